"""Bench runs as Ray tasks: ``mallocgym bench --ray [ADDRESS]`` and ``mallocgym eval --ray``.

:class:`RayRunner` is a :data:`mallocgym.harness.Runner`: :func:`mallocgym.harness.bench`
builds and checks the agents here as always, then hands the runner one
:class:`~mallocgym.harness.Run` per scenario x agent. The runner puts each scenario in Ray's
object store once and starts one task per run, which rebuilds the agent from its spec string
with the ``solve`` function the runner was made with (the harness passes
:func:`mallocgym.harness.solve_spec`; this module does not import the harness), so only scenarios (numpy arrays), spec strings and
:class:`~mallocgym.harness.Result` rows travel. Results are yielded as they come back (the bar
advances then); an error in a task is raised here as the task raised it, and the runs not yet
finished are cancelled.

This module imports ray only when a runner is made (the ``[ray]`` extra), so nothing imports it
without ``--ray``. See ``docs/ray.md``.
"""

from __future__ import annotations

import logging
import os
import re
import socket
import warnings
from typing import Callable, Iterator, Sequence

from ._extras import require

__all__ = ["RayRunner", "check_address", "ADDRESS_FORMS", "PROBE_TIMEOUT_S"]

ADDRESS_FORMS = "auto, HOST:PORT (a cluster's GCS, from `ray start --head`) or ray://HOST:PORT (Ray Client)"
PROBE_TIMEOUT_S = 5.0  # a HOST:PORT that does not accept a connection in this time is refused up front

_HOST_PORT = re.compile(r"^(ray://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+):([0-9]{1,5})$")


def check_address(address: str | None) -> str | None:
    """``address`` as given when it has one of the :data:`ADDRESS_FORMS` (None: a local Ray),
    else a ``ValueError`` naming them."""
    if address is None or address == "auto":
        return address
    match = _HOST_PORT.match(address)
    if not match or not 1 <= int(match.group(3)) <= 65535:
        raise ValueError(f"--ray {address!r}: not a Ray address; expected {ADDRESS_FORMS}")
    return address


def _probe(address: str, given: str) -> None:
    """Refuse at once a ``HOST:PORT`` nothing listens on (ray.init would retry it for minutes);
    ``given`` names it in the error (``--ray HOST:PORT``)."""
    match = _HOST_PORT.match(address)
    if match is None:
        return  # a form Ray reads itself (RAY_ADDRESS may hold one)
    host, port = match.group(2).strip("[]"), int(match.group(3))
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT_S):
            pass
    except OSError as exc:
        raise ConnectionError(f"{given}: no Ray cluster answers there ({exc.strerror or exc}); "
                              f"start one with `ray start --head` and give the address it prints") from None


def _solve_task(solve_spec: Callable, scenario, spec: str, name: str, seed: int, env: str, budget_s: float | None,
                cwd: str):
    """The body of one Ray task (run on a worker, which imports mallocgym there): ``solve_spec``
    (the runner's ``solve``, sent by reference). It runs in the
    driver's working directory ``cwd`` when that exists on the worker's node (this machine, a
    shared filesystem), so that a relative ``KIND:PATH`` means what it means to the driver."""
    here = os.getcwd()
    move = cwd != here and os.path.isdir(cwd)
    if move:
        os.chdir(cwd)
    try:
        return solve_spec(scenario, spec, name=name, seed=seed, env=env, budget_s=budget_s)
    finally:
        if move:
            os.chdir(here)


