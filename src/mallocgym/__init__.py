"""mallocgym: MallocGame, a Gymnasium environment for learned memory mapping in ML compilers.

    import gymnasium as gym
    import mallocgym

    env = gym.make("MallocGame-v0")   # whole-live-range placement
    env = gym.make("MallocGame-v1")   # per-use decisions with prefetch and eviction (XLA's MSA)

Public API: the ``MallocGame-v0`` and ``MallocGame-v1`` ids (registered on import),
:class:`Workload`, :class:`Hardware`, :func:`load`, :func:`save`, :func:`evaluate` (v0 mappings),
:func:`evaluate_v1` (v1 mappings).
"""

from gymnasium.envs.registration import register, registry

from ._version import __version__
from .hardware import PROFILES, Hardware, profile
from .pricing.v0 import Evaluation, evaluate
from .pricing.v1 import EvaluationV1, evaluate_v1
from .workloads import Workload, load, save
__all__ = ["Workload", "Hardware", "PROFILES", "profile", "load", "save", "evaluate", "Evaluation",
           "evaluate_v1", "EvaluationV1", "ENV_ID", "ENV_ID_V1", "__version__"]

ENV_ID = "MallocGame-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="mallocgym.env:MallocGameEnv",
             vector_entry_point="mallocgym.vector:MallocGameVectorEnv")

ENV_ID_V1 = "MallocGame-v1"

if ENV_ID_V1 not in registry:
    register(id=ENV_ID_V1, entry_point="mallocgym.env.v1:MallocGameV1Env")

