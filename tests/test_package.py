"""The package as users get it: the wheel (bundled data, py.typed, no torch in its core
requirements) installed in a clean venv plays an episode; the core commands import no optional
dependency; a missing extra is named; the first numba compilation is announced."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
import venv
import zipfile
from pathlib import Path

import pytest

from mallocgym import _jit, cli
from mallocgym.env.v0 import env_kernels
from mallocgym._extras import EXTRAS, MissingExtraError, require, require_extra
from mallocgym.agents import make_agent

ROOT = Path(__file__).resolve().parents[1]
MINIMALLOC = Path(__file__).parent / "data" / "minimalloc"
OPTIONAL = ("torch", "stable_baselines3", "sb3_contrib", "ortools", "matplotlib", "ray", "tensorboard")

# Prepended to a script: importing any optional dependency fails as if it were not installed.
BLOCKER = textwrap.dedent(f"""
    import importlib.abc, sys
    BLOCKED = {OPTIONAL!r}
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in BLOCKED:
                raise ModuleNotFoundError(f"No module named {{name!r}} (blocked by the test)", name=name)
    sys.meta_path.insert(0, _Block())
""")


def _run(python, script: str, cwd: Path, timeout: float = 240) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "NUMBA_CACHE_DIR", "PYTHONHOME")}
    out = subprocess.run([str(python), "-c", script], cwd=cwd, env=env, capture_output=True, text=True,
                         timeout=timeout)
    assert out.returncode == 0, f"stdout:\n{out.stdout}\nstderr:\n{out.stderr}"
    return out


# ------------------------------------------------------------------------------------------- wheel
def _build_wheel(tmp_path: Path) -> Path:
    """Build the wheel from a copy of the sources (the shared tree gets no build/ or egg-info),
    without network when this venv has a new enough setuptools."""
    import importlib.util
    from importlib.metadata import PackageNotFoundError, version

    proj = tmp_path / "proj"
    proj.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy2(ROOT / name, proj / name)
    shutil.copytree(ROOT / "src", proj / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.nbi", "*.nbc", "*.egg-info"))
    try:
        isolation = int(version("setuptools").split(".")[0]) < 77  # else fetch a newer one (network)
    except PackageNotFoundError:
        isolation = True
    dist = str(tmp_path / "dist")
    if importlib.util.find_spec("build"):  # the dev extra
        cmd = [sys.executable, "-m", "build", "--wheel", "--outdir", dist, str(proj)]
        cmd += [] if isolation else ["--no-isolation"]
    else:
        cmd = [sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--wheel-dir", dist, str(proj)]
        cmd += [] if isolation else ["--no-build-isolation"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    (wheel,) = (tmp_path / "dist").glob("mallocgym-*.whl")
    return wheel


def _clean_venv(tmp_path: Path, wheel: Path) -> Path:
    """A venv without system site-packages holding the wheel; its dependencies (gymnasium,
    numpy, numba, ...) come from this venv's site-packages through a .pth line, which adds the
    folder but does not run the .pth files in it: the editable install of mallocgym stays out."""
    target = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False, symlinks=os.name != "nt").create(target)
    python = target / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--quiet", "--no-deps",
                    "--no-index", "--disable-pip-version-check", str(wheel)], check=True, timeout=300)
    site = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())
    ours = {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}
    (site / "_mallocgym_test_deps.pth").write_text("".join(f"{p}\n" for p in sorted(ours)))
    return python


def test_wheel_installs_and_plays_an_episode(tmp_path):
    wheel = _build_wheel(tmp_path)
    with zipfile.ZipFile(wheel) as z:
        names = set(z.namelist())
        (meta_name,) = (n for n in names if n.endswith(".dist-info/METADATA"))
        meta = z.read(meta_name).decode()
    bundled = {p.relative_to(ROOT / "src").as_posix() for p in (ROOT / "src/mallocgym/data").rglob("*")
               if p.is_file() and "__pycache__" not in p.parts}
    assert {"mallocgym/data/suite/manifest.json", "mallocgym/data/minimalloc/LICENSE"} <= bundled
    assert any(n.endswith(".npz") for n in bundled)
    assert bundled <= names, sorted(bundled - names)
    assert "mallocgym/py.typed" in names
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert not any(n.endswith((".nbi", ".nbc", ".pyc")) for n in names)

    # core requirements: no torch, SB3 or OR-Tools; the extras are declared
    requires = [line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Requires-Dist:")]
    core = {r.split(";")[0].strip().split("[")[0].split("<")[0].split(">")[0].split("=")[0].split("!")[0]
            .split("~")[0].strip().lower().replace("_", "-") for r in requires if "extra ==" not in r}
    assert core == {"gymnasium", "numpy", "numba", "tqdm"}, core
    assert not core & {"torch", "stable-baselines3", "sb3-contrib", "ortools"}
    extras = {line.split(":", 1)[1].strip() for line in meta.splitlines() if line.startswith("Provides-Extra:")}
    assert {"sb3", "muzero", "exact", "plot", "ray", "dev"} <= extras
    torch_extras = {r.split("extra ==")[1].strip(" '\"") for r in requires if r.startswith("torch") and "extra ==" in r}
    assert torch_extras == {"sb3", "muzero"}

    python = _clean_venv(tmp_path, wheel)
    script = BLOCKER + textwrap.dedent(f"""
        import importlib.resources
        import gymnasium as gym
        import numpy as np
        import mallocgym
        assert mallocgym.__file__.startswith({str(tmp_path / "venv")!r}), mallocgym.__file__
        assert importlib.resources.files("mallocgym").joinpath("py.typed").is_file()
        from mallocgym import _jit
        from mallocgym.env.v0 import env_kernels
        assert _jit.needs_compile(env_kernels())  # a fresh install: no numba cache yet
        env = gym.make("MallocGame-v0", workload="alexnet-train@1/8")
        obs, info = env.reset(seed=0)
        terminated = truncated = False
        while not (terminated or truncated):
            action = int(np.flatnonzero(obs["action_mask"])[0])
            obs, reward, terminated, truncated, info = env.step(action)
        assert terminated and not truncated and info["speedup"] >= 1.0, info
        mallocgym.evaluate(env.unwrapped.workload, info["offsets"], env.unwrapped.hardware)
        print("speedup", info["speedup"])
    """)
    out = _run(python, script, tmp_path)
    assert "speedup" in out.stdout and out.stderr.count(_jit.MESSAGE) <= 1
    # the episode wrote numba's cache next to the installed modules; the next run finds it
    _run(python, "from mallocgym import _jit; from mallocgym.env.v0 import env_kernels; "
         "assert not _jit.needs_compile(env_kernels())", tmp_path)


# ---------------------------------------------------------------------------- core without extras
def test_core_commands_import_no_optional_dependency(tmp_path):
    csv = MINIMALLOC / "input.12.csv"
    script = BLOCKER + textwrap.dedent(f"""
        import contextlib, io
        import gymnasium as gym
        import numpy as np
        import mallocgym
        from mallocgym.cli import main
        runs = [["list"], ["show", "lstm-infer@1/8"], ["bench", "--suite", "synthetic", "--split", "test",
                                                        "--agents", "xla,rollout"]]
        runs += [["solve", {str(csv)!r}, "--capacity", "8", "--agent", a]
                 for a in ("all-slow", "random", "first-fit", "best-fit", "xla", "rollout", "beam", "mcts")]
        for argv in runs:
            with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
                assert main(argv) == 0, argv
        env = gym.make("MallocGame-v0", workload="lstm-infer@1/8")
        obs, info = env.reset(seed=0)
        env.step(int(np.flatnonzero(obs["action_mask"])[0]))
        loaded = sorted(m for m in sys.modules if m.partition(".")[0] in BLOCKED)
        assert not loaded, loaded
    """)
    _run(sys.executable, script, tmp_path)


# ---------------------------------------------------------------------------------- missing extras
@pytest.mark.parametrize("spec, extra, module", [
    ("maskable_ppo:runs/x", "sb3", "torch"), ("ppo:runs/x", "sb3", "stable_baselines3"),
    ("dqn:runs/x", "sb3", "sb3_contrib"), ("muzero-pol:runs/x", "muzero", "torch"),
    ("muzero-sim:runs/x", "muzero", "torch"),
])
def test_missing_extra_is_named(monkeypatch, capsys, spec, extra, module):
    monkeypatch.setitem(sys.modules, module, None)  # `import module` raises ImportError
    kind = spec.partition(":")[0]
    hint = f"pip install 'mallocgym[{extra}]'"
    with pytest.raises(MissingExtraError) as info:
        make_agent(spec)
    assert f"the {kind!r} agent needs the [{extra}] extra: {hint}" in str(info.value)
    assert isinstance(info.value, ImportError) and info.value.name == module

    status = cli.main(["solve", str(MINIMALLOC / "input.12.csv"), "--capacity", "8", "--agent", spec])
    err = capsys.readouterr().err
    assert status == 2 and err.startswith("mallocgym: error: ") and hint in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("kind, module", [("sb3", "sb3_contrib"), ("muzero", "torch")])
def test_train_without_its_extra(monkeypatch, capsys, kind, module):
    monkeypatch.setitem(sys.modules, module, None)
    status = cli.main(["train", kind, "--minutes", "1", "--out", "never-written"])
    err = capsys.readouterr().err
    assert status == 2
    assert err.strip() == (f"mallocgym: error: 'mallocgym train {kind}' needs the [{kind}] extra: "
                           f"pip install 'mallocgym[{kind}]' (import of {module} halted; None in sys.modules)")


def test_require(monkeypatch):
    assert require("json", "plot").__name__ == "json"
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"plotting needs the \[plot\] extra: pip install 'mallocgym\[plot\]'"):
        require("matplotlib", "plot", "plotting")
    with pytest.raises(ValueError, match=r"\[plot\] extra"):  # the CLI prints ValueErrors as one line
        require_extra("plot")
    assert set(EXTRAS) == {"sb3", "muzero", "exact", "plot", "ray", "tensorboard"}


# ------------------------------------------------------------------------------- numba first compile
def _fresh(monkeypatch):
    monkeypatch.setattr(_jit, "_announced", False)
    monkeypatch.setattr(_jit, "_compiled_in_process", lambda kernel: False)


def _populate(folder: Path, stamp=None) -> None:
    """Write the index files numba would write for the env's kernels (one entry each)."""
    from numba.core.caching import IndexDataCacheFile

    for kernel in env_kernels():
        cache_file = kernel._cache._cache_file
        base = cache_file._index_name[: -len(".nbi")]
        IndexDataCacheFile(str(folder), base, cache_file._source_stamp if stamp is None else stamp)._save_index(
            {"signature": base + ".1.nbc"})