class RayRunner:
    """Solves bench runs as Ray tasks (one CPU each) and yields their results as they finish.

    Arguments:
      address: ``None`` uses the Ray already initialised in this process, else starts a new
        local one (``ray.init(address="local")``: all this machine's CPUs) and shuts it down
        after the runs; ``"auto"`` joins ``RAY_ADDRESS``, else the cluster that ``ray start``
        started on this machine;
        ``"HOST:PORT"`` joins a cluster's head as a driver, ``"ray://HOST:PORT"`` through Ray
        Client. A cluster joined here is left running; this process disconnects after the runs.

    Made before anything runs, it refuses a malformed address (``ValueError``), a missing ray
    (the ``[ray]`` extra's :class:`~mallocgym._extras.MissingExtraError`) and a ``HOST:PORT``
    that accepts no connection (``ConnectionError``); ``auto`` with no cluster running is a
    ``ConnectionError`` when the runs start.

    ``solve``: what a task calls, ``solve(scenario, spec, name=, seed=, env=, budget_s=) -> Result``
    (:func:`mallocgym.harness.solve_spec`, which :func:`mallocgym.harness.ray_runner` passes). A
    runner made without one only connects (``_connect``, as MuZero's Ray training uses it).
    """

    def __init__(self, address: str | None = None, *, solve: Callable | None = None):
        self.address = check_address(address)
        self._solve = solve
        self._ray = require("ray", "ray", "--ray")
        if self.address not in (None, "auto"):
            _probe(self.address, f"--ray {self.address}")
        elif self.address == "auto" and os.environ.get("RAY_ADDRESS", "auto") != "auto":
            _probe(os.environ["RAY_ADDRESS"], f"--ray auto (RAY_ADDRESS={os.environ['RAY_ADDRESS']})")

    def __repr__(self) -> str:
        return f"RayRunner(address={self.address!r})"

    def _connect(self) -> bool:
        """Initialise Ray unless it already is; True when this runner did (and shuts it down)."""
        ray = self._ray
        if ray.is_initialized():
            if self.address is not None:
                raise ValueError(f"--ray {self.address}: Ray is already initialised in this process; "
                                 f"give no address to use it")
            return False
        if self.address is None:  # no dashboard, and no metrics (whose agent the plain `ray` package lacks:
            # every process would log that it cannot reach it)
            kwargs = {"include_dashboard": False, "logging_level": logging.WARNING,
                      "_system_config": {"enable_metrics_collection": False}}
        elif self.address.startswith("ray://"):
            kwargs = {}
        else:
            kwargs = {"logging_level": logging.WARNING}
        with warnings.catch_warnings():
            # a FutureWarning about GPU visibility, which these CPU tasks never use
            warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")
            client_log = logging.getLogger("ray.client_builder")  # Ray Client's INFO line about its kwargs
            level = client_log.level
            client_log.setLevel(max(level, logging.WARNING))
            try:  # "local": a new Ray, not one that RAY_ADDRESS or an earlier `ray start` points at
                ray.init(address="local" if self.address is None else self.address, **kwargs)
            except ConnectionError as exc:
                if self.address == "auto" and not os.environ.get("RAY_ADDRESS"):
                    raise ConnectionError("--ray auto: no running Ray cluster found (RAY_ADDRESS is not set and "
                                          "`ray start` started none on this machine)") from None
                raise ConnectionError(f"--ray {self.address}: {_one_line(exc)}") from None
            except SystemExit:  # ray.init exits when the GCS it was given never answers
                raise ConnectionError(f"--ray {self.address}: Ray could not connect to a cluster there") from None
            finally:
                client_log.setLevel(level)
        return True

    def __call__(self, runs: Sequence) -> Iterator[tuple[int, object]]:
        """Solve ``runs`` (:class:`mallocgym.harness.Run`) as Ray tasks; yield ``(index, Result)`` as
        each finishes."""
        if self._solve is None:
            raise ValueError("this RayRunner was made without solve=: make it with mallocgym.harness.ray_runner")
        unbuilt = sorted({run.agent.name for run in runs if run.spec is None})
        if unbuilt:
            raise ValueError(f"agent {', '.join(map(repr, unbuilt))} was given as an object: with Ray, give agents "
                             f"as spec strings (xla, rollout, muzero-sim:DIR), which each task builds")
        ray = self._ray
        from ray.exceptions import RayError, RayTaskError

        started = self._connect()
        pending: list = []
        try:
            task = ray.remote(num_cpus=1)(_solve_task)  # a lost worker's run is retried (runs are repeatable)
            stored: dict[int, object] = {}
            index = {}
            cwd = os.getcwd()
            for i, run in enumerate(runs):
                if id(run.scenario) not in stored:
                    stored[id(run.scenario)] = ray.put(run.scenario)
                ref = task.remote(self._solve, stored[id(run.scenario)], run.spec, run.agent.name, run.seed, run.env,
                                  run.budget_s, cwd)
                index[ref] = i
                pending.append(ref)
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        result = ray.get(ref)
                    except RayTaskError as exc:
                        cause = getattr(exc, "cause", None)
                        if isinstance(cause, Exception) and not isinstance(cause, RayError):
                            raise cause from None  # the run's own error, as a local run raises it
                        raise _failed(runs[index[ref]], exc) from None
                    except RayError as exc:  # a worker or node lost
                        raise _failed(runs[index[ref]], exc) from None
                    yield index[ref], result
        finally:
            for ref in pending:
                ray.cancel(ref, force=True)
            if started:
                ray.shutdown()


def _failed(run, exc: BaseException) -> OSError:
    return OSError(f"Ray failed to run {run.agent.name} on {run.scenario.name}: {_one_line(exc)}")


def _one_line(exc: BaseException) -> str:
    text = "; ".join(line.strip() for line in str(exc).splitlines() if line.strip())
    return text or type(exc).__name__
