"""MallocGame-v0's canonical decision mode (``order="canonical"``): it reaches exactly the
canonical packings (brute force), its best mapping is the optimum over all placements under the
reference cost model, and it is a clean Gymnasium env; the search agents play it."""

from __future__ import annotations

import pickle
import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env as gym_check_env
from hypothesis import given, settings

from mallocgym import Hardware, Workload, evaluate
from mallocgym.agents import make_agent
from mallocgym.env import MallocGameEnv
from mallocgym.env.canonical import CANONICAL_CANDIDATE_FEATURES, CanonicalGameEnv
from mallocgym.harness import solve
from mallocgym.scenarios import resolve

import reference
from conftest import mlp_scenario
from strategies import scenarios


# ----------------------------------------------------------------------------- pure-Python references
def _shares_op(w, i, j) -> bool:
    return bool(w.start[i] <= w.end[j] and w.end[i] >= w.start[j])


def _valid_mappings(w, capacity, alignment):
    """Every valid mapping: each buffer slow (-1) or at an aligned offset in
    ``[0, capacity - size]``, no two buffers sharing an op and an address."""
    n = w.num_buffers
    out = []
    offsets = [-1] * n

    def assign(b):
        if b == n:
            out.append(tuple(offsets))
            return
        offsets[b] = -1
        assign(b + 1)
        for o in range(0, int(capacity - w.size[b]) + 1, alignment):
            if all(offsets[j] < 0 or not _shares_op(w, b, j) or o >= offsets[j] + w.size[j]
                   or offsets[j] >= o + w.size[b] for j in range(b)):
                offsets[b] = o
                assign(b + 1)
        offsets[b] = -1

    assign(0)
    return out


def _drop(w, offsets, alignment):
    """Fast buffers in increasing offset, each lowered to the aligned highest top of the
    already dropped ones sharing an op with it."""
    out = [-1] * w.num_buffers
    done = []
    for b in sorted((b for b in range(w.num_buffers) if offsets[b] >= 0), key=lambda b: (offsets[b], b)):
        top = max([out[j] + int(w.size[j]) for j in done if _shares_op(w, b, j)], default=0)
        out[b] = -(-top // alignment) * alignment
        done.append(b)
    return tuple(out)


def _play_all(env):
    """Every episode the env can play from its current position (every legal action at every
    step): a list of (final offsets, final info, return)."""
    leaves = []

    def walk(ret):
        snap = env.clone_state()
        for a in np.flatnonzero(env.action_masks()):
            env.restore_state(snap)
            _, reward, done, _, info = env.step(int(a))
            if done:
                leaves.append((tuple(info["offsets"]), info, ret + reward))
            else:
                walk(ret + reward)
        env.restore_state(snap)

    walk(0.0)
    return leaves


def _random_tiny(seed, n=4, alignment=1):
    rng = np.random.default_rng(seed)
    start = rng.integers(0, 4, n)
    end = start + rng.integers(0, 3, n)
    size = rng.integers(1, 4, n) * alignment
    w = Workload.from_buffers(f"tiny{seed}", flops=np.zeros(int(end.max()) + 1), size=size, start=start, end=end)
    capacity = int(rng.integers(4, 8)) * alignment
    return w, Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=capacity,
                       alignment=alignment)


# ----------------------------------------------------------------------------- reachability
def _waiting_case():
    """g (60 B, ops 0-1) at 0 under e (40 B, ops 1-2) at 60 under d (10 B, ops 2-3) at 100;
    h (50 B, ops 4-5) at 0 under c (10 B, ops 4-5) at 50. Capacity 110."""
    w = Workload.from_buffers("waiting", flops=np.zeros(6), size=[60, 40, 10, 50, 10],
                              start=[0, 1, 2, 4, 4], end=[1, 2, 3, 5, 5])
    return w, Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=110)


