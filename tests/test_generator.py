from fractions import Fraction

import hashlib
from dataclasses import replace

import gymnasium as gym
import numpy as np
import pytest

from mallocgym import evaluate
from mallocgym.pricing.v0 import program_time
from mallocgym.hardware import profile
from mallocgym.heuristics import greedy, xla_like
from mallocgym.scenarios import Scenario, capacity_for
from mallocgym.workloads import generator
from mallocgym.scenarios import WorkloadGenerator, planted
from mallocgym.workloads.generator import GeneratorConfig, generate, preset

ARRAYS = ("flops", "transcendentals", "size", "start", "end", "access_ptr", "access_op", "access_bytes",
          "access_write")
SEEDS = {"small": range(40), "medium": range(10), "large": range(3)}


def _same(a, b) -> bool:
    return (a.name == b.name and a.buffer_names == b.buffer_names and a.op_names == b.op_names
            and all(np.array_equal(getattr(a, k), getattr(b, k)) for k in ARRAYS))


@pytest.fixture(scope="module")
def generated():
    """Every preset's workloads for SEEDS, generated once for the module."""
    return {name: [generate(name, s) for s in seeds] for name, seeds in SEEDS.items()}


# ------------------------------------------------------------------------------------- config
@pytest.mark.parametrize("kwargs, message", [
    (dict(buffers=(10, 5)), r"GeneratorConfig.buffers must be a pair"),
    (dict(buffers=(0, 5)), r"GeneratorConfig.buffers must be a pair"),
    (dict(buffers=(1.5, 5)), r"GeneratorConfig.buffers must be a pair"),
    (dict(families=("gnn",)), r"GeneratorConfig.families must be distinct names"),
    (dict(families=()), r"GeneratorConfig.families must be distinct names"),
    (dict(optimizers=("adam", "adam")), r"GeneratorConfig.optimizers must be distinct names"),
    (dict(training=1.5), r"GeneratorConfig.training must be a probability"),
    (dict(tokens=(3, 3)), r"GeneratorConfig.tokens = \(3, 3\) holds no allowed value"),
    (dict(dtype_bytes=3), r"GeneratorConfig.dtype_bytes must be 1, 2 or 4"),
    (dict(name="a b"), r"GeneratorConfig.name must be a non-empty word"),
])
def test_bad_config_raises_naming_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        GeneratorConfig(**kwargs)


def test_config_is_frozen_and_presets_are_named():
    cfg = preset("small")
    with pytest.raises(AttributeError):
        cfg.buffers = (1, 2)
    assert GeneratorConfig(families=["mlp"]).families == ("mlp",)
    with pytest.raises(ValueError, match="unknown generator preset 'huge'"):
        preset("huge")
    with pytest.raises(ValueError, match="seed must be >= 0"):
        generate("small", -1)


# ---------------------------------------------------------------------------- hand-worked emitter
def _tiny_program(*, eager: bool, optimizer: str = "sgd"):
    prog = generator._Program("tiny", dtype=2, training=True, optimizer=optimizer, eager_update=eager)
    x = prog.data("x", 4 * 8)
    y = prog.matmul("fc", x, 4, 8, 16, bias=True)
    prog.softmax_xent("xent", y, 4)
    prog.finish()
    return prog.p.build()


def test_training_step_of_one_dense_layer_by_hand():
    w = _tiny_program(eager=False)
    # forward, loss, backward (no dx: x is data), then SGD on the weight and the bias
    assert w.op_names == ("fc.dot", "xent", "xent.grad", "fc.dot.dw", "fc.db", "sgd.fc.w", "sgd.fc.b")
    assert w.flops.tolist() == [2 * 4 * 8 * 16, 5 * 64, 4 * 64, 2 * 4 * 8 * 16, 64, 2 * 128, 2 * 16]
    assert w.transcendentals.tolist() == [0, 64, 64, 0, 0, 0, 0]
    sizes = dict(zip(w.buffer_names, w.size.tolist()))
    assert sizes == {"x": 64, "fc.w": 256, "fc.b": 32, "fc.y": 128, "xent.labels": 16, "xent.loss": 4,
                     "d.fc.y": 128, "d.fc.w": 256, "d.fc.b": 32, "fc.w.new": 256, "fc.b.new": 32}
    live = {n: (int(s), int(e)) for n, s, e in zip(w.buffer_names, w.start, w.end)}
    # parameters live from op 0 to their last use; outputs to the last op; activations from the
    # op that writes them to the backward op that reads them last
    assert live["fc.w"] == (0, 5) and live["fc.b"] == (0, 6) and live["x"] == (0, 3)
    assert live["fc.y"] == (0, 2) and live["d.fc.y"] == (2, 4) and live["xent.loss"] == (1, 6)
    assert live["fc.w.new"] == (5, 6) and live["fc.b.new"] == (6, 6)


