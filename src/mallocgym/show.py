"""Statistics and pictures of scenarios: ``mallocgym show`` and ``mallocgym list``.

:func:`scenario_stats` summarises one scenario; :func:`suite_table` gives one row per workload
of a suite (the table of ``docs/suite.md``); :func:`pressure_picture` draws memory pressure as
a NumPy raster with no plotting library: the top panel is live bytes over time (blue, red above
the capacity) against the fast-memory capacity (a black line, drawn over the red), the bottom
panel the buffers' live ranges (one bar per buffer, sorted by start), both with time on x.
``mallocgym show --png`` draws the same with axes, units and a title through matplotlib
(:func:`mallocgym.plot.pressure_figure`, the ``[plot]`` extra).
"""

from __future__ import annotations

import numpy as np

from .hardware import Hardware
from .render import BACKGROUND, OUTLINE, buffer_colour
from .scenarios import Scenario
from .workloads import Workload

__all__ = ["scenario_stats", "suite_table", "table_markdown", "compute_bound_share", "pressure_picture"]

LIVE = (70, 130, 180)
OVER = (214, 96, 77)
CAPACITY = (0, 0, 0)  # black: it must stand out against the red over-capacity bars


def op_bytes(workload: Workload) -> np.ndarray:
    """``float64[T]``: bytes each op moves (reads and writes)."""
    return np.bincount(workload.access_op, weights=workload.access_bytes, minlength=workload.num_ops)


def compute_bound_share(workload: Workload, hardware: Hardware) -> float:
    """Among the ops that do work (flops, transcendentals or bytes), the fraction whose compute
    time is at least their memory time with every buffer in slow memory."""
    nbytes = op_bytes(workload)
    compute = np.maximum(workload.flops / hardware.peak_flops,
                         workload.transcendentals / hardware.transcendental_rate)
    memory = nbytes / hardware.slow_bw
    working = (compute > 0) | (memory > 0)
    if not working.any():
        return 0.0
    return float(np.count_nonzero(working & (compute >= memory)) / np.count_nonzero(working))


def scenario_stats(scenario: Scenario) -> dict:
    """Sizes, bytes, flops, time with everything in slow memory and memory pressure."""
    from .pricing.v0 import evaluate

    w, hw = scenario.workload, scenario.hardware
    ev = evaluate(w, np.full(w.num_buffers, -1, dtype=np.int64), hw)
    live = w.live_bytes
    duration = w.end - w.start + 1
    return {
        "scenario": scenario.name, "split": scenario.split, "workload": w.name, "ops": w.num_ops,
        "buffers": w.num_buffers, "accesses": w.num_accesses, "total_bytes": w.total_bytes,
        "peak_live_bytes": w.peak_live_bytes, "mean_live_bytes": float(live.mean()),
        "fast_capacity": hw.fast_capacity, "capacity_over_peak": hw.fast_capacity / w.peak_live_bytes,
        "ops_over_capacity": float(np.mean(live > hw.fast_capacity)),
        "buffer_bytes_min": int(w.size.min()), "buffer_bytes_median": float(np.median(w.size)),
        "buffer_bytes_max": int(w.size.max()), "oversized_buffers": ev.oversized_buffers,
        "buffer_ops_median": float(np.median(duration)),
        "total_flops": float(w.flops.sum()), "total_transcendentals": float(w.transcendentals.sum()),
        "hardware": hw.name, "time_all_slow_s": ev.time_all_slow,
        "compute_bound_ops": compute_bound_share(w, hw),
    }


def suite_table(scenarios: list[Scenario], info: dict[str, dict] | None = None) -> list[dict]:
    """One row per workload of ``scenarios`` (first scenario of each): model, family, split,
    ops, buffers, peak live bytes, compute-bound share (default hardware, all slow), and the
    fast-memory sizes of its scenarios. ``info`` maps workload name to manifest rows."""
    rows: dict[str, dict] = {}
    for s in scenarios:
        w = s.workload
        if w.name not in rows:
            extra = (info or {}).get(w.name, {})
            rows[w.name] = {
                "workload": w.name, "family": extra.get("family", ""), "split": s.split, "ops": w.num_ops,
                "buffers": w.num_buffers, "peak_live_bytes": w.peak_live_bytes, "total_flops": float(w.flops.sum()),
                "compute_bound_ops": compute_bound_share(w, s.hardware), "scenarios": [],
                "description": extra.get("description", ""),
            }
        rows[w.name]["scenarios"].append(s.name)
    return list(rows.values())