def test_a_waiting_buffer_is_lifted_later():
    """Placing g, h, c (floor 50) leaves d with L = 0 < floor: d is not a candidate but must not
    be dropped; placing e lifts it to 100, where it goes."""
    w, hw = _waiting_case()
    g, e, d, h, c = range(5)
    env = MallocGameEnv(w, hw, order="canonical", n_candidates=8, invalid_action="raise")
    env.reset(seed=0)

    def place(b):
        hits = np.flatnonzero(env.candidate_buffers == b)
        assert hits.size == 1, (b, env.candidate_buffers.tolist())
        return env.step(int(hits[0]))

    for b in (g, h, c):
        place(b)
    assert env.floor == 50
    assert d not in env.candidate_buffers and e in env.candidate_buffers
    assert dict(zip(env.candidate_buffers.tolist(), env.candidate_offsets.tolist())) == {e: 60}
    place(e)
    assert dict(zip(env.candidate_buffers.tolist(), env.candidate_offsets.tolist())) == {d: 100}
    *_, done, _, info = place(d)
    assert done and info["offsets"] == [0, 60, 100, 0, 50] and info["floor"] == 100


def _small_waiting_case(seed=None, alignment=1):
    """:func:`_waiting_case` in tenths (capacity 11), small enough to enumerate."""
    w, hw = _waiting_case()
    w = Workload.from_buffers("waiting10", flops=np.zeros(6), size=w.size // 10, start=w.start, end=w.end)
    return w, Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=11)


@pytest.mark.parametrize("case,seed,alignment", [(_random_tiny, 0, 1), (_random_tiny, 1, 1), (_random_tiny, 2, 1),
                                                 (_random_tiny, 3, 2), (_random_tiny, 4, 2), (_random_tiny, 5, 1),
                                                 (_small_waiting_case, None, 1)])
def test_reaches_exactly_the_canonical_packings(case, seed, alignment):
    """The final mappings of every action sequence (K >= N) are exactly the drops of all valid
    mappings, slow buffers included."""
    w, hw = case(seed, alignment=alignment)
    canonical = {_drop(w, m, alignment) for m in _valid_mappings(w, hw.fast_capacity, alignment)}
    env = MallocGameEnv(w, hw, order="canonical", n_candidates=w.num_buffers, invalid_action="raise")
    env.reset(seed=0)
    reached = {offsets for offsets, _, _ in _play_all(env)}
    assert reached == canonical
    assert len(canonical) > 4


def _best_by_brute_force(w, hw):
    """The fastest mapping over all placements, priced by the reference cost model."""
    return min(reference.program_time(w, m, hw) for m in _valid_mappings(w, hw.fast_capacity, hw.alignment))


@settings(max_examples=25, deadline=None)
@given(scenarios(max_ops=5, max_buffers=4))
def test_best_return_is_the_brute_force_optimum(case):
    """Every episode is priced like the reference cost model and passes evaluate; the best one
    is the optimum over all valid placements."""
    w, hw = case
    env = MallocGameEnv(w, hw, order="canonical", n_candidates=w.num_buffers, invalid_action="raise")
    env.reset(seed=0)
    slow = reference.program_time(w, [-1] * w.num_buffers, hw)
    best = np.inf
    for offsets, info, ret in _play_all(env):
        ref = reference.program_time(w, offsets, hw)
        assert info["time"] == pytest.approx(ref, rel=1e-9)
        assert evaluate(w, list(offsets), hw).time == pytest.approx(ref, rel=1e-9)
        assert ret == pytest.approx(1 - ref / slow, rel=1e-9, abs=1e-12)
        best = min(best, ref)
    assert best == pytest.approx(_best_by_brute_force(w, hw), rel=1e-12)


