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
MAX_CANDIDATES = 4096
"""Largest ``n_candidates`` (``K``) an env or an agent takes."""


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


# ------------------------------------------------------------------------------ strict readers
# What every file reader (workload JSON and NPZ meta, v1 mappings, run configs) shares: a file
# that is a regular, readable UTF-8 file; JSON with bounded nesting, no NaN/Infinity and no key
# given twice; objects with known keys only; integers of the exact type, bounded before they
# meet numpy. Each failure is one ``ValueError`` naming the file and the field.

MAX_DEPTH = 32
"""Deepest JSON nesting a reader accepts (the formats need at most 4)."""

MAX_FILE_BYTES = 2**31
"""Largest file a reader opens (2 GiB)."""

MAX_ECHO = 80
"""Characters of a user's value an error message echoes back."""


def clip(value, limit: int = MAX_ECHO) -> str:
    """``repr(value)``, cut to ``limit`` characters (with the full length) for an error message."""
    try:
        text = repr(value)
    except Exception:  # pragma: no cover - a repr that fails
        text = f"<{type(value).__name__}>"
    if len(text) <= limit:
        return text
    return f"{text[:limit]}... ({len(text)} characters)"


def nearest_hint(key, known) -> str:
    """``" (did you mean 'x'?)"`` for the known name nearest to ``key``, or ``""``."""
    import difflib

    if not isinstance(key, str):
        return ""
    names = [str(k) for k in known]
    match = difflib.get_close_matches(key[:200], names, n=1, cutoff=0.6)
    if not match and key:  # a known name cut short or run on ('done' for 'done_before')
        match = [n for n in names if n.startswith(key) or key.startswith(n)][:1]
    return f" (did you mean {match[0]!r}?)" if match else ""


def check_keys(obj: dict, known, where: str) -> None:
    """Refuse a key of ``obj`` outside ``known``: one error naming it and the nearest known key."""
    for key in obj:
        if key not in known:
            raise ValueError(f"{where}: unknown field {clip(key)}{nearest_hint(key, known)}; known fields: "
                             f"{', '.join(known)}")


def field_int(value, where: str, key: str, *, low: int = -MAX_BYTES, high: int = MAX_BYTES) -> int:
    """A field read from a file: a JSON integer (not a bool, not ``1.0``) in ``[low, high]``,
    else a ``ValueError`` naming ``key``."""
    if not (type(value) is int or isinstance(value, np.integer)):
        raise ValueError(f"{where}: field {key!r} = {clip(value)} is not an integer")
    value = int(value)
    if value < low:
        raise ValueError(f"{where}: field {key!r} = {clip(value)} must be >= {low}")
    if value > high:
        raise ValueError(f"{where}: field {key!r} = {clip(value)} must be <= {high}")
    return value


def field_str(value, where: str, key: str) -> str:
    """A field read from a file that must be a string."""
    if not isinstance(value, str):
        raise ValueError(f"{where}: field {key!r} = {clip(value)} is not a string")
    return value


def field_list(value, where: str, key: str, what: str = "values") -> list:
    """A field read from a file that must be a JSON list."""
    if not isinstance(value, list):
        raise ValueError(f"{where}: field {key!r} must be a list of {what}, got {clip(value)}")
    return value


def field_numbers(value, where: str, key: str, label: str = "op") -> list[float]:
    """A list of finite JSON numbers (ints or floats, not bools) as floats."""
    out = []
    for i, v in enumerate(field_list(value, where, key, "numbers")):
        if type(v) not in (int, float):
            raise ValueError(f"{where}: {label} {i}: field {key!r} = {clip(v)} is not a number")
        try:
            f = float(v)
        except OverflowError:
            f = math.inf
        if not math.isfinite(f):
            raise ValueError(f"{where}: {label} {i}: field {key!r} = {clip(v)} is not a finite number")
        out.append(f)
    return out


