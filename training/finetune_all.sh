#!/usr/bin/env bash
# Fine-tune the five shipped English->French checkpoints with the copy augmentation (names,
# numbers, casing; s2s/data.py), longer joined pairs, and the pointer-generator (--copy: the
# four attention models copy through their attention; en-fr-none cannot), all five
# identically, in place. --copy-fraction 0.3 adds 30% more pairs per epoch drawn from those
# that name a person or hold a number, all swapped (docs/training.md, "The copy fine-tune").
# About 25 min per 1000 steps on 2 CPU cores, plus 5 min of evaluation. The old scores are
# kept in each metrics.json under "before". A model is skipped once its metrics.json records
# STEPS steps; an interrupted model resumes from its state in $RUNS, and a larger STEPS
# continues each model from there (the cosine schedule recomputed for the new length: a warm
# restart, the same for all five). Usage: [STEPS=N] bash training/finetune_all.sh [path/to/fra.txt]
set -euo pipefail
DATA=${1:-../shared/data/tatoeba-en-fr/fra.txt}
RUNS=${RUNS:-runs}
for ATT in ${MODELS:-additive dot general scaled-dot none}; do
  OUT="checkpoints/en-fr-$ATT"
  if python -c "import json,sys; m=json.load(open('$OUT/metrics.json')); sys.exit(0 if 'before' in m and m['train']['steps'] >= ${STEPS:-1000} else 1)"; then
    echo "skip $OUT: already fine-tuned for ${STEPS:-1000} steps"; continue
  fi
  mkdir -p "$RUNS/en-fr-$ATT-copy"
  [ -d "$RUNS/en-fr-$ATT-base" ] || cp -r "$OUT" "$RUNS/en-fr-$ATT-base"    # the starting point, kept
  python -m s2s.train --data "$DATA" --init-from "$RUNS/en-fr-$ATT-base" --out "$OUT" \
    --work "$RUNS/en-fr-$ATT-copy" --copy-test examples/copy_test.tsv \
    --steps ${STEPS:-1000} --copy-fraction 0.3 --warmup 100 --lr 1e-3 --long-fraction 0.3 --long-max 6 --p-name 0.8 --p-number 1.0 --copy \
    --dropout 0.1 --label-smoothing 0.1 --max-tokens 2400 --threads 2 \
    --description "$(python -c "import json; print(json.load(open('$RUNS/en-fr-$ATT-base/config.json'))['description'])") $([ "$ATT" = none ] && echo 'Fine-tuned on varied names and numbers; it cannot copy (no attention).' || echo 'Fine-tuned to copy names and numbers through its attention (pointer-generator).')"
done