def test_nothing_fits_passes_once(trap):
    """With every buffer larger than the fast memory, the only legal action (K) ends the game."""
    w, _ = trap
    env = MallocGameEnv(w, Hardware(peak_flops=1e12, slow_bw=1000.0, fast_bw=10000.0, fast_capacity=50),
                        order="canonical", n_candidates=2)
    obs, _ = env.reset(seed=0)
    assert obs["action_mask"].tolist() == [0, 0, 1, 0]
    _, reward, done, _, info = env.step(2)
    assert done and reward == 0.0 and info["offsets"] == [-1, -1, -1]


# ----------------------------------------------------------------------------- env contract
def test_made_by_gym_make_and_checkers_pass():
    env = gym.make("MallocGame-v0", order="canonical", n_candidates=4)
    assert isinstance(env.unwrapped, CanonicalGameEnv) and isinstance(env.unwrapped, MallocGameEnv)
    assert env.action_space == gym.spaces.Discrete(8)
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    scenario = mlp_scenario(0)
    raw = gym.make("MallocGame-v0", order="canonical", workload=scenario).unwrapped
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        gym_check_env(raw, skip_render_check=False)
        sb3_check_env(MallocGameEnv(scenario, order="canonical"), warn=True)


def test_masks_candidates_and_observations_agree():
    env = MallocGameEnv(mlp_scenario(0), order="canonical", n_candidates=6)
    k = env.k
    obs, info = env.reset(seed=0)
    rng = np.random.default_rng(0)
    steps = 0
    while True:
        assert env.observation_space.contains(obs)
        mask = obs["action_mask"]
        assert np.array_equal(mask, info["action_mask"]) and np.array_equal(mask.astype(bool), env.action_masks())
        shown = env.candidate_buffers
        assert mask[k] == 1 and mask[:k].sum() == shown.size and np.array_equal(mask[:k], mask[k:])
        low = env.candidate_offsets
        assert np.all(np.diff(low) >= 0) and np.all(low >= env.floor) and env.current_buffer == shown[0]
        rows = env.structured(obs)["candidates"]
        cap = env.hardware.fast_capacity
        assert rows.shape == (k, len(CANONICAL_CANDIDATE_FEATURES))
        np.testing.assert_allclose(rows[: shown.size, 1], low / cap, rtol=1e-6)
        np.testing.assert_allclose(rows[: shown.size, 3], env.workload.size[shown] / cap, rtol=1e-6)
        assert not rows[shown.size:].any()
        obs, _, done, _, info = env.step(int(rng.choice(np.flatnonzero(mask))))
        steps += 1
        if done:
            break
    assert steps <= env.workload.num_buffers and info["step"] == steps
    evaluate(env.workload, info["offsets"], env.hardware)


def _episode(env, seed):
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    trace = [obs]
    while True:
        obs, reward, done, _, info = env.step(int(rng.choice(np.flatnonzero(obs["action_mask"]))))
        trace.append((obs, reward))
        if done:
            return trace, info


def test_seeded_determinism_pickle_and_clone():
    a, ia = _episode(gym.make("MallocGame-v0", order="canonical"), 7)
    b, ib = _episode(gym.make("MallocGame-v0", order="canonical"), 7)
    assert ia["offsets"] == ib["offsets"] and len(a) == len(b)
    assert all(np.array_equal(x[0][key], y[0][key]) and x[1] == y[1] for x, y in zip(a[1:], b[1:]) for key in x[0])
    env = MallocGameEnv(mlp_scenario(1), order="canonical")
    env.reset(seed=0)
    for _ in range(4):
        env.step(0)
    snap = env.clone_state()
    copy = pickle.loads(pickle.dumps(env))
    assert isinstance(copy, CanonicalGameEnv)
    moves = (env.k, 1, 0, env.k + 1)
    first = [env.step(a)[:3] for a in moves]
    second = [copy.step(a)[:3] for a in moves]
    env.restore_state(snap)
    third = [env.step(a)[:3] for a in moves]
    for (o1, r1, _), (o2, r2, _), (o3, r3, _) in zip(first, second, third):
        assert r1 == r2 == r3
        assert all(np.array_equal(o1[key], o2[key]) and np.array_equal(o1[key], o3[key]) for key in o1)
    with pytest.raises(TypeError, match="CanonicalGameState"):
        env.restore_state(MallocGameEnv(mlp_scenario(1)).clone_state())


