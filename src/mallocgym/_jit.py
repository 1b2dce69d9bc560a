"""Say so, once, before the numba kernels are compiled for the first time.

The kernels are ``@njit(cache=True)``: the first run compiles them (about 15 s) and writes
numba's cache (``__pycache__/*.nbi``/``*.nbc`` next to the sources, or under
``NUMBA_CACHE_DIR``); later runs load them in well under a second. :func:`announce_compile`
prints one line on stderr when the kernels are about to be compiled::

    mallocgym: compiling numba kernels (first run only, ~15 s)...

It reads the cache's index files the way numba does (numba's version and the source's hash must
match); it never compiles anything itself.

numba compiles a kernel once per argument type, and a read-only array is another type than a
writable one: :func:`frozen_record` gives the simulators' fixed records (``sim.Static``,
``sim.v1.Static1``, classes marked :func:`read_only_record`) read-only arrays however they were
built, pickled or copied, so each kernel
that reads one is compiled once, not once per mix of writable and read-only fields.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Iterable, TextIO

import numpy as np

__all__ = ["MESSAGE", "announce_compile", "frozen_record", "needs_compile", "read_only_record"]

MESSAGE = "mallocgym: compiling numba kernels (first run only, ~15 s)..."

_announced = False


def _compiled_in_process(kernel) -> bool:
    return bool(getattr(kernel, "signatures", None))


def _is_cached(kernel, cache_dir: str | Path | None = None) -> bool:
    """Whether numba's cache holds a fresh index with at least one entry for ``kernel``
    (looked for in ``cache_dir`` instead of numba's own cache directory when given)."""
    try:
        from numba.core.caching import IndexDataCacheFile

        cache_file = kernel._cache._cache_file  # numba's IndexDataCacheFile for this kernel
        path = str(cache_dir) if cache_dir is not None else cache_file._cache_path
        base = cache_file._index_name[: -len(".nbi")]
        return bool(IndexDataCacheFile(path, base, cache_file._source_stamp)._load_index())
    except Exception:  # another numba layout: any index file of the kernel's module counts
        code = getattr(getattr(kernel, "py_func", None), "__code__", None)
        if code is None:
            return True  # not a numba kernel: nothing to compile
        py_file = Path(code.co_filename)
        folder = Path(cache_dir) if cache_dir is not None else py_file.parent / "__pycache__"
        return any(folder.glob(f"{py_file.stem}.*.nbi"))


def needs_compile(kernels: Iterable, cache_dir: str | Path | None = None) -> bool:
    """Whether calling ``kernels`` (the env's: :func:`mallocgym.env.v0.env_kernels`) will compile
    one of them: not yet compiled in this process and not in numba's cache (or in ``cache_dir``)."""
    kernels = tuple(kernels)
    return any(not _compiled_in_process(k) and not _is_cached(k, cache_dir) for k in kernels)


def announce_compile(kernels: Iterable, *, cache_dir: str | Path | None = None,
                     stream: TextIO | None = None) -> bool:
    """Print :data:`MESSAGE` on stderr (or ``stream``) if the kernels are about to be compiled.
    Checks once per process (the kernels stay compiled once they are); returns whether it
    printed."""
    global _announced
    if _announced:
        return False
    _announced = True
    if not needs_compile(kernels, cache_dir):
        return False
    print(MESSAGE, file=stream if stream is not None else sys.stderr, flush=True)
    return True


def _read_only(value):
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()   # the caller's array stays writable
        value.setflags(write=False)
    return value


def _rebuild(cls, fields):
    return frozen_record(cls(*fields))


def _reduce_frozen(record):
    return _rebuild, (type(record), tuple(record))


def read_only_record(cls):
    """The namedtuple class ``cls``, whose records come back from ``pickle`` and
    ``copy.deepcopy`` (whose arrays are writable) through :func:`frozen_record`, so that worker
    processes and copies call the kernels with the same types."""
    cls.__reduce__ = _reduce_frozen
    return cls


def frozen_record(record):
    """``record`` (a namedtuple of arrays) with read-only views of its writable arrays."""
    return type(record)(*(_read_only(v) for v in record))
