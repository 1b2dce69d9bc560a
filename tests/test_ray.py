"""``bench --ray`` / ``eval --ray``: the runs as Ray tasks give the local results.

The Ray tests share one local Ray with 2 CPUs (started once for the module) and are skipped
when the ``[ray]`` extra is not installed; the tests that need no Ray (no import of ray
without ``--ray``, the missing extra's error, a malformed address) always run.
"""

import importlib.util
import json
import os
import socket
import subprocess
import sys
import textwrap
import warnings

import pytest

from conftest import mlp_scenario
from mallocgym import cli, harness
from mallocgym.agents import make_agent
from mallocgym.harness import bench, ray_runner

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="the [ray] extra is not installed: pip install 'mallocgym[ray]'")

AGENTS = ["all-slow", "xla", "random", "rollout"]


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the whole module, shut down after it."""
    if not HAS_RAY:
        pytest.skip("the [ray] extra is not installed: pip install 'mallocgym[ray]'")
    import ray

    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")  # about GPUs, which we never use
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING",
                 log_to_driver=False)  # the workers' own output (a compile notice) stays out of capsys
    yield ray
    ray.shutdown()


def _without_wall(results):
    """Every field of every result but the wall times (``wall_s``, a search's ``fallback_s``)."""
    rows = [r.to_dict() for r in results]
    for row in rows:
        assert row.pop("wall_s") >= 0
        for timing in ("fallback_s", "over_budget_s"):  # a search's own wall times
            row.get("info", {}).pop(timing, None)
    return rows


def _run(capsys, *argv):
    code = cli.main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _errors(err: str) -> list[str]:
    """stderr without the progress bar's lines and bench's finished runs (``SCENARIO  AGENT: speedup ...``)."""
    return [line for line in err.splitlines() if not line.startswith(("mallocgym bench:", "mallocgym eval:"))
            and ": speedup " not in line]


# ------------------------------------------------------------------------------ same results
@needs_ray
def test_ray_bench_gives_the_local_results(local_ray, monkeypatch):
    scenarios = [mlp_scenario(seed) for seed in range(3)]
    local = bench(scenarios, AGENTS, seed=3, progress=False)

    labels, totals = [], []

    class Bar:  # records what the bar is told as the Ray results come back
        def __init__(self, total, desc="", *, enabled=True, **_):
            totals.append(total)

        def update(self, label="", advance=1.0, *, done=None):
            labels.append(label)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            pass

    def not_here(*args, **kwargs):
        raise AssertionError("a run was solved in the test process, not in a Ray task")

    monkeypatch.setattr(harness, "Progress", Bar)
    monkeypatch.setattr(harness, "solve", not_here)  # the Ray workers have the real one
    remote = bench(scenarios, AGENTS, seed=3, runner=ray_runner())
    assert [(r.scenario, r.agent) for r in remote] == [(s.name, a) for s in scenarios for a in AGENTS]
    assert _without_wall(remote) == _without_wall(local)
    assert totals == [len(scenarios) * len(AGENTS)]
    assert sorted(labels) == sorted(f"{s.name} {a}" for s in scenarios for a in AGENTS)
    # the seed reaches the tasks: random under another seed maps differently
    other = bench(scenarios[:1], ["random"], seed=4, progress=False, runner=ray_runner())
    assert other[0].offsets != local[2].offsets


@needs_ray
def test_an_error_in_a_task_is_the_local_error(local_ray):
    scenario = mlp_scenario(0)
    with pytest.raises(Exception) as here:
        bench([scenario], ["random"], seed=-1, progress=False)  # numpy refuses a negative seed mid-run
    with pytest.raises(Exception) as there:
        bench([scenario], ["xla", "random"], seed=-1, progress=False, runner=ray_runner())
    assert type(there.value) is type(here.value) is ValueError
    assert str(there.value) == str(here.value)


@needs_ray
def test_ray_takes_agents_as_specs_only(local_ray):
    with pytest.raises(ValueError, match=r"agent 'xla' was given as an object: with Ray, give agents as spec "):
        bench([mlp_scenario(0)], [make_agent("xla")], progress=False, runner=ray_runner())


# ------------------------------------------------------------------------------ the command line
@needs_ray
def test_cli_bench_ray_end_to_end(local_ray, capsys, tmp_path):
    common = ["bench", "--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s1@1/8",
              "--agents", ",".join(AGENTS)]
    code, local_out, _ = _run(capsys, *common, "--out", str(tmp_path / "local"))
    assert code == 0
    code, ray_out, err = _run(capsys, *common, "--ray", "--out", str(tmp_path / "ray"))
    assert code == 0 and _errors(err) == [] and "8/8" in err

    def no_wall_column(stdout: str) -> tuple[str, list[str]]:
        """The speedup table as printed, and the summary without its last column (total wall s)."""
        table, summary = stdout.split("\n\n", 1)
        return table, [line.rsplit("|", 2)[0] for line in summary.splitlines() if not line.startswith("wrote ")]

    assert "| mlp-train-s1@1/8 | 1.0000 |" in ray_out and "| rollout | " in ray_out
    assert no_wall_column(ray_out) == no_wall_column(local_out)
    ray_rows, local_rows = (json.loads((tmp_path / d / "results.json").read_text()) for d in ("ray", "local"))
    for row in ray_rows + local_rows:
        row.pop("wall_s")
        for timing in ("fallback_s", "over_budget_s"):  # a search's own wall times
            row.get("info", {}).pop(timing, None)
    assert ray_rows == local_rows and len(ray_rows) == 8
    ray_csv, local_csv = ((tmp_path / d / "results.csv").read_text().splitlines() for d in ("ray", "local"))
    wall = ray_csv[0].split(",").index("wall_s")
    strip = lambda lines: [[c for i, c in enumerate(line.split(",")) if i != wall] for line in lines]  # noqa: E731
    assert strip(ray_csv) == strip(local_csv)


@needs_ray
def test_cli_eval_ray(local_ray, capsys):
    argv = ["eval", "--agent", "random", "--scenario", "mlp-train-s0@1/8", "--scenario", "mlp-train-s2@1/8",
            "--seed", "7", "--json"]
    code, out, err = _run(capsys, *argv, "--ray")
    assert code == 0 and _errors(err) == []
    code, local_out, _ = _run(capsys, *argv)
    assert code == 0
    there, here = json.loads(out), json.loads(local_out)
    assert [row["scenario"] for row in there] == ["mlp-train-s0@1/8", "mlp-train-s2@1/8"]
    for row in there + here:
        row.pop("wall_s")
    assert there == here and len(there[0]["offsets"]) == 43


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("address, message", [
    ("nowhere", "--ray 'nowhere': not a Ray address; expected auto, HOST:PORT"),
    ("ray://host", "--ray 'ray://host': not a Ray address"),
    ("127.0.0.1:70000", "--ray '127.0.0.1:70000': not a Ray address"),
    ("", "--ray '': not a Ray address"),
])
def test_a_malformed_address_is_one_error(capsys, address, message):
    code, out, err = _run(capsys, "bench", "--scenario", "mlp-train-s0@1/8", "--agents", "xla", "--ray", address)
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"mallocgym: error: {message}")


