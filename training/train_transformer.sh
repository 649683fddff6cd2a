#!/usr/bin/env bash
# Train the shipped Transformer, en-fr-transformer, on the recurrent models' data and
# pieces (the fine-tuned checkpoints' tokenizer, as it is), with their copy recipe: names,
# numbers and casing varied on both sides (s2s/data.py), --copy-fraction 0.3, long pairs of
# up to 6 joined sentences, and the pointer-generator over its head-mean cross-attention.
# 3 + 3 layers, d = 256, 4 heads, FFN 1024, bf16 autocast (--bf16). Dropout 0.1 where Vaswani
# et al. put it (sub-layer outputs, embeddings + positions), none on the attention weights or
# inside the FFN: on 2 cores each dropped element costs a random number, and those two were
# about half of a step's 21% in bernoulli_ (`python tools/bench_train_step.py --profile
# [--inner-dropout 0]`; docs/models.md, "The Transformer"). STEPS is sized from the throughput
# measured on this machine (~2,600 target tokens/s on 2 cores) to fit 90 min: the shipped run
# took 86 min. The weights of the last 10 evaluation points (every 100 steps) are kept and the
# shipped model is the average of the last k, k chosen by validation loss (k = 2 on the shipped
# run: steps 3,500 and 3,600).
# Resumable: run it again.
# Usage: bash training/train_transformer.sh [path/to/fra.txt]
set -euo pipefail
DATA=${1:-../shared/data/tatoeba-en-fr/fra.txt}
RUNS=${RUNS:-runs}
OUT=${OUT:-checkpoints/en-fr-transformer}
# glibc hands every large tensor (a batch's logits are ~130 MB) back to the kernel when it is
# freed and gets fresh zeroed pages for the next: a quarter of the time went to page clearing.
# Keep freed memory in the process instead (`python tools/bench_train_step.py`: bf16 steps
# 2.36 -> 1.33 s here).
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=20000000000 MALLOC_TOP_PAD_=1000000000
python -m s2s.train --data "$DATA" --arch transformer --out "$OUT" --name en-fr-transformer --work "$RUNS/en-fr-transformer" \
  --tokenizer checkpoints/en-fr-additive/spm.model --copy-test examples/copy_test.tsv \
  --hidden 256 --layers 3 --heads 4 --ffn 1024 --dropout 0.1 --attention-dropout 0 --ffn-dropout 0 --label-smoothing 0.1 \
  --steps ${STEPS:-3600} --warmup 400 --lr ${LR:-1e-3} --max-tokens ${MAX_TOKENS:-4000} \
  --long-fraction 0.3 --long-max 6 --p-name 0.8 --p-number 1.0 --copy-fraction 0.3 --copy --threads 2 --bf16 --average-last 10 \
  --description "Transformer (Vaswani et al. 2017): 3 + 3 pre-LN layers, d = 256, 4 heads, no recurrence. Copies names and numbers through its head-mean cross-attention (pointer-generator)."