def test_invalid_actions(trap):
    w, hw = trap  # capacity 200: the three buffers are candidates at offset 0 (K = 4: 3 shown)
    raise_env = MallocGameEnv(w, hw, order="canonical", n_candidates=4, invalid_action="raise")
    raise_env.reset(seed=0)
    with pytest.raises(ValueError, match="action 3 is masked"):
        raise_env.step(3)
    with pytest.raises(ValueError, match="outside the action space"):
        raise_env.step(8)
    skip = MallocGameEnv(w, hw, order="canonical", n_candidates=4)
    skip.reset(seed=0)
    first = skip.current_buffer
    _, reward, done, _, info = skip.step(3)  # masked: candidate 0 goes to slow memory
    assert info["invalid_action"] and reward == 0.0 and not done
    assert first not in skip.candidate_buffers and info["step"] == 1
    term = MallocGameEnv(w, hw, order="canonical", n_candidates=4, invalid_action="terminate")
    term.reset(seed=0)
    assert term.candidate_buffers.tolist() == [0, 1, 2]  # boundedness ties: size descending, then id
    term.step(4)  # buffer 0 to slow memory
    term.step(0)  # buffer 1 at 0
    _, _, done, _, info = term.step(7)  # masked: only buffer 2 (at 100) is shown
    assert done and info["invalid_action"] and info["offsets"] == [-1, 0, -1]
    with pytest.raises(RuntimeError, match="after the episode ended"):
        term.step(0)


def test_bad_arguments(tiny, tiny_hw):
    with pytest.raises(ValueError, match="order must be one of .*'canonical'.*got 'canon'"):
        MallocGameEnv(tiny, tiny_hw, order="canon")
    with pytest.raises(ValueError, match="n_candidates = 0 must be >= 1"):
        MallocGameEnv(tiny, tiny_hw, order="canonical", n_candidates=0)
    with pytest.raises(TypeError, match="does not run order='canonical'"):
        gym.make_vec("MallocGame-v0", num_envs=2, workload=tiny, hardware=tiny_hw, order="canonical")
    sync = gym.make_vec("MallocGame-v0", num_envs=2, vectorization_mode="sync", workload=tiny, hardware=tiny_hw,
                        order="canonical")
    sync.reset(seed=0)
    sync.close()


# ----------------------------------------------------------------------------- search agents
def _replay(scenario, offsets):
    """Play ``offsets`` in the canonical mode with every candidate shown: send the candidates
    that the mapping leaves slow, place the lowest one it puts at its offset ``L``."""
    n = scenario.workload.num_buffers
    env = MallocGameEnv(scenario, order="canonical", n_candidates=n, invalid_action="raise")
    env.reset(seed=0)
    while True:
        shown, low = env.candidate_buffers, env.candidate_offsets
        slow = np.flatnonzero(offsets[shown] < 0)
        if slow.size:
            action = n + int(slow[0])
        else:
            hits = np.flatnonzero(offsets[shown] == low)
            assert hits.size, f"no candidate at its mapping offset: {shown.tolist()} {low.tolist()}"
            action = int(hits[0])
        *_, done, _, info = env.step(action)
        if done:
            return info


@pytest.mark.parametrize("spec", ["rollout:order=canonical", "beam:width=2,order=canonical",
                                  "mcts:simulations=4,order=canonical"])
