"""Pictures people read, drawn with matplotlib (the ``[plot]`` extra).

- :func:`memory_map_figure`: a mapping (``mallocgym solve --png``): fast-memory address against
  op index, one rectangle per buffer (v0) or chunk (v1, with the prefetch in flight and the
  eviction hold hatched), the capacity, and beneath it each op's time under the mapping against
  all-slow;
- :func:`pressure_figure`: a scenario (``mallocgym show --png``): live bytes against the
  capacity, the buffers' live ranges, and each op's time all-slow against all-fast;
- :func:`training_figure`: a training run's curves (``mallocgym plot RUN_DIR``) from the logs
  that ``mallocgym train sb3`` (``logs/progress.csv``, ``logs/eval.csv``) and ``mallocgym train
  muzero`` (``log.jsonl``) write.

Each returns a :class:`matplotlib.figure.Figure` (no pyplot, no global state);
:func:`save_figure` writes it as a PNG atomically (:func:`figure_png`: the PNG's bytes). Importing this module needs no matplotlib;
every function that draws raises :class:`mallocgym._extras.MissingExtraError` naming the
``[plot]`` extra when it is missing. The env's ``render_mode="rgb_array"`` frames stay NumPy
rasters (:mod:`mallocgym.render`), with no matplotlib.
"""

from __future__ import annotations

import csv
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ._extras import require_extra
from .hardware import Hardware
from .render import buffer_colour
from .workloads import Workload

__all__ = ["memory_map_figure", "pressure_figure", "training_figure", "save_figure", "figure_png", "read_run", "TrainingRun",
           "op_times", "op_times_v1", "plot_run", "reference_speedups", "byte_unit", "NotARunError", "WIDTH_PX",
           "DPI"]

DPI = 100
WIDTH_PX = 960  # every figure is 960 pixels wide
CAPACITY_COLOUR = "black"
LIVE_COLOUR = "#4682b4"
OVER_COLOUR = "#f4a582"  # live bytes above the capacity: light salmon, under a black capacity line
SLOW_COLOUR = "#b0b0b0"
MAPPED_COLOUR = "#2166ac"
FAST_BOUND_COLOUR = "#1b7837"
HATCH_COLOUR = (0.15, 0.15, 0.15)  # prefetches in flight
EVICT_COLOUR = "#b2182b"  # eviction holds: dark red hatching and outline
EDGE_LIMIT = 400  # outline each rectangle when at most this many are drawn


def _matplotlib(what: str):
    """``matplotlib.figure.Figure`` after checking the ``[plot]`` extra."""
    require_extra("plot", what)
    from matplotlib.figure import Figure

    return Figure


# ------------------------------------------------------------------------------------ units
def byte_unit(n: float) -> tuple[float, str]:
    """``(divisor, name)`` of the binary unit that suits ``n`` bytes: the largest of B, KiB,
    MiB and GiB that ``n`` reaches."""
    for power, name in ((3, "GiB"), (2, "MiB"), (1, "KiB")):
        if n >= 1024**power:
            return float(1024**power), name
    return 1.0, "B"


def _bytes_text(n: float) -> str:
    div, name = byte_unit(n)
    return f"{n / div:.3g} {name}" if name != "B" else f"{int(n)} B"


def _time_unit(seconds: float) -> tuple[float, str]:
    """``(multiplier, name)`` for durations around ``seconds``: s, ms, µs or ns."""
    for mult, name in ((1.0, "s"), (1e3, "ms"), (1e6, "µs")):
        if seconds * mult >= 1.0:
            return mult, name
    return 1e9, "ns"


def _time_text(seconds: float) -> str:
    mult, name = _time_unit(seconds)
    return f"{seconds * mult:.3g} {name}"


def _rgb(b: int) -> tuple[float, float, float]:
    return tuple(c / 255.0 for c in buffer_colour(b))


def _lighter(rgb, amount: float = 0.55) -> tuple[float, float, float]:
    return tuple(c + (1.0 - c) * amount for c in rgb)


# ------------------------------------------------------------------------------------ op times
def op_times(workload: Workload, fast: np.ndarray, hardware: Hardware) -> np.ndarray:
    """``float64[T]``: each op's time (s) under the roofline cost model with the buffers flagged
    in ``fast`` (``bool[N]``) in fast memory; sums to :func:`mallocgym.hardware.program_time`."""
    fast = np.asarray(fast, dtype=bool)
    owner = np.repeat(np.arange(workload.num_buffers), np.diff(workload.access_ptr))
    in_fast = fast[owner]
    t = workload.num_ops
    slow_bytes = np.bincount(workload.access_op[~in_fast], weights=workload.access_bytes[~in_fast], minlength=t)
    fast_bytes = np.bincount(workload.access_op[in_fast], weights=workload.access_bytes[in_fast], minlength=t)
    compute = np.maximum(workload.flops / hardware.peak_flops, workload.transcendentals / hardware.transcendental_rate)
    memory = slow_bytes / hardware.slow_bw + fast_bytes / hardware.fast_bw
    return np.maximum(compute, memory) + hardware.op_overhead


