"""Memory-map pictures: time on x, address on y, one colour per buffer; and a PNG writer.

No plotting library is needed: pictures are NumPy ``uint8[H, W, 3]`` arrays and
:func:`write_png` encodes them with ``zlib``.
"""

from __future__ import annotations

import colorsys
import struct
import zlib
from pathlib import Path

import numpy as np

from ._files import atomic_write
from .workloads import Workload

__all__ = ["memory_map", "write_png", "ascii_map", "buffer_colour"]

BACKGROUND = (250, 250, 250)
FAST_MEMORY = (226, 232, 240)
HIGHLIGHT = (255, 214, 102)
OUTLINE = (40, 40, 40)


def buffer_colour(b: int) -> tuple[int, int, int]:
    """A stable, well-spread colour for buffer ``b`` (golden-ratio hues)."""
    hue = (b * 0.6180339887498949) % 1.0
    r, g, bl = colorsys.hsv_to_rgb(hue, 0.55, 0.85)
    return int(r * 255), int(g * 255), int(bl * 255)


def memory_map(workload: Workload, offsets, capacity: int, *, width: int = 640, height: int = 320,
               highlight: int | None = None, margin: int = 8) -> np.ndarray:
    """Draw a mapping: each fast buffer is a rectangle over its live ops (x) and its bytes (y,
    address 0 at the bottom). ``highlight`` shades that buffer's live window (the buffer being
    decided). Returns ``uint8[height, width, 3]``."""
    offsets = np.asarray(offsets, dtype=np.int64)
    image = np.empty((height, width, 3), dtype=np.uint8)
    image[:] = BACKGROUND
    x0, x1 = margin, width - margin
    y0, y1 = margin, height - margin
    image[y0:y1, x0:x1] = FAST_MEMORY
    n_ops = workload.num_ops
    sx = (x1 - x0) / n_ops
    sy = (y1 - y0) / capacity

    def xs(t0, t1):
        return x0 + int(np.floor(t0 * sx)), x0 + max(int(np.ceil(t1 * sx)), int(np.floor(t0 * sx)) + 1)

    if highlight is not None and 0 <= highlight < workload.num_buffers:
        a, b = xs(workload.start[highlight], workload.end[highlight] + 1)
        image[y0:y1, a:b] = HIGHLIGHT
    for b in np.flatnonzero(offsets >= 0):
        a, c = xs(workload.start[b], workload.end[b] + 1)
        top = y1 - int(np.floor(offsets[b] * sy))
        bottom = y1 - max(int(np.ceil((offsets[b] + workload.size[b]) * sy)), int(np.floor(offsets[b] * sy)) + 1)
        image[bottom:top, a:c] = buffer_colour(int(b))
        if c - a > 2 and top - bottom > 2:
            image[bottom, a:c] = OUTLINE
            image[top - 1, a:c] = OUTLINE
            image[bottom:top, a] = OUTLINE
            image[bottom:top, c - 1] = OUTLINE
    image[y0 - 1, x0 - 1:x1 + 1] = OUTLINE
    image[y1, x0 - 1:x1 + 1] = OUTLINE
    image[y0 - 1:y1 + 1, x0 - 1] = OUTLINE
    image[y0 - 1:y1 + 1, x1] = OUTLINE
    return image


def write_png(path, rgb: np.ndarray) -> Path:
    """Write ``uint8[H, W, 3]`` as a PNG file (atomically)."""
    rgb = np.ascontiguousarray(rgb, dtype=np.uint8)
    if rgb.ndim != 3 or rgb.shape[2] != 3:
        raise ValueError(f"expected an RGB image of shape [H, W, 3], got {rgb.shape}")
    height, width, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(height))

    def chunk(tag: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + tag + data + struct.pack(">I", zlib.crc32(tag + data) & 0xFFFFFFFF)

    png = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0))
           + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))
    path = Path(path)
    with atomic_write(path, "wb") as handle:
        handle.write(png)
    return path


_SHADES = " .:-=+*#%@"


def ascii_map(occupancy: np.ndarray) -> str:
    """Text picture of an occupancy image ``[address_bins, time_bins]`` in ``[0, 1]``, address 0
    at the bottom."""
    rows = []
    for a in reversed(range(occupancy.shape[0])):
        rows.append("|" + "".join(_SHADES[min(int(v * (len(_SHADES) - 1) + 0.5), len(_SHADES) - 1)]
                                  for v in occupancy[a]) + "|")
    return "\n".join(rows)
