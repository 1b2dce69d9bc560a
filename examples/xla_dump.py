"""For compiler engineers: an XLA dump in, two MallocGame-v1 mappings out, each checked by `mallocgym evaluate`.

    python examples/xla_dump.py [DUMP_DIR] [--module NAME] [--fraction 0.25] [--seconds 2] [--out runs/xla-dump]

What it shows:

1. ``mallocgym.workloads.xla.import_xla_dump(DUMP_DIR)``: one module of an ``--xla_dump_to``
   folder as a workload (ops with their flops, buffers with live ranges and accesses), saved as
   ``workload.json`` (the CLI does the same: ``mallocgym import xla DUMP_DIR -o workload.json``).
   Without ``DUMP_DIR`` it reads the small JAX training step bundled with the tests
   (``tests/data/xla/rnn_train``). Make your own dump with::

       XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis" python my_jax_program.py

2. A fast memory of ``--fraction`` of the program's peak live bytes, solved by ``xla-msa`` (a
   port of XLA's Memory Space Assignment) and by ``rollout`` (a search that starts from and
   completes with MSA's choices) under a ``--seconds`` wall budget.
3. Each mapping written to ``OUT/<agent>.mapping.json`` (the format of docs/game-v1.md,
   "Mapping format": per use, slow / fast at an offset / prefetched after an op) and checked by
   the command line, as anyone holding the two files can::

       mallocgym evaluate OUT/workload.json OUT/rollout.mapping.json --capacity BYTES --json
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import mallocgym
from mallocgym import harness
from mallocgym.scenarios import Scenario, capacity_for
from mallocgym.workloads.xla import import_xla_dump

BUNDLED = Path(__file__).resolve().parent.parent / "tests" / "data" / "xla" / "rnn_train"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dump", nargs="?", default=str(BUNDLED), help="an --xla_dump_to folder")
    parser.add_argument("--module", help="which module of the dump (default: the largest)")
    parser.add_argument("--fraction", type=Fraction, default=Fraction(1, 4),
                        help="fast memory as a fraction of the peak live bytes (default 1/4)")
    parser.add_argument("--seconds", type=float, default=2.0, help="the rollout search's wall budget")
    parser.add_argument("--out", default="runs/xla-dump", help="folder for workload.json and the mappings")
    args = parser.parse_args(argv)
    if not 0 < args.fraction <= 1 or not 0 < args.seconds < float("inf"):
        parser.error("--fraction must be in (0, 1] and --seconds a positive number")
    try:
        workload = import_xla_dump(args.dump, module=args.module)
    except ValueError as exc:
        parser.error(str(exc))

    hardware = mallocgym.profile("tpu-v4-like")
    capacity = capacity_for(workload, args.fraction, hardware.alignment)
    scenario = Scenario(workload.name, workload, hardware.with_capacity(capacity))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    mallocgym.save(workload, out / "workload.json")
    print(f"{workload.name}: {workload.num_ops} ops, {workload.num_buffers} buffers, peak live "
          f"{workload.peak_live_bytes} B, fast memory {capacity} B -> {out / 'workload.json'}")

    for spec in ("xla-msa", f"rollout:time_limit={args.seconds}"):
        result = harness.solve(scenario, spec, env="v1")
        path = out / f"{spec.split(':')[0]}.mapping.json"
        path.write_text(json.dumps(result.mapping) + "\n")
        command = [sys.executable, "-m", "mallocgym.cli", "evaluate", str(out / "workload.json"), str(path),
                   "--capacity", str(capacity), "--json"]
        checked = json.loads(subprocess.run(command, check=True, capture_output=True, text=True).stdout)
        print(f"{result.agent}: speedup {result.speedup:.4f} (mallocgym evaluate: {checked['speedup']:.4f}), "
              f"{result.copy_bytes / 1e3:.1f} kB copied, {result.wall_s:.2f} s -> {path}")


if __name__ == "__main__":
    main()