def op_times_v1(workload: Workload, mapping: dict, hardware: Hardware) -> tuple[np.ndarray, np.ndarray]:
    """``(mapped, all_slow)``, each ``float64[T]``: every op's time (s) under MSA's runtime model
    for a valid v1 ``mapping`` and with everything in slow memory, each op's stall for late
    copies included (a stall after the last op counts on the last op); each sums to the program
    time :func:`mallocgym.evaluate_v1` reports."""
    from .pricing.v1 import _validated, price
    from .sim import v1

    _, st, kind, off, pstart, ev_done, _ = _validated(workload, mapping, hardware)

    def per_op(kind, pstart, ev_done) -> np.ndarray:
        _, elapsed, stall = price(st, kind, off, pstart, ev_done)
        times = elapsed + stall[:-1]
        times[-1] += stall[-1]
        return times

    mapped = per_op(kind, pstart, ev_done)
    slow = per_op(np.full_like(kind, v1.SLOW), np.full_like(pstart, -1), np.full_like(ev_done, -1))
    return mapped, slow


# ------------------------------------------------------------------------------------ drawing helpers
def _rects(ax, boxes: Sequence[tuple[float, float, float, float]], colours, *, hatch: str | None = None,
           hatch_colour=HATCH_COLOUR, edges: bool = True, zorder: float = 2, label: str | None = None):
    """Rectangles ``(x0, x1, y0, y1)`` as one PolyCollection (fast for thousands); ``hatch``:
    hatched and outlined in ``hatch_colour``."""
    from matplotlib.collections import PolyCollection

    if not boxes:
        return None
    verts = [((x0, y0), (x1, y0), (x1, y1), (x0, y1)) for x0, x1, y0, y1 in boxes]
    kwargs: dict[str, Any] = {"facecolors": colours, "zorder": zorder, "label": label}
    if hatch:  # outlined too: a copy part a pixel thin still shows as a dark line
        kwargs.update(hatch=hatch, edgecolors=[hatch_colour], linewidths=0.8)
    else:
        kwargs.update(edgecolors=[(0.2, 0.2, 0.2)] if edges else "none", linewidths=0.4 if edges else 0.0)
    coll = PolyCollection(verts, **kwargs)
    if hatch:
        coll.set_hatch_linewidth(0.6)
    ax.add_collection(coll)
    return coll


def _capacity_line(ax, capacity_units: float, text: str, x_right: float) -> None:
    """The fast-memory capacity: a thick black line above everything, labelled at its right end."""
    ax.axhline(capacity_units, color="white", linewidth=4.0, zorder=9)  # a halo against any fill
    ax.axhline(capacity_units, color=CAPACITY_COLOUR, linewidth=1.8, zorder=10, label=text)
    ax.annotate(text, xy=(x_right, capacity_units), xytext=(-4, 3), textcoords="offset points", ha="right",
                va="bottom", fontsize=8.5, zorder=11,
                bbox={"boxstyle": "round,pad=0.15", "facecolor": "white", "edgecolor": "none", "alpha": 0.85})


def _op_time_panel(ax, series: Sequence[tuple[np.ndarray, str, str, bool]], n_ops: int) -> None:
    """Each op's time as steps over ops ``[t, t + 1)``: ``series`` of ``(times, label, colour, filled)``."""
    peak = max(float(np.max(s[0])) for s in series if len(s[0]))
    mult, unit = _time_unit(peak)
    x = np.arange(n_ops + 1)
    for times, label, colour, filled in series:
        y = np.append(times, times[-1]) * mult
        if filled:
            ax.fill_between(x, y, step="post", color=colour, linewidth=0, label=label, zorder=2)
        else:  # drawn over the filled one: what shows of that one above this is the time saved
            ax.fill_between(x, y, step="post", color=colour, alpha=0.85, linewidth=0, label=label, zorder=3)
    ax.set_ylabel(f"op time ({unit})")
    ax.set_ylim(0, peak * mult * 1.08)
    ax.legend(loc="upper right", fontsize=8, framealpha=0.9)
    ax.grid(axis="y", color="0.9", linewidth=0.6)


