"""Workload files: mallocgym JSON, compressed NPZ, and MiniMalloc CSV.

The formats are documented in ``docs/file_format.md``. Every reader raises one ``ValueError``
that names the file, and where it can the line, buffer and field; every writer writes to a
temporary file and renames it, so a failed save leaves nothing half-written.
"""

from __future__ import annotations

import csv
import io
import json
import os
import re
import zipfile
from pathlib import Path

import numpy as np

from .._files import atomic_write
from .._validate import (MAX_BYTES, check_header, check_keys, clip, field_int, field_list, field_numbers,
                         field_str, parse_json, read_json, check_regular_file)
from .core import Workload


def one_line(exc) -> str:
    return " ".join(str(exc).split())[:500]

__all__ = ["load", "save", "load_json", "save_json", "load_npz", "save_npz", "load_minimalloc"]

FORMAT = "mallocgym-workload"
VERSION = 1


def load(path: str | os.PathLike) -> Workload:
    """Read a workload by its extension: ``.json``, ``.npz`` or MiniMalloc ``.csv``."""
    path = Path(path)
    suffix = path.suffix.lower()
    readers = {".json": load_json, ".npz": load_npz, ".csv": load_minimalloc}
    if suffix not in readers:
        raise ValueError(f"{path}: unknown workload file type {suffix!r} (expected .json, .npz or .csv)")
    check_regular_file(path, what="workload file")
    return readers[suffix](path)


