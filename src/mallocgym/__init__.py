"""mallocgym: MallocGame, a Gymnasium environment for learned memory mapping in ML compilers.

    import gymnasium as gym
    import mallocgym

    env = gym.make("MallocGame-v0")

Public API: the ``MallocGame-v0`` id (registered on import), :class:`Workload`,
:class:`Hardware`, :func:`load`, :func:`save`, :func:`evaluate`.
"""

from gymnasium.envs.registration import register, registry

from .evaluate import Evaluation, evaluate
from .hardware import PROFILES, Hardware, profile
from .workloads import Workload, load, save

__version__ = "0.1.0"
__all__ = ["Workload", "Hardware", "PROFILES", "profile", "load", "save", "evaluate", "Evaluation",
           "ENV_ID", "__version__"]

ENV_ID = "MallocGame-v0"

if ENV_ID not in registry:
    register(id=ENV_ID, entry_point="mallocgym.env:MallocGameEnv",
             vector_entry_point="mallocgym.vector:MallocGameVectorEnv")

ENV_ID_V1 = "MallocGame-v1"

if ENV_ID_V1 not in registry:
    register(id=ENV_ID_V1, entry_point="mallocgym.env.v1:MallocGameV1Env")


def evaluate_v1(workload, mapping, hardware=None, **kwargs):
    """Validate and price a MallocGame-v1 mapping (see :func:`mallocgym.evaluate_v1.evaluate_v1`)."""
    from .evaluate_v1 import evaluate_v1 as _evaluate_v1

    return _evaluate_v1(workload, mapping, hardware, **kwargs)
