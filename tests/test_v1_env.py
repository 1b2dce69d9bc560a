"""MallocGame-v1 as a Gymnasium env: checkers, seeding, pickling, masks, bad actions, rendering."""

from __future__ import annotations

import pickle
import warnings
from fractions import Fraction

import gymnasium as gym
import numpy as np
import pytest

import mallocgym  # noqa: F401  (registers the ids)
from mallocgym.env.v1 import MallocGameV1Env

from conftest import mlp_scenario

SCENARIO = mlp_scenario(0, Fraction(1, 8))


def test_gymnasium_and_sb3_checkers_pass_without_warnings():
    from gymnasium.utils.env_checker import check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("MallocGame-v1", workload=SCENARIO).unwrapped)
    pytest.importorskip("stable_baselines3")
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sb3_check_env(MallocGameV1Env(SCENARIO))


def _play(env, seed, rng_seed):
    rng = np.random.default_rng(rng_seed)
    obs, info = env.reset(seed=seed)
    trace = []
    done = False
    while not done:
        a = int(rng.choice(np.flatnonzero(info["action_mask"])))
        obs, r, done, _, info = env.step(a)
        trace.append((a, r, obs["actions"].sum()))
    return trace, info


def test_same_seed_same_episode_and_suite_sampling_is_seeded():
    env = gym.make("MallocGame-v1")
    names = []
    for _ in range(2):
        env.reset(seed=7)
        names.append(env.unwrapped.scenario.name)
    assert names[0] == names[1]
    a = _play(MallocGameV1Env(SCENARIO), 3, 5)
    b = _play(MallocGameV1Env(SCENARIO), 3, 5)
    assert a[0] == b[0] and a[1]["mapping"] == b[1]["mapping"]


def test_pickled_env_continues_identically():
    env = MallocGameV1Env(SCENARIO)
    obs, info = env.reset(seed=0)
    for _ in range(5):
        obs, _, _, _, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    twin = pickle.loads(pickle.dumps(env))
    done = False
    while not done:
        a = int(np.flatnonzero(info["action_mask"])[0])
        o1, r1, done, _, info = env.step(a)
        o2, r2, d2, _, info2 = twin.step(a)
        assert r1 == r2 and done == d2 and all(np.array_equal(o1[k], o2[k]) for k in o1)
    assert info["mapping"] == info2["mapping"]


def test_masks_agree_and_every_observation_is_in_the_space():
    env = MallocGameV1Env(SCENARIO)
    obs, info = env.reset(seed=0)
    done = False
    while not done:
        assert env.observation_space.contains(obs)
        assert np.array_equal(obs["action_mask"], info["action_mask"])
        assert np.array_equal(env.action_masks(), info["action_mask"].astype(bool))
        assert info["action_mask"][0] == 1 and info["action_mask"].sum() >= 2  # no forced position is shown
        obs, _, done, _, info = env.step(int(np.flatnonzero(info["action_mask"])[-1]))
    assert info["forced_decisions"] + info["agent_decisions"] == env.static.seg_use.shape[0]


def test_invalid_action_modes_and_actions_outside_the_space():
    env = MallocGameV1Env(SCENARIO, invalid_action="raise")
    obs, info = env.reset(seed=0)
    masked = int(np.flatnonzero(info["action_mask"] == 0)[0])
    with pytest.raises(ValueError, match=rf"action {masked} is masked"):
        env.step(masked)
    for bad in (-1, env.n_actions, 2.5, "1"):
        with pytest.raises(ValueError, match="action"):
            env.step(bad)
    skip = MallocGameV1Env(SCENARIO)  # default: a masked action is SLOW, flagged
    obs, info = skip.reset(seed=0)
    seg = skip.current_segment
    _, _, _, _, info = skip.step(masked)
    assert info["invalid_action"] and skip.sim_state.seg_kind[seg] == 1  # SLOW
    stop = MallocGameV1Env(SCENARIO, invalid_action="terminate")
    obs, info = stop.reset(seed=0)
    _, reward, done, _, info = stop.step(masked)
    assert done and reward == 0.0 and info["speedup"] == 1.0 and "mapping" in info
    with pytest.raises(RuntimeError, match="after the episode ended"):
        stop.step(0)


