"""Pricing: what a mapping costs, one module per game, and MSA's runtime cost model.

- :mod:`mallocgym.pricing.v0`: :func:`~mallocgym.pricing.v0.evaluate`, the single source of
  truth for a MallocGame-v0 mapping's time (offsets per buffer, roofline cost model).
- :mod:`mallocgym.pricing.v1`: :func:`~mallocgym.pricing.v1.evaluate_v1`, the MallocGame-v1
  mapping checker (the mapping file format, validation, price).
- :mod:`mallocgym.pricing.runtime`: XLA MSA's ``RuntimeSimulator`` as numba kernels, the
  runtime cost model v1's rules (:mod:`mallocgym.sim.v1`) and :mod:`.v1` price with.

``mallocgym.evaluate`` and ``mallocgym.evaluate_v1`` are these functions. This ``__init__``
imports nothing, so the kernels in :mod:`.runtime` load without the checkers above them.
"""