def test_search_agents_play_the_canonical_mode(spec):
    scenario = mlp_scenario(0)
    agent = make_agent(spec)
    solution = agent.solve(scenario)
    info = _replay(scenario, solution.offsets)
    np.testing.assert_array_equal(info["offsets"], solution.offsets)
    ev = evaluate(scenario.workload, solution.offsets, scenario.hardware)
    assert info["time"] == pytest.approx(ev.time, rel=1e-12)
    # never worse than the mode's own greedy completion (rollout with one completion)
    greedy = make_agent("rollout:order=canonical,max_completions=1").solve(scenario)
    assert ev.time <= evaluate(scenario.workload, greedy.offsets, scenario.hardware).time * (1 + 1e-12)
    assert agent.solve(scenario, seed=3).offsets.tolist() == solution.offsets.tolist()


@pytest.mark.parametrize("spec", ["rollout:order=canonical", "beam:order=canonical", "mcts:order=canonical"])
def test_search_agents_find_the_trap_optimum(spec, trap):
    """The trap's optimum (0.68 s: the two small buffers, not the big one) is canonical."""
    w, hw = trap
    result = solve(resolve(w, hw), spec)
    np.testing.assert_array_equal(result.offsets, [-1, 0, 100])
    assert result.time == pytest.approx(0.68, rel=1e-12)


@pytest.mark.parametrize("seed", range(3))
def test_wide_search_reaches_the_optimum(seed):
    """On 5-buffer programs, a wide beam and MCTS in the canonical mode (K >= N) find the
    optimum over all placements (brute force)."""
    w, hw = _random_tiny(10 + seed, n=5)
    scenario = resolve(w, hw)
    optimum = _best_by_brute_force(w, hw)
    for spec in ("beam:width=64,n_candidates=5,order=canonical", "mcts:simulations=200,n_candidates=5,order=canonical"):
        assert solve(scenario, spec).time == pytest.approx(optimum, rel=1e-12), spec


@pytest.mark.parametrize("spec,match", [
    ("rollout:order=nope", "order must be one of boundedness, canonical"),
    ("rollout:levels=2,order=canonical", "levels=2"),
])
def test_bad_search_settings(spec, match):
    with pytest.raises(ValueError, match=match):
        make_agent(spec)


def test_canonical_order_is_a_v0_setting():
    from mallocgym.scenarios import suite

    with pytest.raises(ValueError, match="order=canonical is a MallocGame-v0 mode"):
        make_agent("mcts:order=canonical").solve_v1(suite("synthetic")[0])



def test_maskable_ppo_trains_and_acts_legally():
    """sb3-contrib's MaskablePPO takes the env as is (``action_masks()``); its masked actions are
    always legal."""
    import torch
    from sb3_contrib import MaskablePPO

    torch.set_num_threads(1)
    env = MallocGameEnv(mlp_scenario(0), order="canonical", n_candidates=4, n_next=2, memory_bins=(4, 4))
    model = MaskablePPO("MultiInputPolicy", env, n_steps=32, batch_size=32, n_epochs=1, seed=0,
                        policy_kwargs={"net_arch": [16]})
    model.learn(64)
    obs, _ = env.reset(seed=1)
    while True:
        action, _ = model.predict(obs, action_masks=env.action_masks(), deterministic=False)
        assert obs["action_mask"][int(action)] == 1
        obs, _, done, _, info = env.step(int(action))
        if done:
            break
    evaluate(env.workload, info["offsets"], env.hardware)


def test_docstring_and_docs_list_the_canonical_features():
    from pathlib import Path

    doc = CanonicalGameEnv.__doc__
    for section in ("## Description", "## Action Space", "## Observation Space", "## Rewards",
                    "## Episode End", "## Information", "## Arguments", "## Version History"):
        assert section in doc
    assert 'order="canonical"' in MallocGameEnv.__doc__
    text = (Path(__file__).resolve().parents[1] / "docs" / "game.md").read_text()
    section = text.index("| # | canonical candidate feature |")
    positions = [text.find(f"| {i} | {name} |", section) for i, name in enumerate(CANONICAL_CANDIDATE_FEATURES)]
    assert all(p >= 0 for p in positions) and positions == sorted(positions)
    assert all(name in doc for name in CANONICAL_CANDIDATE_FEATURES)