def _buffers_patch(label: str):
    """A legend entry for the buffers: a patch in one of their colours."""
    from matplotlib.patches import Patch

    return Patch(facecolor=_rgb(2), edgecolor=(0.2, 0.2, 0.2), label=label)


def _new_figure(what: str, height_px: int, ratios: Sequence[float]):
    Figure = _matplotlib(what)
    fig = Figure(figsize=(WIDTH_PX / DPI, height_px / DPI), dpi=DPI, layout="constrained")
    axes = fig.subplots(len(ratios), 1, sharex=True, gridspec_kw={"height_ratios": list(ratios)})
    return fig, list(np.atleast_1d(axes))


# ------------------------------------------------------------------------------------ memory map
def memory_map_figure(scenario, result) -> "Any":
    """The mapping of ``result`` (a :class:`mallocgym.harness.Result` played on ``scenario``):
    top, fast-memory address (KiB/MiB/GiB) against op index with one rectangle per buffer in
    fast memory (v0) or per chunk (v1: the part of a prefetched chunk before its first use,
    while the copy is in flight, and the part a produced chunk is held only until its eviction
    completes are hatched, each with its own hatch, and named in the legend), the capacity as a
    black line; bottom, each op's time under the mapping against all-slow. The title names the
    scenario, the hardware, the agent and the speedup."""
    w, hw = scenario.workload, scenario.hardware
    capacity = hw.fast_capacity
    fig, (top, bottom) = _new_figure("--png (a matplotlib memory map)", 680, (3.0, 1.25))
    div, unit = byte_unit(capacity)
    legend = []
    from matplotlib.patches import Patch

    if result.env == "v1":
        from .pricing.v1 import chunks_v1

        chunks = chunks_v1(w, result.mapping, hw)
        solid, solid_c, pre, pre_c, ev, ev_c = [], [], [], [], [], []
        for c in chunks:
            lo, hi, y0 = c["first_op"], c["last_op"] + 1, c["offset"] / div
            y1 = (c["offset"] + c["size"]) / div
            rgb = _rgb(c["buffer"])
            a = c["first_use"] if c["prefetched"] else lo
            b = c["evict_from"] if c["evict_from"] is not None else hi
            if c["prefetched"] and a > lo:
                pre.append((lo, a, y0, y1))
                pre_c.append(_lighter(rgb))
            if b < hi:
                ev.append((b, hi, y0, y1))
                ev_c.append(_lighter(rgb))
            if b > a:
                solid.append((a, b, y0, y1))
                solid_c.append(rgb)
        edges = len(chunks) <= EDGE_LIMIT
        _rects(top, solid, solid_c, edges=edges)
        _rects(top, pre, pre_c, hatch="////", zorder=3)
        _rects(top, ev, ev_c, hatch="\\\\\\\\", hatch_colour=EVICT_COLOUR, zorder=3)
        legend += [_buffers_patch(f"chunk in fast memory, coloured by buffer ({len(chunks)})"),
                   Patch(facecolor="white", edgecolor=HATCH_COLOUR, hatch="////",
                         label=f"prefetch in flight ({len(pre)})"),
                   Patch(facecolor="white", edgecolor=EVICT_COLOUR, hatch="\\\\\\\\",
                         label=f"held until eviction done ({len(ev)})")]
        mapped, slow = op_times_v1(w, result.mapping, hw)
        placed = len({c["buffer"] for c in chunks})
        stall = result.stall_time or 0.0
        detail = (f"{_bytes_text(result.copy_bytes or 0)} copied, "
                  + (f"stall {_time_text(stall)}" if stall > 0 else "no stall"))
    else:
        offsets = np.asarray(result.offsets, dtype=np.int64)
        fast = offsets >= 0
        boxes = [(w.start[b], w.end[b] + 1, offsets[b] / div, (offsets[b] + w.size[b]) / div)
                 for b in np.flatnonzero(fast)]
        _rects(top, boxes, [_rgb(int(b)) for b in np.flatnonzero(fast)], edges=len(boxes) <= EDGE_LIMIT)
        placed = int(fast.sum())
        legend.append(_buffers_patch(f"buffer in fast memory, one colour each ({placed})"))
        mapped, slow = op_times(w, fast, hw), op_times(w, np.zeros(w.num_buffers, bool), hw)
        detail = ""
    cap = capacity / div
    top.axhspan(0, cap, color="#eef1f5", zorder=0)
    _capacity_line(top, cap, f"capacity {_bytes_text(capacity)}", w.num_ops)
    top.set_xlim(0, w.num_ops)
    top.set_ylim(0, cap * 1.13)  # a strip above the capacity for the legend
    top.set_yticks([t for t in top.get_yticks() if 0 <= t <= cap * (1 + 1e-9)])  # no address past the memory
    top.set_ylim(0, cap * 1.13)
    top.set_ylabel(f"fast-memory address ({unit})")
    top.legend(handles=legend, loc="upper left", fontsize=8, ncols=min(len(legend), 4), framealpha=0.95)
    top.set_title(f"{scenario.name} on {hw.name}: agent {result.agent}, speedup {result.speedup:.3f}× over all-slow\n"
                  f"{w.num_buffers} buffers, {w.num_ops} ops, {placed} in fast memory "
                  f"({result.placed_bytes_fraction:.1%} of bytes)" + (f"; {detail}" if detail else ""), fontsize=10)
    _op_time_panel(bottom, [(slow, f"all slow: {_time_text(float(slow.sum()))}", SLOW_COLOUR, True),
                            (mapped, f"this mapping: {_time_text(float(mapped.sum()))}", MAPPED_COLOUR, False)],
                   w.num_ops)
    bottom.set_xlabel("op index (program order)")
    return fig


