"""The native batched env (mallocgym.vector) against N separate MallocGame-v0 envs."""

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv

import mallocgym  # noqa: F401  (registers MallocGame-v0)
from mallocgym import Hardware, Workload
from mallocgym.env import MallocGameEnv
from mallocgym.vector import MallocGameVectorEnv

INFO_KEYS = ("time", "time_all_slow", "speedup", "placed_bytes_fraction", "invalid_action", "buffer", "step")


def _workload(seed: int, n: int) -> Workload:
    """A small random program: ``n`` buffers over ``n`` ops, some ops compute-heavy."""
    rng = np.random.default_rng(seed)
    start = rng.integers(0, n, size=n)
    end = np.minimum(start + rng.integers(0, 4, size=n), n - 1)
    size = rng.integers(1, 9, size=n) * 64
    flops = rng.choice([0.0, 1e3, 5e6], size=n).tolist()
    return Workload.from_buffers(f"rand{seed}", flops, size.tolist(), start.tolist(), end.tolist())


# Games of different sizes in one batch (3 to 12 buffers), so episodes end at different steps.
WORKLOADS = [_workload(s, n) for s, n in ((0, 3), (1, 7), (2, 12), (3, 5))]
HARDWARE = Hardware(peak_flops=1e12, slow_bw=1e9, fast_bw=1e10, fast_capacity=1024)
KWARGS = dict(workload=WORKLOADS, hardware=HARDWARE, n_candidates=4, n_next=3, memory_bins=(8, 8))


def _actions(rng, masks, k):
    """Mostly legal random actions, one in five uniform over the space (masked ones included)."""
    out = []
    for row in masks:
        out.append(int(rng.integers(k + 1)) if rng.random() < 0.2 else int(rng.choice(np.flatnonzero(row))))
    return np.array(out)


def _assert_obs_equal(a, b, where):
    assert sorted(a) == sorted(b), where
    for key in a:
        np.testing.assert_array_equal(a[key], b[key], err_msg=f"{where}: obs[{key!r}]")


@pytest.mark.parametrize("mode", [AutoresetMode.NEXT_STEP, AutoresetMode.SAME_STEP])
@pytest.mark.parametrize("invalid", ["skip", "terminate"])
def test_matches_sync_vector_env_step_for_step(mode, invalid):
    n = 5
    kwargs = dict(KWARGS, invalid_action=invalid)
    native = MallocGameVectorEnv(n, autoreset_mode=mode, **kwargs)
    sync = SyncVectorEnv([lambda: MallocGameEnv(**kwargs) for _ in range(n)], autoreset_mode=mode)
    obs_a, info_a = native.reset(seed=11)
    obs_b, info_b = sync.reset(seed=11)
    rng = np.random.default_rng(0)
    episodes = 0
    for t in range(120):
        _assert_obs_equal(obs_a, obs_b, f"step {t}")
        actions = _actions(rng, obs_a["action_mask"], native.k)
        obs_a, rew_a, term_a, trunc_a, info_a = native.step(actions)
        obs_b, rew_b, term_b, trunc_b, info_b = sync.step(actions)
        np.testing.assert_array_equal(rew_a, rew_b, err_msg=f"step {t}: rewards")
        np.testing.assert_array_equal(term_a, term_b, err_msg=f"step {t}: terminated")
        assert not trunc_a.any()
        for key in INFO_KEYS:
            np.testing.assert_array_equal(info_a[key], info_b[key], err_msg=f"step {t}: info[{key!r}]")
        done = np.flatnonzero(term_a)
        episodes += done.size
        final_a = info_a if mode == AutoresetMode.NEXT_STEP else info_a.get("final_info", {})
        final_b = info_b if mode == AutoresetMode.NEXT_STEP else info_b.get("final_info", {})
        for i in done:
            np.testing.assert_array_equal(final_a["offsets"][i], np.asarray(final_b["offsets"][i]))
            if mode == AutoresetMode.SAME_STEP:
                _assert_obs_equal(info_a["final_obs"][i], info_b["final_obs"][i], f"step {t}: final_obs {i}")
    assert episodes >= 20  # the comparison crossed many autoresets


def test_matches_separate_envs_and_returns_add_up():
    """N separate envs with seeds s + i, stepped by hand, give the same observations and
    rewards; each finished game's rewards sum to 1 - time / time_all_slow."""
    n = 3
    native = gym.make_vec("MallocGame-v0", num_envs=n, vectorization_mode="vector_entry_point", **KWARGS)
    assert isinstance(native.unwrapped, MallocGameVectorEnv)
    assert native.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    envs = [MallocGameEnv(**KWARGS) for _ in range(n)]
    obs, _ = native.reset(seed=5)
    singles = [env.reset(seed=5 + i)[0] for i, env in enumerate(envs)]
    rng = np.random.default_rng(1)
    returns = np.zeros(n)
    finished = 0
    pending_reset = np.zeros(n, dtype=bool)
    for t in range(60):
        for i in range(n):
            for key in obs:
                np.testing.assert_array_equal(obs[key][i], singles[i][key], err_msg=f"step {t} game {i} {key}")
        actions = _actions(rng, obs["action_mask"], native.unwrapped.k)
        obs, rewards, terminated, _, info = native.step(actions)
        for i, env in enumerate(envs):
            if pending_reset[i]:
                singles[i], _ = env.reset()
                assert rewards[i] == 0.0 and not terminated[i]
                returns[i] = 0.0
                continue
            singles[i], reward, done, _, single_info = env.step(int(actions[i]))
            assert rewards[i] == reward
            returns[i] += reward
            if done:
                finished += 1
                assert returns[i] == pytest.approx(1.0 - single_info["time"] / single_info["time_all_slow"], abs=1e-12)
        pending_reset = terminated.copy()
    assert finished >= 10