def test_eager_updates_and_adam_state():
    w = _tiny_program(eager=True, optimizer="adam")
    assert w.op_names == ("fc.dot", "xent", "xent.grad", "fc.dot.dw", "adam.fc.w", "fc.db", "adam.fc.b")
    sizes = dict(zip(w.buffer_names, w.size.tolist()))
    # Adam's two moments per weight are fp32 inputs and outputs
    assert sizes["fc.w.m"] == sizes["fc.w.v"] == sizes["fc.w.m.new"] == 128 * 4
    b = w.buffer_names.index("fc.w.v.new")
    assert w.end[b] == w.num_ops - 1 and w.start[w.buffer_names.index("fc.w.m")] == 0


def test_residual_gradients_accumulate():
    prog = generator._Program("res", dtype=2, training=True, optimizer="sgd", eager_update=False)
    x = prog.matmul("in", prog.data("data", 64), 4, 16, 16, bias=False)
    h = prog.unary("act", x, flops=1)
    y = prog.add("residual", x, h)
    prog.softmax_xent("xent", y, 4)
    prog.finish()
    w = prog.p.build()
    # x feeds the residual add and the activation: its two gradient contributions are summed
    acc = w.op_names.index("d.in.y.accumulate")
    assert w.op_names[acc - 1] == "act.grad" and w.op_names[acc + 1] == "in.dot.dw"


def test_block_counts_predict_the_buffer_count():
    for seed in range(4):
        plan = generator._draw(preset("small"), seed)
        assert plan.counts(4).tolist() == [plan.program(k).p.num_buffers for k in range(1, 5)]


def _digest(workloads) -> str:
    h = hashlib.sha256()
    for w in workloads:
        h.update("|".join((w.name,) + w.buffer_names + w.op_names).encode())
        for k in ARRAYS:
            h.update(np.ascontiguousarray(getattr(w, k), dtype=np.float64).tobytes())
    return h.hexdigest()


def test_default_families_reproduce_the_workloads_from_before_unet_and_rnn():
    # digest of generate("small", 0..7) computed with the generator before the U-Net and RNN
    # families (and the pooling, concatenation and use-counted eager updates) were added
    assert generator.DEFAULT_FAMILIES == preset("small").families == ("transformer", "cnn", "mlp")
    assert _digest(generate("small", s) for s in range(8)) == \
        "c8cbd913c77e1fb16dea399e6db05c4756d0a632632513134265442c1f4bf41c"


def _rnn(*, training: bool, steps: int, eager: bool = False):
    fam = generator._RNN.__new__(generator._RNN)
    fam.hidden, fam.rows, fam.features, fam.layers, fam.classes = 4, 8, 2, 1, 10
    prog = generator._Program("rnn", dtype=2, training=training, optimizer="sgd", eager_update=eager)
    fam.emit(prog, [{}] * steps)
    prog.finish()
    return prog.p.build()


