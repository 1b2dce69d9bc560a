"""Observation features: numba kernels that turn a simulator position into an observation.

- :mod:`mallocgym.features.v0`: MallocGame-v0's observation (buffer, candidate, next-buffer and
  progress features, scaled into ``[0, 1]``).
- :mod:`mallocgym.features.v1`: MallocGame-v1's observation and action table (``options``,
  ``observe``) and the kernels that play its forced positions.

Import the version's module (``from mallocgym.features import v0``); this ``__init__`` imports
nothing.
"""