# ------------------------------------------------------------------------------------ pressure
def pressure_figure(scenario) -> "Any":
    """Memory pressure of ``scenario`` (no mapping): top, live bytes at each op (blue up to the
    capacity, light salmon above it) under the capacity as a black line; middle, the buffers'
    live ranges sorted by first op; bottom, each op's time with every buffer in slow memory
    against every buffer in fast memory (the bound no mapping passes). The title names the
    scenario, the hardware and the capacity."""
    w, hw = scenario.workload, scenario.hardware
    capacity = hw.fast_capacity
    fig, (top, mid, bottom) = _new_figure("--png (a matplotlib picture)", 720, (1.5, 1.5, 1.0))
    live = w.live_bytes.astype(np.float64)
    div, unit = byte_unit(max(float(live.max()), float(capacity)))
    x = np.arange(w.num_ops + 1)
    y = np.append(live, live[-1]) / div
    cap = capacity / div
    top.fill_between(x, np.minimum(y, cap), step="post", color=LIVE_COLOUR, linewidth=0, label="live bytes")
    over = y > cap
    if over.any():
        top.fill_between(x, cap, y, where=over, step="post", color=OVER_COLOUR, linewidth=0, interpolate=False,
                         label="live bytes above the capacity")
    _capacity_line(top, cap, f"capacity {_bytes_text(capacity)}", w.num_ops)
    top.set_ylim(0, max(float(y.max()), cap) * 1.12)
    top.set_ylabel(f"live bytes ({unit})")
    top.legend(loc="upper left", fontsize=8, ncols=3, framealpha=0.95)
    top.grid(axis="y", color="0.9", linewidth=0.6)
    order = np.lexsort((w.end, w.start))
    boxes = [(w.start[b], w.end[b] + 1, rank, rank + 0.85) for rank, b in enumerate(order)]
    _rects(mid, boxes, [_rgb(int(b)) for b in order], edges=False)
    mid.set_ylim(w.num_buffers + 0.5, -0.5)
    mid.set_ylabel("buffer (by first op)")
    slow = op_times(w, np.zeros(w.num_buffers, bool), hw)
    fast = op_times(w, np.ones(w.num_buffers, bool), hw)
    _op_time_panel(bottom, [(slow, f"all slow: {_time_text(float(slow.sum()))}", SLOW_COLOUR, True),
                            (fast, f"all fast (no capacity): {_time_text(float(fast.sum()))}",
                             FAST_BOUND_COLOUR, False)], w.num_ops)
    bottom.set_xlabel("op index (program order)")
    top.set_xlim(0, w.num_ops)
    share = float(np.mean(live > capacity))
    top.set_title(f"{scenario.name} on {hw.name}: fast memory {_bytes_text(capacity)} = "
                  f"{capacity / w.peak_live_bytes:.1%} of the peak live bytes ({_bytes_text(w.peak_live_bytes)})\n"
                  f"{w.num_buffers} buffers, {w.num_ops} ops; {share:.0%} of ops have more live bytes than the "
                  f"fast memory; all fast: {float(slow.sum()) / float(fast.sum()):.3g}× faster than all slow",
                  fontsize=10)
    return fig


# ------------------------------------------------------------------------------------ training runs
class NotARunError(ValueError):
    """A folder holds no log that ``mallocgym train sb3`` or ``mallocgym train muzero`` writes."""