@needs_ray
def test_an_address_nothing_answers_at_is_one_error_before_any_run(capsys, monkeypatch):
    port = _closed_port()
    monkeypatch.setattr(harness, "solve", lambda *a, **k: pytest.fail("ran a scenario"))
    for command in (["bench", "--agents", "xla"], ["eval", "--agent", "xla"]):
        code, out, err = _run(capsys, *command, "--scenario", "mlp-train-s0@1/8", "--ray", f"127.0.0.1:{port}")
        assert code == 2 and out == ""
        [line] = err.splitlines()  # not even the progress bar
        assert line.startswith(f"mallocgym: error: --ray 127.0.0.1:{port}: no Ray cluster answers there (")
        assert line.endswith("start one with `ray start --head` and give the address it prints")


@needs_ray
def test_an_address_while_ray_runs_here_is_one_error(local_ray, capsys):
    code, _, err = _run(capsys, "bench", "--scenario", "mlp-train-s0@1/8", "--agents", "xla", "--ray", "auto")
    assert code == 2
    assert _errors(err) == ["mallocgym: error: --ray auto: Ray is already initialised in this process; "
                            "give no address to use it"]


def test_ray_without_the_extra_names_it(capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails as if it were not installed
    code, out, err = _run(capsys, "bench", "--scenario", "mlp-train-s0@1/8", "--agents", "xla", "--ray")
    assert code == 2 and out == ""
    assert err.strip() == ("mallocgym: error: --ray needs the [ray] extra: pip install 'mallocgym[ray]' "
                           "(import of ray halted; None in sys.modules)")


def test_speed_takes_no_ray(capsys):
    code, _, err = _run(capsys, "bench", "--speed", "--ray")
    assert code == 2 and "it takes no --ray" in err


def test_nothing_imports_ray_without_the_flag(tmp_path):
    script = textwrap.dedent("""
        import contextlib, io, sys
        from mallocgym.cli import main
        for argv in (["bench", "--scenario", "mlp-train-s0@1/8", "--agents", "all-slow,xla,random"],
                     ["eval", "--agent", "xla", "--scenario", "mlp-train-s0@1/8"]):
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert main(argv) == 0, argv
        loaded = sorted(m for m in sys.modules if m.partition(".")[0] == "ray")
        assert not loaded, loaded
        print("no ray")
    """)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    proc = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=240)
    assert proc.returncode == 0 and proc.stdout == "no ray\n", proc.stderr