def test_lstm_inference_by_hand():
    w = _rnn(training=False, steps=2)
    assert w.op_names == ("t0.l0.gates.dot", "t0.l0.cell", "t1.l0.gates.dot", "t1.l0.cell", "head.dot")
    # gates: 2 * rows * (features + hidden) * 4 hidden; cell: 10 flops and 5 transcendentals per state
    assert w.flops.tolist() == [2 * 8 * 6 * 16, 10 * 32, 2 * 8 * 6 * 16, 10 * 32, 2 * 8 * 4 * 10]
    assert w.transcendentals.tolist() == [0, 5 * 32, 0, 5 * 32, 0]
    sizes = dict(zip(w.buffer_names, w.size.tolist()))
    assert sizes["l0.wx"] == 2 * 16 * 2 and sizes["l0.wh"] == 4 * 16 * 2 and sizes["l0.b"] == 16 * 2
    assert sizes["t0.l0.gates"] == 8 * 16 * 2 and sizes["t0.l0.c"] == 8 * 4 * 4 and sizes["t0.l0.h"] == 8 * 4 * 2
    live = {n: (int(a), int(b)) for n, a, b in zip(w.buffer_names, w.start, w.end)}
    # weights are shared by both steps; step 0's hidden state feeds step 1's gates (op 2), its
    # cell state step 1's cell update (op 3)
    assert live["l0.wx"] == live["l0.wh"] == (0, 2)
    assert live["t0.l0.h"] == (1, 2) and live["t0.l0.c"] == (1, 3) and live["t0.l0.gates"] == (0, 1)


def test_lstm_backward_through_time_sums_shared_gradients_before_the_eager_update():
    w = _rnn(training=True, steps=3, eager=True)
    ops = list(w.op_names)
    # one dW op per step, summed twice, and only then the (eager) update of the shared weight
    dw = [i for i, n in enumerate(ops) if n.endswith(".gates.dot.dw")]
    assert [ops[i] for i in dw] == ["t2.l0.gates.dot.dw", "t1.l0.gates.dot.dw", "t0.l0.gates.dot.dw"]
    assert ops.count("d.l0.wx.accumulate") == 2 and ops.count("d.l0.wh.accumulate") == 2
    assert ops.index("sgd.l0.wx") > dw[-1] and ops.index("sgd.l0.wx") > max(
        i for i, n in enumerate(ops) if n == "d.l0.wx.accumulate")
    # the hidden state's gradient flows back from step 2 to step 0 (h0 is an input: none)
    names = list(w.buffer_names)
    assert "d.t1.l0.h" in names and "d.t0.l0.h" in names and "d.l0.h0" not in names


def test_unet_keeps_each_level_live_until_its_decoder_and_concatenates():
    cfg = replace(preset("small"), families=("unet",), training=0.0)
    w = generate(cfg, 4)
    assert "-unet-infer-" in w.name
    names = list(w.buffer_names)
    ops = list(w.op_names)
    levels = sorted(int(n[len("down"):].split(".")[0]) for n in names if n.startswith("down") and n.endswith("maxpool.y"))
    assert levels == list(range(len(levels))) and len(levels) >= 1
    for i in levels:
        kept = max((j for j, n in enumerate(names) if n.startswith("stem." if i == 0 else f"down{i - 1}.")
                    and n.endswith(".relu.y")), key=lambda j: names[j])  # the level's last conv output
        cat = names.index(f"up{i}.concat.y")
        up = names.index(f"up{i}.deconv.y")
        assert w.size[cat] == w.size[up] + w.size[kept]  # concatenation along channels
        assert w.end[kept] == ops.index(f"up{i}.concat")  # live from the encoder to the decoder
        assert w.size[names.index(f"down{i}.maxpool.y")] * 4 >= w.size[kept]  # 2x2 pooling


@pytest.mark.parametrize("family", ["unet", "rnn"])
def test_new_families_are_valid_scenarios_in_the_preset_ranges(family):
    for name in ("small", "medium"):
        cfg = replace(preset(name), families=(family,))
        lo, hi = cfg.buffers
        modes = set()
        for seed in range(6):
            w = generate(cfg, seed)
            assert w.name.startswith(f"gen-{name}-{family}-")
            assert lo <= w.num_buffers <= hi, (w.name, w.num_buffers)
            modes.add("-train-" in w.name)
            s = WorkloadGenerator(cfg).scenario(seed, Fraction(1, 8))
            ev = evaluate(s.workload, xla_like(s), s.hardware)
            assert ev.speedup >= 1.0 and ev.placed_bytes_fraction > 0
        assert modes == {True, False}