SB3_PROGRESS = Path("logs") / "progress.csv"
SB3_EVAL = Path("logs") / "eval.csv"
SB3_EVAL_SCENARIOS = Path("logs") / "eval_scenarios.csv"
MUZERO_LOG = Path("log.jsonl")
# the same log in a weights-only export of a run (baselines/muzero/*/: checkpoint.pt, train-log.jsonl)
MUZERO_EXPORTED_LOG = Path("train-log.jsonl")
# losses drawn on a log scale when every value is positive (PPO's value loss, DQN's loss); PPO's
# policy-gradient and total losses hover around zero and are left out; its entropy gets a panel
SB3_LOSSES = ("train/value_loss", "train/loss")
SB3_ENTROPY = "train/entropy_loss"
EVAL_GROUPS = {"test": "test split", "holdout": "held-out training programs", "valid": "held-out generated programs",
               "train": "training scenarios"}
GROUP_COLOURS = {"test": "#d62728", "holdout": "#9467bd", "valid": "#1f77b4", "train": "#2ca02c"}


@dataclass
class TrainingRun:
    """A training run's logs as columns of floats (``nan`` where a row has no value).

    ``kind``: ``"sb3"`` or ``"muzero"``. ``progress``: one column per logged field, against
    ``steps`` (env steps); ``evals`` (sb3 with evaluation on): ``logs/eval.csv``'s columns;
    ``eval_scenarios``: group -> the scenario names of its newest evaluation; ``losses``: the
    loss columns of ``progress``; ``meta``: what the run says of itself (algorithm, game version,
    budget)."""

    path: Path
    kind: str
    progress: dict[str, np.ndarray]
    evals: dict[str, np.ndarray] = field(default_factory=dict)
    eval_scenarios: dict[str, list[str]] = field(default_factory=dict)
    losses: list[str] = field(default_factory=list)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def env(self) -> str:
        """The game the run trained on, ``"v0"`` or ``"v1"``."""
        return str(self.meta.get("env", "v0"))


def _floats(rows: list[dict], key: str) -> np.ndarray:
    out = np.full(len(rows), np.nan)
    for i, r in enumerate(rows):
        v = r.get(key)
        if v not in (None, ""):
            try:
                out[i] = float(v)
            except (TypeError, ValueError):
                pass
    return out


def _read_csv(path: Path) -> tuple[list[str], list[dict]]:
    try:
        with open(path, newline="") as handle:
            reader = csv.DictReader(handle)
            rows = list(reader)
            return list(reader.fieldnames or []), rows
    except (OSError, UnicodeDecodeError, csv.Error) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None


def _read_sb3(run: Path) -> TrainingRun:
    progress: dict[str, np.ndarray] = {}
    header: list[str] = []
    if (run / SB3_PROGRESS).is_file():
        header, rows = _read_csv(run / SB3_PROGRESS)
        if "time/total_timesteps" not in header:
            raise NotARunError(f"{run / SB3_PROGRESS}: not a progress.csv of mallocgym train sb3 "
                               f"(no column time/total_timesteps)")
        progress = {key: _floats(rows, key) for key in header}
        progress["steps"] = progress.pop("time/total_timesteps")
    evals: dict[str, np.ndarray] = {}
    if (run / SB3_EVAL).is_file():
        eval_header, rows = _read_csv(run / SB3_EVAL)
        if "steps" not in eval_header:
            raise NotARunError(f"{run / SB3_EVAL}: not an eval.csv of mallocgym train sb3 (no column steps)")
        evals = {key: _floats(rows, key) for key in eval_header}
    groups: dict[str, list[str]] = {}
    if (run / SB3_EVAL_SCENARIOS).is_file():
        _, rows = _read_csv(run / SB3_EVAL_SCENARIOS)
        last = max((float(r["steps"]) for r in rows if r.get("steps")), default=None)
        for r in rows:
            if r.get("steps") and float(r["steps"]) == last and r.get("group") and r.get("scenario"):
                groups.setdefault(r["group"], []).append(r["scenario"])
    meta: dict[str, Any] = {}
    try:
        info = json.loads((run / "train.json").read_text())
        meta = {"algo": info.get("algo"), "env": (info.get("config") or {}).get("env", {}).get("version", "v0"),
                "steps": (info.get("trained") or {}).get("steps"), "minutes": (info.get("trained") or {}).get("minutes"),
                "runs": (info.get("trained") or {}).get("runs")}
    except (OSError, ValueError, AttributeError, TypeError, RecursionError):
        pass
    if not progress.get("steps", np.empty(0)).size and not evals.get("steps", np.empty(0)).size:
        raise NotARunError(f"{run}: its mallocgym train sb3 logs have no rows yet")
    losses = [k for k in SB3_LOSSES if k in progress and np.isfinite(progress[k]).any()
              and (progress[k][np.isfinite(progress[k])] > 0).all()]
    return TrainingRun(run, "sb3", progress, evals, groups, losses, meta)