def check_header(doc, where: str, fmt: str, version: int = 1) -> None:
    """``doc`` is an object whose ``format`` is exactly ``fmt`` and ``version`` the integer ``version``."""
    if not isinstance(doc, dict):
        raise ValueError(f"{where}: expected a JSON object at the top level, got {type(doc).__name__}")
    if doc.get("format") != fmt or type(doc.get("format")) is not str:
        raise ValueError(f"{where}: field 'format' must be {fmt!r}, got {clip(doc.get('format'))}")
    if type(doc.get("version")) is not int or doc["version"] != version:
        raise ValueError(f"{where}: unsupported version {clip(doc.get('version'))}: field 'version' must be the "
                         f"integer {version} (this mallocgym reads {version})")


def check_regular_file(path, *, what: str = "file"):
    """``os.stat(path)`` of a regular file, or one ``ValueError`` saying what ``path`` is instead
    (missing, a folder, a FIFO or device, a symlink loop, unreadable, too large)."""
    import errno
    import os
    import stat

    try:
        info = os.stat(path)
    except FileNotFoundError:
        raise ValueError(f"{path}: no such file") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise ValueError(f"{path}: a symbolic link loop, not a {what}") from None
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    if stat.S_ISDIR(info.st_mode):
        raise ValueError(f"{path}: is a folder, not a {what}")
    if not stat.S_ISREG(info.st_mode):
        kind = "a FIFO" if stat.S_ISFIFO(info.st_mode) else "a socket" if stat.S_ISSOCK(info.st_mode) else "a device"
        raise ValueError(f"{path}: is {kind}, not a regular {what}")
    if info.st_size > MAX_FILE_BYTES:
        raise ValueError(f"{path}: {info.st_size} bytes is larger than a {what} may be ({MAX_FILE_BYTES})")
    return info


def read_file(path, *, what: str = "file") -> bytes:
    """The bytes of a regular file (:func:`check_regular_file`), or one ``ValueError``."""
    check_regular_file(path, what=what)
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror or exc})") from None


_JSON_STRING = None


def json_depth(text: str) -> int:
    """The deepest nesting of ``[`` and ``{`` in JSON ``text`` (brackets inside strings ignored)."""
    import re

    global _JSON_STRING
    if _JSON_STRING is None:
        _JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"', re.DOTALL)
    bare = _JSON_STRING.sub('""', text)
    codes = np.frombuffer(bare.encode("utf-8", "replace"), dtype=np.uint8)
    if not codes.size:
        return 0
    step = ((codes == ord("[")) | (codes == ord("{"))).astype(np.int64) - \
        ((codes == ord("]")) | (codes == ord("}"))).astype(np.int64)
    return int(np.cumsum(step).max(initial=0))


def _no_constant(name: str):
    raise ValueError(f"{name} is not a JSON number")


def _unique_pairs(pairs):
    out = {}
    for key, value in pairs:
        if key in out:
            raise ValueError(f"field {clip(key)} is given twice in one object")
        out[key] = value
    return out


def parse_json(text, where: str):
    """Parse JSON strictly: nesting at most :data:`MAX_DEPTH`, no NaN/Infinity, no key twice in
    one object, integers of at most 4300 digits; one ``ValueError`` naming ``where``."""
    import json

    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    depth = json_depth(text)
    if depth > MAX_DEPTH:
        raise ValueError(f"{where}: JSON nested {depth} deep; a mallocgym file nests at most {MAX_DEPTH} deep")
    try:
        return json.loads(text, parse_constant=_no_constant, object_pairs_hook=_unique_pairs)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{where}:{exc.lineno}:{exc.colno}: invalid JSON: {exc.msg}") from None
    except (ValueError, RecursionError, OverflowError, TypeError) as exc:
        raise ValueError(f"{where}: invalid JSON: {exc}") from None


def read_json(path, *, what: str = "file"):
    """:func:`read_file` then :func:`parse_json`."""
    return parse_json(read_file(path, what=what), str(path))