# --------------------------------------------------------------------------------- generate
def test_same_seed_same_workload_bit_for_bit():
    for name in ("small", "medium"):
        a, b = generate(name, 11), generate(preset(name), 11)
        assert _same(a, b)
        other = generate(name, 12)
        assert other.name != a.name
        assert not _same(a, other)


def test_preset_buffer_ranges(generated):
    for name, workloads in generated.items():
        lo, hi = preset(name).buffers
        counts = [w.num_buffers for w in workloads]
        assert all(lo <= c <= hi for c in counts), (name, counts)
        assert len(set(counts)) > 1


def test_generated_workloads_are_valid_and_mixed(generated):
    families = set()
    for name, workloads in generated.items():
        for w in workloads:
            assert w.name.startswith(f"gen-{name}-")
            families.add(w.name.split("-")[2])
            # every buffer is touched; one that an op writes is live from that op (the others
            # are program inputs, live from op 0)
            assert np.all(np.diff(w.access_ptr) >= 1)
            owner = np.repeat(np.arange(w.num_buffers), np.diff(w.access_ptr))
            first_write = np.full(w.num_buffers, w.num_ops)
            np.minimum.at(first_write, owner[w.access_write], w.access_op[w.access_write])
            written = first_write < w.num_ops
            assert np.array_equal(first_write[written], w.start[written])
            assert np.all(w.start[~written] == 0)
            hw = profile().with_capacity(capacity_for(w, Fraction(1, 8)))
            ev = evaluate(w, np.full(w.num_buffers, -1), hw)
            assert 0.0 < ev.compute_bound_ops < 1.0, (w.name, ev.compute_bound_ops)
    assert families == {"transformer", "cnn", "mlp"}


def test_sizes_span_three_orders_of_magnitude(generated):
    for name in ("medium", "large"):
        for w in generated[name]:
            assert w.size.max() / w.size.min() >= 1000, w.name


def test_training_and_inference_steps():
    train = generate(GeneratorConfig(buffers=(50, 80), training=1.0, families=("transformer",)), 0)
    infer = generate(GeneratorConfig(buffers=(50, 80), training=0.0, families=("transformer",)), 0)
    assert "-train-" in train.name and "-infer-" in infer.name
    assert any(n.endswith(".grad") or ".dw" in n for n in train.op_names)
    assert not any(n.endswith(".grad") or ".dw" in n for n in infer.op_names)
    # the logits are the inference program's output: live to the last op
    b = infer.buffer_names.index("head.y")
    assert infer.end[b] == infer.num_ops - 1


# ------------------------------------------------------------------------------ the env callable
def test_workload_generator_returns_scenarios():
    gen = WorkloadGenerator(preset("small"), fractions=(Fraction(1, 8), 0.5))
    s = gen(np.random.default_rng(1))
    assert isinstance(s, Scenario)
    fraction = Fraction(s.name.split("@")[1])
    assert fraction in (Fraction(1, 8), Fraction(1, 2))
    assert s.hardware.fast_capacity == capacity_for(s.workload, fraction, s.hardware.alignment)
    assert _same(gen(np.random.default_rng(1)).workload, s.workload)
    with pytest.raises(ValueError, match="capacity fraction"):
        WorkloadGenerator("small", fractions=(0,))


def test_env_resets_to_fresh_seeded_instances():
    gen = WorkloadGenerator(preset("small"))
    env, twin = gym.make("MallocGame-v0", workload=gen), gym.make("MallocGame-v0", workload=gen)
    env.reset(seed=7)
    twin.reset(seed=7)
    first = env.unwrapped.scenario
    assert _same(first.workload, twin.unwrapped.workload)
    assert first.hardware == twin.unwrapped.hardware
    env.reset()
    assert env.unwrapped.workload.name != first.workload.name
    done = False
    while not done:
        _, _, done, _, info = env.step(int(np.flatnonzero(env.unwrapped.action_masks())[0]))
    s = env.unwrapped.scenario
    assert evaluate(s.workload, info["offsets"], s.hardware).speedup == pytest.approx(info["speedup"])