def _read_muzero(run: Path, path: Path) -> TrainingRun:
    records, starts, end = [], [], None
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{path}: cannot be read ({exc})") from None
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except (ValueError, RecursionError):  # a damaged line (or one nested past Python's recursion limit)
            raise NotARunError(f"{path}: line {number} is not JSON: not a log.jsonl of mallocgym train muzero") from None
        if not isinstance(record, dict) or "event" not in record:
            raise NotARunError(f"{path}: line {number} has no 'event': not a log.jsonl of mallocgym train muzero")
        if record["event"] in ("start", "resume"):
            starts.append(record)
        elif record["event"] == "progress":
            records.append(record)
        elif record["event"] == "end":
            end = record
            records.append(record)
    if not records:
        raise NotARunError(f"{path}: no progress lines yet (the trainer logs one every log_every_s seconds)")
    keys = sorted({k for r in records for k, v in r.items() if isinstance(v, (int, float)) and not isinstance(v, bool)})
    progress = {k: np.array([float(r.get(k, np.nan)) for r in records]) for k in keys}
    loss_keys = sorted({k for r in records for k in (r.get("losses") or {})})
    for k in loss_keys:
        progress[f"loss/{k}"] = np.array([float((r.get("losses") or {}).get(k, np.nan)) for r in records])
    progress["steps"] = progress.get("env_steps", np.arange(len(records), dtype=float))
    meta: dict[str, Any] = {"runs": len(starts), "env": "v0"}
    if starts:
        meta["minutes"] = sum(float(s.get("minutes", 0.0)) for s in starts)
        meta["scenarios"] = len(starts[0].get("scenarios") or [])
        meta["generator"] = starts[0].get("generator")
    last = end or records[-1]
    meta["steps"], meta["elapsed_s"] = last.get("env_steps"), last.get("elapsed_s")
    return TrainingRun(run, "muzero", progress, losses=[f"loss/{k}" for k in loss_keys], meta=meta)


def read_run(run_dir) -> TrainingRun:
    """Read a run folder of ``mallocgym train sb3`` (``logs/progress.csv`` and/or
    ``logs/eval.csv``) or ``mallocgym train muzero`` (``log.jsonl``, or ``train-log.jsonl`` in a
    weights-only export such as ``baselines/muzero/labels``). A folder that is neither,
    or whose logs hold no rows yet, is a :class:`NotARunError` (a ``ValueError``) naming it."""
    run = Path(run_dir)
    if not run.exists():
        raise NotARunError(f"{run}: no such folder")
    if not run.is_dir():
        raise NotARunError(f"{run}: is a file; give the run folder (--out of mallocgym train)")
    if (run / SB3_PROGRESS).is_file() or (run / SB3_EVAL).is_file():
        return _read_sb3(run)
    for log in (MUZERO_LOG, MUZERO_EXPORTED_LOG):
        if (run / log).is_file():
            return _read_muzero(run, run / log)
    raise NotARunError(f"{run}: not a training run: it has neither {SB3_PROGRESS.as_posix()} (mallocgym train sb3) "
                       f"nor {MUZERO_LOG.as_posix()} (mallocgym train muzero; {MUZERO_EXPORTED_LOG.as_posix()} in an export)")


_GENERATED = re.compile(r"^gen-(?P<preset>[a-z]+)-.*-s(?P<seed>\d+)@(?P<num>\d+)/(?P<den>\d+)$")


def _scenario_by_name(name: str):
    """A bundled scenario, or a generated one rebuilt from its name (``gen-PRESET-...-sSEED@A/B``);
    None when neither works."""
    from .scenarios import resolve

    try:
        return resolve(name)
    except (ValueError, OSError, KeyError):
        pass
    match = _GENERATED.match(name)
    if not match:
        return None
    try:
        from fractions import Fraction

        from .scenarios import WorkloadGenerator

        fraction = Fraction(int(match["num"]), int(match["den"]))
        scenario = WorkloadGenerator(match["preset"], fractions=(fraction,)).scenario(int(match["seed"]), fraction)
    except (ImportError, ValueError, TypeError):
        return None
    return scenario if scenario.name == name else None


