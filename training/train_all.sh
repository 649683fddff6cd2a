#!/usr/bin/env bash
# Retrain the five English->French checkpoints exactly as shipped (about 45 min each on
# 2 CPU cores, without the copy augmentation: --no-augment). finetune_all.sh is the copy
# fine-tune under test (docs/training.md, "The copy fine-tune").
# A model whose checkpoint already holds test metrics is skipped, and an interrupted model
# resumes from its state in $RUNS, so the script can be re-run.
# Usage: bash training/train_all.sh [path/to/fra.txt]
set -euo pipefail
DATA=${1:-../shared/data/tatoeba-en-fr/fra.txt}
RUNS=${RUNS:-runs}
declare -A DESC=(
  [additive]="Bahdanau (additive MLP) attention: v^T tanh(W1 h_i + W2 s_j)"
  [none]="No attention: one fixed vector (the final encoder state) at every step"
  [dot]="Dot-product attention: h_i . s_j"
  [general]="General (bilinear, multiplicative) attention: h_i^T W s_j"
  [scaled-dot]="Scaled dot-product attention: (W h_i)^T (U s_j) / sqrt(d)"
)
for ATT in ${MODELS:-additive none dot general scaled-dot}; do
  OUT="checkpoints/en-fr-$ATT"
  if [ -f "$OUT/metrics.json" ] && grep -q '"test"' "$OUT/metrics.json"; then
    echo "skip $OUT: already trained and evaluated"; continue
  fi
  python -m s2s.train --data "$DATA" --attention "$ATT" --out "$OUT" --work "$RUNS/en-fr-$ATT" \
    --steps 4800 --long-fraction 0.2 --no-augment --dropout 0.1 --label-smoothing 0.1 --lr 2e-3 --max-tokens 2400 \
    --description "${DESC[$ATT]}. Bi-LSTM encoder, LSTM decoder, about 3.6M parameters."
done
