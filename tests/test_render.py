"""The env's rgb_array memory map (a NumPy raster): the current buffer is marked on top."""

from __future__ import annotations

import numpy as np

from mallocgym import Workload
from mallocgym.render import CURRENT, HIGHLIGHT, buffer_colour, memory_map


def _wide():
    # buffer 0 lives over every op and fills the memory; buffer 1 (undecided) lives over ops 4-5 of 10
    return Workload.from_buffers("wide", flops=[0.0] * 10, size=[1000, 100], start=[0, 4], end=[9, 5])


def test_current_buffer_is_drawn_on_top_of_placed_buffers():
    w = _wide()
    width, height, margin = 208, 120, 4
    image = memory_map(w, [0, -1], 1000, width=width, height=height, highlight=1, margin=margin)
    x0 = margin
    sx = (width - 2 * margin) / w.num_ops
    left, right = x0 + int(4 * sx), x0 + int(6 * sx)
    mid_row = height // 2
    # brackets just outside the window, over buffer 0 (which covers the whole memory)
    assert np.all(image[margin:height - margin, left - 2:left] == CURRENT)
    assert np.all(image[margin:height - margin, right:right + 2] == CURRENT)
    # inside the window buffer 0 still shows; the shading under it does not
    assert np.all(image[mid_row, left + 1:right - 1] == buffer_colour(0))
    assert not np.any(np.all(image == HIGHLIGHT, axis=-1))
    # bars in the margins above and below the window
    assert np.all(image[margin - 2, left:right] == CURRENT) and np.all(image[height - margin + 1, left:right] == CURRENT)
    # elsewhere nothing is marked
    assert not np.any(np.all(image[:, :left - 2] == CURRENT, axis=-1))
    assert not np.any(np.all(image[:, right + 2:] == CURRENT, axis=-1))


def test_no_current_buffer_no_mark_and_free_window_is_shaded():
    w = _wide()
    plain = memory_map(w, [0, -1], 1000, width=208, height=120, margin=4)
    assert not np.any(np.all(plain == CURRENT, axis=-1))
    empty = memory_map(w, [-1, -1], 1000, width=208, height=120, highlight=1, margin=4)
    assert np.any(np.all(empty == HIGHLIGHT, axis=-1)) and np.any(np.all(empty == CURRENT, axis=-1))