def save(workload: Workload, path: str | os.PathLike) -> Path:
    """Write a workload as ``.json`` or ``.npz`` (by extension), atomically."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".json":
        save_json(workload, path)
    elif suffix == ".npz":
        save_npz(workload, path)
    else:
        raise ValueError(f"{path}: can only save .json or .npz workloads, not {suffix!r}")
    return path


def _wrap(path: Path, build):
    """Run ``build()``; prefix a ValueError from validation with the file name. The reader
    boundary: a ``TypeError``, ``OverflowError`` or ``RecursionError`` that bad content raises
    further down becomes a ``ValueError`` too."""
    try:
        return build()
    except (TypeError, OverflowError, RecursionError) as exc:
        raise ValueError(f"{path}: {one_line(exc)}") from None
    except ValueError as exc:
        message = str(exc)
        if message.startswith(str(path)):
            raise
        raise ValueError(f"{path}: {message}") from None


# ---------------------------------------------------------------------------------------- JSON
def workload_to_dict(workload: Workload) -> dict:
    """The JSON document of a workload (see docs/file_format.md)."""
    buffers = []
    for b in range(workload.num_buffers):
        entry = {"size": int(workload.size[b]), "start": int(workload.start[b]), "end": int(workload.end[b])}
        if workload.buffer_names:
            entry = {"name": workload.buffer_names[b], **entry}
        entry["accesses"] = [[op, n, "w" if w else "r"] for op, n, w in workload.accesses(b)]
        buffers.append(entry)
    doc = {"format": FORMAT, "version": VERSION, "name": workload.name, "flops": workload.flops.tolist()}
    if np.any(workload.transcendentals):
        doc["transcendentals"] = workload.transcendentals.tolist()
    if workload.op_names:
        doc["op_names"] = list(workload.op_names)
    if workload.default_capacity is not None:
        doc["default_capacity"] = workload.default_capacity
    if workload.outputs is not None:
        doc["outputs"] = list(workload.outputs)
    doc["buffers"] = buffers
    return doc


_TOP_KEYS = ("format", "version", "name", "flops", "transcendentals", "op_names", "default_capacity", "outputs",
             "buffers")
_BUFFER_KEYS = ("name", "size", "start", "end", "accesses")


def workload_from_dict(doc: dict, where: str = "workload") -> Workload:
    """Inverse of :func:`workload_to_dict`, with errors naming ``where`` and the field.

    Strict (docs/file_format.md, "Strict reading"): unknown fields, a wrong JSON type and an
    integer outside its bounds are each one ``ValueError``."""
    check_header(doc, where, FORMAT, VERSION)
    check_keys(doc, _TOP_KEYS, where)
    for key in ("name", "flops", "buffers"):
        if key not in doc:
            raise ValueError(f"{where}: missing field {key!r}")
    name = field_str(doc["name"], where, "name")
    flops = field_numbers(doc["flops"], where, "flops")
    trans = field_numbers(doc["transcendentals"], where, "transcendentals") if "transcendentals" in doc else None
    op_names = tuple(field_str(v, f"{where}: op {i}", "op_names")
                     for i, v in enumerate(field_list(doc.get("op_names", []), where, "op_names", "strings")))
    capacity = (field_int(doc["default_capacity"], where, "default_capacity", low=1, high=MAX_BYTES)
                if "default_capacity" in doc else None)
    outputs = None
    if "outputs" in doc:
        outputs = [field_int(v, f"{where}: outputs[{i}]", "outputs", low=0, high=MAX_BYTES)
                   for i, v in enumerate(field_list(doc["outputs"], where, "outputs", "buffer indices"))]
    buffers = field_list(doc["buffers"], where, "buffers", "objects")
    names, size, start, end, accesses = [], [], [], [], []
    for b, entry in enumerate(buffers):
        here = f"{where}: buffer {b}"
        if not isinstance(entry, dict):
            raise ValueError(f"{here}: expected an object, got {clip(entry)}")
        check_keys(entry, _BUFFER_KEYS, here)
        for key in ("size", "start", "end"):
            if key not in entry:
                raise ValueError(f"{here}: missing field {key!r}")
        size.append(field_int(entry["size"], here, "size", low=1, high=MAX_BYTES))
        start.append(field_int(entry["start"], here, "start", low=0, high=MAX_BYTES))
        end.append(field_int(entry["end"], here, "end", low=0, high=MAX_BYTES))
        names.append(field_str(entry["name"], here, "name") if "name" in entry else str(b))
        if "accesses" not in entry:
            accesses.append([(start[-1], size[-1], True), (end[-1], size[-1], False)])
            continue
        parsed = []
        for i, acc in enumerate(field_list(entry["accesses"], here, "accesses", "[op, bytes, \"r\"|\"w\"]")):
            at = f"{here}: access {i}"
            if not isinstance(acc, list) or len(acc) != 3 or acc[2] not in ("r", "w") or type(acc[2]) is not str:
                raise ValueError(f"{at}: field 'accesses' = {clip(acc)} must be [op, bytes, \"r\"|\"w\"]")
            parsed.append((field_int(acc[0], at, "op", low=0, high=MAX_BYTES),
                           field_int(acc[1], at, "bytes", low=0, high=MAX_BYTES), acc[2] == "w"))
        accesses.append(parsed)
    has_names = any("name" in e for e in buffers)
    try:
        return Workload.from_buffers(
            name, flops, size, start, end, accesses,
            transcendentals=trans,
            buffer_names=tuple(names) if has_names else (),
            op_names=op_names,
            default_capacity=capacity,
            outputs=outputs,
        )
    except (TypeError, OverflowError, RecursionError) as exc:  # the reader boundary: bad input is a ValueError
        raise ValueError(f"{where}: {one_line(exc)}") from None


def save_json(workload: Workload, path: str | os.PathLike) -> None:
    with atomic_write(path, "w") as handle:
        json.dump(workload_to_dict(workload), handle, separators=(",", ":"))
        handle.write("\n")


def load_json(path: str | os.PathLike) -> Workload:
    path = Path(path)
    doc = read_json(path, what="workload file")
    return _wrap(path, lambda: workload_from_dict(doc, str(path)))


# ----------------------------------------------------------------------------------------- NPZ
_NPZ_ARRAYS = ("flops", "transcendentals", "size", "start", "end", "access_ptr", "access_op",
               "access_bytes", "access_write")


def save_npz(workload: Workload, path: str | os.PathLike) -> None:
    """Compressed NumPy arrays plus a JSON ``meta`` entry; reproducible: the same workload always
    gives the same bytes (fixed zip timestamps and order)."""
    meta = {
        "format": FORMAT, "version": VERSION, "name": workload.name,
        "buffer_names": list(workload.buffer_names), "op_names": list(workload.op_names),
        "default_capacity": workload.default_capacity,
    }
    if workload.outputs is not None:
        meta["outputs"] = list(workload.outputs)
    arrays = {"meta": np.array(json.dumps(meta))}
    arrays.update({key: getattr(workload, key) for key in _NPZ_ARRAYS})
    with atomic_write(path, "wb") as handle:
        with zipfile.ZipFile(handle, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for key, array in arrays.items():
                buffer = io.BytesIO()
                np.lib.format.write_array(buffer, np.require(array, requirements="C"), allow_pickle=False)
                info = zipfile.ZipInfo(f"{key}.npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(info, buffer.getvalue(), compresslevel=9)


def load_npz(path: str | os.PathLike) -> Workload:
    path = Path(path)
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path}: not a mallocgym NPZ file (not a zip archive of .npy arrays)")
    try:
        with np.load(path, allow_pickle=False) as data:
            missing = [k for k in ("meta",) + _NPZ_ARRAYS if k not in data.files]
            if missing:
                raise ValueError(f"{path}: missing array {missing[0]!r}")
            meta = parse_json(str(data["meta"]), f"{path}: array 'meta'")
            arrays = {key: data[key] for key in _NPZ_ARRAYS}
    except ValueError as exc:
        if str(exc).startswith(str(path)):
            raise
        if "allow_pickle" in str(exc):  # an object array: say what is wrong, not how to unpickle it
            raise ValueError(f"{path}: not a mallocgym NPZ file (it holds Python objects, not plain arrays)") from None
        raise ValueError(f"{path}: not a readable mallocgym NPZ file ({exc})") from None
    except Exception as exc:  # zipfile.BadZipFile, OSError, EOFError, json errors ...
        raise ValueError(f"{path}: not a readable mallocgym NPZ file ({type(exc).__name__}: {exc})") from None
    where = f"{path}: array 'meta'"
    check_header(meta, where, FORMAT, VERSION)
    check_keys(meta, _META_KEYS, where)
    if "name" not in meta:
        raise ValueError(f"{where}: missing field 'name'")
    name = field_str(meta["name"], where, "name")
    strings = {key: tuple(field_str(v, f"{where}: {key}[{i}]", key)
                          for i, v in enumerate(field_list(meta.get(key, []), where, key, "strings")))
               for key in ("buffer_names", "op_names")}
    capacity = meta.get("default_capacity")  # the writer stores null for none
    if capacity is not None:
        capacity = field_int(capacity, where, "default_capacity", low=1, high=MAX_BYTES)
    outputs = None
    if "outputs" in meta:
        outputs = [field_int(v, f"{where}: outputs[{i}]", "outputs", low=0, high=MAX_BYTES)
                   for i, v in enumerate(field_list(meta["outputs"], where, "outputs", "buffer indices"))]
    return _wrap(path, lambda: Workload(name, default_capacity=capacity, outputs=outputs, **strings, **arrays))


_META_KEYS = ("format", "version", "name", "buffer_names", "op_names", "default_capacity", "outputs")


# ------------------------------------------------------------------------------ MiniMalloc CSV
_CAPACITY_IN_NAME = re.compile(r"\.(\d+)\.csv$", re.IGNORECASE)
MINIMALLOC_COLUMNS = ("id", "lower", "upper", "size")
_CSV_INT = re.compile(r"[-+]?[0-9]+")


def read_minimalloc_rows(path: str | os.PathLike) -> tuple[list[dict], bool]:
    """Parse a MiniMalloc CSV into rows ``{id, lower, upper, size[, offset]}`` (ints but ``id``).

    Returns the rows and whether the file has an ``offset`` column (a solution).
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from None
    reader = csv.reader(text.splitlines())
    try:
        header = [h.strip() for h in next(reader)]
    except StopIteration:
        raise ValueError(f"{path}: empty file (expected header {','.join(MINIMALLOC_COLUMNS)})") from None
    for column in MINIMALLOC_COLUMNS:
        if column not in header:
            raise ValueError(f"{path}: line 1: missing column {column!r} (header is {','.join(header)!r})")
    has_offset = "offset" in header
    index = {name: header.index(name) for name in MINIMALLOC_COLUMNS + (("offset",) if has_offset else ())}
    rows, seen = [], set()
    for line_no, fields in enumerate(reader, start=2):
        if not fields or all(not f.strip() for f in fields):
            continue
        if len(fields) != len(header):
            raise ValueError(f"{path}: line {line_no}: {len(fields)} fields, header has {len(header)}")
        row = {"id": fields[index["id"]].strip()}
        for name, col in index.items():
            if name == "id":
                continue
            raw = fields[col].strip()
            if not _CSV_INT.fullmatch(raw):  # int() would also take '1_000' and ' ١٢ '
                raise ValueError(f"{path}: line {line_no}: field {name!r} = {clip(raw)} is not an integer")
            row[name] = int(raw) if len(raw) <= 30 else MAX_BYTES + 1  # no 4300-digit conversions
            if abs(row[name]) > MAX_BYTES:
                raise ValueError(f"{path}: line {line_no}: field {name!r} = {raw if len(raw) <= 30 else clip(raw)} must be at most {MAX_BYTES} "
                                 "in magnitude")
        if row["id"] in seen:
            raise ValueError(f"{path}: line {line_no}: field 'id' = {row['id']!r} is repeated")
        seen.add(row["id"])
        if row["lower"] < 0:
            raise ValueError(f"{path}: line {line_no}: field 'lower' = {row['lower']} must be >= 0")
        if row["upper"] <= row["lower"]:
            raise ValueError(f"{path}: line {line_no}: field 'upper' = {row['upper']} must be > lower = {row['lower']}")
        if row["size"] <= 0:
            raise ValueError(f"{path}: line {line_no}: field 'size' = {row['size']} must be > 0")
        if has_offset and row["offset"] < -1:
            raise ValueError(f"{path}: line {line_no}: field 'offset' = {row['offset']} must be >= -1")
        rows.append(row)
    if not rows:
        raise ValueError(f"{path}: no buffers")
    return rows, has_offset


