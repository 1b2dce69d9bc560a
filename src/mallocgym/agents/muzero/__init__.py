"""mallocMuZero: a MuZero agent for MallocGame (PyTorch, CPU).

- :mod:`.networks` representation / dynamics / prediction and the version-2 heads;
  :mod:`.transforms` h(x) and supports; :mod:`.model` the network as the agents call it;
- :mod:`.simsearch` search on the exact simulator; :mod:`.labels` labelled games and the
  policy's rule; :mod:`.v1` the agent on MallocGame-v1;
- :mod:`.expert`, :mod:`.source`, :mod:`.workers`, :mod:`.train` training (expert iteration);
  :mod:`.checkpoint` saving and loading; :mod:`.config` the frozen configuration;
- :mod:`.agent` the harness agents ``muzero-sim:DIR`` and ``muzero-pol:DIR``.

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
