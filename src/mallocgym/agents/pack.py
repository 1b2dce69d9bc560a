"""The ``pack`` agent: a canonical-solution search (after MiniMalloc) that picks and places buffers.

Usage: ``make_agent("pack")`` (10 s), ``make_agent("pack:30")`` or
``make_agent("pack:time_limit_s=30,lp_bound=0")``; or :func:`solve_pack`. docs/pack.md has the
details, baselines/pack/README.md the measured results.

The scenario becomes :func:`mallocgym.agents.exact.build_problem`'s integer model (the same
exact reductions and integer time quanta as the CP-SAT agent): the buffers that can save time,
their lengths and highest offsets on the address unit ``u``, and per op the saving of each
buffer, capped at ``memory - compute`` for ops that can become compute-bound. With ``O0`` the
all-slow objective, a mapping's objective is ``O0 - saving(x)`` with
``saving(x) = sum_b lin_b x_b + sum_t min(cap_t, sum_b s_tb x_b)``.

0. With OR-Tools installed (the ``exact`` extra), the *knapsack relaxation* first
   (:func:`knapsack_relaxation`, CP-SAT, ``knapsack_s``): the same saving over binary ``x``
   with one row ``sum len_b x_b <= capacity`` per maximal set of co-live buffers and no
   geometry. Its optimum bounds every mapping's saving; the set it chooses, packed by the
   canonical search (the most valuable part of it that packs, ``repair_share`` of the time), is
   a second starting mapping. When that packing keeps the relaxation's whole optimum, it is
   proven optimal and the search below is skipped.
1. Each connected component of the interval graph first tries to place *every* useful buffer
   (:func:`mallocgym.sim.pack.pack`'s decision search; a share of the time): if that works, the
   component is optimal (no saving is negative).
2. Otherwise branch and bound over canonical packings maximises ``saving``
   (:func:`mallocgym.sim.pack.maximise_parts`), starting from the best of the repaired
   knapsack set and the greedy mappings (:data:`GREEDY`: XLA-like, best fit, first fit) dropped
   onto the ``u`` grid; the answer is the fastest of the search's mapping and those greedy ones,
   so ``pack`` is never worse than any of them, whatever the time limit.
3. The upper bound on the saving is the smallest of the search's (the tree searched: exact; else
   its root bound), the knapsack relaxation's and, with OR-Tools, the LP relaxation
   ``max sum lin x + sum z_t``, ``z_t <= cap_t``, ``z_t <= sum s_tb x_b``, the same clique
   rows, ``0 <= x <= 1`` (GLOP), rounded up with a ``1e-9`` relative margin for the LP's
   floating point. The reported ``time_lower_bound`` is the integer model's time of
   ``O0 - bound`` (it under-estimates every mapping's time; see :mod:`mallocgym.agents.exact`),
   so the leaderboard prints a gap.

Bad input: a time limit <= 0 is an error; a buffer larger than the fast memory is never in the
model (it stays slow, as everywhere); a fast memory smaller than the alignment is legal and
then leaves only the buffers that fit in it, if any.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from .. import sim
from ..heuristics import HEURISTICS
from ..pricing.v0 import evaluate
from ..scenarios import Scenario
from ..sim import pack as packing
from ..workloads.minimalloc import minimalloc_rows
from .base import Solution, parse_config
from .exact import BOUND_SAFETY, Problem, build_problem, drop_to_grid

__all__ = ["PackConfig", "PackAgent", "solve_pack", "pack_factory", "lp_saving_bound", "knapsack_relaxation"]


@dataclass(frozen=True)
class PackConfig:
    """Settings of the ``pack`` agent.

    Attributes:
      time_limit_s: wall-clock limit of the search, seconds (> 0); the LP and knapsack bounds
        come on top.
      lp_bound: also bound the saving by the LP relaxation (needs OR-Tools, the ``exact``
        extra; skipped silently when it is missing, and then only the search's bound is used).
      knapsack_s: when > 0 (and OR-Tools is installed), first solve the *knapsack relaxation*
        (the model without the packing geometry: only "every maximal set of co-live buffers
        fits the memory", binary choices) with CP-SAT for at most this many seconds, on top of
        ``time_limit_s``. Its proven bound tightens the saving bound (it is never weaker than
        the LP's once solved), and the set it chooses, packed by the canonical search, is a
        second starting mapping (see ``repair_share``). 0: off.
      repair_share: share of ``time_limit_s`` spent packing the knapsack's set (the most
        valuable subset of it that packs), in ``[0, 1)``; the rest goes to the branch and bound
        over all buffers, started from the better of that packing and XLA-like's.
      resolution: integer time quanta per all-slow program time (>= 1000), as for ``exact``.
      exact_s: when > 0 and the saving is not proven optimal, then run the CP-SAT agent
        (:func:`mallocgym.agents.exact.solve_exact`, 2 workers) for this many seconds, started
        from ``pack``'s mapping and given ``pack``'s bound as a row; the answer is the better
        mapping and the larger bound (needs the ``exact`` extra).
    """

    time_limit_s: float = 10.0
    lp_bound: bool = True
    knapsack_s: float = 5.0
    repair_share: float = 0.5
    resolution: int = 1 << 30
    exact_s: float = 0.0

    def __post_init__(self) -> None:
        if not (isinstance(self.time_limit_s, (int, float)) and not isinstance(self.time_limit_s, bool)
                and math.isfinite(self.time_limit_s) and self.time_limit_s > 0):
            raise ValueError(f"PackConfig.time_limit_s must be a finite number > 0, got {self.time_limit_s!r}")
        if not (isinstance(self.exact_s, (int, float)) and not isinstance(self.exact_s, bool)
                and math.isfinite(self.exact_s) and self.exact_s >= 0):
            raise ValueError(f"PackConfig.exact_s must be a finite number >= 0, got {self.exact_s!r}")
        if isinstance(self.resolution, bool) or not isinstance(self.resolution, int) or self.resolution < 1000:
            raise ValueError(f"PackConfig.resolution must be an integer >= 1000, got {self.resolution!r}")
        if not (isinstance(self.knapsack_s, (int, float)) and not isinstance(self.knapsack_s, bool)
                and math.isfinite(self.knapsack_s) and self.knapsack_s >= 0):
            raise ValueError(f"PackConfig.knapsack_s must be a finite number >= 0, got {self.knapsack_s!r}")
        if not (isinstance(self.repair_share, (int, float)) and not isinstance(self.repair_share, bool)
                and 0 <= self.repair_share < 1):
            raise ValueError(f"PackConfig.repair_share must be a number in [0, 1), got {self.repair_share!r}")


def _values(problem: Problem):
    """``lin[i]``, the CSR op gains ``(g_ptr, g_op, g_val, opcap)`` and ``O0`` of the model."""
    n = len(problem.buffers)
    lin = np.zeros(n, dtype=np.int64)
    for i, s in problem.linear.items():
        lin[i] = -int(s)
    rows: list[list[tuple[int, int]]] = [[] for _ in range(n)]
    opcap = np.zeros(max(len(problem.max_ops), 1), dtype=np.int64)
    o0 = 0
    for k, (low, mem, gains) in enumerate(problem.max_ops):
        opcap[k] = mem - low
        o0 += max(low, mem)
        for i, s in gains.items():
            rows[i].append((k, int(s)))
    g_ptr = np.zeros(n + 1, dtype=np.int64)
    g_ptr[1:] = np.cumsum([len(r) for r in rows])
    g_op = np.array([k for r in rows for k, _ in r], dtype=np.int64)
    g_val = np.array([s for r in rows for _, s in r], dtype=np.int64)
    return lin, (g_ptr, g_op, g_val, opcap), o0


def lp_saving_bound(problem: Problem) -> int | None:
    """An upper bound on the model's saving from its LP relaxation (clique capacity rows, per-op
    caps), solved by OR-Tools' GLOP; None when OR-Tools is missing or the LP fails."""
    try:
        from ortools.linear_solver import pywraplp
    except ImportError:
        return None
    n = len(problem.buffers)
    if n == 0:
        return 0
    solver = pywraplp.Solver.CreateSolver("GLOP")
    if solver is None:
        return None
    x = [solver.NumVar(0.0, 1.0, f"x{i}") for i in range(n)]
    objective = solver.Objective()
    for i, s in problem.linear.items():
        objective.SetCoefficient(x[i], float(-s))
    for k, (low, mem, gains) in enumerate(problem.max_ops):
        z = solver.NumVar(0.0, float(mem - low), f"z{k}")
        objective.SetCoefficient(z, 1.0)
        row = solver.Constraint(-solver.infinity(), 0.0)
        row.SetCoefficient(z, 1.0)
        for i, s in gains.items():
            row.SetCoefficient(x[i], -float(s))
    for clique in problem.cliques:
        if int(problem.length[clique].sum()) > problem.capacity_units:
            row = solver.Constraint(-solver.infinity(), float(problem.capacity_units))
            for i in clique:
                row.SetCoefficient(x[int(i)], float(problem.length[i]))
    objective.SetMaximization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        return None
    value = objective.Value()
    return int(math.floor(value * (1 + 1e-9) + 1.0))


def knapsack_relaxation(problem: Problem, time_limit_s: float, *, seed: int = 0):
    """The model without the packing geometry, solved by CP-SAT: maximise ``saving(x)`` over
    binary ``x`` subject to one row ``sum len_b x_b <= capacity`` per maximal set of co-live
    buffers (the per-op caps kept exactly). Every packing satisfies these rows, so the optimum,
    or CP-SAT's proven bound when time runs out, bounds the saving of every mapping; the chosen
    set need not pack. Returns ``(bound, chosen, status)``: ``bound`` an int upper bound on the
    saving, ``chosen`` a bool array over ``problem.buffers`` (None without a solution), and
    CP-SAT's status name; ``(None, None, "missing")`` when OR-Tools is not installed."""
    try:
        from ortools.sat.python import cp_model
    except ImportError:
        return None, None, "missing"
    n = len(problem.buffers)
    if n == 0:
        return 0, np.zeros(0, dtype=bool), "OPTIMAL"
    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{i}") for i in range(n)]
    for clique in problem.cliques:
        if int(problem.length[clique].sum()) > problem.capacity_units:
            model.add(sum(int(problem.length[i]) * x[int(i)] for i in clique) <= problem.capacity_units)
    terms = [-int(s) * x[i] for i, s in problem.linear.items() if s]
    for k, (low, mem, gains) in enumerate(problem.max_ops):
        z = model.new_int_var(0, max(mem - low, 0), f"z{k}")
        model.add(z <= sum(int(s) * x[i] for i, s in gains.items()))
        terms.append(z)
    model.maximize(sum(terms))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 2
    solver.parameters.random_seed = int(seed) % (1 << 31)
    status = solver.solve(model)
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None, None, name
    bound = solver.best_objective_bound
    if not math.isfinite(bound):
        return None, None, name
    chosen = np.array([solver.boolean_value(v) for v in x], dtype=bool)
    if status == cp_model.OPTIMAL:  # an integer model: the optimum is the chosen set's saving
        return int(round(solver.objective_value)), chosen, name
    return int(math.ceil(bound * (1 + 1e-12))), chosen, name  # rounded up: still an upper bound


def _saving(offsets: np.ndarray, lin: np.ndarray, gains) -> int:
    """``saving(x)`` of a packing (offsets over the model's buffers, -1 = slow)."""
    g_ptr, g_op, g_val, opcap = gains
    placed = offsets >= 0
    owner = np.repeat(np.arange(offsets.size), np.diff(g_ptr))
    acc = np.zeros(opcap.size, dtype=np.int64)
    hit = placed[owner]
    np.add.at(acc, g_op[hit], g_val[hit])
    return int(lin[placed].sum() + np.minimum(acc, opcap).sum())


def _subset_gains(gains, keep: np.ndarray):
    """The CSR op gains ``(g_ptr, g_op, g_val, opcap)`` of the rectangles ``keep`` only."""
    g_ptr, g_op, g_val, opcap = gains
    lo, hi = g_ptr[keep], g_ptr[keep + 1]
    ptr = np.concatenate([[0], np.cumsum(hi - lo)]).astype(np.int64)
    rows = np.concatenate([np.arange(a, b) for a, b in zip(lo, hi)] + [np.zeros(0, dtype=np.int64)]).astype(np.int64)
    return ptr, g_op[rows].astype(np.int64), g_val[rows].astype(np.int64), opcap


GREEDY = ("xla", "best-fit", "first-fit")
"""The greedy mappings ``pack`` starts from (the best of them on the model) and compares its
answer with: ``pack`` never returns a mapping slower than any of them."""


def _on_grid(scenario: Scenario, problem: Problem, mapping: np.ndarray) -> np.ndarray:
    """A mapping's fast/slow split over the model's buffers, dropped onto the ``unit`` grid
    (offsets in units, -1 = slow): a valid packing of the model. A buffer the drop would lift
    above its highest offset (only when ``unit`` does not divide the sizes) goes slow."""
    ids, unit = problem.buffers, problem.unit
    keep = np.full(scenario.workload.num_buffers, sim.SLOW, dtype=np.int64)
    keep[ids] = mapping[ids]
    grid = drop_to_grid(scenario, keep, unit)
    out = np.where(grid[ids] >= 0, grid[ids] // unit, -1).astype(np.int64)
    out[out > problem.max_offset] = -1
    return out


def solve_pack(scenario: Scenario, config: PackConfig = PackConfig()) -> Solution:
    """Solve ``scenario`` with the canonical packing search under ``config``: the best mapping
    found (never worse than XLA-like, best fit or first fit), a proven lower bound on program time, and in ``info`` the
    status (``optimal`` when the saving is proven best), nodes, bounds and wall time."""
    begin = time.perf_counter()
    w, hw = scenario.workload, scenario.hardware
    problem = build_problem(scenario, config.resolution)
    ids = problem.buffers
    unit = problem.unit
    greedy = {name: HEURISTICS[name](scenario) for name in GREEDY}
    lin, gains, o0 = _values(problem)
    info = {"buffers_in_model": int(len(ids)), "unit_bytes": int(unit), "time_limit_s": config.time_limit_s}
    names = list(greedy)
    candidates = [greedy[name] for name in names]
    bound_saving = None
    if len(ids):
        # the incumbent: the best greedy mapping on the model's grid (so pack >= each of them)
        starts = [_on_grid(scenario, problem, m) for m in candidates]
        values = [_saving(x, lin, gains) for x in starts]
        initial = starts[int(np.argmax(values))]
        info["greedy_start"] = names[int(np.argmax(values))]
        # the program's own clock when it has one (MiniMalloc traces): widths in the preorders
        _, lower, upper = minimalloc_rows(w)
        p_start = np.asarray(lower)[ids].astype(np.int64)
        p_end = np.asarray(upper)[ids].astype(np.int64) - 1
        length, maxoff = problem.length.astype(np.int64), problem.max_offset.astype(np.int64)
        search_s = config.time_limit_s
        knap_bound = None
        if config.knapsack_s > 0:
            knap_bound, chosen, knap_status = knapsack_relaxation(problem, config.knapsack_s)
            info["knapsack"] = {"status": knap_status, "saving_bound": knap_bound,
                                "chosen": None if chosen is None else int(chosen.sum())}
            # (when it chooses every buffer, the search's first step tries exactly that)
            if chosen is not None and chosen.any() and not chosen.all() and config.repair_share > 0:
                # the most valuable part of the knapsack's set that packs: a second start
                keep = np.flatnonzero(chosen).astype(np.int64)
                repair_s = config.time_limit_s * config.repair_share
                sub, _, _, _, used = packing.maximise_parts(
                    p_start[keep], p_end[keep], length[keep], int(problem.capacity_units), maxoff[keep],
                    lin[keep], _subset_gains(gains, keep), time_limit_s=repair_s)
                search_s = max(config.time_limit_s - repair_s, 1e-3)
                repaired = np.full(len(ids), -1, dtype=np.int64)
                repaired[keep] = sub
                info["knapsack"]["repair_nodes"] = int(used)
                if _saving(repaired, lin, gains) > _saving(initial, lin, gains):
                    initial = repaired
        repaired_value = _saving(initial, lin, gains)
        if knap_bound is not None and repaired_value >= knap_bound:  # the relaxation's optimum packs
            offsets, value, ub, proven, nodes = initial, repaired_value, repaired_value, True, 0
        else:
            offsets, value, ub, proven, nodes = packing.maximise_parts(
                p_start, p_end, length, int(problem.capacity_units), maxoff, lin, gains,
                time_limit_s=search_s, initial=initial, fit_share=packing.FIT_SHARE)
        mapping = np.full(w.num_buffers, sim.SLOW, dtype=np.int64)
        placed = offsets >= 0
        mapping[ids[placed]] = offsets[placed] * unit
        candidates.insert(0, mapping)
        names.insert(0, "pack")
        bound_saving = ub
        info.update(nodes=int(nodes), saving=int(value), status="optimal" if proven else "feasible")
        if config.lp_bound and not proven:
            lp = lp_saving_bound(problem)
            info["lp_saving_bound"] = lp
            if lp is not None:
                bound_saving = min(bound_saving, lp)
        if knap_bound is not None and not proven:
            bound_saving = max(min(bound_saving, knap_bound), int(value))
        if bound_saving <= value:
            proven = True
            info["status"] = "optimal"
        info["saving_bound"] = int(bound_saving)
    else:
        info.update(nodes=0, saving=0, status="optimal", saving_bound=0)
        bound_saving = 0
    times = [evaluate(w, m, hw).time for m in candidates]
    best = int(np.argmin(times))
    info["source"] = names[best]
    lower = max(float(problem.time_of(o0 - bound_saving)) * (1.0 - BOUND_SAFETY), 0.0)
    mapping = candidates[best]
    if config.exact_s > 0 and info["status"] != "optimal":
        from .exact import ExactConfig, solve_exact

        polished = solve_exact(scenario, ExactConfig(time_limit_s=config.exact_s, resolution=config.resolution),
                               initial=mapping, objective_floor=o0 - bound_saving)
        info["exact"] = {k: polished.info.get(k) for k in ("status", "source", "wall_s")}
        if evaluate(w, polished.offsets, hw).time < times[best]:
            mapping, info["source"] = polished.offsets, "exact"
        lower = max(lower, polished.time_lower_bound or 0.0)
    info["wall_s"] = time.perf_counter() - begin
    return Solution(mapping, time_lower_bound=lower, info=info)


@dataclass
class PackAgent:
    """The canonical packing agent; ``pack:SECONDS`` sets ``config.time_limit_s``."""

    config: PackConfig = field(default_factory=PackConfig)
    name: str = "pack"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        """Deterministic: ``seed`` is accepted for the agent interface and not used."""
        return solve_pack(scenario, self.config)


def pack_factory(kind: str, arg: str | None) -> PackAgent:
    """``pack`` (10 s), ``pack:SECONDS`` or ``pack:key=value,...`` (:class:`PackConfig` fields)."""
    config = parse_config(PackConfig, arg, positional="time_limit_s", where=f"agent {kind!r}")
    return PackAgent(config, name=kind if arg is None else f"{kind}:{arg}")
