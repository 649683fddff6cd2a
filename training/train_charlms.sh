#!/usr/bin/env bash
# Retrain the character-level language models exactly as shipped: 2 layers of 256 units,
# 13,000 steps of 32 x 128 characters, the same schedule for every cell. On War and Peace the
# same model with three cells (LSTM, GRU, Elman RNN), differing only in the cell; on the Linux
# kernel an LSTM. About 45-60 min each on 2 CPU cores (one thread; see docs/training.md).
# War and Peace: the models train on its first 2,882,952 characters, the train part of the
# copy the LSTM was first trained on (that copy had 176 lines of emoticons after the book,
# since removed, so today's 90 % boundary falls 6,361 characters earlier; --train-chars keeps
# the training text identical, and validation starts where training stops).
# A model whose checkpoint holds test metrics is skipped; an interrupted one resumes from $RUNS.
# Usage: bash training/train_charlms.sh [path/to/shared/data]
set -euo pipefail
DATA=${1:-../shared/data}
RUNS=${RUNS:-runs}
WP_TRAIN_CHARS=2882952
declare -A DESC=(
  [war-and-peace]="2-layer character LSTM (256 cells per layer) trained on Tolstoy's War and Peace (English translation)"
  [war-and-peace-gru]="2-layer character GRU (256 units per layer) trained on Tolstoy's War and Peace (English translation), like the LSTM beside it: same text, size, steps and schedule"
  [war-and-peace-rnn]="2-layer character Elman RNN (256 tanh units per layer) trained on Tolstoy's War and Peace (English translation), like the LSTM beside it: same text, size, steps and schedule"
  [linux-kernel]="2-layer character LSTM (256 cells per layer) trained on the C source of Linux 6.1's kernel/ directory"
)
for NAME in ${MODELS:-war-and-peace war-and-peace-gru war-and-peace-rnn linux-kernel}; do
  OUT="checkpoints/charlm-$NAME"
  if [ -f "$OUT/metrics.json" ] && grep -q '"test"' "$OUT/metrics.json"; then
    echo "skip $OUT: already trained and evaluated"; continue
  fi
  CORPUS=${NAME%-gru}; CORPUS=${CORPUS%-rnn}
  CELL=lstm; case $NAME in *-gru) CELL=gru;; *-rnn) CELL=rnn;; esac
  EXTRA=(); [ "$CORPUS" = war-and-peace ] && EXTRA=(--train-chars $WP_TRAIN_CHARS)
  OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} python -m s2s.train_charlm --data "$DATA/$CORPUS/input.txt" --out "$OUT" \
    --work "$RUNS/charlm-$NAME" --cell $CELL "${EXTRA[@]}" \
    --hidden 256 --layers 2 --emb-dim 64 --batch 32 --seq 128 --steps 13000 --lr 3e-3 --dropout 0.1 \
    --description "${DESC[$NAME]}."
done
