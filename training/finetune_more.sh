#!/usr/bin/env bash
# One more, gentler leg of the copy fine-tune (finetune_all.sh) for all five English->French
# checkpoints, identically, starting from the shipped fp16 weights (a checkout has no
# resumable states): the same augmentation and pointer-generator, a short warm-up to a low
# peak lr (2.5e-4, where finetune_all.sh's last leg began) and cosine decay to 0 over STEPS
# steps, the weights of the last 4 evaluation points (every 50 steps) kept, and the shipped
# model the average of the last k of them, k chosen by validation loss (train.py
# --average-last). Each metrics.json keeps the original model's scores under "before" and
# this leg's starting point under "previous". A model is skipped once $RUNS/en-fr-ATT-more
# holds its finished log; an interrupted one resumes there.
# Usage: [STEPS=N] [MODELS="general dot"] bash training/finetune_more.sh [path/to/fra.txt]
set -euo pipefail
DATA=${1:-../shared/data/tatoeba-en-fr/fra.txt}
RUNS=${RUNS:-runs}
export MALLOC_MMAP_MAX_=0 MALLOC_TRIM_THRESHOLD_=20000000000 MALLOC_TOP_PAD_=1000000000   # train_transformer.sh: why
for ATT in ${MODELS:-general dot additive scaled-dot none}; do
  OUT="checkpoints/en-fr-$ATT"
  WORK="$RUNS/en-fr-$ATT-more"
  if [ -f "$WORK/train.log" ] && grep -q "wrote $OUT" "$WORK/train.log"; then echo "skip $OUT: done"; continue; fi
  mkdir -p "$WORK"
  [ -d "$WORK/base" ] || cp -r "$OUT" "$WORK/base"        # this leg's starting point, kept
  python -m s2s.train --data "$DATA" --init-from "$WORK/base" --out "$OUT" --work "$WORK" \
    --copy-test examples/copy_test.tsv --steps ${STEPS:-600} --warmup 30 --lr 2.5e-4 --eval-every 50 --average-last 4 --trace-points 4 \
    --copy-fraction 0.3 --long-fraction 0.3 --long-max 6 --p-name 0.8 --p-number 1.0 --copy \
    --dropout 0.1 --label-smoothing 0.1 --max-tokens 2400 --threads 2 \
    --description "$(python -c "import json; print(json.load(open('$WORK/base/config.json'))['description'])")"
done