def reference_speedups(run: TrainingRun, agent: str) -> dict[str, float]:
    """Group -> geometric-mean speedup of ``agent`` on the scenarios of the run's newest
    evaluation of that group (``logs/eval_scenarios.csv``), for the groups whose every scenario
    can be rebuilt; played through the harness on the run's game."""
    from .harness import bench

    out: dict[str, float] = {}
    for group, names in run.eval_scenarios.items():
        scenarios = [_scenario_by_name(n) for n in dict.fromkeys(names)]
        if not scenarios or any(s is None for s in scenarios):
            continue
        results = bench(scenarios, [agent], progress=False, env=run.env)
        out[group] = float(np.exp(np.mean(np.log([r.speedup for r in results]))))
    return out


def _steps_axis(ax) -> None:
    from matplotlib.ticker import EngFormatter

    ax.xaxis.set_major_formatter(EngFormatter(sep=""))
    ax.set_xlabel("env steps")
    ax.grid(color="0.92", linewidth=0.6)


def _finite(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _loss_panel(ax, run: TrainingRun) -> None:
    """The losses against env steps, on a log scale when every value is positive."""
    x = run.progress["steps"]
    values = [run.progress[k][np.isfinite(run.progress[k])] for k in run.losses]
    positive = all(v.size and (v > 0).all() for v in values)
    for key in run.losses:
        xs, ys = _finite(x, run.progress[key])
        ax.plot(xs, ys, linewidth=1.0, label=key.split("/", 1)[1])
    if positive:
        ax.set_yscale("log")
    ax.set_ylabel("loss" + (" (log scale)" if positive else ""))
    ax.legend(loc="upper right", fontsize=8, ncols=min(len(run.losses), 3), framealpha=0.9)


def training_figure(run: TrainingRun, reference: dict[str, float] | None = None,
                    reference_agent: str = "xla") -> "Any":
    """A run's curves against env steps, one panel per kind of figure it logged.

    sb3: the mean training-episode return (``rollout/ep_rew_mean``); the evaluations'
    geometric-mean speedups over all-slow per group (``logs/eval.csv``), with the checkpoint kept
    as ``model.zip`` circled and ``reference`` (group -> speedup of ``reference_agent``) as dashed
    lines; the losses. muzero: the mean return of the games searched over the learned model
    against XLA-like's on the same programs; the fraction of games that beat XLA-like (search
    and teacher games); the losses."""
    panels = []
    p = run.progress
    if run.kind == "sb3":
        if "rollout/ep_rew_mean" in p and np.isfinite(p["rollout/ep_rew_mean"]).any():
            panels.append("return")
        if run.evals.get("steps", np.empty(0)).size and any(f"{g}_speedup" in run.evals and np.isfinite(
                run.evals[f"{g}_speedup"]).any() for g in EVAL_GROUPS):
            panels.append("speedup")
    else:
        if "return_mean" in p and np.isfinite(p["return_mean"]).any():
            panels.append("return")
        if any(k in p and np.isfinite(p[k]).any() for k in ("beats_xla_fraction", "teacher_beats_xla_fraction")):
            panels.append("beats")
    if run.losses:
        panels.append("losses")
    if run.kind == "sb3" and SB3_ENTROPY in p and np.isfinite(p[SB3_ENTROPY]).any():
        panels.append("entropy")
    if not panels:
        raise NotARunError(f"{run.path}: its logs have no returns, speedups or losses to plot")
    fig, axes = _new_figure("'mallocgym plot'", 250 + 190 * len(panels), [1.0] * len(panels))
    x = p.get("steps", np.empty(0))
    for ax, panel in zip(axes, panels):
        if panel == "return" and run.kind == "sb3":
            ax.plot(*_finite(x, p["rollout/ep_rew_mean"]), color="#1f77b4", linewidth=1.0,
                    label="training episodes (rollout/ep_rew_mean)")
            ax.set_ylabel("mean return\n(1 − time / all-slow)")
            ax.legend(loc="lower right", fontsize=8)
        elif panel == "return":
            ax.plot(*_finite(x, p["return_mean"]), color="#1f77b4", linewidth=1.2, label="search over the learned model")
            if "xla_return_mean" in p:
                ax.plot(*_finite(x, p["xla_return_mean"]), color="black", linestyle="--", linewidth=1.0,
                        label="XLA-like on the same programs")
            ax.set_ylabel("mean return of the\nlast games (1 − time/all-slow)")
            ax.legend(loc="lower right", fontsize=8)
        elif panel == "beats":
            for key, label, colour in (("beats_xla_fraction", "search over the learned model", "#1f77b4"),
                                       ("teacher_beats_xla_fraction", "teacher (rollout) games", "#ff7f0e")):
                if key in p and np.isfinite(p[key]).any():
                    ax.plot(*_finite(x, p[key]), color=colour, linewidth=1.0, label=label)
            ax.set_ylim(-0.03, 1.03)
            ax.set_ylabel("share of games\nbeating XLA-like")
            ax.legend(loc="lower right", fontsize=8)
        elif panel == "speedup":
            ev = run.evals
            for group, label in EVAL_GROUPS.items():
                key = f"{group}_speedup"
                if key not in ev or not np.isfinite(ev[key]).any():
                    continue
                colour = GROUP_COLOURS[group]
                ax.plot(*_finite(ev["steps"], ev[key]), color=colour, marker="o", markersize=3, linewidth=1.2,
                        label=label)
                if reference and group in reference:
                    ax.axhline(reference[group], color=colour, linestyle="--", linewidth=1.0,
                               label=f"_{reference_agent} on the {label}")  # one legend entry for all below
            proxies = []
            if reference:
                from matplotlib.lines import Line2D

                proxies.append(Line2D([], [], color="0.35", linestyle="--", linewidth=1.0,
                                      label=f"{reference_agent} on the same scenarios (dashed, same colour)"))
            if "selected" in ev and (ev["selected"] == 1).any():
                pick = np.flatnonzero(ev["selected"] == 1)[-1]
                score = ev.get("score", ev.get("valid_speedup"))
                ax.plot([ev["steps"][pick]], [score[pick]], marker="o", markersize=11, markerfacecolor="none",
                        markeredgecolor="black", linestyle="none", label="kept as model.zip")
            ax.set_ylabel("geomean speedup\nover all-slow")
            low, high = ax.get_ylim()
            ax.set_ylim(low, high + 0.45 * (high - low))  # headroom for the legend above the curves
            handles = [h for h in ax.get_lines() if not h.get_label().startswith("_")] + proxies
            ax.legend(handles=handles, loc="upper left", fontsize=7.5, ncols=3, framealpha=0.9)
        elif panel == "losses":
            _loss_panel(ax, run)
        elif panel == "entropy":  # SB3 logs the entropy loss, minus the policy's mean entropy
            ax.plot(*_finite(x, -p[SB3_ENTROPY]), color="#8c564b", linewidth=1.0)
            ax.set_ylabel("policy entropy\n(nats)")
        _steps_axis(ax)
    for ax in axes[:-1]:
        ax.set_xlabel("")
    m = run.meta
    if run.kind == "sb3":
        head = f"mallocgym train sb3 --algo {m.get('algo') or '?'} (MallocGame-{run.env})"
    else:
        head = "mallocgym train muzero"
    facts = []
    if m.get("steps") is not None:
        facts.append(f"{int(m['steps']):,} env steps")
    if m.get("minutes") is not None and run.kind == "sb3":
        facts.append(f"{float(m['minutes']):.1f} min")
    if m.get("elapsed_s") is not None:
        facts.append(f"{float(m['elapsed_s']) / 60:.1f} min")
    if m.get("runs"):
        runs = int(m["runs"])
        facts.append("one run" if runs == 1 else f"{runs} runs (resumed {runs - 1}×)")
    axes[0].set_title(f"{run.path.name}: {head}\n" + ", ".join(facts), fontsize=10)
    return fig


def figure_png(fig) -> bytes:
    """``fig`` as PNG bytes (what :func:`save_figure` writes), for a caller that writes a set of
    files as one (``mallocgym run``)."""
    import io

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI)
    return buffer.getvalue()


def save_figure(fig, path) -> Path:
    """Write ``fig`` as a PNG to ``path`` atomically (nothing is left on an error)."""
    from ._files import atomic_write

    path = Path(path)
    if path.is_dir():
        raise ValueError(f"--png {path}: is a folder; give a .png file name")
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=DPI)
    return path


def plot_run(run_dir, png, *, reference: str | None = "auto") -> Path:
    """``mallocgym plot RUN_DIR --png FILE``: read the run, draw :func:`training_figure` and write
    it. ``reference``: the agent whose speedups on the sb3 evaluation sets are drawn as dashed
    lines (``"auto"``: ``xla`` on v0, ``xla-msa`` on v1; ``None``: none)."""
    _matplotlib("'mallocgym plot'")
    run = read_run(run_dir)
    ref: dict[str, float] = {}
    agent = None
    if reference is not None and run.kind == "sb3" and run.eval_scenarios:
        agent = ("xla-msa" if run.env == "v1" else "xla") if reference == "auto" else reference
        ref = reference_speedups(run, agent)
    return save_figure(training_figure(run, ref, agent or "xla"), png)
