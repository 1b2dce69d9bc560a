"""``mallocgym train muzero --ray``: self-play actors and the learner as Ray actors.

The actors play the local self-play's games (same records: fields, dtypes, shapes and, with the
same seed and weights, values), the learner starts from the local run's network, a tiny
``--ray`` run writes a checkpoint that loads (and that a local ``--resume`` continues), and bad
input is one line. The tests on Ray share one local Ray with 2 CPUs (``ray.init(num_cpus=2)``),
are skipped without the ``[ray]`` extra and are marked slow (starting Ray and its worker
processes takes 20-40 s on the 2-core machine): the default run checks the same actor and
learner classes in this process, and the errors that need no Ray.
"""

import dataclasses
import importlib.util
import json
import sys
import warnings

import numpy as np
import pytest
import torch

from mallocgym import cli
from mallocgym.agents.muzero.agent import make_env
from mallocgym.agents.muzero.checkpoint import load_checkpoint, load_network
from mallocgym.agents.muzero.config import MuZeroConfig
from mallocgym.agents.muzero.distributed import ActorWorker, LearnerWorker, actor_seeds
from mallocgym.agents.muzero.expert import ExpertActor
from mallocgym.agents.muzero.mcts import NetworkModel
from mallocgym.agents.muzero.networks import MuZeroNet, ObsSpec
from mallocgym.agents.muzero.selfplay import ScenarioSource, SelfPlay
from mallocgym.agents.muzero.train import main
from mallocgym.scenarios import Scenario

from conftest import mlp_scenario

torch.set_num_threads(1)

HAS_RAY = importlib.util.find_spec("ray") is not None
needs_ray = pytest.mark.skipif(not HAS_RAY, reason="the [ray] extra is not installed: pip install 'mallocgym[ray]'")

TINY_SETS = ["network.hidden=32", "network.candidate_hidden=16", "network.memory_hidden=8",
             "search.num_simulations=4", "search.eval_simulations=4", "train.num_actors=4", "train.min_replay=40",
             "train.batch_size=16", "train.unroll_steps=3", "train.td_steps=5", "train.replay_capacity=4000",
             "train.checkpoint_every_s=1000", "train.log_every_s=0.5", "train.replay_ratio=8"]
TINY = MuZeroConfig().with_overrides(TINY_SETS)
TINY_V2 = MuZeroConfig().with_overrides(["network.hidden=32", "network.candidate_hidden=16",
                                         "network.memory_hidden=8", "network.version=2",
                                         "simulator.num_simulations=2", "train.heldout_fraction=0.5"])
SEED = 5


@pytest.fixture(scope="module")
def local_ray():
    """One local Ray with 2 CPUs for the whole module, shut down after it."""
    if not HAS_RAY:
        pytest.skip("the [ray] extra is not installed: pip install 'mallocgym[ray]'")
    import ray

    if ray.is_initialized():
        ray.shutdown()
    with pytest.MonkeyPatch.context() as mp, warnings.catch_warnings():
        mp.setenv("RAY_USAGE_STATS_ENABLED", "0")
        warnings.filterwarnings("ignore", category=FutureWarning, module=r"ray\.")
        ray.init(address="local", num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield ray
    ray.shutdown()


def local_net(config, scenario):
    """The network a local run starts from (``train``: ``torch.manual_seed(seed)``, then the net)."""
    torch.manual_seed(SEED)
    return MuZeroNet(ObsSpec.from_env(make_env(scenario, config)), config.network).eval()


def assert_same(a, b, where="record"):
    """Equal records: the same type, fields, array dtypes, shapes and values (NaN = NaN)."""
    assert type(a) is type(b), where
    if isinstance(a, np.ndarray):
        assert a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    elif isinstance(a, dict):
        assert sorted(a) == sorted(b), where
        for key in a:
            assert_same(a[key], b[key], f"{where}.{key}")
    elif dataclasses.is_dataclass(a):
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{where}.{f.name}")
    elif isinstance(a, tuple) and hasattr(a, "_fields"):
        for name in a._fields:
            assert_same(getattr(a, name), getattr(b, name), f"{where}.{name}")
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{where}[{i}]")
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b), where
    else:
        assert a == b, where


def local_selfplay_v1(scenarios, net, moves):
    """``train``'s self-play, built as it builds it, ``moves`` batched moves."""
    children = np.random.SeedSequence(SEED).spawn(TINY.train.num_actors + 1)
    selfplay = SelfPlay(TINY, ScenarioSource(scenarios, None, 0.0), [np.random.default_rng(c) for c in children[:-1]])
    items = []
    for _ in range(moves):
        items.extend(selfplay.step(NetworkModel(net)))
    return items


