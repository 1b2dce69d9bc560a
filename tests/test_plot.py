"""matplotlib pictures: `solve --png`, `show --png` (memory maps, memory pressure) and `mallocgym
plot RUN_DIR` (training curves), their text and scales read back from the matplotlib objects, and
the one-line errors (missing [plot] extra, bad --png, a folder that is not a run)."""

from __future__ import annotations

import json
import struct
import sys
from pathlib import Path

import numpy as np
import pytest

from mallocgym import evaluate, scenarios
from mallocgym.cli import main
from mallocgym.harness import solve

pytest.importorskip("matplotlib")

from mallocgym import plot  # noqa: E402

V0 = "mlp-train-s0@1/8"      # synthetic, small
V1 = "mlp-train@1/8"         # bundled; greedy v1 prefetches and evicts here


def png_size(path: Path) -> tuple[int, int]:
    data = Path(path).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def texts(fig) -> str:
    """Every title, axis label, legend entry and annotation of ``fig``, one per line."""
    out = []
    for ax in fig.axes:
        out += [ax.get_title(), ax.get_xlabel(), ax.get_ylabel()]
        legend = ax.get_legend()
        if legend is not None:
            out += [t.get_text() for t in legend.get_texts()]
        out += [t.get_text() for t in ax.texts]
    return "\n".join(out)


def one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("mallocgym: error: "), err
    return err


