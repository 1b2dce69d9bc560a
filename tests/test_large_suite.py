"""The large suite (whole networks of 5k-50k buffers) and the real chips' profiles: files,
manifest, sizes, scenario names and capacities. Nothing here solves a large program: the
timings are in docs/speed.md ("Large programs"), measured with `mallocgym bench --suite large`."""

import hashlib
import json
from pathlib import Path

import pytest

import mallocgym
from mallocgym import scenarios
from mallocgym.hardware import PROFILES, profile

LARGE_DIR = Path(scenarios.__file__).parent / "data" / "large"
SUITE_DIR = Path(scenarios.__file__).parent / "data" / "suite"
MiB = 2**20


@pytest.fixture(scope="module")
def rows():
    return json.loads((LARGE_DIR / "manifest.json").read_text())["workloads"]


def test_manifest_matches_the_files(rows):
    assert {r["file"] for r in rows} == {p.name for p in LARGE_DIR.glob("*.npz")}
    for r in rows:
        data = (LARGE_DIR / r["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == r["sha256"], r["file"]
        w = mallocgym.load(LARGE_DIR / r["file"])
        assert (w.name, w.num_ops, w.num_buffers, w.peak_live_bytes, w.total_bytes) == (
            r["name"], r["ops"], r["buffers"], r["peak_live_bytes"], r["total_bytes"])
        assert r["fractions"] == ["1/8", "1/2"]
        assert r["profiles"] == ["tpu-v4i-vmem", "tpu-v4i-cmem"]


def test_programs_are_at_the_scale_users_compile(rows):
    assert len(rows) >= 3
    assert len({r["family"] for r in rows}) >= 3
    for r in rows:
        assert 5000 <= r["buffers"] <= 50000, r["name"]
        assert r["flops"] > 0 and r["split"] == "test"
    total = sum((LARGE_DIR / r["file"]).stat().st_size for r in rows) + (LARGE_DIR / "manifest.json").stat().st_size
    assert total < 15 * 10**6  # shipped compressed, well under the package's budget


def test_default_suite_is_untouched_by_the_large_group():
    doc = json.loads((SUITE_DIR / "manifest.json").read_text())
    assert doc["generator"] == "python examples/model_zoo.py"
    assert all("profiles" not in r for r in doc["workloads"])
    assert {r["name"] for r in doc["workloads"]}.isdisjoint(
        r["name"] for r in json.loads((LARGE_DIR / "manifest.json").read_text())["workloads"])


def test_real_chip_profiles_have_their_published_sizes():
    # TPU v4i: 16 MiB VMEM and 128 MiB CMEM, 137 TFLOP/s bf16, 614 GB/s HBM; TPU v5e: 128 MiB VMEM,
    # 197 TFLOP/s, 820 GB/s (docs/suite.md, "Real chips"); the fast bandwidth is 10x HBM (estimate).
    assert PROFILES["tpu-v4i-vmem"].fast_capacity == 16777216
    assert PROFILES["tpu-v4i-cmem"].fast_capacity == 134217728
    assert PROFILES["tpu-v5e-vmem"].fast_capacity == 134217728
    for name, flops, hbm in (("tpu-v4i-vmem", 137e12, 614e9), ("tpu-v4i-cmem", 137e12, 614e9),
                             ("tpu-v5e-vmem", 197e12, 820e9)):
        hw = profile(name)
        assert (hw.name, hw.peak_flops, hw.slow_bw, hw.fast_bw) == (name, flops, hbm, 10 * hbm)
    # the "-like" profiles still leave the size to the scenario
    assert all(PROFILES[n].fast_capacity is None for n in ("tpu-v4-like", "gpu-a100-like", "npu-edge-like"))


def test_large_suite_names_and_capacities(rows):
    suite = scenarios.suite("large")
    expected = [f"{r['name']}@{tag}" for r in rows for tag in ("1/8", "1/2", "16MiB", "128MiB")]
    assert [s.name for s in suite] == expected == scenarios.names("large", "test")
    assert scenarios.suite("large", "train") == []
    by_name = {s.name: s for s in suite}
    for r in rows:
        vmem, cmem = by_name[f"{r['name']}@16MiB"], by_name[f"{r['name']}@128MiB"]
        assert (vmem.hardware.name, vmem.hardware.fast_capacity) == ("tpu-v4i-vmem", 16 * MiB)
        assert (cmem.hardware.name, cmem.hardware.fast_capacity) == ("tpu-v4i-cmem", 128 * MiB)
        eighth = by_name[f"{r['name']}@1/8"]
        assert eighth.hardware.name == "tpu-v4-like"
        assert eighth.hardware.fast_capacity == scenarios.capacity_for(eighth.workload, "1/8")
        assert vmem.workload is cmem.workload is eighth.workload
    assert scenarios.get(f"{rows[0]['name']}@16MiB").hardware.fast_capacity == 16 * MiB


def test_capacity_label_by_hand():
    assert scenarios.capacity_label(16 * MiB) == "16MiB"
    assert scenarios.capacity_label(1536 * 1024) == "1536KiB"
    assert scenarios.capacity_label(2048) == "2KiB"
    assert scenarios.capacity_label(1000) == "1000B"


def test_a_manifest_naming_a_profile_without_a_size_is_an_error(tmp_path, monkeypatch):
    folder = tmp_path / "large"
    folder.mkdir()
    (folder / "manifest.json").write_text(json.dumps({
        "format": "mallocgym-suite", "version": 1,
        "workloads": [{"name": "w", "file": "w.npz", "split": "test", "fractions": [], "profiles": ["tpu-v4-like"]}]}))
    monkeypatch.setattr(scenarios, "_data_dir", lambda *parts: tmp_path / "large")
    scenarios.manifest.cache_clear()
    try:
        with pytest.raises(ValueError, match=r"manifest.json: workload 0: profile 'tpu-v4-like' is not a hardware "
                                             r"profile with a fixed fast-memory size"):
            scenarios.manifest("large")
    finally:
        scenarios.manifest.cache_clear()
    with pytest.raises(ValueError, match="no manifest for suite 'synthetic'"):
        scenarios.manifest("synthetic")


def test_bench_and_eval_take_the_large_suite_by_name(capsys):
    from mallocgym.cli import main

    # argument checking only: a split the suite lacks is one clear error (exit 2), nothing solved
    assert main(["bench", "--suite", "large", "--split", "train", "--agents", "xla"]) == 2
    assert "suite 'large' has no 'train' scenarios" in capsys.readouterr().err
    assert main(["list", "--suite", "large", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["name"] for r in listed] == scenarios.names("large")
    assert {r["family"] for r in listed} == {"resnet", "gpt", "vit"}
    # all-slow places nothing: a quick eval through the suite's name, speedup exactly 1
    name = scenarios.names("large")[2]
    assert main(["eval", "--suite", "large", "--scenario", name, "--agent", "all-slow", "--json", "--quiet"]) == 0
    (result,) = json.loads(capsys.readouterr().out)
    assert (result["scenario"], result["fast_capacity"], result["speedup"]) == (name, 16 * MiB, 1.0)