@pytest.mark.parametrize("kwargs, error, text", [
    ({"n_starts": 5}, ValueError, r"n_starts = 5 must be <= 4"),
    ({"n_starts": 1.5}, TypeError, r"n_starts must be an integer"),
    ({"ratios": (1.5, 0.8, 10.0)}, ValueError, r"min <= preferred <= max"),
    ({"ratios": (0.8, 1.5)}, ValueError, r"three positive numbers"),
    ({"order": "nope"}, ValueError, r"order must be one of"),
    ({"capacity": True}, TypeError, r"capacity must be an integer"),
    ({"xla_hint": 1}, ValueError, r"xla_hint must be True or False, got 1"),
])
def test_bad_arguments_name_the_argument(kwargs, error, text):
    with pytest.raises(error, match=text):
        MallocGameV1Env(SCENARIO, **kwargs)


def test_xla_hint_marks_msa_action_at_every_decision_and_nothing_at_the_end():
    """xla_hint=True adds obs["xla_action"], one-hot at msa_action (in the space, the same along a
    game whatever is played); without it the observation is unchanged."""
    hinted, plain = MallocGameV1Env(SCENARIO, xla_hint=True), MallocGameV1Env(SCENARIO)
    assert "xla_action" in hinted.observation_space.spaces and "xla_action" not in plain.observation_space.spaces
    rng = np.random.default_rng(0)
    obs, _ = hinted.reset(seed=0)
    plain_obs, _ = plain.reset(seed=0)
    done, seen = False, set()
    while not done:
        assert hinted.observation_space.contains(obs) and set(obs) == set(plain_obs) | {"xla_action"}
        hint = obs.pop("xla_action")
        assert hint.sum() == 1.0 and int(hint.argmax()) == hinted.msa_action() and obs["action_mask"][hint.argmax()]
        for key in obs:
            np.testing.assert_array_equal(obs[key], plain_obs[key])
        seen.add(int(hint.argmax()))
        # half the time another legal move, so the hint follows the game actually played
        legal = np.flatnonzero(obs["action_mask"])
        action = int(rng.choice(legal)) if rng.random() < 0.5 else hinted.msa_action()
        obs, _, done, _, _ = hinted.step(action)
        plain_obs, *_ = plain.step(action)
    assert not obs["xla_action"].any() and len(seen) >= 2


def test_render_modes():
    env = MallocGameV1Env(SCENARIO, render_mode="ansi")
    env.reset(seed=0)
    text = env.render()
    assert text.startswith("MallocGame-v1  mlp-train-s0@1/8") and "legal action(s)" in text
    env = MallocGameV1Env(SCENARIO, render_mode="rgb_array", memory_bins=(16, 24))
    env.reset(seed=0)
    picture = env.render()
    assert picture.shape == (16, 24, 3) and picture.dtype == np.uint8


def test_v0_is_unchanged_beside_v1():
    """v0's env, registration and numbers are what they were (v1 lives beside it)."""
    from mallocgym.env import MallocGameEnv

    assert gym.spec("MallocGame-v0").entry_point == "mallocgym.env:MallocGameEnv"
    env = MallocGameEnv(SCENARIO)
    assert env.action_space.n == 17 and set(env.observation_space.spaces) == {
        "buffer", "candidates", "next", "memory", "progress", "action_mask"}


def test_incremental_time_equals_a_full_simulation_bit_for_bit():
    """After every step the env's incrementally updated time is exactly a fresh full run of the
    runtime model over the same allocations."""
    from mallocgym.pricing import runtime
    from mallocgym.sim import v1

    env = MallocGameV1Env(mlp_scenario(1, Fraction(1, 8)))
    rng = np.random.default_rng(0)
    obs, info = env.reset(seed=0)
    done, restarts = False, 0
    while not done:
        obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        st, state = env.static, env.sim_state
        q, t = v1.copy_list(state), st.compute_time.shape[0]
        full = runtime.simulate_trusted(st.compute_time, state.slow_bytes / st.params[v1.SLOW_BW],
                                        state.fast_bytes / st.params[v1.FAST_BW], st.overhead, st.params[v1.SLOW_BW],
                                        state.cp_start[q], state.cp_done[q], state.cp_bytes[q], state.cp_kind[q],
                                        np.zeros(t), np.zeros(t + 1))
        assert info["time"] == full
        restarts += int(state.sim_empty[1:].any())
    assert restarts > 0  # the queues were empty somewhere: the restart path was taken


