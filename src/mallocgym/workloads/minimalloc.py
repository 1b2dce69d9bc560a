"""MiniMalloc solutions: write a workload (and a mapping) as MiniMalloc CSV, read a mapping back.

MiniMalloc (Moffitt, ASPLOS 2023, github.com/google/minimalloc) reads ``id,lower,upper,size``
(one buffer per row, live over ``[lower, upper)``) and writes the same rows with an ``offset``
column. :func:`mallocgym.workloads.io.load_minimalloc` compresses time to the distinct access
points but keeps the original times as the op names, and the CSV ids as the buffer names, so a
mapping found here is written back with the file's own ids and times, ready for MiniMalloc's
tools, and a MiniMalloc solution can be read and checked with :func:`mallocgym.evaluate`.

Offset ``-1`` means "not placed" (slow memory); MiniMalloc itself always places every buffer.
"""

from __future__ import annotations

import csv
import io as _io
import os
from pathlib import Path

import numpy as np

from .._files import atomic_write
from .core import Workload
from .io import read_minimalloc_rows

__all__ = ["write_minimalloc", "read_minimalloc_solution", "minimalloc_rows"]


def _times(workload: Workload) -> np.ndarray:
    """The time of each op: the op names when they are strictly increasing integers (as
    ``load_minimalloc`` sets them), otherwise the op indices."""
    names = workload.op_names
    if names:
        try:
            times = np.array([int(n) for n in names], dtype=np.int64)
        except ValueError:
            times = None
        if times is not None and (times.shape[0] < 2 or np.all(np.diff(times) > 0)):
            return times
    return np.arange(workload.num_ops, dtype=np.int64)


def minimalloc_rows(workload: Workload) -> tuple[list[str], np.ndarray, np.ndarray]:
    """``(ids, lower, upper)`` of the buffers in MiniMalloc's terms: ids are the buffer names
    (or indices), ``[lower, upper)`` the live range in the original times (``upper`` is the
    last live time plus one)."""
    times = _times(workload)
    ids = list(workload.buffer_names) if workload.buffer_names else [str(b) for b in range(workload.num_buffers)]
    return ids, times[workload.start], times[workload.end] + 1


def write_minimalloc(path: str | os.PathLike, workload: Workload, offsets=None) -> Path:
    """Write ``workload`` as a MiniMalloc CSV ``id,lower,upper,size``, with an ``offset`` column
    when ``offsets`` (one per buffer, ``-1`` = not placed) is given. Atomic. Accesses and flops
    are not part of the format and are lost."""
    path = Path(path)
    ids, lower, upper = minimalloc_rows(workload)
    bad = [i for i in ids if any(c in i for c in ",\"\r\n")]
    if bad:
        raise ValueError(f"{path}: buffer id {bad[0]!r} cannot be written to a MiniMalloc CSV (it holds a comma, "
                         "quote or line break)")
    header = ["id", "lower", "upper", "size"]
    columns = [ids, lower.tolist(), upper.tolist(), workload.size.tolist()]
    if offsets is not None:
        raw = np.asarray(offsets)
        if raw.shape != (workload.num_buffers,):
            raise ValueError(f"{path}: offsets have shape {raw.shape}, expected ({workload.num_buffers},)")
        if raw.dtype.kind not in "iu" and not (raw.dtype.kind == "f" and np.all(raw == np.round(raw))):
            raise ValueError(f"{path}: offsets must be integers, got dtype {raw.dtype}")
        off = raw.astype(np.int64)
        low = np.flatnonzero(off < -1)
        if low.size:
            raise ValueError(f"{path}: {workload.buffer_label(int(low[0]))}: offset {off[low[0]]} must be >= -1")
        header.append("offset")
        columns.append(off.tolist())
    text = _io.StringIO()
    writer = csv.writer(text, lineterminator="\n")
    writer.writerow(header)
    writer.writerows(zip(*columns))
    with atomic_write(path, "w") as handle:
        handle.write(text.getvalue())
    return path


def _line_numbers(path: Path) -> list[int]:
    """The line of each data row, skipping blank rows as ``read_minimalloc_rows`` does."""
    lines = []
    for line_no, fields in enumerate(csv.reader(path.read_text(encoding="utf-8").splitlines()), start=1):
        if line_no > 1 and fields and any(f.strip() for f in fields):
            lines.append(line_no)
    return lines


def read_minimalloc_solution(path: str | os.PathLike, workload: Workload) -> np.ndarray:
    """The mapping (``int64[N]`` in the workload's buffer order, ``-1`` = not placed) in a
    MiniMalloc solution CSV ``id,lower,upper,size,offset`` for ``workload``.

    Every row must name a buffer of the workload with its ``lower``, ``upper`` and ``size``, and
    every buffer must have a row; otherwise one ``ValueError`` names the file, the line and the
    field. Whether the offsets fit the fast memory and do not overlap is
    :func:`mallocgym.evaluate`'s to check.
    """
    path = Path(path)
    rows, has_offset = read_minimalloc_rows(path)
    if not has_offset:
        raise ValueError(f"{path}: line 1: missing column 'offset' (a solution has id,lower,upper,size,offset)")
    lines = _line_numbers(path)
    ids, lower, upper = minimalloc_rows(workload)
    index = {name: b for b, name in enumerate(ids)}
    offsets = np.full(workload.num_buffers, -2, dtype=np.int64)
    for row, line in zip(rows, lines):
        where = f"{path}: line {line}"
        b = index.get(row["id"])
        if b is None:
            raise ValueError(f"{where}: field 'id' = {row['id']!r} is not a buffer of workload {workload.name!r}")
        expected = {"lower": int(lower[b]), "upper": int(upper[b]), "size": int(workload.size[b])}
        for key, value in expected.items():
            if row[key] != value:
                raise ValueError(f"{where}: field {key!r} = {row[key]} does not match buffer {row['id']!r} "
                                 f"of workload {workload.name!r} ({key} {value})")
        offsets[b] = row["offset"]
    missing = np.flatnonzero(offsets == -2)
    if missing.size:
        b = int(missing[0])
        raise ValueError(f"{path}: no row for buffer {ids[b]!r} of workload {workload.name!r} "
                         f"({missing.size} buffer(s) missing)")
    return offsets
