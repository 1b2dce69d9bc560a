"""One validation path for user-given numbers: types and bounds checked up front.

Every route into a workload (JSON, NPZ, CSV, XLA import, ``Workload(...)``, the generator), every
hardware profile, env argument and CLI argument goes through these checks, so that a bad value
is one ``ValueError`` (``TypeError`` for a wrong type) naming the field, never a wrong answer
later.

Bounds: any one size, capacity, offset or access is at most :data:`MAX_BYTES` (2**48 bytes,
256 TiB) and the bytes a workload moves or holds sum to at most :data:`MAX_TOTAL_BYTES` (2**60),
so no sum the simulator forms in ``int64`` can overflow (``int64`` holds 2**63 - 1).
"""

from __future__ import annotations

import math
import numbers

import numpy as np

__all__ = ["MAX_BYTES", "MAX_TOTAL_BYTES", "check_int", "check_number", "check_int_array",
           "parse_bytes"]

MAX_BYTES = 2**48
MAX_TOTAL_BYTES = 2**60


def _is_int(value) -> bool:
    return isinstance(value, (numbers.Integral, np.integer)) and not isinstance(value, (bool, np.bool_))


def check_int(value, name: str, *, low: int | None = None, high: int | None = None) -> int:
    """``value`` as a Python ``int``, or one clear error naming ``name``.

    A bool, float or string is a ``TypeError`` (``capacity=True`` is not 1 byte, ``2.5``
    candidates is not 2); a value outside ``[low, high]`` is a ``ValueError``.
    """
    if not _is_int(value):
        raise TypeError(f"{name} must be an integer, got {type(value).__name__} {value!r}")
    value = int(value)
    if low is not None and value < low:
        raise ValueError(f"{name} = {value} must be >= {low}")
    if high is not None and value > high:
        raise ValueError(f"{name} = {value} must be <= {high}")
    return value


def check_number(value, name: str, *, positive: bool = False) -> float:
    """A finite real number (not a bool), ``> 0`` with ``positive``, else ``>= 0``."""
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
        raise TypeError(f"{name} must be a number, got {type(value).__name__} {value!r}")
    value = float(value)
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise ValueError(f"{name} = {value!r} must be a finite number {'> 0' if positive else '>= 0'}")
    return value


def check_int_array(values, name: str, label=None) -> np.ndarray:
    """A 1-D ``int64`` copy of ``values``: every entry an integer in ``[-MAX_BYTES, MAX_BYTES]``.

    Floats are accepted only when whole (an NPZ stores what it stores; ``262144.7`` or NaN is an
    error, not ``262144`` or ``-2**63``); bools and objects are not. ``label(i)`` names entry
    ``i`` in the error (default ``"entry i"``).
    """
    label = label or (lambda i: f"entry {i}")
    arr = np.asarray(values)
    if arr.dtype.kind == "b":
        raise TypeError(f"field '{name}' must hold integers, got booleans")
    if arr.dtype.kind == "f":
        bad = np.flatnonzero(~np.isfinite(arr) | (arr != np.round(arr)) | (np.abs(arr) > MAX_BYTES))
        if bad.size:
            i = int(bad[0])
            raise ValueError(f"{label(i)}: field '{name}' = {arr.flat[i].item()!r} is not an integer of at most "
                             f"{MAX_BYTES} in magnitude")
        return arr.astype(np.int64)
    if arr.dtype.kind == "O":
        out = np.empty(arr.shape, dtype=np.int64)
        for i, v in enumerate(arr.flat):
            out.flat[i] = check_int(v, f"{label(i)}: field '{name}'", low=-MAX_BYTES, high=MAX_BYTES)
        return out
    if arr.dtype.kind not in "iu":
        raise TypeError(f"field '{name}' must hold integers, got dtype {arr.dtype}")
    if arr.dtype.kind == "u" and arr.size and int(arr.max()) > MAX_BYTES:
        i = int(np.argmax(arr))
        raise ValueError(f"{label(i)}: field '{name}' = {int(arr.flat[i])} must be <= {MAX_BYTES}")
    out = arr.astype(np.int64)
    bad = np.flatnonzero(np.abs(out) > MAX_BYTES)
    if bad.size:
        i = int(bad[0])
        raise ValueError(f"{label(i)}: field '{name}' = {int(out.flat[i])} must be at most {MAX_BYTES} in magnitude")
    return out


def parse_bytes(text: str) -> int:
    """A CLI byte count: a whole number in ``[1, MAX_BYTES]`` (for ``argparse``'s ``type=``)."""
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number of bytes") from None
    if not 1 <= value <= MAX_BYTES:
        raise ValueError(f"{value} bytes is outside [1, {MAX_BYTES}]")
    return value