def local_selfplay_v2(scenarios, net, moves):
    """``_train_expert``'s actor, built as it builds it (the first of 3 children of the seed)."""
    actor_seed, _, _ = np.random.SeedSequence(SEED).spawn(3)
    actor = ExpertActor(TINY_V2, ScenarioSource(scenarios, None, 0.0), np.random.default_rng(actor_seed),
                        NetworkModel(net))
    return [actor.step() for _ in range(moves)]


def check_learner_starts_as_a_local_run(config, net):
    step, state = LearnerWorker(config.to_dict(), SEED, net.spec.to_dict()).weights()
    assert step == 0 and all(torch.equal(state[k], v) for k, v in net.state_dict().items())


class InProcess:
    """An :class:`ActorWorker` called here (the class is plain Python; Ray wraps the same one)."""

    def __init__(self, *args):
        self.actor = ActorWorker(*args)

    def set_weights(self, weights):
        return self.actor.set_weights(weights)

    def play(self, **kwargs):
        return self.actor.play(**kwargs)


class ViaRay:
    """The same calls to an :class:`ActorWorker` running as a Ray actor (its own process)."""

    def __init__(self, ray, *args):
        self.ray, self.handle = ray, ray.remote(ActorWorker).remote(*args)

    def set_weights(self, weights):
        return self.ray.get(self.handle.set_weights.remote(weights))

    def play(self, **kwargs):
        return self.ray.get(self.handle.play.remote(**kwargs))


def check_actors_play_the_local_games(scenarios, make_actor):
    """Version 1 (4 games searched together, 3 moves each) and version 2 (the simulator search's
    records, every other game held out), each game on one of two 3-buffer programs drawn with
    the actor's generators: the actor's records are the local self-play's."""
    runs = {1: (TINY, 7, local_selfplay_v1), 2: (TINY_V2, 9, local_selfplay_v2)}
    for version, (config, moves, local_play) in runs.items():
        net = local_net(config, scenarios[0])
        actor = make_actor(config.to_dict(), scenarios, False, SEED, 0, net.spec.to_dict())
        assert actor.set_weights((0, net.state_dict())) == 0
        played = actor.play(moves=moves)
        check_learner_starts_as_a_local_run(config, net)
        local = local_play(scenarios, net, moves)
        assert played["moves"] == moves and played["weights_version"] == 0
        assert played["env_steps"] == moves * (config.train.num_actors if version == 1 else 1)
        items = played["items"]
        if version == 1:
            assert len(items) == 8 and all(len(record) == 3 for record, _ in items)
            assert {episode.scenario for _, episode in items} == {"trap", "tiny"}
        else:
            assert sum(len(records) for records, _, _ in items) > 0
            assert [game.heldout for _, _, game in items if game is not None] == [False, True, False]
        assert_same(items, local)
        # what the learner stores of it
        learner = LearnerWorker(config.to_dict(), SEED, net.spec.to_dict())
        added = learner.add(played)
        assert added["env_steps"] == played["env_steps"]
        if version == 1:
            assert added["positions"] == 8 * 3 and len(added["games"]) == 8
        else:
            stored = sum(int(np.count_nonzero(r.legal)) >= 2 for records, held, _ in items if not held
                         for r in records)
            assert added["positions"] == stored == learner.replay.size > 0 and learner.heldout.size > 0


def test_actors_play_the_local_games(trap, tiny, tiny_hw):
    check_actors_play_the_local_games([Scenario("trap", *trap), Scenario("tiny", tiny, tiny_hw)], InProcess)


@pytest.mark.slow
@needs_ray
def test_ray_actors_play_the_local_games(local_ray, trap, tiny, tiny_hw):
    check_actors_play_the_local_games([Scenario("trap", *trap), Scenario("tiny", tiny, tiny_hw)],
                                      lambda *args: ViaRay(local_ray, *args))


def test_another_actor_plays_its_own_games():
    first, second = (actor_seeds(SEED, TINY, i) for i in (0, 1))
    local = np.random.SeedSequence(SEED).spawn(TINY.train.num_actors + 1)
    assert [s.spawn_key for s in first] == [c.spawn_key for c in local[:-1]]
    keys = {s.spawn_key for s in first} | {local[-1].spawn_key}
    assert len(second) == TINY.train.num_actors and not keys & {s.spawn_key for s in second}
    (v2_first,), (v2_second,) = (actor_seeds(SEED, TINY_V2, i) for i in (0, 1))
    assert v2_first.spawn_key == (0,) and v2_second.spawn_key == (3,)   # 1 and 2: learner, held-out draws


