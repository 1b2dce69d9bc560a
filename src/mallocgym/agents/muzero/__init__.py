"""mallocMuZero: a MuZero agent for MallocGame (PyTorch, CPU).

- :mod:`.networks` representation / dynamics / prediction; :mod:`.transforms` h(x) and supports;
- :mod:`.tree` (numba) and :mod:`.mcts` batched search over the learned model (pUCT or Gumbel);
  :mod:`.simsearch` search on the exact simulator;
- :mod:`.selfplay`, :mod:`.replay`, :mod:`.learner`, :mod:`.train` training;
  :mod:`.checkpoint` saving and loading; :mod:`.config` the frozen configuration;
- :mod:`.agent` the harness agents ``muzero:DIR`` and ``muzero-sim:DIR``.

See ``docs/muzero.md``.
"""

from .agent import MuZeroAgent, muzero_factory
from .checkpoint import load_network, save_checkpoint
from .config import EnvConfig, MuZeroConfig, NetworkConfig, SearchConfig, SimulatorConfig, TrainConfig
from .networks import MuZeroNet, ObsSpec
from .train import main, train

__all__ = ["MuZeroAgent", "muzero_factory", "MuZeroConfig", "EnvConfig", "NetworkConfig", "SearchConfig",
           "SimulatorConfig", "TrainConfig", "MuZeroNet", "ObsSpec", "load_network", "save_checkpoint",
           "train", "main"]
