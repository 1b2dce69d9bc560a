#!/usr/bin/env bash
# Regenerate the leaderboard: every entry of this script, the memory-map picture, README.md.
#
#   bash baselines/run_all.sh                 # everything below (about 40 minutes on 2 cores)
#   bash baselines/run_all.sh rollout mcts    # only the entries whose folder name matches
#   OTHERS=1 bash baselines/run_all.sh        # also rerun other folders' command.txt (exact, ...)
#
# Each entry is baselines/<agent>/<suite>/ with command.txt (the exact command) and the
# results.{md,csv,json} that `mallocgym bench --out` writes. Entries of other agents (the exact
# solver, trained agents) live beside these with their own command.txt; make_readme.py picks up
# every results.json, whichever script wrote it.
set -euo pipefail
cd "$(dirname "$0")/.."

BIN=.venv/bin
[ -x "$BIN/mallocgym" ] || BIN="$(dirname "$(command -v mallocgym)")"
export PATH="$BIN:$PATH"

# MallocGame-v1: every v1 agent in one run per suite (search agents at an equal 10 s budget), and
# the search agents' headroom over xla-msa at 2 and 30 s per scenario
V1_AGENTS="all-slow,random,greedy,xla-msa,xla-msa:picker=count,xla-msa:in_env=1,rollout:time_limit=10,beam:time_limit=10,mcts:time_limit=10"
V1_HEADROOM="xla-msa,rollout:time_limit=2,beam:time_limit=2,mcts:time_limit=2,rollout:time_limit=30,beam:time_limit=30,mcts:time_limit=30"

# folder | agent spec | suites (default = the bundled suite's test split) | game version
ENTRIES=(
  "all-slow|all-slow|default minimalloc|v0"
  "random|random|default minimalloc|v0"
  "first-fit|first-fit|default minimalloc|v0"
  "best-fit|best-fit|default minimalloc|v0"
  "xla|xla|default minimalloc|v0"
  "rollout|rollout|default minimalloc|v0"
  "beam|beam|default minimalloc|v0"
  "mcts|mcts|default minimalloc|v0"
  "rollout-nested|rollout:levels=2|minimalloc|v0"
  "pack|pack,pack:time_limit_s=10,exact_s=45|default minimalloc|v0"
  "canonical|rollout:max_completions=2000,rollout:max_completions=2000,order=canonical,beam:width=4,max_completions=2000,beam:width=4,max_completions=2000,order=canonical,mcts:simulations=8,mcts:simulations=8,order=canonical|default minimalloc|v0"
  "v1|$V1_AGENTS|default minimalloc|v1"
  "v1-headroom|$V1_HEADROOM|default|v1"
)

FILTER=("$@")
matches() {  # matches NAME: true when no filter was given or one is part of NAME
  [ ${#FILTER[@]} -eq 0 ] && return 0
  local f
  for f in "${FILTER[@]}"; do [[ "$1" == *"$f"* ]] && return 0; done
  return 1
}

ours=()
for row in "${ENTRIES[@]}"; do
  IFS='|' read -r folder agent suites env <<<"$row"
  for s in $suites; do
    if [ "$s" = default ]; then
      out="baselines/$folder/default-test"
      cmd=(mallocgym bench --env "$env" --suite default --split test --agents "$agent" --out "$out")
    else
      out="baselines/$folder/$s"
      cmd=(mallocgym bench --env "$env" --suite "$s" --agents "$agent" --out "$out")
    fi
    ours+=("$out")
    matches "$out" || continue
    echo "== ${cmd[*]}" >&2
    nice -n 10 "${cmd[@]}" >/dev/null
    printf '%s\n' "${cmd[*]}" >"$out/command.txt"
  done
done

if [ "${OTHERS:-0}" = 1 ]; then
  while IFS= read -r file; do
    dir="$(dirname "$file")"
    case " ${ours[*]} " in *" $dir "*) continue ;; esac
    matches "$dir" || continue
    echo "== $dir: $(cat "$file")" >&2
    while IFS= read -r line; do
      [ -n "$line" ] && nice -n 10 bash -c "$line" >/dev/null
    done <"$file"
  done < <(find baselines -mindepth 2 -name command.txt | sort)
fi

if matches memory-map; then
  echo "== mallocgym solve transformer-encoder-bwd@1/8 --agent rollout --png docs/img/memory-map.png" >&2
  nice -n 10 mallocgym solve transformer-encoder-bwd@1/8 --agent rollout --png docs/img/memory-map.png
fi

"$BIN/python" baselines/make_readme.py
