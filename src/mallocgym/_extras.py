"""Optional dependencies ("extras") and the error that names the one to install.

``pip install mallocgym`` gives the env, the simulator, the heuristics, search and the CLI
(gymnasium, numpy, numba). The learned agents and a few tools need more::

    require_extra("sb3", "the 'maskable_ppo' agent")   # imports torch, stable_baselines3, sb3_contrib

raises :class:`MissingExtraError` ("the 'maskable_ppo' agent needs the [sb3] extra: pip install
'mallocgym[sb3]' (No module named 'torch')") when one of them is missing.
"""

from __future__ import annotations

import importlib
from types import ModuleType

__all__ = ["EXTRAS", "MissingExtraError", "require", "require_extra", "install_hint"]

# extra -> the top-level modules it provides (what `require_extra` imports).
EXTRAS: dict[str, tuple[str, ...]] = {
    "sb3": ("torch", "stable_baselines3", "sb3_contrib"),
    "muzero": ("torch",),
    "exact": ("ortools",),
    "plot": ("matplotlib",),
    "ray": ("ray",),
    "tensorboard": ("tensorboard",),
}


class MissingExtraError(ModuleNotFoundError, ValueError):
    """An optional dependency is not installed. A ``ModuleNotFoundError`` (so ``except
    ImportError`` catches it) and a ``ValueError`` (so the command line prints it as one line
    ``mallocgym: error: ...`` with exit status 2)."""


def install_hint(extra: str) -> str:
    return f"pip install 'mallocgym[{extra}]'"


def require(module: str, extra: str, what: str | None = None) -> ModuleType:
    """Import ``module``; if it is missing, raise :class:`MissingExtraError` naming ``extra``."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        needs = f"{what} needs" if what else "this needs"
        err = MissingExtraError(f"{needs} the [{extra}] extra: {install_hint(extra)} ({exc})")
        err.name = module
        raise err from None


def require_extra(extra: str, what: str | None = None) -> None:
    """Import every module of ``extra`` (:data:`EXTRAS`); the first missing one raises
    :class:`MissingExtraError`."""
    for module in EXTRAS[extra]:
        require(module, extra, what)