# ------------------------------------------------------------------------------------ memory maps
def test_solve_png_is_a_960_pixel_wide_matplotlib_picture(capsys, tmp_path):
    out = tmp_path / "map.png"
    assert main(["solve", V0, "--agent", "xla", "--png", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert png_size(out) == (plot.WIDTH_PX, 680)
    assert not list(tmp_path.glob(".*.tmp"))  # written atomically


def test_v0_memory_map_has_axes_title_capacity_and_op_times():
    s = scenarios.resolve(V0)
    r = solve(s, "xla")
    fig = plot.memory_map_figure(s, r)
    top, bottom = fig.axes
    div, unit = plot.byte_unit(s.hardware.fast_capacity)
    assert top.get_ylabel() == f"fast-memory address ({unit})" and bottom.get_xlabel() == "op index (program order)"
    assert bottom.get_ylabel().startswith("op time (")
    title = top.get_title()
    assert s.name in title and s.hardware.name in title and "agent xla" in title and f"{r.speedup:.3f}×" in title
    # the capacity: a black line at the capacity, above every rectangle
    caps = [line for line in top.get_lines() if line.get_color() == "black"]
    assert len(caps) == 1 and caps[0].get_ydata()[0] == pytest.approx(s.hardware.fast_capacity / div)
    assert caps[0].get_zorder() > max(c.get_zorder() for c in top.collections)
    assert top.get_ylim()[1] > s.hardware.fast_capacity / div  # the line is inside the picture
    # one rectangle per placed buffer, at its offset
    (rects,) = [c for c in top.collections if len(c.get_paths()) == int(np.sum(np.array(r.offsets) >= 0))]
    b = int(np.flatnonzero(np.array(r.offsets) >= 0)[0])
    first = rects.get_paths()[0].vertices
    assert first[:, 0].min() == s.workload.start[b] and first[:, 0].max() == s.workload.end[b] + 1
    assert first[:, 1].min() == pytest.approx(r.offsets[b] / div)
    assert "capacity" in texts(fig) and "all slow" in texts(fig) and "this mapping" in texts(fig)


def test_op_times_sum_to_the_evaluated_times():
    s = scenarios.resolve(V0)
    r = solve(s, "xla")
    fast = np.array(r.offsets) >= 0
    ev = evaluate(s.workload, r.offsets, s.hardware)
    assert plot.op_times(s.workload, fast, s.hardware).sum() == pytest.approx(ev.time, rel=1e-12)
    assert plot.op_times(s.workload, np.zeros_like(fast), s.hardware).sum() == pytest.approx(ev.time_all_slow)
    s1 = scenarios.resolve(V1)
    r1 = solve(s1, "greedy", env="v1")
    mapped, slow = plot.op_times_v1(s1.workload, r1.mapping, s1.hardware)
    assert mapped.shape == slow.shape == (s1.workload.num_ops,)
    assert mapped.sum() == pytest.approx(r1.time, rel=1e-9) and slow.sum() == pytest.approx(r1.time_all_slow, rel=1e-9)


def test_v1_memory_map_draws_prefetches_and_evictions_hatched_with_a_legend(tmp_path, capsys):
    from mallocgym.pricing.v1 import chunks_v1

    s = scenarios.resolve(V1)
    r = solve(s, "greedy", env="v1")
    chunks = chunks_v1(s.workload, r.mapping, s.hardware)
    n_pre = sum(c["prefetched"] and c["first_use"] > c["first_op"] for c in chunks)
    n_ev = sum(c["evict_from"] is not None for c in chunks)
    assert n_pre > 0 and n_ev > 0  # the scenario shows both
    fig = plot.memory_map_figure(s, r)
    top = fig.axes[0]
    hatched = {c.get_hatch(): len(c.get_paths()) for c in top.collections if c.get_hatch()}
    assert hatched == {"////": n_pre, "\\\\\\\\": n_ev}
    legend = [t.get_text() for t in top.get_legend().get_texts()]
    assert f"prefetch in flight ({n_pre})" in legend and f"held until eviction done ({n_ev})" in legend
    assert "agent greedy" in top.get_title() and "copied" in top.get_title()
    out = tmp_path / "v1.png"
    assert main(["solve", V1, "--env", "v1", "--agent", "greedy", "--png", str(out)]) == 0
    assert png_size(out) == (plot.WIDTH_PX, 680)


def test_show_png_draws_the_capacity_above_the_over_capacity_fill(capsys, tmp_path):
    out = tmp_path / "pressure.png"
    assert main(["show", "moe-layer-fwd@1/8", "--png", str(out)]) == 0
    assert png_size(out) == (plot.WIDTH_PX, 720)
    s = scenarios.resolve("moe-layer-fwd@1/8")
    fig = plot.pressure_figure(s)
    top = fig.axes[0]
    div, _ = plot.byte_unit(max(s.workload.peak_live_bytes, s.hardware.fast_capacity))
    (cap,) = [line for line in top.get_lines() if line.get_color() == "black"]
    assert cap.get_ydata()[0] == pytest.approx(s.hardware.fast_capacity / div)
    fills = top.collections
    assert len(fills) == 2 and cap.get_zorder() > max(f.get_zorder() for f in fills)  # over the salmon fill
    assert plot.OVER_COLOUR != plot.CAPACITY_COLOUR
    assert s.name in top.get_title() and s.hardware.name in top.get_title()
    assert "live bytes above the capacity" in texts(fig) and "all fast" in texts(fig)


def test_png_without_the_plot_extra_is_one_line_naming_it(monkeypatch, capsys, tmp_path):
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    for argv in (["solve", V0, "--png"], ["show", V0, "--png"], ["plot", str(tmp_path), "--png"]):
        out = tmp_path / "x.png"
        assert main(argv + [str(out)]) == 2
        err = one_error_line(capsys)
        assert "mallocgym: error: --png needs the [plot] extra: pip install 'mallocgym[plot]'" in err, err
        assert "speedup" not in capsys.readouterr().out  # refused before solving
        assert not out.exists()


@pytest.mark.parametrize("name, message", [("map.jpg", "the file name must end in .png"),
                                           ("folder.png", "is a folder")])
def test_bad_png_paths_are_refused_before_solving(capsys, tmp_path, name, message):
    (tmp_path / "folder.png").mkdir()
    assert main(["solve", V0, "--png", str(tmp_path / name)]) == 2
    assert message in one_error_line(capsys)


# ------------------------------------------------------------------------------------ training runs
def _sb3_run(folder: Path, scenario_names: list[str]) -> Path:
    logs = folder / "logs"
    logs.mkdir(parents=True)
    (logs / "progress.csv").write_text(
        "time/fps,time/iterations,rollout/ep_rew_mean,time/total_timesteps,train/value_loss,train/loss,"
        "train/entropy_loss,train/policy_gradient_loss\n"
        "100,1,0.30,64,,,,\n100,2,0.35,128,0.02,-0.01,-1.2,-0.001\n100,3,0.40,192,0.01,0.02,-1.0,0.002\n")
    (logs / "eval.csv").write_text(
        "steps,wall_s,train_s,eval_s,score,valid_speedup,holdout_speedup,train_speedup,test_speedup,selected\n"
        "0,1,0,1,1.10,1.10,,1.20,1.30,1\n128,3,2,1,1.30,1.30,,1.50,1.40,1\n192,5,3,1,1.20,1.20,,1.40,1.45,0\n")
    rows = ["steps,group,scenario,speedup"] + [f"192,train,{n},1.4" for n in scenario_names]
    (logs / "eval_scenarios.csv").write_text("\n".join(rows) + "\n")
    (folder / "train.json").write_text(json.dumps({"algo": "maskable_ppo", "config": {"env": {"version": "v0"}},
                                                   "trained": {"steps": 192, "minutes": 0.1, "runs": 1}}))
    return folder


def test_plot_of_an_sb3_run_draws_return_speedups_with_the_xla_reference_and_losses(capsys, tmp_path):
    run = _sb3_run(tmp_path / "run", [V0])
    fig = plot.training_figure(plot.read_run(run), {"train": 1.25}, "xla")
    assert [ax.get_ylabel().split("\n")[0] for ax in fig.axes] == [
        "mean return", "geomean speedup", "loss (log scale)", "policy entropy"]
    assert fig.axes[-1].get_xlabel() == "env steps"
    words = texts(fig)
    for text in ("training scenarios", "test split", "held-out generated programs",
                 "xla on the same scenarios (dashed, same colour)",
                 "kept as model.zip", "value_loss", "mallocgym train sb3 --algo maskable_ppo"):
        assert text in words, text
    assert "held-out training programs" not in words  # an empty column draws nothing
    dashed = [line for line in fig.axes[1].get_lines() if line.get_linestyle() == "--"]
    assert len(dashed) == 1 and dashed[0].get_ydata()[0] == 1.25 and dashed[0].get_color() == plot.GROUP_COLOURS["train"]
    # the loss panel: value_loss only (train/loss is not positive here), on a log scale
    assert fig.axes[2].get_yscale() == "log" and len(fig.axes[2].get_lines()) == 1
    # the command computes the reference by playing xla on the named scenarios
    out = tmp_path / "curves.png"
    assert main(["plot", str(run), "--png", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    width, height = png_size(out)
    assert width == plot.WIDTH_PX and height == 250 + 190 * 4
    expected = solve(scenarios.resolve(V0), "xla").speedup
    assert plot.reference_speedups(plot.read_run(run), "xla") == {"train": pytest.approx(expected)}


def _muzero_log(folder: Path) -> Path:
    folder.mkdir(parents=True)
    lines = [{"event": "start", "minutes": 1.0, "scenarios": ["a@1/8"], "env_steps": 0, "elapsed_s": 0.0}]
    for i in range(1, 5):
        lines.append({"event": "progress", "env_steps": 100 * i, "elapsed_s": 10.0 * i, "return_mean": 0.2 + 0.05 * i,
                      "xla_return_mean": 0.4, "beats_xla_fraction": 0.1 * i,
                      "losses": {"loss": 1.0 / i, "value": 2.0 / i, "policy": 0.5 / i}})
    lines.append({"event": "end", **lines[-1]})
    (folder / "log.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    return folder


def test_plot_of_a_muzero_run_draws_return_against_xla_and_losses(capsys, tmp_path):
    run = plot.read_run(_muzero_log(tmp_path / "mz"))
    assert run.kind == "muzero" and list(run.progress["steps"]) == [100, 200, 300, 400, 400]
    fig = plot.training_figure(run)
    words = texts(fig)
    assert "search over the learned model" in words and "XLA-like on the same programs" in words
    assert "share of games\nbeating XLA-like" in words and "mallocgym train muzero" in words
    assert fig.axes[-1].get_yscale() == "log" and len(fig.axes[-1].get_lines()) == 3
    out = tmp_path / "mz.png"
    assert main(["plot", str(tmp_path / "mz"), "--png", str(out)]) == 0
    assert png_size(out)[0] == plot.WIDTH_PX


def test_plot_reads_the_log_of_a_weights_only_export(tmp_path):
    """baselines/muzero/*/ hold train-log.jsonl next to checkpoint.pt: plot reads it as log.jsonl."""
    run = _muzero_log(tmp_path / "mz")
    (run / "log.jsonl").rename(run / "train-log.jsonl")
    exported = plot.read_run(run)
    assert exported.kind == "muzero" and list(exported.progress["steps"]) == [100, 200, 300, 400, 400]
    assert list(exported.progress["loss/value"][:2]) == [2.0, 1.0]


def test_plot_of_a_real_muzero_run_written_by_the_trainer_with_quiet(capsys, tmp_path):
    """`train muzero --quiet` (a tiny run): no bar on stderr; `plot` reads the log it wrote."""
    pytest.importorskip("torch")
    from mallocgym.workloads import save
    from mallocgym.workloads.synthetic import mlp_training_step

    workload = save(mlp_training_step(3), tmp_path / "mlp3.json")
    tiny = ["network.hidden=16", "network.candidate_hidden=8", "network.memory_hidden=4", "train.min_replay=8",
            "train.batch_size=8", "train.label_positions=1000", "train.checkpoint_every_s=1000",
            "train.log_every_s=0.2"]
    argv = ["train", "muzero", "--quiet", "--minutes", "0.02", "--out", str(tmp_path / "run"), "--scenario",
            str(workload)] + [f"--set={s}" for s in tiny]
    assert main(argv) == 0
    err = capsys.readouterr().err
    assert "mallocgym train muzero" not in err and "%|" not in err, err
    out = tmp_path / "mz.png"
    assert main(["plot", str(tmp_path / "run"), "--png", str(out)]) == 0
    assert png_size(out)[0] == plot.WIDTH_PX


@pytest.mark.parametrize("make, message", [
    (lambda p: p / "missing", "no such folder"),
    (lambda p: p, "not a training run: it has neither logs/progress.csv (mallocgym train sb3) nor log.jsonl "
     "(mallocgym train muzero; train-log.jsonl in an export)"),
    (lambda p: (p / "f.txt").write_text("x") and p / "f.txt", "is a file; give the run folder"),
    (lambda p: (p / "log.jsonl").write_text("{oops\n") and p, "line 1 is not JSON"),
    (lambda p: (p / "log.jsonl").write_text('{"event": "start"}\n') and p, "no progress lines yet"),
    (lambda p: (p / "logs").mkdir() or (p / "logs" / "progress.csv").write_text("a,b\n1,2\n") and p,
     "not a progress.csv of mallocgym train sb3"),
])
def test_plot_refuses_a_folder_that_is_not_a_run_in_one_line(capsys, tmp_path, make, message):
    run = make(tmp_path)
    out = tmp_path / "never.png"
    assert main(["plot", str(run), "--png", str(out)]) == 2
    assert message in one_error_line(capsys)
    assert not out.exists()