def _mib(n: int) -> str:
    return f"{n / 2**20:.2f} MiB" if n >= 2**20 else f"{n / 2**10:.1f} KiB"


def table_markdown(rows: list[dict]) -> str:
    """The suite table as Markdown."""
    lines = ["| workload | family | split | ops | buffers | peak live bytes | GFLOP | compute-bound ops |",
             "|---|---|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['workload']} | {r['family'] or '-'} | {r['split']} | {r['ops']} | {r['buffers']} | "
                     f"{_mib(r['peak_live_bytes'])} | {r['total_flops'] / 1e9:.2f} | {r['compute_bound_ops']:.0%} |")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ picture
def _columns(n_ops: int, width: int) -> tuple[np.ndarray, np.ndarray]:
    """Pixel column range ``[x0, x1)`` of each op when ``n_ops`` ops span ``width`` pixels."""
    edges = np.floor(np.arange(n_ops + 1) * width / n_ops).astype(np.int64)
    x1 = np.maximum(edges[1:], edges[:-1] + 1)
    return edges[:-1], np.minimum(x1, width)


def pressure_picture(workload: Workload, capacity: int | None = None, *, width: int = 960,
                     height: int = 540, margin: int = 8) -> np.ndarray:
    """Memory pressure of a workload as ``uint8[height, width, 3]``.

    Top third: live bytes at each op (blue; red above ``capacity``) and the capacity as a black
    line. Bottom: one bar per buffer over its live ops, sorted by start, coloured per buffer
    (several buffers share a pixel row when there are more buffers than rows).
    """
    if width < 4 * margin or height < 6 * margin:
        raise ValueError(f"picture of {width}x{height} pixels is too small")
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = BACKGROUND
    x0, x1 = margin, width - margin
    plot_w = x1 - x0
    top_y0, top_y1 = margin, margin + (height - 3 * margin) // 3
    bot_y0, bot_y1 = top_y1 + margin, height - margin
    left, right = _columns(workload.num_ops, plot_w)

    # top panel: live bytes, drawn column by column with the maximum over the ops in a column
    live = workload.live_bytes.astype(np.float64)
    scale_top = max(float(live.max()), float(capacity or 0), 1.0)
    panel_h = top_y1 - top_y0
    col_live = np.zeros(plot_w)
    for t in range(workload.num_ops):
        col_live[left[t]:right[t]] = np.maximum(col_live[left[t]:right[t]], live[t])
    heights = np.round(col_live / scale_top * panel_h).astype(np.int64)
    cap_h = int(round(capacity / scale_top * panel_h)) if capacity else panel_h + 1
    for x in range(plot_w):
        h = heights[x]
        if h <= 0:
            continue
        image[top_y1 - min(h, cap_h):top_y1, x0 + x] = LIVE
        if h > cap_h:
            image[top_y1 - h:top_y1 - cap_h, x0 + x] = OVER
    if capacity:  # one pixel row: the top row of a bar exactly at capacity
        image[top_y1 - min(max(cap_h, 1), panel_h), x0:x1] = CAPACITY
    # bottom panel: live ranges
    order = np.lexsort((workload.end, workload.start))
    rows = bot_y1 - bot_y0
    n = workload.num_buffers
    for rank, b in enumerate(order):
        ya = bot_y0 + int(rank * rows / n)
        yb = max(bot_y0 + int((rank + 1) * rows / n) - (1 if rows >= 2 * n else 0), ya + 1)
        image[ya:yb, x0 + left[workload.start[b]]:x0 + right[workload.end[b]]] = buffer_colour(int(b))
    for ya, yb in ((top_y0, top_y1), (bot_y0, bot_y1)):
        image[ya - 1, x0 - 1:x1 + 1] = OUTLINE
        image[yb, x0 - 1:x1 + 1] = OUTLINE
        image[ya - 1:yb + 1, x0 - 1] = OUTLINE
        image[ya - 1:yb + 1, x1] = OUTLINE
    return image