def test_sub_envs_stay_consistent():
    native = MallocGameVectorEnv(2, **KWARGS)
    obs, _ = native.reset(seed=0)
    for _ in range(4):
        obs, *_ = native.step(np.zeros(2, dtype=np.int64))
    for i, env in enumerate(native.envs):
        np.testing.assert_array_equal(env.action_masks(), obs["action_mask"][i].astype(bool))
        _assert_obs_equal(env.observation(), {k: v[i] for k, v in obs.items()}, f"game {i}")
        assert len(env.candidate_offsets) == int(obs["action_mask"][i][:-1].sum())
    np.testing.assert_array_equal(native.action_masks(), obs["action_mask"].astype(bool))


def test_bad_actions_raise():
    native = MallocGameVectorEnv(2, **KWARGS)
    native.reset(seed=0)
    with pytest.raises(ValueError, match="game 1: action 5 is outside"):
        native.step(np.array([0, 5]))
    with pytest.raises(ValueError, match="2 integers"):
        native.step(np.array([0, 1, 2]))
    strict = MallocGameVectorEnv(2, **dict(KWARGS, invalid_action="raise"))
    obs, _ = strict.reset(seed=0)
    masked = [i for i in range(strict.k) if obs["action_mask"][1][i] == 0]
    assert masked, "the first buffer of game 1 should have fewer than K candidates"
    with pytest.raises(ValueError, match=f"game 1: action {masked[0]} is masked"):
        strict.step(np.array([strict.k, masked[0]]))


def test_reset_mask_resets_only_those_games():
    native = MallocGameVectorEnv(3, **KWARGS)
    obs0, _ = native.reset(seed=2)
    obs1, *_ = native.step(np.full(3, native.k))
    obs2, info = native.reset(options={"reset_mask": np.array([True, False, False])})
    assert info["_step"].tolist() == [True, False, False]
    for key in obs2:
        np.testing.assert_array_equal(obs2[key][1:], obs1[key][1:])
    assert info["step"][0] == 0


def test_vector_env_over_the_bundled_suite():
    """The default construction (the bundled train split) steps and autoresets."""
    native = gym.make_vec("MallocGame-v0", num_envs=2, vectorization_mode="vector_entry_point")
    obs, _ = native.reset(seed=0)
    for _ in range(3):
        obs, rewards, *_ = native.step(np.full(2, native.unwrapped.k))  # skip: reward 0
        assert (rewards == 0.0).all()
    assert native.observation_space.contains(obs)


def test_sb3_adapter_matches_dummy_vec_env():
    from stable_baselines3.common.vec_env import DummyVecEnv

    from mallocgym.agents.sb3.vec_env import SB3VecEnv

    n = 3
    native = SB3VecEnv(n, **KWARGS)
    dummy = DummyVecEnv([lambda: MallocGameEnv(**KWARGS) for _ in range(n)])
    native.seed(4)
    dummy.seed(4)
    obs_a, obs_b = native.reset(), dummy.reset()
    rng = np.random.default_rng(2)
    dones = 0
    for t in range(80):
        _assert_obs_equal(obs_a, obs_b, f"step {t}")
        masks = np.stack(native.env_method("action_masks"))
        np.testing.assert_array_equal(masks, np.stack(dummy.env_method("action_masks")))
        actions = _actions(rng, masks, 4)
        obs_a, rew_a, done_a, infos_a = native.step(actions)
        obs_b, rew_b, done_b, infos_b = dummy.step(actions)
        np.testing.assert_allclose(rew_a, rew_b, rtol=1e-6)
        np.testing.assert_array_equal(done_a, done_b)
        for i in np.flatnonzero(done_a):
            dones += 1
            _assert_obs_equal(infos_a[i]["terminal_observation"], infos_b[i]["terminal_observation"], f"step {t}")
            np.testing.assert_array_equal(infos_a[i]["offsets"], infos_b[i]["offsets"])
    assert dones >= 10


def test_kernel_arrays_are_the_live_episode_arrays():
    env = MallocGameEnv(workload="mlp-train@1/8")
    obs, _ = env.reset(seed=0)
    arrays = env.kernel_arrays()
    assert arrays.state is env.sim_state and arrays.static is env.static
    np.testing.assert_array_equal(arrays.obs.action_mask, obs["action_mask"])
    step = env.step_index
    obs, *_ = env.step(env.k)                 # skip: the same state object advances
    assert env.kernel_arrays().state is arrays.state and env.step_index == step + 1
    np.testing.assert_array_equal(arrays.obs.action_mask, obs["action_mask"])
    other = MallocGameEnv(workload="mlp-train@1/8")
    other.share_compiled(env)
    other.reset(seed=0)
    assert other.static is env.static         # compiled once, shared