def test_first_compile_is_announced(monkeypatch, tmp_path):
    _fresh(monkeypatch)
    stream = io.StringIO()
    assert _jit.announce_compile(env_kernels(), cache_dir=tmp_path, stream=stream)
    assert stream.getvalue() == _jit.MESSAGE + "\n"
    assert "compiling numba kernels (first run only" in _jit.MESSAGE
    assert not _jit.announce_compile(env_kernels(), cache_dir=tmp_path, stream=stream)  # once per process
    assert stream.getvalue().count("\n") == 1


def test_no_announcement_with_a_cache(monkeypatch, tmp_path):
    _populate(tmp_path)
    _fresh(monkeypatch)
    stream = io.StringIO()
    assert not _jit.needs_compile(env_kernels(), cache_dir=tmp_path)
    assert not _jit.announce_compile(env_kernels(), cache_dir=tmp_path, stream=stream)
    assert stream.getvalue() == ""


def test_stale_cache_is_announced(monkeypatch, tmp_path):
    _populate(tmp_path, stamp=b"another source")
    _fresh(monkeypatch)
    assert _jit.needs_compile(env_kernels(), cache_dir=tmp_path)


def test_announce_prints_to_stderr(monkeypatch, tmp_path, capsys):
    _fresh(monkeypatch)
    _jit.announce_compile(env_kernels(), cache_dir=tmp_path)
    assert capsys.readouterr().err == _jit.MESSAGE + "\n"


def test_compiled_kernels_are_not_announced(monkeypatch, tmp_path):
    monkeypatch.setattr(_jit, "_announced", False)
    kernel = env_kernels()[0]
    monkeypatch.setattr(_jit, "_compiled_in_process", lambda k: k is kernel)
    assert _jit.needs_compile(env_kernels(), cache_dir=tmp_path)  # the other kernel is neither compiled nor cached
    assert not _jit.needs_compile([kernel], cache_dir=tmp_path)
