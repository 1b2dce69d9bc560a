"""An exact mapping solver: the whole problem as one OR-Tools CP-SAT model.

Usage: ``make_agent("exact")`` or ``make_agent("exact:60")`` (a 60 s time limit), or
:func:`solve_exact`. It needs the ``exact`` extra (``pip install mallocgym[exact]``).

The model (docs/exact.md has the derivation):

* **Placement.** A Boolean ``x_b`` ("in fast memory") and an offset ``o_b`` (in units of ``u``
  bytes, see below) per buffer, and an optional interval over addresses ``[o_b, o_b + len_b)``,
  present iff ``x_b``. ``o_b <= (capacity - size_b) // u`` keeps a buffer inside fast memory.
  Two fast buffers live at a common op must not share an address. As a 2-D packing (config
  ``no_overlap="2d"``) that is one ``NoOverlap2D`` over optional time intervals, fixed to
  ``[start_b, end_b + 1)``, and the address intervals. Since the time intervals are fixed, the
  pairs that must not overlap are exactly those inside some maximal set of co-live buffers (a
  maximal clique of the interval graph), so the default (``"cliques"``) states the same
  constraint as one 1-D ``NoOverlap`` per maximal clique, which packed better in our runs. Redundant knapsack rows (the lengths of a clique's fast buffers
  fit the memory) tighten the LP relaxation.
* **Cost.** Program time is ``sum_t max(c_t, m_t(x)) + T * op_overhead`` with compute time
  ``c_t`` and memory time ``m_t(x) = M_t - sum_b s_tb x_b`` (``M_t``: all-slow memory time;
  ``s_tb``: what moving buffer ``b``'s bytes at op ``t`` to fast memory saves). Ops that no
  model variable touches, or with ``c_t >= M_t``, are constants; ops with ``c_t`` no larger
  than their all-fast memory time contribute ``m_t(x)`` linearly; every other op gets an
  op-time variable ``y_t >= c_t``, ``y_t >= m_t(x)``. The objective is their sum.

Exact simplifications (each keeps some optimal mapping feasible):

* A buffer that has no positive-byte access at an op with ``c_t < M_t`` (or any buffer, when
  ``fast_bw <= slow_bw``) can change no op's time, so it stays in slow memory.
* **Address unit.** ``u = A * gcd_b(ceil(size_b / A))`` (``A`` = alignment) over the model's
  buffers, and a buffer occupies ``len_b = ceil_A(size_b) / u`` units. Take any valid mapping and
  "drop" its fast buffers in increasing offset order, each onto the highest top
  (``offset + ceil_A(size)``) of the dropped buffers it shares an op with (0 if none): tops are multiples of ``u`` by induction, no offset
  rises (an aligned offset above a buffer is at least its offset plus ``ceil_A(size)``), and no
  pair collides. So an optimal mapping with offsets that are multiples of ``u`` exists, and the
  solver searches only those (MiniMalloc's 1 MiB instances become 1024 units of 1 KiB).

Integer scaling and the lower bound. All arithmetic below is exact (:class:`fractions.Fraction`
over the float inputs). The parts of the time that no variable changes (constant ops, the
all-slow memory time of the linear ops, ``T * op_overhead``) are kept exactly, outside the
solver. The rest is counted in quanta of ``q = time_all_slow / resolution`` seconds (any
``q > 0`` would do), rounded so that the integer objective *under*-estimates it for every
mapping: savings ``S_tb = ceil(s_tb / q)`` round up, an op-time variable's ``C_t = floor(c_t / q)``
and ``M'_t = floor(M_t / q)`` round down, and ``max`` is monotone. Hence for every mapping ``x``,
``time_of(obj(x)) = q * obj(x) + constants <= time(x)``, and CP-SAT's proven bound ``B`` on the
objective (taken as ``floor(B)``, and only once CP-SAT has a solution: a stop in presolve
reports ``UNKNOWN`` with a meaningless 0, and then the all-fast objective, which no mapping
beats, is used) gives ``time_of(floor(B)) <= min_x time(x)``. The reported
bound is that value times ``1 - 1e-12``, which covers the float rounding of ``evaluate()``'s own
sum (below ``1e-14`` relative for any workload of realistic size). The under-estimate is off by
less than one quantum per rounded coefficient, so a mapping optimal for the integer model is
within ``info["rounding_slack_s"] = q * (P + V)`` seconds of the bound (``P`` savings terms,
``V`` op-time variables), that is ``(P + V) / resolution`` of the all-slow time: 3e-7 of it on
MiniMalloc's A (308 terms) with the default resolution ``2**30``.

The XLA-like mapping, dropped onto the ``u`` grid as above (which changes no buffer's memory
space), is given to CP-SAT as a complete hint, and the answer is whichever of CP-SAT's mapping
and the XLA-like one evaluates faster, so it is never worse than XLA-like.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from fractions import Fraction

import numpy as np

from .. import heuristics, sim
from ..pricing.v0 import evaluate
from ..scenarios import Scenario
from .base import Solution

__all__ = ["ExactConfig", "ExactAgent", "Problem", "build_problem", "drop_to_grid", "solve_exact",
           "exact_factory", "MissingSolverError", "BOUND_SAFETY"]

INSTALL_HINT = "pip install mallocgym[exact]"
BOUND_SAFETY = 1e-12  # relative margin for the float rounding of evaluate()'s sum


class MissingSolverError(ImportError, ValueError):
    """OR-Tools is not installed (an ``ImportError``; also a ``ValueError`` so that the
    command line prints it as one line)."""


def _cp_model():
    try:
        from ortools.sat.python import cp_model
    except ImportError as exc:
        raise MissingSolverError(f"the exact agent needs OR-Tools: {INSTALL_HINT} ({exc})") from None
    return cp_model


@dataclass(frozen=True)
class ExactConfig:
    """Settings of the CP-SAT solve.

    Attributes:
      time_limit_s: wall-clock limit of the CP-SAT search, seconds (> 0).
      workers: CP-SAT search workers (threads), >= 1; 2 matches a 2-core machine.
      resolution: integer time quanta per all-slow program time (>= 1000): larger means a
        tighter bound and larger coefficients.
      hint: start the search from the XLA-like mapping.
      clique_rows: add the redundant "co-live buffers fit the memory" rows.
      probing: let CP-SAT's presolve probe (``cp_model_probing_level`` 2 instead of 0); off by
        default: on workloads of ~1,000 buffers probing alone took 25 s of a 30 s budget.
      no_overlap: ``"cliques"`` (one NoOverlap over addresses per maximal set of co-live
        buffers), ``"2d"`` (one NoOverlap2D over time x address) or ``"both"``. The first two
        state the same constraint, since the time intervals are fixed; ``"cliques"`` found
        better packings on MiniMalloc's instances in our runs (baselines/exact/README.md).
      log: print CP-SAT's search log to stdout.
    """

    time_limit_s: float = 10.0
    workers: int = 2
    resolution: int = 1 << 30
    hint: bool = True
    clique_rows: bool = True
    probing: bool = False
    no_overlap: str = "cliques"
    log: bool = False

    def __post_init__(self) -> None:
        if not (isinstance(self.time_limit_s, (int, float)) and math.isfinite(self.time_limit_s)
                and self.time_limit_s > 0):
            raise ValueError(f"ExactConfig.time_limit_s must be a finite number > 0, got {self.time_limit_s!r}")
        if isinstance(self.workers, bool) or not isinstance(self.workers, int) or self.workers < 1:
            raise ValueError(f"ExactConfig.workers must be an integer >= 1, got {self.workers!r}")
        if isinstance(self.resolution, bool) or not isinstance(self.resolution, int) or self.resolution < 1000:
            raise ValueError(f"ExactConfig.resolution must be an integer >= 1000, got {self.resolution!r}")
        if self.no_overlap not in ("2d", "cliques", "both"):
            raise ValueError(f"ExactConfig.no_overlap must be '2d', 'cliques' or 'both', got {self.no_overlap!r}")


@dataclass(frozen=True, eq=False)
class Problem:
    """The integer model's data (no OR-Tools objects), built by :func:`build_problem`.

    Attributes:
      buffers: ``int64[n]`` ids of the buffers that may go to fast memory; the rest stay slow.
      unit: address unit ``u`` in bytes; ``length[i]`` and ``max_offset[i]`` are in units.
      length: ``int64[n]`` units occupied by ``buffers[i]`` (``ceil_A(size) / u``).
      max_offset: ``int64[n]`` largest offset, in units, that keeps the buffer in fast memory.
      capacity_units: units available to any set of co-live buffers (``ceil_A(capacity) // u``).
      cliques: maximal sets of co-live model buffers (indices into ``buffers``).
      quantum: seconds per integer time unit, an exact rational.
      constant: seconds (exact) of the ops' times that do not depend on the mapping, plus the
        all-slow memory time of the ops in ``linear``.
      linear: ``{i: S}`` objective coefficients of ``x_i`` from ops that are always memory-bound.
      max_ops: per op-time variable ``(C_t, M'_t, {i: S_ti})``: ``y_t >= C_t``,
        ``y_t >= M'_t - sum_i S_ti x_i``.
      overhead: ``T * op_overhead`` seconds (exact), added to every time.
      terms: rounded coefficients (savings terms plus op-time variables): the slack, in quanta.
    """

    buffers: np.ndarray
    unit: int
    length: np.ndarray
    max_offset: np.ndarray
    capacity_units: int
    cliques: list
    quantum: Fraction
    constant: Fraction
    linear: dict
    max_ops: list
    overhead: Fraction
    terms: int

    def time_of(self, objective: int) -> Fraction:
        """Seconds that a value of the integer objective (the variable part) stands for."""
        return self.quantum * objective + self.constant + self.overhead

    def all_fast_objective(self) -> int:
        """The objective with every model buffer in fast memory, packing ignored: a lower bound
        on the objective of any mapping, since no saving is negative."""
        total = sum(self.linear.values())
        for low, mem, gains in self.max_ops:
            total += max(low, mem - sum(gains.values()))
        return total


def _floor_div(a: Fraction, b: Fraction) -> int:
    return math.floor(a / b)


def _useful(workload, compute, slow_time, fast_gains) -> np.ndarray:
    """Buffers with a positive-byte access at an op that is not compute-bound when all slow."""
    if not fast_gains:
        return np.zeros(workload.num_buffers, dtype=bool)
    open_op = np.array([c < m for c, m in zip(compute, slow_time)], dtype=bool)
    owner = np.repeat(np.arange(workload.num_buffers), np.diff(workload.access_ptr))
    hit = open_op[workload.access_op] & (workload.access_bytes > 0)
    useful = np.zeros(workload.num_buffers, dtype=bool)
    useful[owner[hit]] = True
    return useful


def _maximal_cliques(start: np.ndarray, end: np.ndarray) -> list[np.ndarray]:
    """Maximal sets of intervals ``[start, end]`` sharing a point (indices), one per point
    where the live set stops growing."""
    points = np.unique(start)
    out = []
    for k, t in enumerate(points):
        live = np.flatnonzero((start <= t) & (end >= t))
        following = points[k + 1] if k + 1 < len(points) else None
        if following is None or np.any(end[live] < following):
            out.append(live)
    return out


def build_problem(scenario: Scenario, resolution: int = 1 << 30) -> Problem:
    """The integer model of ``scenario`` (see the module docstring for why it is exact and why
    its bound is rigorous)."""
    w, hw = scenario.workload, scenario.hardware
    capacity, align = int(hw.fast_capacity), int(hw.alignment)
    peak, rate = Fraction(hw.peak_flops), Fraction(hw.transcendental_rate)
    slow_bw, fast_bw = Fraction(hw.slow_bw), Fraction(hw.fast_bw)
    compute = [max(Fraction(f) / peak, Fraction(x) / rate) for f, x in zip(w.flops, w.transcendentals)]
    slow_bytes = np.zeros(w.num_ops, dtype=np.int64)
    np.add.at(slow_bytes, w.access_op, w.access_bytes)
    slow_time = [int(n) / slow_bw for n in slow_bytes]
    gain_per_byte = 1 / slow_bw - 1 / fast_bw
    useful = _useful(w, compute, slow_time, gain_per_byte > 0) & (w.size <= capacity)
    ids = np.flatnonzero(useful).astype(np.int64)
    index = {int(b): i for i, b in enumerate(ids)}

    all_slow = sum(max(c, m) for c, m in zip(compute, slow_time))
    quantum = Fraction(float(all_slow) / resolution) if all_slow > 0 else Fraction(1)
    # bytes each model buffer moves at each op
    per_op: list[dict[int, int]] = [dict() for _ in range(w.num_ops)]
    for b in ids:
        i = index[int(b)]
        for a in range(w.access_ptr[b], w.access_ptr[b + 1]):
            t, n = int(w.access_op[a]), int(w.access_bytes[a])
            if n > 0:
                per_op[t][i] = per_op[t].get(i, 0) + n
    saving = gain_per_byte / quantum  # quanta saved per byte
    constant, linear, max_ops, terms = Fraction(0), {}, [], 0
    for t in range(w.num_ops):
        c, m, moved = compute[t], slow_time[t], per_op[t]
        if not moved or c >= m:
            constant += max(c, m)
            continue
        gains = {i: math.ceil(n * saving) for i, n in moved.items()}
        terms += len(moved)
        if c <= m - gain_per_byte * sum(moved.values()):  # memory-bound even with all of it fast
            constant += m
            for i, s in gains.items():
                linear[i] = linear.get(i, 0) - s
        else:
            max_ops.append((_floor_div(c, quantum), _floor_div(m, quantum), gains))
            terms += 1

    rounded = -(-w.size[ids] // align) * align
    unit = align * (int(np.gcd.reduce(rounded // align)) if len(ids) else 1)
    cliques = _maximal_cliques(w.start[ids], w.end[ids]) if len(ids) else []
    return Problem(
        buffers=ids, unit=unit, length=rounded // unit, max_offset=(capacity - w.size[ids]) // unit,
        capacity_units=(-(-capacity // align) * align) // unit, cliques=cliques, quantum=quantum,
        constant=constant, linear=linear, max_ops=max_ops,
        overhead=w.num_ops * Fraction(hw.op_overhead), terms=terms,
    )


def drop_to_grid(scenario: Scenario, offsets: np.ndarray, unit: int) -> np.ndarray:
    """The same fast/slow split with every fast buffer dropped as low as it goes, in increasing
    offset order; the offsets become multiples of ``unit`` (when ``unit`` divides every fast
    buffer's alignment-rounded size) and none rises."""
    w, align = scenario.workload, scenario.hardware.alignment
    out = np.full(w.num_buffers, sim.SLOW, dtype=np.int64)
    fast = np.flatnonzero(offsets >= 0)
    fast = fast[np.argsort(offsets[fast], kind="stable")]
    top = -(-w.size // align) * align
    done = np.zeros(0, dtype=np.int64)
    for b in fast:
        near = done[(w.start[done] <= w.end[b]) & (w.end[done] >= w.start[b])]
        level = int((out[near] + top[near]).max()) if near.size else 0
        out[b] = -(-level // unit) * unit
        done = np.append(done, b)
    return out


def _build_model(cp_model, problem: Problem, scenario: Scenario, config: ExactConfig, hint,
                 objective_floor: int | None = None):
    w = scenario.workload
    model = cp_model.CpModel()
    x, o, times, spaces = [], [], [], []
    for i, b in enumerate(problem.buffers):
        xi = model.new_bool_var(f"x{b}")
        oi = model.new_int_var(0, int(problem.max_offset[i]), f"o{b}")
        model.add(oi == 0).only_enforce_if(~xi)
        length = int(problem.length[i])
        spaces.append(model.new_optional_interval_var(oi, length, oi + length, xi, f"a{b}"))
        if config.no_overlap in ("2d", "both"):
            times.append(model.new_optional_fixed_size_interval_var(
                int(w.start[b]), int(w.end[b] - w.start[b] + 1), xi, f"t{b}"))
        x.append(xi)
        o.append(oi)
    if x and config.no_overlap in ("2d", "both"):
        model.add_no_overlap_2d(times, spaces)
    if config.no_overlap in ("cliques", "both"):
        for clique in problem.cliques:
            if len(clique) > 1:
                model.add_no_overlap([spaces[i] for i in clique])
    if config.clique_rows:
        for clique in problem.cliques:
            if int(problem.length[clique].sum()) > problem.capacity_units:
                model.add(sum(int(problem.length[i]) * x[i] for i in clique) <= problem.capacity_units)
    fast = None if hint is None else [bool(hint[b] >= 0) for b in problem.buffers]
    objective = [s * x[i] for i, s in problem.linear.items() if s]
    for k, (low, mem, gains) in enumerate(problem.max_ops):
        y = model.new_int_var(low, max(low, mem), f"y{k}")
        model.add(y + sum(s * x[i] for i, s in gains.items()) >= mem)
        objective.append(y)
        if fast is not None:  # a complete hint is loaded as a first solution
            model.add_hint(y, max(low, mem - sum(s for i, s in gains.items() if fast[i])))
    if objective_floor is not None and objective:  # a proven bound from elsewhere (pack), as a row
        model.add(sum(objective) >= int(objective_floor))
    model.minimize(sum(objective))
    if hint is not None:
        for i, b in enumerate(problem.buffers):
            model.add_hint(x[i], fast[i])
            model.add_hint(o[i], int(max(hint[b], 0)) // problem.unit)
    return model, x, o


def solve_exact(scenario: Scenario, config: ExactConfig = ExactConfig(), *, seed: int = 0,
                initial: np.ndarray | None = None, objective_floor: int | None = None) -> Solution:
    """Solve ``scenario`` with CP-SAT under ``config``; return the best mapping found (never
    worse than XLA-like, or than ``initial``), a rigorous lower bound on program time, and in
    ``info`` the CP-SAT status (``OPTIMAL``, ``FEASIBLE``, ...), wall time, model size and
    rounding slack.

    ``initial`` (a valid mapping, e.g. the ``pack`` agent's) replaces the XLA-like one as the
    hint; ``objective_floor`` is a proven lower bound on the integer objective of
    :func:`build_problem` at ``config.resolution`` (``pack`` proves one), added as a row."""
    cp_model = _cp_model()
    begin = time.perf_counter()
    problem = build_problem(scenario, config.resolution)
    w, hw = scenario.workload, scenario.hardware
    xla = heuristics.xla_like(scenario) if initial is None else np.asarray(initial, dtype=np.int64)
    info = {"buffers_in_model": int(len(problem.buffers)), "unit_bytes": int(problem.unit),
            "op_time_vars": len(problem.max_ops), "workers": config.workers,
            "time_limit_s": config.time_limit_s,
            "rounding_slack_s": float(problem.quantum * problem.terms)}
    candidates = [xla]
    if len(problem.buffers) == 0:
        info["status"] = "OPTIMAL"
        bound_int = 0
    else:
        hint = None
        if config.hint:
            start = np.full(w.num_buffers, sim.SLOW, dtype=np.int64)
            start[problem.buffers] = xla[problem.buffers]
            hint = drop_to_grid(scenario, start, problem.unit)
        model, x, o = _build_model(cp_model, problem, scenario, config, hint, objective_floor)
        solver = cp_model.CpSolver()
        solver.parameters.max_time_in_seconds = float(config.time_limit_s)
        solver.parameters.num_workers = config.workers
        solver.parameters.random_seed = int(seed) % (1 << 31)
        solver.parameters.log_search_progress = config.log
        solver.parameters.cp_model_probing_level = 2 if config.probing else 0
        cpu = time.process_time()
        status = solver.solve(model)
        info["solver_cpu_s"] = time.process_time() - cpu
        if status == cp_model.MODEL_INVALID:  # a bug in this module, not in the scenario
            raise RuntimeError(f"exact: CP-SAT rejected the model: {model.validate()}")
        info["status"] = solver.status_name(status)
        info["deterministic_time"] = solver.deterministic_time
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
            mapping = np.full(w.num_buffers, sim.SLOW, dtype=np.int64)
            for i, b in enumerate(problem.buffers):
                if solver.boolean_value(x[i]):
                    mapping[b] = solver.value(o[i]) * problem.unit
            candidates.insert(0, mapping)
            info["objective"] = int(round(solver.objective_value))
        # CP-SAT's bound is meaningful once it has a solution (UNKNOWN reports 0)
        bound_int = problem.all_fast_objective()
        if objective_floor is not None:
            bound_int = max(bound_int, int(objective_floor))
        raw = solver.best_objective_bound
        if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) and math.isfinite(raw):
            bound_int = max(bound_int, math.floor(raw))
    times = [evaluate(w, m, hw).time for m in candidates]
    best = int(np.argmin(times))
    info["source"] = "cp-sat" if len(candidates) == 2 and best == 0 else ("xla" if initial is None else "initial")
    bound = max(float(problem.time_of(bound_int)) * (1.0 - BOUND_SAFETY), 0.0)
    info["wall_s"] = time.perf_counter() - begin
    return Solution(candidates[best], time_lower_bound=bound, info=info)


@dataclass
class ExactAgent:
    """The CP-SAT agent; ``exact:SECONDS`` sets ``config.time_limit_s``."""

    config: ExactConfig = field(default_factory=ExactConfig)
    name: str = "exact"

    def solve(self, scenario: Scenario, *, seed: int = 0) -> Solution:
        return solve_exact(scenario, self.config, seed=seed)


def exact_factory(kind: str, arg: str | None) -> ExactAgent:
    """``exact`` (10 s) or ``exact:SECONDS``; fails at once, with the install command, when
    OR-Tools is missing."""
    _cp_model()
    if arg is None:
        return ExactAgent()
    try:
        seconds = float(arg)
    except ValueError:
        raise ValueError(f"agent {kind!r} takes a time limit in seconds ({kind}:SECONDS), got {kind}:{arg}") from None
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"agent {kind!r}: the time limit must be > 0 seconds, got {kind}:{arg}")
    return ExactAgent(ExactConfig(time_limit_s=seconds), name=f"{kind}:{arg}")
