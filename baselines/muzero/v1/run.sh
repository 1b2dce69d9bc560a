#!/usr/bin/env bash
# The MallocGame-v1 entry's runs (issue 31): the first training run, then the DAgger run from its
# weights (RULE.md, amendment of 2026-11-27), then the policy at every margin of the rule on the
# three program sets of equal_time.py, in parallel; then the departure head (RULE.md, amendments of
# 2026-11-27 06:55 and 11:27 UTC): its data on 11 fresh training-distribution programs, its fit, and
# its threshold on validation with the check at doubling departures (amendment of 14:07 UTC;
# HEAD=0: no head).
#
#   WORKERS=2 MINUTES=56 OUT=out/v1-entry bash baselines/muzero/v1/run.sh    # as published (2 cores)
#   WORKERS=15 DEVICE=cuda MINUTES=6.5 bash baselines/muzero/v1/run.sh                # 16 cores and a GPU
#
# WORKERS: label-worker processes (train.label_workers) and parallel evaluations; DEVICE: the
# learner's (train.device); MINUTES: the training budget; PY: the Python to use; SETS and
# MARGINS: what is evaluated (default: the rule's); EVAL_OUT: where (default: OUT); BUFFERS: the
# generator's buffer range (train.generator_buffers); DAGGER_MINUTES: the DAgger run's budget
# (default 60; 0: none, the margins are then the first run's).
set -euo pipefail
PY=${PY:-python}
WORKERS=${WORKERS:-2}
DEVICE=${DEVICE:-cpu}
MINUTES=${MINUTES:-45}
OUT=${OUT:-out/v1-entry}
SETS=${SETS:-validation table test}
MARGINS=${MARGINS:-0 0.25 0.5 1 2 4 8}
BUFFERS=${BUFFERS:-100,1100}
EVAL_OUT=${EVAL_OUT:-$OUT}
DAGGER_MINUTES=${DAGGER_MINUTES:-60}
export OMP_NUM_THREADS=1 PY OUT EVAL_OUT
mkdir -p "$OUT" "$EVAL_OUT"
# compile the simulator's kernels once (numba's cache), before the workers start
$PY -c "
import numpy as np
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.v1 import label_game_v1
from mallocgym.scenarios import resolve
cfg = MuZeroConfig().with_overrides(['env.game=v1', 'network.version=2', 'train.label_fraction=1'])
label_game_v1(resolve('alexnet-train@1/8'), cfg, np.random.default_rng(0))"
$PY -m mallocgym.cli train muzero --env v1 --suite default --minutes "$MINUTES" --out "$OUT/run" --seed 0 --quiet \
  --set network.version=2 --set train.label_fraction=1.0 \
  --set train.generator_families=transformer,cnn,mlp,unet,rnn --set train.generator_buffers="$BUFFERS" \
  --set train.generator_fraction=0.9 --set train.heldout_fraction=0.05 --set train.replay_ratio=8 \
  --set train.replay_capacity=300000 --set train.positive_weight=1 \
  --set train.log_every_s=30 --set train.checkpoint_every_s=60 \
  --set train.label_workers="$WORKERS" --set train.device="$DEVICE" > "$OUT/train-summary.json"
NET="$OUT/run"
if [ "$DAGGER_MINUTES" != 0 ]; then
  $PY -m mallocgym.cli train muzero --env v1 --config "$OUT/run/config.json" --init "$OUT/run" \
    --minutes "$DAGGER_MINUTES" --out "$OUT/dagger" --seed 1 --quiet --set train.label_policy=0.5 \
    --set train.label_workers="$WORKERS" --set train.device="$DEVICE" > "$OUT/dagger-summary.json"
  NET="$OUT/dagger"
fi
export NET
for SET in $SETS; do
  for M in $MARGINS; do echo "$SET $M"; done
done | xargs -P "$WORKERS" -n 2 sh -c \
  '$PY baselines/muzero/equal_time.py margins --env v1 --set $0 --checkpoint "$NET" --margins $1 \
     --out "$EVAL_OUT/margins_$0_$1.json" > /dev/null'
if [ "${HEAD:-1}" != 0 ]; then
  # the head on programs 0-10 (RULE.md, amendment of 2026-11-27 11:27 UTC; the 60-program head
  # before it: --generated 0,32 and 1000,1028), its threshold on validation with the check
  $PY baselines/muzero/v1/head.py data --generated 0,11 --out "$OUT/head-data" --workers "$WORKERS" --checkpoint "$NET"
  $PY baselines/muzero/v1/head.py fit --data "$OUT/head-data" --out "$OUT/head" --checkpoint "$NET"
  # its threshold with the check at doubling departures (RULE.md, amendment of 14:07 UTC): every
  # checked game recorded, the doubling check's validation geomean per T computed from them
  $PY baselines/muzero/v1/checked.py rows --set validation --thresholds=-1,0,1,2,4,8 --checkpoint "$OUT/head" \
    --out "$EVAL_OUT/checked_validation.jsonl" > /dev/null
  $PY baselines/muzero/v1/checked.py summary "$EVAL_OUT/checked_validation.jsonl" > "$EVAL_OUT/checked_validation_summary.jsonl"
fi