def load_minimalloc(path: str | os.PathLike) -> Workload:
    """Read a MiniMalloc CSV (``id,lower,upper,size``, live over ``[lower, upper)``).

    MiniMalloc has no ops or flops: each buffer gets a write of ``size`` bytes at ``lower`` and a
    read of ``size`` bytes at ``upper - 1``, and every op has zero flops, so the time saved by
    placing a buffer is proportional to its bytes. Time is compressed to the distinct access
    points (which keeps every overlap and, with ``op_overhead = 0``, every time). A capacity in
    the file name (``A.1048576.csv``) becomes the workload's ``default_capacity``.
    """
    path = Path(path)
    rows, _ = read_minimalloc_rows(path)
    lower = np.array([r["lower"] for r in rows], dtype=np.int64)
    last = np.array([r["upper"] - 1 for r in rows], dtype=np.int64)
    events = np.unique(np.concatenate([lower, last]))
    start = np.searchsorted(events, lower)
    end = np.searchsorted(events, last)
    size = np.array([r["size"] for r in rows], dtype=np.int64)
    match = _CAPACITY_IN_NAME.search(path.name)
    name = path.name[: match.start()] if match else path.stem
    return _wrap(path, lambda: Workload.with_default_accesses(
        name, np.zeros(len(events)), size, start, end,
        buffer_names=tuple(r["id"] for r in rows),
        op_names=tuple(str(int(e)) for e in events),
        default_capacity=int(match.group(1)) if match else None,
    ))
