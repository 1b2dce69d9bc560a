"""Small synthetic programs: a seeded MLP training step (the built-in default scenarios)."""

from __future__ import annotations

import numpy as np

from .builder import ProgramBuilder
from .core import Workload

__all__ = ["mlp_training_step"]


def mlp_training_step(seed: int, *, layers: int = 6, dtype_bytes: int = 2) -> Workload:
    """Forward, backward and SGD update of an MLP with seeded widths and batch size.

    Each layer is a matmul (compute-heavy when wide) followed by an elementwise activation
    (memory-bound); the backward pass re-reads forward activations, so buffers live long and
    fast memory is contended.
    """
    rng = np.random.default_rng(seed)
    batch = int(rng.choice([16, 32, 64, 128]))
    widths = [int(w) for w in rng.choice([128, 256, 512, 1024, 2048], size=layers + 1)]
    p = ProgramBuilder(f"mlp-train-s{seed}")
    x = [p.buffer("x0", batch * widths[0] * dtype_bytes, parameter=True)]
    weights, pre = [], []
    for l in range(layers):
        din, dout = widths[l], widths[l + 1]
        w = p.buffer(f"w{l}", din * dout * dtype_bytes, parameter=True)
        y = p.buffer(f"y{l}", batch * dout * dtype_bytes)
        p.op(f"fwd{l}.matmul", flops=2 * batch * din * dout, reads=[x[l], w], writes=[y])
        out = p.buffer(f"x{l + 1}", batch * dout * dtype_bytes)
        p.op(f"fwd{l}.relu", flops=batch * dout, reads=[y], writes=[out])
        weights.append(w)
        pre.append(y)
        x.append(out)
    grad = p.buffer("dloss", batch * widths[-1] * dtype_bytes)
    p.op("loss", flops=3 * batch * widths[-1], transcendentals=batch * widths[-1], reads=[x[-1]], writes=[grad])
    for l in reversed(range(layers)):
        din, dout = widths[l], widths[l + 1]
        gy = p.buffer(f"dy{l}", batch * dout * dtype_bytes)
        p.op(f"bwd{l}.relu", flops=batch * dout, reads=[grad, pre[l]], writes=[gy])
        gw = p.buffer(f"dw{l}", din * dout * dtype_bytes)
        p.op(f"bwd{l}.dw", flops=2 * batch * din * dout, reads=[x[l], gy], writes=[gw])
        if l > 0:
            gx = p.buffer(f"dx{l}", batch * din * dtype_bytes)
            p.op(f"bwd{l}.dx", flops=2 * batch * din * dout, reads=[gy, weights[l]], writes=[gx])
            grad = gx
        new_w = p.buffer(f"w{l}.new", din * dout * dtype_bytes, output=True)
        p.op(f"sgd{l}", flops=2 * din * dout, reads=[weights[l], gw], writes=[new_w])
    return p.build()
