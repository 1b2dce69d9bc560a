"""Memory-map rasters: time on x, address on y, one colour per buffer; and a PNG writer.

No plotting library is needed: pictures are NumPy ``uint8[H, W, 3]`` arrays (the env's
``render_mode="rgb_array"`` frames, fast enough to draw every step) and :func:`write_png`
encodes them with ``zlib``. The pictures people read, with axes, units, a title and a legend
(``mallocgym solve --png``, ``show --png``, ``plot``), are drawn by :mod:`mallocgym.plot` with
matplotlib.
"""

from __future__ import annotations

import colorsys
import struct
import zlib
from pathlib import Path

import numpy as np

from ._files import atomic_write
from .workloads import Workload

__all__ = ["memory_map", "memory_map_v1", "write_png", "ascii_map", "buffer_colour"]

BACKGROUND = (250, 250, 250)
FAST_MEMORY = (226, 232, 240)
HIGHLIGHT = (255, 214, 102)  # the current buffer's live window, under the placed buffers
CURRENT = (230, 120, 0)  # its brackets, on top of them
OUTLINE = (40, 40, 40)


def buffer_colour(b: int) -> tuple[int, int, int]:
    """A stable, well-spread colour for buffer ``b`` (golden-ratio hues)."""
    hue = (b * 0.6180339887498949) % 1.0
    r, g, bl = colorsys.hsv_to_rgb(hue, 0.55, 0.85)
    return int(r * 255), int(g * 255), int(bl * 255)


class _Canvas:
    """A memory-map canvas: ``n_ops`` on x, ``capacity`` bytes on y (address 0 at the bottom)."""

    def __init__(self, n_ops: int, capacity: int, width: int, height: int, margin: int):
        self.image = np.empty((height, width, 3), dtype=np.uint8)
        self.image[:] = BACKGROUND
        self.x0, self.x1 = margin, width - margin
        self.y0, self.y1 = margin, height - margin
        self.image[self.y0:self.y1, self.x0:self.x1] = FAST_MEMORY
        self.sx = (self.x1 - self.x0) / n_ops
        self.sy = (self.y1 - self.y0) / capacity

    def xs(self, t0, t1) -> tuple[int, int]:
        a = self.x0 + int(np.floor(t0 * self.sx))
        return a, self.x0 + max(int(np.ceil(t1 * self.sx)), int(np.floor(t0 * self.sx)) + 1)

    def ys(self, off, size) -> tuple[int, int]:
        top = self.y1 - int(np.floor(off * self.sy))
        return self.y1 - max(int(np.ceil((off + size) * self.sy)), int(np.floor(off * self.sy)) + 1), top

    def shade(self, t0, t1, colour) -> None:
        a, b = self.xs(t0, t1)
        self.image[self.y0:self.y1, a:b] = colour

    def rect(self, t0, t1, off, size, colour, *, outline: bool = True, hatched: bool = False) -> None:
        """Ops ``[t0, t1)`` x bytes ``[off, off + size)``; ``hatched``: diagonal stripes (a copy)."""
        a, c = self.xs(t0, t1)
        bottom, top = self.ys(off, size)
        self.image[bottom:top, a:c] = colour
        if hatched and c > a and top > bottom:
            yy, xx = np.mgrid[bottom:top, a:c]
            light = tuple(int(v + (255 - v) * 0.6) for v in colour)
            self.image[bottom:top, a:c][(xx + yy) % 6 < 3] = light
        if outline and c - a > 2 and top - bottom > 2:
            self.image[bottom, a:c] = OUTLINE
            self.image[top - 1, a:c] = OUTLINE
            self.image[bottom:top, a] = OUTLINE
            self.image[bottom:top, c - 1] = OUTLINE

    def bracket(self, t0, t1, colour, thickness: int = 2) -> None:
        """Mark ops ``[t0, t1)`` on top of what is drawn: a bar ``thickness`` pixels wide just
        outside each side of the window, over the whole address range, and a bar over the window
        in the margins above and below the memory (drawn after :meth:`frame`)."""
        a, b = self.xs(t0, t1)
        height, width, _ = self.image.shape
        lo, hi = max(self.y0 - 1, 0), min(self.y1 + 1, height)
        self.image[lo:hi, max(a - thickness, 0):a] = colour
        self.image[lo:hi, b:min(b + thickness, width)] = colour
        band = max(min(thickness * 2, self.y0 - 1), 0)
        self.image[self.y0 - 1 - band:self.y0 - 1, max(a - thickness, 0):min(b + thickness, width)] = colour
        self.image[self.y1 + 1:self.y1 + 1 + band, max(a - thickness, 0):min(b + thickness, width)] = colour

    def frame(self) -> np.ndarray:
        x0, x1, y0, y1 = self.x0, self.x1, self.y0, self.y1
        self.image[y0 - 1, x0 - 1:x1 + 1] = OUTLINE
        self.image[y1, x0 - 1:x1 + 1] = OUTLINE
        self.image[y0 - 1:y1 + 1, x0 - 1] = OUTLINE
        self.image[y0 - 1:y1 + 1, x1] = OUTLINE
        return self.image


def memory_map(workload: Workload, offsets, capacity: int, *, width: int = 640, height: int = 320,
               highlight: int | None = None, margin: int = 8) -> np.ndarray:
    """Draw a mapping: each fast buffer is a rectangle over its live ops (x) and its bytes (y,
    address 0 at the bottom). ``highlight`` marks that buffer's live window (the buffer being
    decided): shaded where no placed buffer is, and on top of the placed buffers two brackets
    (:meth:`_Canvas.bracket`) just outside the window and bars in the margins above and below it.
    Returns ``uint8[height, width, 3]``; a fast NumPy raster (the env's ``rgb_array`` frame)."""
    offsets = np.asarray(offsets, dtype=np.int64)
    canvas = _Canvas(workload.num_ops, capacity, width, height, margin)
    current = highlight is not None and 0 <= highlight < workload.num_buffers
    if current:
        canvas.shade(workload.start[highlight], workload.end[highlight] + 1, HIGHLIGHT)
    for b in np.flatnonzero(offsets >= 0):
        canvas.rect(workload.start[b], workload.end[b] + 1, offsets[b], workload.size[b], buffer_colour(int(b)))
    image = canvas.frame()
    if current:
        canvas.bracket(workload.start[highlight], workload.end[highlight] + 1, CURRENT)
    return image


def memory_map_v1(workload: Workload, chunks: list[dict], capacity: int, *, width: int = 640, height: int = 320,
                  margin: int = 8) -> np.ndarray:
    """Draw a MallocGame-v1 mapping from its chunks (:func:`mallocgym.pricing.v1.chunks_v1`):
    each chunk a rectangle in its buffer's colour; the part of a prefetched chunk before its use
    (the copy in flight) and the part a produced chunk is held only for its eviction are hatched."""
    canvas = _Canvas(workload.num_ops, capacity, width, height, margin)
    for c in chunks:
        colour = buffer_colour(c["buffer"])
        lo, hi, off, size = c["first_op"], c["last_op"] + 1, c["offset"], c["size"]
        canvas.rect(lo, hi, off, size, colour)
        if c["prefetched"]:
            canvas.rect(lo, c["first_use"], off, size, colour, hatched=True, outline=False)
        if c["evict_from"] is not None:
            canvas.rect(c["evict_from"], hi, off, size, colour, hatched=True, outline=False)
    return canvas.frame()


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