def test_next_lists_the_following_buffers_in_decision_order():
    env = MallocGameV1Env(SCENARIO, n_next=3)
    obs, _ = env.reset(seed=0)
    st = env.static
    table = env.structured(obs)["next"]
    assert table.shape == (3, 7)
    order = [int(st.seg_buf[s]) for s in st.order[int(env.sim_state.counters[0]):]]
    following = []
    for b in order:
        if b != env.current_buffer and (not following or following[-1] != b) and len(following) < 3:
            following.append(b)
    w, t = env.workload, env.workload.num_ops
    for row, b in zip(table, following):
        assert row[0] == 1.0
        assert row[2] == pytest.approx(w.start[b] / t) and row[3] == pytest.approx(w.end[b] / t)


def _redraw(env):
    """The occupancy image drawn afresh from the state's chunks (plain Python, floats)."""
    st, state = env.static, env.sim_state
    a_bins, t_bins = env.memory_bins
    n_ops, cap = st.compute_time.shape[0], float(st.iparams[0])
    bin_ops, bin_bytes = n_ops / t_bins, cap / a_bins
    image = np.zeros((a_bins, t_bins))
    for c in state.active[:state.counters[1]]:
        lo_t, hi_t = float(state.ch_lo[c]), float(state.ch_hi[c] + 1)
        lo_a = float(state.ch_off[c])
        hi_a = lo_a + st.size[state.ch_buf[c]]
        for tb in range(t_bins):
            ot = min(hi_t, (tb + 1) * bin_ops) - max(lo_t, tb * bin_ops)
            for ab in range(a_bins):
                oa = min(hi_a, (ab + 1) * bin_bytes) - max(lo_a, ab * bin_bytes)
                if ot > 0 and oa > 0:
                    image[ab, tb] += ot * oa / (bin_ops * bin_bytes)
    return np.minimum(image, 1.0)


def test_occupancy_image_kept_by_the_rules_equals_a_redraw():
    """The image the state keeps as chunks open, grow and shrink (evictions placed and dropped)
    is the one drawn afresh from the chunks after every step, and survives clone/restore."""
    env = MallocGameV1Env(mlp_scenario(1, Fraction(1, 8)), memory_bins=(8, 12))
    rng = np.random.default_rng(3)
    obs, info = env.reset(seed=0)
    done, steps = False, 0
    while not done:
        obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(info["action_mask"]))))
        steps += 1
        image = obs["memory"].reshape(2, 8, 12)[0]
        np.testing.assert_allclose(image, _redraw(env), rtol=0, atol=1e-6)
        if steps == 5:
            snapshot = env.clone_state()
            kept = image.copy()
    assert env.sim_state.image.any()
    env.restore_state(snapshot)
    np.testing.assert_array_equal(env._obs.memory[0], kept)


def test_occupancy_image_by_hand():
    """4 ops, capacity 8 B, 2 x 2 bins (4 B x 2 ops each): a 4-byte buffer produced fast at
    offset 0 by op 0 and read by op 1 fills the lower-left bin exactly; the image is that bin."""
    from mallocgym.hardware import Hardware
    from mallocgym.workloads.builder import ProgramBuilder

    b = ProgramBuilder("tiny")
    v = b.buffer("v", 4)
    b.op("w", flops=1e3, writes=[v])
    b.op("r", flops=1e3, reads=[v])
    b.op("x", flops=1e3)
    b.op("y", flops=1e3)
    env = MallocGameV1Env(b.build(), Hardware(fast_capacity=8, name="tiny"), memory_bins=(2, 2), n_candidates=1)
    obs, info = env.reset(seed=0)
    assert env.action_meaning(1) == ("fast", 0, -1)
    obs, *_ = env.step(1)
    assert obs["memory"].reshape(2, 2, 2)[0].tolist() == [[1.0, 0.0], [0.0, 0.0]]
