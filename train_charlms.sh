#!/usr/bin/env bash
# Retrain the two character-level LSTM language models exactly as shipped (2 layers of 256
# cells, about 0.9M parameters; ~19k characters/s on 2 CPU cores, so 13,000 steps of 32 x 128
# characters take about 50 min each). A model whose checkpoint holds test metrics is skipped;
# an interrupted one resumes from its state in $RUNS.
# Usage: bash train_charlms.sh [path/to/shared/data]
set -euo pipefail
DATA=${1:-../shared/data}
RUNS=${RUNS:-runs}
declare -A DESC=(
  [war-and-peace]="2-layer character LSTM (256 cells per layer) trained on Tolstoy's War and Peace (English translation)"
  [linux-kernel]="2-layer character LSTM (256 cells per layer) trained on the C source of Linux 6.1's kernel/ directory"
)
for CORPUS in ${CORPORA:-war-and-peace linux-kernel}; do
  OUT="checkpoints/charlm-$CORPUS"
  if [ -f "$OUT/metrics.json" ] && grep -q '"test"' "$OUT/metrics.json"; then
    echo "skip $OUT: already trained and evaluated"; continue
  fi
  python -m s2s.train_charlm --data "$DATA/$CORPUS/input.txt" --out "$OUT" --work "$RUNS/charlm-$CORPUS" \
    --hidden 256 --layers 2 --emb-dim 64 --batch 32 --seq 128 --steps 13000 --lr 3e-3 --dropout 0.1 \
    --description "${DESC[$CORPUS]}."
done
