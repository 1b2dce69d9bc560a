"""Workloads: the :class:`Workload` dataclass, its file formats and the bundled scenarios."""

from .core import ACCESS_READ, ACCESS_WRITE, Workload
from .io import load, load_json, load_minimalloc, load_npz, save, save_json, save_npz

__all__ = ["Workload", "load", "save", "load_json", "save_json", "load_npz", "save_npz",
           "load_minimalloc", "ACCESS_READ", "ACCESS_WRITE"]