@pytest.mark.slow
@needs_ray
def test_train_muzero_ray_writes_a_loadable_checkpoint(local_ray, tmp_path, capsys):
    sets = [f"--set={s}" for s in TINY_SETS]
    out = tmp_path / "run"
    code = main(["--scenario", "mlp-train-s0@1/8", "--minutes", "0.06", "--out", str(out), "--seed", "3", "--quiet",
                 "--ray", *sets])
    assert code == 0
    summary = json.loads(capsys.readouterr().out)
    net, config, payload = load_network(out)
    assert config == TINY and net.spec == ObsSpec.from_env(make_env(mlp_scenario(0), TINY))
    progress = payload["progress"]
    assert progress["episodes"] > 0 and progress["train_steps"] > 0 and progress["env_steps"] > 0
    assert summary["train_steps"] == progress["train_steps"] and summary["checkpoint"] == str(out / "checkpoint.pt")
    assert payload["optimizer"]["state"]   # the learner's AdamW moments came back
    assert len(payload["rng"]["actors"]) == TINY.train.num_actors and "learner" in payload["rng"]
    lines = [json.loads(line) for line in (out / "log.jsonl").read_text().splitlines()]
    assert lines[0]["event"] == "start" and lines[0]["ray"] == {"address": None, "actors": 1}
    assert lines[-1]["event"] == "end" and "return_mean" in lines[-1] and "losses" in lines[-1]
    # the checkpoint is in the local format: a local run continues it
    code = main(["--scenario", "mlp-train-s0@1/8", "--minutes", "0.01", "--out", str(out), "--resume", "--quiet"])
    assert code == 0 and load_checkpoint(out)["progress"]["env_steps"] > progress["env_steps"]


@pytest.mark.slow
@needs_ray
def test_more_actors_than_cpus_is_one_error(local_ray, tmp_path, capsys):
    code = cli.main(["train", "muzero", "--scenario", "mlp-train-s0@1/8", "--minutes", "1", "--out",
                     str(tmp_path / "x"), "--quiet", "--ray", "--ray-actors", "2"])
    assert code == 2 and not (tmp_path / "x").exists()
    assert capsys.readouterr().err.strip() == ("mallocgym: error: --ray-actors 2: the Ray cluster has 2 CPUs, and the "
                                               "actors and the learner need 3 (one each)")


@pytest.mark.parametrize("extra, message", [
    (["--ray", "nowhere"], "--ray 'nowhere': not a Ray address; expected auto, HOST:PORT"),
    (["--ray-actors", "2"], "--ray-actors needs --ray"),
    (["--ray", "--ray-actors", "0"], "--ray-actors must be >= 1, got 0"),
    (["--ray", "--resume"], "--ray starts a new run; continue one without --ray"),
])
def test_bad_ray_options_are_one_line(tmp_path, capsys, extra, message):
    if "--resume" in extra:   # a run to resume, so that the refusal is --ray's
        (tmp_path / "x").mkdir()
        (tmp_path / "x" / "checkpoint.pt").write_bytes(b"")
    code = cli.main(["train", "muzero", "--scenario", "mlp-train-s0@1/8", "--minutes", "1", "--out",
                     str(tmp_path / "x"), "--quiet", *extra])
    out, err = capsys.readouterr()
    assert code == 2 and out == ""
    assert len(err.splitlines()) == 1 and err.startswith(f"mallocgym: error: {message}")


def test_ray_missing_is_one_line_and_a_local_run_needs_no_ray(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)   # `import ray` fails as if it were not installed
    argv = ["train", "muzero", "--scenario", "mlp-train-s0@1/8", "--minutes", "0.005", "--quiet",
            *[f"--set={s}" for s in TINY_SETS]]
    code = cli.main([*argv, "--out", str(tmp_path / "a"), "--ray"])
    assert code == 2 and not (tmp_path / "a").exists()
    assert capsys.readouterr().err.strip() == ("mallocgym: error: --ray needs the [ray] extra: pip install "
                                               "'mallocgym[ray]' (import of ray halted; None in sys.modules)")
    assert cli.main([*argv, "--out", str(tmp_path / "b")]) == 0   # without --ray nothing imports it
    assert (tmp_path / "b" / "checkpoint.pt").is_file()
