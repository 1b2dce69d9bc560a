"""The bundled suites: files, manifest, splits, names, gym.make sampling, list/show."""

import hashlib
import json
from fractions import Fraction
from pathlib import Path

import gymnasium as gym
import numpy as np
import pytest

import mallocgym
from mallocgym import evaluate, scenarios
from mallocgym.cli import main
from mallocgym.render import BACKGROUND
from mallocgym.show import CAPACITY, LIVE, OVER, compute_bound_share, pressure_picture

SUITE_DIR = Path(scenarios.__file__).parent / "data" / "suite"
FAMILIES = {"mlp", "alexnet", "resnet", "transformer", "gpt", "lstm", "unet", "moe", "alphatensor"}


@pytest.fixture(scope="module")
def rows():
    return json.loads((SUITE_DIR / "manifest.json").read_text())["workloads"]


def test_manifest_matches_the_files(rows):
    assert {r["file"] for r in rows} == {p.name for p in SUITE_DIR.glob("*.npz")}
    for r in rows:
        data = (SUITE_DIR / r["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"], r["file"]
        w = mallocgym.load(SUITE_DIR / r["file"])
        assert (w.name, w.num_ops, w.num_buffers, w.peak_live_bytes, w.total_bytes) == (
            r["name"], r["ops"], r["buffers"], r["peak_live_bytes"], r["total_bytes"])
        assert r["fractions"] == ["1/8", "1/2"]


def test_suite_has_real_programs_of_many_families(rows):
    assert len(rows) >= 12
    assert {r["family"] for r in rows} >= FAMILIES
    assert {"alexnet-infer", "alexnet-train", "strassen2-matmul", "transformer-encoder-fwd",
            "transformer-encoder-bwd", "gpt-decode-kvcache"} <= {r["name"] for r in rows}
    for r in rows:
        assert 100 <= r["buffers"] <= 5000, r["name"]
        assert r["flops"] > 0


def test_default_suite_loads_and_validates(rows):
    suite = scenarios.suite("default")
    assert len(suite) == 2 * len(rows)
    by_name = {s.name: s for s in suite}
    for r in rows:
        for fraction in ("1/8", "1/2"):
            s = by_name[f"{r['name']}@{fraction}"]
            assert s.split == r["split"] and s.workload.name == r["name"]
            w = s.workload
            expected = max(-(-w.peak_live_bytes * Fraction(fraction).numerator // Fraction(fraction).denominator),
                           int(w.size.max()))
            assert s.hardware.fast_capacity == expected == scenarios.capacity_for(w, Fraction(fraction))
            assert scenarios.oversized(w, s.hardware) == 0  # the fractions keep every buffer placeable
            ev = evaluate(w, np.full(w.num_buffers, -1), s.hardware)
            assert ev.time_all_slow > 0 and ev.speedup == 1.0
    # loaded once, cached
    assert scenarios.suite("default")[0].workload is suite[0].workload


def test_splits_partition_the_workloads():
    train = {s.workload.name for s in scenarios.suite("default", "train")}
    test = {s.workload.name for s in scenarios.suite("default", "test")}
    assert train and test and not train & test
    assert train | test == {s.workload.name for s in scenarios.suite("default")}
    assert scenarios.names("default", "test") == [s.name for s in scenarios.suite("default", "test")]
    with pytest.raises(ValueError, match="unknown split"):
        scenarios.suite("default", "valid")
    with pytest.raises(ValueError, match="unknown suite"):
        scenarios.suite("nope")


def test_synthetic_and_minimalloc_suites():
    synthetic = scenarios.suite("synthetic")
    assert len(synthetic) == 12 and synthetic[0].name == "mlp-train-s0@1/8"
    mm = scenarios.suite("minimalloc")
    assert [s.name for s in mm] == [f"minimalloc-{c}@1MiB" for c in "ABCDE"]
    assert [s.workload.num_buffers for s in mm] == [154, 170, 203, 213, 215]
    assert all(s.split == "test" and s.hardware.fast_capacity == 1048576 for s in mm)


def test_get_finds_names_from_every_suite():
    assert scenarios.get("mlp-train-s0@1/8").workload.name == "mlp-train-s0"
    assert scenarios.get("minimalloc-C@1MiB").workload.num_buffers == 203
    assert scenarios.get("alexnet-train@1/2").hardware.fast_capacity > scenarios.get("alexnet-train@1/8").hardware.fast_capacity
    assert scenarios.get("strassen2-matmul").name == "strassen2-matmul@1/8"
    all_names = [n for suite in scenarios.SUITES for n in scenarios.names(suite)]
    assert len(all_names) == len(set(all_names))
    with pytest.raises(ValueError, match="unknown scenario"):
        scenarios.get("alexnet-train@1/3")


def test_gym_make_samples_the_train_split():
    env = gym.make("MallocGame-v0")
    train = set(scenarios.names("default", "train"))
    assert {s.name for s in env.unwrapped.scenarios} == train
    seen = set()
    for seed in range(12):
        env.reset(seed=seed)
        seen.add(env.unwrapped.scenario.name)
    assert seen <= train and len(seen) > 2
    one = gym.make("MallocGame-v0", workload="lstm-train@1/2")
    one.reset(seed=0)
    assert one.unwrapped.scenario.name == "lstm-train@1/2"
    assert one.unwrapped.hardware.fast_capacity == scenarios.get("lstm-train@1/2").hardware.fast_capacity


def test_a_masked_random_episode_on_a_real_program_is_valid():
    env = gym.make("MallocGame-v0", workload="unet-infer@1/8")
    obs, info = env.reset(seed=3)
    rng = np.random.default_rng(3)
    total, done = 0.0, False
    while not done:
        action = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, reward, done, _, info = env.step(action)
        total += reward
    s = scenarios.get("unet-infer@1/8")
    ev = evaluate(s.workload, info["offsets"], s.hardware)
    assert ev.time == pytest.approx(info["time"], rel=1e-9)
    assert total == pytest.approx(1 - ev.time / ev.time_all_slow, rel=1e-9)
    assert ev.placed_bytes_fraction > 0


# ------------------------------------------------------------------------------ list and show
def test_list_markdown_and_json(capsys, rows):
    assert main(["list", "--markdown"]) == 0
    table = capsys.readouterr().out.strip().splitlines()
    assert table[0].startswith("| workload | family | split | ops | buffers | peak live bytes")
    assert len(table) == 2 + len(rows)
    assert any(line.startswith("| strassen2-matmul | alphatensor | test |") for line in table)
    assert main(["list", "--suite", "minimalloc", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["buffers"] for r in listed] == [154, 170, 203, 213, 215]
    assert main(["list", "--split", "train", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {r["split"] for r in listed} == {"train"} and all(r["family"] for r in listed)


def test_show_json_and_png(capsys, tmp_path):
    png = tmp_path / "p.png"
    assert main(["show", "unet-infer@1/8", "--json", "--png", str(png)]) == 0
    stats = json.loads(capsys.readouterr().out)
    s = scenarios.get("unet-infer@1/8")
    assert stats["buffers"] == s.workload.num_buffers and stats["family"] == "unet"
    assert stats["fast_capacity"] == s.hardware.fast_capacity
    assert 0 < stats["ops_over_capacity"] < 1
    data = png.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and int.from_bytes(data[16:20], "big") == 960


def test_compute_bound_share_agrees_with_evaluate():
    # evaluate() counts every op whose compute time >= memory time, so an op that does no work
    # counts; compute_bound_share leaves those out.
    s = scenarios.get("mlp-train@1/8")
    w = s.workload
    ev = evaluate(w, np.full(w.num_buffers, -1), s.hardware)
    moved = np.bincount(w.access_op, weights=w.access_bytes, minlength=w.num_ops)
    idle = np.count_nonzero((w.flops == 0) & (w.transcendentals == 0) & (moved == 0))
    share = compute_bound_share(w, s.hardware)
    assert round(ev.compute_bound_ops * w.num_ops) == round(share * (w.num_ops - idle)) + idle
    assert 0 < share < 1


def test_pressure_picture_by_hand(tiny):
    # tiny: sizes 100, 200, 300 live [0,1], [0,2], [1,3]: live bytes 300, 600, 500, 300.
    # 4 ops over 400 - 2*8 = 384 columns: 96 columns each; capacity 400 of a 600-byte scale.
    image = pressure_picture(tiny, 400, width=400, height=200)
    top_y0, top_y1 = 8, 8 + (200 - 24) // 3
    panel = image[top_y0:top_y1, 8:392]
    column = lambda t: panel[:, 96 * t + 48]  # noqa: E731
    is_colour = lambda col, rgb: np.all(col == rgb, axis=-1)  # noqa: E731
    panel_h = top_y1 - top_y0
    assert is_colour(column(0), LIVE).sum() == round(300 / 600 * panel_h)
    assert not is_colour(column(0), OVER).any() and not is_colour(column(3), OVER).any()
    assert is_colour(column(1), OVER).sum() == round(600 / 600 * panel_h) - round(400 / 600 * panel_h)
    assert is_colour(column(2), OVER).sum() == round(500 / 600 * panel_h) - round(400 / 600 * panel_h)
    cap_row = top_y1 - round(400 / 600 * panel_h)
    assert np.all(image[cap_row, 8:392] == CAPACITY)
    # bottom panel: three bars sorted by start; the first op's column shows buffers 0 and 1 only
    bottom = image[top_y1 + 8:200 - 8, 8 + 48]
    assert (np.all(bottom != BACKGROUND, axis=-1)).sum() == pytest.approx(2 / 3 * len(bottom), abs=3)
    with pytest.raises(ValueError, match="too small"):
        pressure_picture(tiny, 400, width=20, height=20)


def test_docs_table_is_the_list_markdown_output(capsys):
    assert main(["list", "--markdown"]) == 0
    table = capsys.readouterr().out.strip()
    assert table in (Path(__file__).parents[1] / "docs" / "suite.md").read_text()