# ------------------------------------------------------------------------------------- planted
def test_planted_mapping_is_a_full_tiling_at_the_all_fast_time():
    for seed in range(5):
        scenario, offsets = planted(seed, n_buffers=64)
        w, hw = scenario.workload, scenario.hardware
        assert w.num_buffers == 64 and np.all(offsets >= 0)
        # fast memory is full at every op: a tiling of ops x addresses
        assert np.all(w.live_bytes == hw.fast_capacity)
        ev = evaluate(w, offsets, hw)
        # by hand: no flops; each buffer is written once and read once, all at fast_bw
        all_fast = 2 * int(w.size.sum()) / hw.fast_bw
        assert ev.time == pytest.approx(all_fast, rel=1e-12)
        assert ev.placed_bytes_fraction == 1.0
        assert ev.time_all_slow == pytest.approx(2 * int(w.size.sum()) / hw.slow_bw, rel=1e-12)


def test_planted_is_optimal_every_buffer_counts():
    scenario, offsets = planted(3, n_buffers=40)
    w, hw = scenario.workload, scenario.hardware
    fast = np.ones(w.num_buffers, dtype=bool)
    best, _ = program_time(w, fast, hw)
    for b in range(w.num_buffers):
        fast[b] = False
        assert program_time(w, fast, hw)[0] > best
        fast[b] = True


def test_greedy_misses_the_planted_optimum_on_some_seeds():
    misses = {"xla": 0, "start": 0, "size": 0}
    for seed in range(10):
        scenario, offsets = planted(seed, n_buffers=64)
        optimum = evaluate(scenario.workload, offsets, scenario.hardware).time
        xla = evaluate(scenario.workload, xla_like(scenario), scenario.hardware).time
        assert xla >= optimum * (1 - 1e-12)
        misses["xla"] += xla > optimum * (1 + 1e-9)
        for order in ("start", "size"):
            misses[order] += bool(np.any(greedy(scenario, order) < 0))
    assert all(m >= 1 for m in misses.values()), misses


def test_planted_alignment_determinism_and_bad_arguments():
    scenario, offsets = planted(2, n_buffers=30, capacity=100_000, hardware="gpu-a100-like")
    w, hw = scenario.workload, scenario.hardware
    assert hw.alignment == 128 and hw.fast_capacity == 100_000 // 128 * 128
    assert np.all(offsets % 128 == 0) and np.all(w.size % 128 == 0)
    evaluate(w, offsets, hw)
    again, offsets2 = planted(2, n_buffers=30, capacity=100_000, hardware="gpu-a100-like")
    assert _same(again.workload, w) and np.array_equal(offsets, offsets2)
    with pytest.raises(ValueError, match="do not fit"):
        planted(0, n_buffers=10, n_ops=2, capacity=4)
    with pytest.raises(ValueError, match="n_buffers must be an integer"):
        planted(0, n_buffers=2.5)


def test_stats_entry_point(capsys):
    assert generator.main(["--stats", "--preset", "small", "--seeds", "3"]) == 0
    out = capsys.readouterr().out
    counts = sorted(generate("small", s).num_buffers for s in range(3))
    assert f"| small | 3 | {counts[0]} / {counts[1]} / {counts[2]} |" in out
    assert generator.main(["--stats", "--preset", "tiny"]) == 2
    assert "unknown generator preset 'tiny'" in capsys.readouterr().err


def test_cli_stats_with_families(capsys):
    assert generator.main(["--stats", "--preset", "small", "--seeds", "2", "--families", "rnn"]) == 0
    row = capsys.readouterr().out.strip().splitlines()[-1]
    assert row.startswith("| small | 2 |") and "rnn" in row and "mlp" not in row and "cnn" not in row
    assert generator.main(["--stats", "--preset", "small", "--families", "gnn"]) == 2
    assert "GeneratorConfig.families" in capsys.readouterr().err


def test_parse_families():
    assert generator.parse_families("unet, rnn") == ("unet", "rnn")
    assert generator.parse_families("  ") == ()
    for bad in ("unet,,rnn", "rnn,rnn", "gnn"):
        with pytest.raises(ValueError, match="GeneratorConfig.families"):
            generator.parse_families(bad)
