"""A seeded generator of program-like workloads, and planted-optimum packing instances.

``generate(preset("medium"), seed)`` writes, op by op, the schedule an ML compiler would emit for
one step of a randomly drawn network: a transformer (attention and MLP blocks), a ResNet-like CNN
(convolutions, batch norms, residual adds) or a residual MLP, and, opt-in (``families``), a U-Net
(encoder-decoder with skip connections) or a stacked LSTM (weights shared over time steps). A
training step runs the forward pass, the loss, the backward pass (reverse-mode, with gradient
accumulation where a tensor feeds two ops) and an optimizer update (SGD, momentum or Adam); an
inference step runs the forward pass only. Buffers are weights, optimizer state, activations, gradients, statistics and scalars, so
sizes spread over orders of magnitude; big matmuls and convolutions are compute-bound under the
default hardware while elementwise ops, norms and updates are memory-bound.

``planted_workload(seed)`` builds a MiniMalloc-style packing instance together with a mapping
that places every buffer (so it is optimal), packed so that fast memory is full at every op.

This module makes workloads only. The scenario layer turns them into scenarios:
``mallocgym.scenarios.WorkloadGenerator(preset("small"))`` is a callable
``(numpy.random.Generator) -> Scenario`` that ``gym.make("MallocGame-v0", workload=...)``
accepts (a fresh instance every episode), and ``mallocgym.scenarios.planted(seed)`` returns the
planted instance as ``(scenario, offsets)``.

    python -m mallocgym.workloads.generator --stats     # docs/generator.md's table
"""

from __future__ import annotations

import argparse
import operator
import sys
from dataclasses import dataclass, replace
from typing import Callable, Iterator

import numpy as np

from ..hardware import profile, program_time
from .builder import ProgramBuilder
from .core import Workload

__all__ = ["GeneratorConfig", "preset", "PRESETS", "FAMILIES", "DEFAULT_FAMILIES", "OPTIMIZERS", "generate",
           "parse_families", "planted_workload", "workload_stats"]

FAMILIES = ("transformer", "cnn", "mlp", "unet", "rnn")
# the presets' and GeneratorConfig's default: the first three families, so that every seed still
# gives the workload it gave before U-Nets and RNNs were added (published runs stay reproducible)
DEFAULT_FAMILIES = ("transformer", "cnn", "mlp")
OPTIMIZERS = ("sgd", "momentum", "adam")
_MAX_BLOCKS = 4096


def _nice(lo: int, hi: int) -> list[int]:
    """Powers of two and 1.5x powers of two in ``[lo, hi]``: the sizes people pick."""
    out = set()
    for k in range(0, 40):
        for v in (1 << k, 3 << k):
            if lo <= v <= hi:
                out.add(v)
    return sorted(out)


def _pow2(lo: int, hi: int) -> list[int]:
    return [1 << k for k in range(0, 40) if lo <= (1 << k) <= hi]


@dataclass(frozen=True)
class GeneratorConfig:
    """What :func:`generate` draws from. Ranges are inclusive ``(low, high)`` pairs.

    Attributes:
      name: prefix of the workload names, ``NAME-FAMILY-MODE-sSEED`` (``gen-small-cnn-train-adam-s3``,
        ``gen-small-mlp-infer-s5``).
      buffers: target number of buffers; the network gets as many blocks as fit the target
        drawn uniformly from this range (one block is the minimum).
      families: network families to draw from: ``"transformer"``, ``"cnn"``, ``"mlp"``,
        ``"unet"``, ``"rnn"`` (default: the first three, as before the last two were added).
      training: probability of a training step (forward, backward, update); otherwise an
        inference step (forward only).
      optimizers: update rules to draw from for training steps: ``"sgd"`` (no state),
        ``"momentum"`` (one fp32 state per weight), ``"adam"`` (two).
      width: model width (transformer ``d_model``, MLP width, 8x the CNN's first channels);
        drawn from the powers of two and 1.5x powers of two in range.
      tokens: activation rows of transformers and MLPs (batch x sequence), a power of two.
      seq_len: transformer sequence length (attention scores are ``seq x seq`` per head).
      image_size: CNN input resolution (at least 8 is used); image_batch: CNN images per step
        (a power of two).
      dtype_bytes: bytes per element of weights and activations (2 = bf16); statistics and
        optimizer state are fp32.
    """

    name: str = "gen"
    buffers: tuple[int, int] = (300, 800)
    families: tuple[str, ...] = DEFAULT_FAMILIES
    training: float = 0.75
    optimizers: tuple[str, ...] = OPTIMIZERS
    width: tuple[int, int] = (512, 2048)
    tokens: tuple[int, int] = (1024, 8192)
    seq_len: tuple[int, int] = (128, 1024)
    image_size: tuple[int, int] = (32, 128)
    image_batch: tuple[int, int] = (8, 64)
    dtype_bytes: int = 2

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or any(c.isspace() for c in self.name):
            raise ValueError(f"GeneratorConfig.name must be a non-empty word, got {self.name!r}")
        for key, allowed in (("families", FAMILIES), ("optimizers", OPTIMIZERS)):
            value = getattr(self, key)
            if isinstance(value, str):
                value = (value,)
            value = tuple(value)
            if not value or len(set(value)) != len(value) or any(v not in allowed for v in value):
                raise ValueError(f"GeneratorConfig.{key} must be distinct names from {allowed}, got {value!r}")
            object.__setattr__(self, key, value)
        for key, values in (("buffers", None), ("width", _nice), ("tokens", _pow2), ("seq_len", _pow2),
                            ("image_size", _nice), ("image_batch", _pow2)):
            pair = getattr(self, key)
            try:
                lo, hi = (int(v) for v in pair)
                ok = lo == pair[0] and hi == pair[1] and 1 <= lo <= hi
            except (TypeError, ValueError):
                ok = False
            if not ok:
                raise ValueError(f"GeneratorConfig.{key} must be a pair of integers 1 <= low <= high, got {pair!r}")
            if values is not None and not values(lo, hi):
                raise ValueError(f"GeneratorConfig.{key} = {pair!r} holds no allowed value "
                                 f"({'a power of two' if values is _pow2 else 'a power of two or 1.5x one'})")
            object.__setattr__(self, key, (lo, hi))
        if not (isinstance(self.training, (int, float)) and 0.0 <= self.training <= 1.0):
            raise ValueError(f"GeneratorConfig.training must be a probability in [0, 1], got {self.training!r}")
        if self.dtype_bytes not in (1, 2, 4):
            raise ValueError(f"GeneratorConfig.dtype_bytes must be 1, 2 or 4, got {self.dtype_bytes!r}")


PRESETS: dict[str, GeneratorConfig] = {
    "small": GeneratorConfig(name="gen-small", buffers=(50, 150), width=(512, 1024), tokens=(1024, 4096),
                             seq_len=(128, 512), image_size=(32, 64), image_batch=(8, 32)),
    "medium": GeneratorConfig(name="gen-medium", buffers=(300, 800)),
    "large": GeneratorConfig(name="gen-large", buffers=(2000, 5000)),
}


def parse_families(text: str) -> tuple[str, ...]:
    """``"unet, rnn"`` -> ``("unet", "rnn")``, checked as :class:`GeneratorConfig` checks
    ``families`` (one ``ValueError`` for an unknown, repeated or empty name); a blank text gives
    ``()``: keep the preset's families."""
    if not text.strip():
        return ()
    names = tuple(f.strip() for f in text.split(","))
    GeneratorConfig(families=names)
    return names


def preset(name: str) -> GeneratorConfig:
    """The ``"small"`` (~50-150 buffers), ``"medium"`` (~300-800) or ``"large"`` (~2,000-5,000)
    configuration."""
    try:
        return PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown generator preset {name!r}; known: {', '.join(PRESETS)}") from None


# ------------------------------------------------------------------------------ program emission
@dataclass(frozen=True)
class _T:
    """A tensor: one buffer of ``elems`` elements; ``grad``: gradients flow back to it."""

    buf: int
    elems: int
    name: str
    grad: bool


class _Program:
    """Emits forward ops now and records closures that emit their backward ops later.

    ``block`` is the network block being emitted (-1: stem and head); every buffer is counted
    against the block that made it (backward and update ops against their forward op's block),
    so the buffer count of any prefix of the blocks is known from one emission. A ``dry``
    program only counts.
    """

    def __init__(self, name: str, *, dtype: int, training: bool, optimizer: str, eager_update: bool,
                 dry: bool = False):
        self.p = ProgramBuilder(name)
        self.dtype = dtype
        self.training = training
        self.optimizer = optimizer
        self.eager_update = eager_update
        self.dry = dry
        self._dry_ids = 0
        self.block = -1
        self.counts: dict[int, int] = {}
        self.tape: list[tuple[int, Callable[[], None]]] = []
        self.params: list[_T] = []
        self.param_block: dict[int, int] = {}
        self.grads: dict[int, _T] = {}
        self.updated: set[int] = set()
        self.uses: dict[int, int] = {}  # forward ops reading each weight
        self.contributions: dict[int, int] = {}  # gradient contributions each weight has had
        self.in_backward = False

    # -- buffers
    def tensor(self, name: str, elems: int, *, grad: bool | None = None, bytes_per: int | None = None,
               parameter: bool = False, output: bool = False) -> _T:
        elems = max(int(elems), 1)
        self.counts[self.block] = self.counts.get(self.block, 0) + 1
        if self.dry:
            buf, self._dry_ids = self._dry_ids, self._dry_ids + 1
        else:
            nbytes = elems * (self.dtype if bytes_per is None else bytes_per)
            buf = self.p.buffer(name, nbytes, parameter=parameter, output=output)
        return _T(buf, elems, name, self.training if grad is None else grad)

    def weight(self, name: str, elems: int) -> _T:
        t = self.tensor(name, elems, parameter=True)
        if self.training:
            self.params.append(t)
            self.param_block[t.buf] = self.block
        return t

    def data(self, name: str, elems: int, bytes_per: int | None = None) -> _T:
        return self.tensor(name, elems, grad=False, bytes_per=bytes_per, parameter=True)

    def op(self, name: str, reads, writes, flops: float, trans: float = 0.0) -> None:
        if not self.in_backward:
            for t in reads:
                if t.buf in self.param_block:
                    self.uses[t.buf] = self.uses.get(t.buf, 0) + 1
        if self.dry:
            return
        self.p.op(name, flops=float(flops), transcendentals=float(trans),
                  reads=[t.buf for t in reads], writes=[t.buf for t in writes])

    # -- reverse mode
    def backward(self, fn: Callable[[], None]) -> None:
        if self.training:
            self.tape.append((self.block, fn))

    def g(self, t: _T) -> _T | None:
        return self.grads.get(t.buf)

    def gtensor(self, t: _T) -> _T:
        """A fresh buffer for a gradient contribution to ``t``."""
        return self.tensor(f"d.{t.name}", t.elems, grad=False)

    def acc(self, t: _T, g: _T) -> None:
        """Add gradient contribution ``g`` to ``t`` (an add op if one is there already)."""
        old = self.grads.get(t.buf)
        if old is not None:
            total = self.tensor(f"d.{t.name}.sum", t.elems, grad=False)
            self.op(f"d.{t.name}.accumulate", [old, g], [total], t.elems)
            g = total
        self.grads[t.buf] = g
        if self.eager_update and t.buf in self.param_block:
            self.contributions[t.buf] = self.contributions.get(t.buf, 0) + 1
            if self.contributions[t.buf] >= self.uses.get(t.buf, 1):
                self.update(t)  # one contribution per forward use: the gradient is complete

    def update(self, w: _T) -> None:
        """The optimizer step of weight ``w`` (its gradient is complete)."""
        if w.buf in self.updated or w.buf not in self.grads:
            return
        self.updated.add(w.buf)
        saved, self.block = self.block, self.param_block[w.buf]
        g, n = self.grads[w.buf], w.elems
        new = self.tensor(f"{w.name}.new", n, grad=False, output=True)
        if self.optimizer == "sgd":
            self.op(f"sgd.{w.name}", [w, g], [new], 2 * n)
        elif self.optimizer == "momentum":
            m = self.tensor(f"{w.name}.m", n, grad=False, bytes_per=4, parameter=True)
            m_new = self.tensor(f"{w.name}.m.new", n, grad=False, bytes_per=4, output=True)
            self.op(f"momentum.{w.name}", [w, g, m], [new, m_new], 4 * n)
        else:
            m = self.tensor(f"{w.name}.m", n, grad=False, bytes_per=4, parameter=True)
            v = self.tensor(f"{w.name}.v", n, grad=False, bytes_per=4, parameter=True)
            m_new = self.tensor(f"{w.name}.m.new", n, grad=False, bytes_per=4, output=True)
            v_new = self.tensor(f"{w.name}.v.new", n, grad=False, bytes_per=4, output=True)
            self.op(f"adam.{w.name}", [w, g, m, v], [new, m_new, v_new], 12 * n, n)
        self.block = saved

    def finish(self) -> None:
        """Run the backward pass and the remaining updates."""
        self.in_backward = True
        for block, fn in reversed(self.tape):
            self.block = block
            fn()
        self.block = -1
        for w in self.params:
            self.update(w)

    def output(self, t: _T) -> None:
        if not self.dry:
            self.p.mark_output(t.buf)

    # -- layers (forward ops now, backward ops recorded)
    def matmul(self, name: str, x: _T, rows: int, k: int, n: int, *, bias: bool) -> _T:
        w = self.weight(f"{name}.w", k * n)
        b = self.weight(f"{name}.b", n) if bias else None
        y = self.tensor(f"{name}.y", rows * n)
        self.op(f"{name}.dot", [x, w] + ([b] if b else []), [y], 2.0 * rows * k * n)

        def bwd():
            dy = self.g(y)
            if dy is None:
                return
            dw = self.gtensor(w)
            self.op(f"{name}.dot.dw", [x, dy], [dw], 2.0 * rows * k * n)
            self.acc(w, dw)
            if b is not None:
                db = self.gtensor(b)
                self.op(f"{name}.db", [dy], [db], rows * n)
                self.acc(b, db)
            if x.grad:
                dx = self.gtensor(x)
                self.op(f"{name}.dot.dx", [dy, w], [dx], 2.0 * rows * k * n)
                self.acc(x, dx)

        self.backward(bwd)
        return y

    def conv(self, name: str, x: _T, batch: int, res: int, cin: int, cout: int, ksize: int,
             stride: int, *, out_res: int | None = None) -> tuple[_T, int]:
        """A ``ksize x ksize`` convolution; ``out_res`` larger than ``res`` makes it a transposed
        (upsampling) convolution, which costs ``ksize^2`` multiply-adds per input pixel."""
        out_res = max(1, res // stride) if out_res is None else out_res
        kernel = self.weight(f"{name}.kernel", ksize * ksize * cin * cout)
        y = self.tensor(f"{name}.y", batch * out_res * out_res * cout)
        pixels = min(res, out_res) ** 2
        flops = 2.0 * batch * pixels * ksize * ksize * cin * cout
        self.op(f"{name}.conv", [x, kernel], [y], flops)

        def bwd():
            dy = self.g(y)
            if dy is None:
                return
            dk = self.gtensor(kernel)
            self.op(f"{name}.conv.dkernel", [x, dy], [dk], flops)
            self.acc(kernel, dk)
            if x.grad:
                dx = self.gtensor(x)
                self.op(f"{name}.conv.dx", [dy, kernel], [dx], flops)
                self.acc(x, dx)

        self.backward(bwd)
        return y, out_res

    def unary(self, name: str, x: _T, *, flops: float, trans: float = 0.0) -> _T:
        y = self.tensor(f"{name}.y", x.elems)
        self.op(name, [x], [y], flops * x.elems, trans * x.elems)

        def bwd():
            dy = self.g(y)
            if dy is not None and x.grad:
                dx = self.gtensor(x)
                self.op(f"{name}.grad", [dy, x], [dx], (flops + 1) * x.elems, trans * x.elems)
                self.acc(x, dx)

        self.backward(bwd)
        return y

    def pool(self, name: str, x: _T, elems: int, *, y_name: str | None = None, saves_input: bool = True) -> _T:
        """A pooling reduction of ``x`` to ``elems`` elements; its gradient reads ``x`` as well
        (the max's position) when ``saves_input``, else only the output's gradient (a mean)."""
        y = self.tensor(y_name or f"{name}.y", elems)
        self.op(name, [x], [y], x.elems)

        def bwd():
            dy = self.g(y)
            if dy is not None and x.grad:
                dx = self.gtensor(x)
                self.op(f"{name}.grad", [dy, x] if saves_input else [dy], [dx], x.elems)
                self.acc(x, dx)

        self.backward(bwd)
        return y

    def concat(self, name: str, parts: list[_T]) -> _T:
        """Concatenation (along channels); the gradient op splits the output's gradient."""
        y = self.tensor(f"{name}.y", sum(t.elems for t in parts))
        self.op(name, parts, [y], 0.0)

        def bwd():
            dy = self.g(y)
            if dy is None:
                return
            grads = [(t, self.gtensor(t)) for t in parts if t.grad]
            if grads:
                self.op(f"{name}.grad", [dy], [g for _, g in grads], 0.0)
                for t, g in grads:
                    self.acc(t, g)

        self.backward(bwd)
        return y

    def add(self, name: str, a: _T, b: _T) -> _T:
        y = self.tensor(f"{name}.y", a.elems)
        self.op(name, [a, b], [y], a.elems)

        def bwd():
            dy = self.g(y)
            if dy is not None:
                for t in (a, b):
                    if t.grad:
                        self.acc(t, dy)

        self.backward(bwd)
        return y

    def norm(self, name: str, x: _T, rows: int, cols: int, *, batch: bool = False) -> _T:
        """Layer norm over ``cols`` (statistics per row) or, with ``batch``, batch norm over
        ``rows`` (statistics per channel); fp32 mean and reciprocal std are saved."""
        gamma, beta = self.weight(f"{name}.gamma", cols), self.weight(f"{name}.beta", cols)
        y = self.tensor(f"{name}.y", x.elems)
        groups = cols if batch else rows
        stats = self.tensor(f"{name}.stats", 2 * groups, grad=False, bytes_per=4)
        self.op(name, [x, gamma, beta], [y, stats], 8 * x.elems, groups)

        def bwd():
            dy = self.g(y)
            if dy is None:
                return
            dg, db = self.gtensor(gamma), self.gtensor(beta)
            dx = [self.gtensor(x)] if x.grad else []
            self.op(f"{name}.grad", [dy, x, stats, gamma], dx + [dg, db], 12 * x.elems)
            self.acc(gamma, dg)
            self.acc(beta, db)
            if dx:
                self.acc(x, dx[0])

        self.backward(bwd)
        return y

    def softmax_xent(self, name: str, logits: _T, rows: int) -> None:
        """Softmax cross-entropy against integer labels: a scalar loss (the backward's root)."""
        labels = self.data(f"{name}.labels", rows, bytes_per=4)
        loss = self.tensor(f"{name}.loss", 1, grad=False, bytes_per=4, output=True)
        self.op(name, [logits, labels], [loss], 5 * logits.elems, logits.elems)

        def bwd():
            dlogits = self.gtensor(logits)
            self.op(f"{name}.grad", [logits, labels], [dlogits], 4 * logits.elems, logits.elems)
            self.acc(logits, dlogits)

        self.backward(bwd)


# --------------------------------------------------------------------------------- the families
def _choice(rng: np.random.Generator, values):
    return values[int(rng.integers(len(values)))]


class _Family:
    """A network family: hyperparameters drawn once, then an unbounded stream of blocks."""

    def __init__(self, cfg: GeneratorConfig, rng: np.random.Generator):
        self.cfg = cfg

    def blocks(self, rng: np.random.Generator) -> Iterator[dict]:
        while True:
            yield {}

    def emit(self, prog: _Program, blocks: list[dict]) -> None:
        raise NotImplementedError


class _Transformer(_Family):
    def __init__(self, cfg, rng):
        super().__init__(cfg, rng)
        self.d = _choice(rng, _nice(*cfg.width))
        self.heads = max(1, self.d // (64 if self.d <= 1024 else 128))
        self.tokens = _choice(rng, _pow2(*cfg.tokens))
        self.seq = min(_choice(rng, _pow2(*cfg.seq_len)), self.tokens)
        self.vocab = _choice(rng, (8192, 16384, 32768))
        self.ffn = _choice(rng, (2, 4))
        self.parallel = bool(rng.random() < 0.25)  # GPT-J style: attention and MLP side by side

    def emit(self, prog, blocks):
        rows, d = self.tokens, self.d
        ids = prog.data("tokens", rows, bytes_per=4)
        table = prog.weight("embed.table", self.vocab * d)
        x = prog.tensor("embed.y", rows * d)
        prog.op("embed.gather", [ids, table], [x], 0.0)

        def embed_bwd():
            dx = prog.g(x)
            if dx is not None:
                dt = prog.gtensor(table)
                prog.op("embed.scatter_add", [dx, ids], [dt], rows * d)
                prog.acc(table, dt)

        prog.backward(embed_bwd)
        for i, _ in enumerate(blocks):
            prog.block = i
            x = self._block(prog, f"l{i}", x)
        prog.block = -1
        h = prog.norm("final.ln", x, rows, d)
        logits = prog.matmul("head", h, rows, d, self.vocab, bias=False)
        if prog.training:
            prog.softmax_xent("xent", logits, rows)
        else:
            prog.output(logits)

    def _attention(self, prog, name, h):
        rows, d, seq, heads = self.tokens, self.d, self.seq, self.heads
        w = prog.weight(f"{name}.qkv.w", d * 3 * d)
        q, k, v = (prog.tensor(f"{name}.{c}", rows * d) for c in "qkv")
        prog.op(f"{name}.qkv.dot", [h, w], [q, k, v], 2.0 * rows * d * 3 * d)

        def qkv_bwd():
            grads = [prog.g(t) for t in (q, k, v)]
            if any(gr is None for gr in grads):
                return
            dw = prog.gtensor(w)
            prog.op(f"{name}.qkv.dot.dw", [h] + grads, [dw], 2.0 * rows * d * 3 * d)
            prog.acc(w, dw)
            dh = prog.gtensor(h)
            prog.op(f"{name}.qkv.dot.dx", grads + [w], [dh], 2.0 * rows * d * 3 * d)
            prog.acc(h, dh)

        prog.backward(qkv_bwd)
        s = prog.tensor(f"{name}.scores", rows * seq * heads)
        prog.op(f"{name}.qk.dot", [q, k], [s], 2.0 * rows * seq * d)

        def qk_bwd():
            ds = prog.g(s)
            if ds is None:
                return
            dq, dk = prog.gtensor(q), prog.gtensor(k)
            prog.op(f"{name}.qk.dot.dq", [ds, k], [dq], 2.0 * rows * seq * d)
            prog.op(f"{name}.qk.dot.dk", [ds, q], [dk], 2.0 * rows * seq * d)
            prog.acc(q, dq)
            prog.acc(k, dk)

        prog.backward(qk_bwd)
        p = prog.unary(f"{name}.softmax", s, flops=5, trans=1)
        o = prog.tensor(f"{name}.pv", rows * d)
        prog.op(f"{name}.pv.dot", [p, v], [o], 2.0 * rows * seq * d)

        def pv_bwd():
            do = prog.g(o)
            if do is None:
                return
            dp, dv = prog.gtensor(p), prog.gtensor(v)
            prog.op(f"{name}.pv.dot.dp", [do, v], [dp], 2.0 * rows * seq * d)
            prog.op(f"{name}.pv.dot.dv", [p, do], [dv], 2.0 * rows * seq * d)
            prog.acc(p, dp)
            prog.acc(v, dv)

        prog.backward(pv_bwd)
        return prog.matmul(f"{name}.out", o, rows, d, d, bias=False)

    def _mlp(self, prog, name, h):
        rows, d = self.tokens, self.d
        u = prog.matmul(f"{name}.up", h, rows, d, self.ffn * d, bias=False)
        a = prog.unary(f"{name}.gelu", u, flops=8, trans=1)
        return prog.matmul(f"{name}.down", a, rows, self.ffn * d, d, bias=False)

    def _block(self, prog, name, x):
        rows, d = self.tokens, self.d
        if self.parallel:
            h = prog.norm(f"{name}.ln", x, rows, d)
            att = self._attention(prog, f"{name}.attn", h)
            mlp = self._mlp(prog, f"{name}.mlp", h)
            return prog.add(f"{name}.residual", x, prog.add(f"{name}.branches", att, mlp))
        h = prog.norm(f"{name}.ln1", x, rows, d)
        x = prog.add(f"{name}.residual1", x, self._attention(prog, f"{name}.attn", h))
        h = prog.norm(f"{name}.ln2", x, rows, d)
        return prog.add(f"{name}.residual2", x, self._mlp(prog, f"{name}.mlp", h))


class _CNN(_Family):
    def __init__(self, cfg, rng):
        super().__init__(cfg, rng)
        self.c0 = max(16, _choice(rng, _nice(*cfg.width)) // 8)
        self.res = max(8, _choice(rng, _nice(*cfg.image_size)))
        self.batch = _choice(rng, _pow2(*cfg.image_batch))
        self.classes = _choice(rng, (10, 100, 1000))
        self.bottleneck = bool(rng.random() < 0.5)

    def blocks(self, rng):
        stage = 0
        while True:
            count = int(rng.integers(1, 5)) if stage < 3 else _MAX_BLOCKS
            for j in range(count):
                yield {"stage": stage, "first": j == 0 and stage > 0}
            stage += 1

    def emit(self, prog, blocks):
        b = self.batch
        images = prog.data("images", b * self.res * self.res * 3)
        big = self.res > 64
        x, res = prog.conv("stem", images, b, self.res, 3, self.c0, 7 if big else 3, 2 if big else 1)
        x = prog.unary("stem.relu", prog.norm("stem.bn", x, b * res * res, self.c0, batch=True), flops=1)
        channels = self.c0
        for i, spec in enumerate(blocks):
            width = self.c0 << spec["stage"]
            cout = 4 * width if self.bottleneck else width
            stride = 2 if spec["first"] and res > 4 else 1
            prog.block = i
            x, res = self._block(prog, f"b{i}", x, res, channels, width, cout, stride)
            channels = cout
        prog.block = -1
        pooled = prog.pool("pool.mean", x, b * channels, y_name="pool.y", saves_input=False)
        logits = prog.matmul("fc", pooled, b, channels, self.classes, bias=True)
        if prog.training:
            prog.softmax_xent("xent", logits, b)
        else:
            prog.output(logits)

    def _conv_bn(self, prog, name, x, res, cin, cout, ksize, stride, relu=True):
        y, res = prog.conv(f"{name}", x, self.batch, res, cin, cout, ksize, stride)
        y = prog.norm(f"{name}.bn", y, self.batch * res * res, cout, batch=True)
        return (prog.unary(f"{name}.relu", y, flops=1) if relu else y), res

    def _block(self, prog, name, x, res, cin, width, cout, stride):
        if self.bottleneck:
            h, r = self._conv_bn(prog, f"{name}.conv1", x, res, cin, width, 1, 1)
            h, r = self._conv_bn(prog, f"{name}.conv2", h, r, width, width, 3, stride)
            h, r = self._conv_bn(prog, f"{name}.conv3", h, r, width, cout, 1, 1, relu=False)
        else:
            h, r = self._conv_bn(prog, f"{name}.conv1", x, res, cin, width, 3, stride)
            h, r = self._conv_bn(prog, f"{name}.conv2", h, r, width, cout, 3, 1, relu=False)
        skip = x
        if stride != 1 or cin != cout:
            skip, _ = self._conv_bn(prog, f"{name}.proj", x, res, cin, cout, 1, stride, relu=False)
        return prog.unary(f"{name}.relu", prog.add(f"{name}.residual", skip, h), flops=1), r


class _MLP(_Family):
    def __init__(self, cfg, rng):
        super().__init__(cfg, rng)
        self.d = _choice(rng, _nice(*cfg.width))
        self.rows = _choice(rng, _pow2(*cfg.tokens))
        self.features = _choice(rng, (256, 512, 1024))
        self.classes = _choice(rng, (10, 100, 1000))
        self.mult = _choice(rng, (2, 4))
        self.layer_norm = bool(rng.random() < 0.5)

    def emit(self, prog, blocks):
        rows, d = self.rows, self.d
        x = prog.data("inputs", rows * self.features)
        x = prog.unary("stem.relu", prog.matmul("stem", x, rows, self.features, d, bias=True), flops=1)
        for i, _ in enumerate(blocks):
            prog.block = i
            h = prog.norm(f"l{i}.ln", x, rows, d) if self.layer_norm else x
            u = prog.matmul(f"l{i}.up", h, rows, d, self.mult * d, bias=True)
            a = prog.unary(f"l{i}.gelu", u, flops=8, trans=1)
            x = prog.add(f"l{i}.residual", x, prog.matmul(f"l{i}.down", a, rows, self.mult * d, d, bias=True))
        prog.block = -1
        logits = prog.matmul("head", x, rows, d, self.classes, bias=True)
        if prog.training:
            prog.softmax_xent("xent", logits, rows)
        else:
            prog.output(logits)


class _UNet(_Family):
    """An encoder-decoder for segmentation. Each block is one level: on the way down, convolutions
    whose output is kept for the skip connection, then a 2x2 max-pool; on the way up, a 2x2
    transposed convolution, concatenation with that level's kept output, convolutions. Early
    levels' full-resolution activations stay live across the whole network."""

    def __init__(self, cfg, rng):
        super().__init__(cfg, rng)
        self.c0 = max(16, _choice(rng, _nice(*cfg.width)) // 16)
        self.res = max(16, _choice(rng, _nice(*cfg.image_size)))
        self.batch = max(1, _choice(rng, _pow2(*cfg.image_batch)) // 4)
        self.classes = _choice(rng, (2, 8, 32))
        self.convs = int(rng.integers(1, 3))  # convolutions per level and side
        self.batch_norm = bool(rng.random() < 0.5)  # the original U-Net has none

    def _convs(self, prog, name, x, res, cin, cout, convs=None):
        for j in range(self.convs if convs is None else convs):
            y, _ = prog.conv(f"{name}.conv{j}", x, self.batch, res, cin if j == 0 else cout, cout, 3, 1)
            if self.batch_norm:
                y = prog.norm(f"{name}.conv{j}.bn", y, self.batch * res * res, cout, batch=True)
            x = prog.unary(f"{name}.conv{j}.relu", y, flops=1)
        return x

    def emit(self, prog, blocks):
        b, res, ch = self.batch, self.res, self.c0
        images = prog.data("images", b * res * res * 3)
        x = self._convs(prog, "stem", images, res, 3, ch, convs=1)
        kept = []
        for i, _ in enumerate(blocks):
            prog.block = i
            kept.append((x, res, ch))
            res, cout = max(1, res // 2), min(2 * ch, 16 * self.c0)
            x = prog.pool(f"down{i}.maxpool", x, b * res * res * ch)
            x = self._convs(prog, f"down{i}", x, res, ch, cout)
            ch = cout
        for i in reversed(range(len(blocks))):
            prog.block = i
            skip, skip_res, skip_ch = kept[i]
            up, _ = prog.conv(f"up{i}.deconv", x, b, res, ch, skip_ch, 2, 1, out_res=skip_res)
            x = self._convs(prog, f"up{i}", prog.concat(f"up{i}.concat", [up, skip]), skip_res, 2 * skip_ch, skip_ch)
            res, ch = skip_res, skip_ch
        prog.block = -1
        logits, _ = prog.conv("head", x, b, res, ch, self.classes, 1, 1)
        if prog.training:
            prog.softmax_xent("xent", logits, b * res * res)
        else:
            prog.output(logits)


class _RNN(_Family):
    """A stacked LSTM over time steps (the blocks). Per step and layer, one matmul computes the
    four gates from the step's input and the previous hidden state, with weights shared by every
    step, and an elementwise op updates the cell and hidden states; a classifier reads the last
    hidden state. The backward pass runs through time and sums each weight's gradient over the
    steps, so weights and their gradients stay live across the whole step."""

    def __init__(self, cfg, rng):
        super().__init__(cfg, rng)
        self.hidden = max(128, _choice(rng, _nice(*cfg.width)) // 2)
        self.rows = max(8, _choice(rng, _pow2(*cfg.tokens)) // 16)  # sequences per batch
        self.features = _choice(rng, (128, 256, 512))
        self.layers = int(rng.integers(1, 4))
        self.classes = _choice(rng, (10, 100, 1000))

    def emit(self, prog, blocks):
        rows, h = self.rows, self.hidden
        params, state = [], []
        for layer in range(self.layers):
            fan_in = self.features if layer == 0 else h
            params.append((prog.weight(f"l{layer}.wx", fan_in * 4 * h), prog.weight(f"l{layer}.wh", h * 4 * h),
                           prog.weight(f"l{layer}.b", 4 * h), fan_in))
            state.append((prog.data(f"l{layer}.h0", rows * h), prog.data(f"l{layer}.c0", rows * h, bytes_per=4)))
        for t, _ in enumerate(blocks):
            prog.block = t
            x = prog.data(f"x{t}", rows * self.features)
            for layer in range(self.layers):
                state[layer] = self._cell(prog, f"t{t}.l{layer}", x, state[layer], params[layer])
                x = state[layer][0]
        prog.block = -1
        logits = prog.matmul("head", state[-1][0], rows, h, self.classes, bias=True)
        if prog.training:
            prog.softmax_xent("xent", logits, rows)
        else:
            prog.output(logits)

    def _cell(self, prog, name, x, hc, params):
        rows, h = self.rows, self.hidden
        (h_prev, c_prev), (wx, wh, b, fan_in) = hc, params
        flops = 2.0 * rows * (fan_in + h) * 4 * h
        gates = prog.tensor(f"{name}.gates", rows * 4 * h)
        prog.op(f"{name}.gates.dot", [x, h_prev, wx, wh, b], [gates], flops)
        c = prog.tensor(f"{name}.c", rows * h, bytes_per=4)
        h_new = prog.tensor(f"{name}.h", rows * h)
        prog.op(f"{name}.cell", [gates, c_prev], [c, h_new], 10 * rows * h, 5 * rows * h)

        def bwd():
            douts = [g for g in (prog.g(h_new), prog.g(c)) if g is not None]
            if not douts:
                return
            dgates = prog.tensor(f"d.{name}.gates", gates.elems, grad=False)
            dc_prev = [prog.gtensor(c_prev)] if c_prev.grad else []
            prog.op(f"{name}.cell.grad", douts + [gates, c_prev, c], [dgates] + dc_prev, 12 * rows * h, 5 * rows * h)
            dw = [prog.gtensor(w) for w in (wx, wh, b)]
            prog.op(f"{name}.gates.dot.dw", [dgates, x, h_prev], dw, flops)
            dins = [(t, prog.gtensor(t)) for t in (x, h_prev) if t.grad]
            if dins:
                prog.op(f"{name}.gates.dot.dx", [dgates, wx, wh], [g for _, g in dins], flops)
            for t, g in list(zip((wx, wh, b), dw)) + dins + list(zip([c_prev] * len(dc_prev), dc_prev)):
                prog.acc(t, g)

        prog.backward(bwd)
        return h_new, c


_FAMILY_CLASSES = {"transformer": _Transformer, "cnn": _CNN, "mlp": _MLP, "unet": _UNet, "rnn": _RNN}


# ------------------------------------------------------------------------------------ generate
class _Plan:
    """One draw of family, mode, optimizer and hyperparameters, with a lazy stream of blocks."""

    def __init__(self, config: GeneratorConfig, seed: int, rng: np.random.Generator):
        self.family_name = _choice(rng, config.families)
        self.training = bool(rng.random() < config.training)
        self.optimizer = _choice(rng, config.optimizers)
        self.eager_update = bool(rng.random() < 0.5)  # update each weight as soon as its gradient is done
        self.target = int(rng.integers(config.buffers[0], config.buffers[1] + 1))
        self.family = _FAMILY_CLASSES[self.family_name](config, rng)
        self.dtype = config.dtype_bytes
        mode = f"train-{self.optimizer}" if self.training else "infer"
        self.name = f"{config.name}-{self.family_name}-{mode}-s{seed}"
        self._stream = self.family.blocks(np.random.default_rng(int(rng.integers(2**63))))
        self._blocks: list[dict] = []

    def program(self, k: int, *, dry: bool = False) -> _Program:
        """The program with the first ``k`` blocks."""
        while len(self._blocks) < k:
            self._blocks.append(next(self._stream))
        prog = _Program(self.name, dtype=self.dtype, training=self.training, optimizer=self.optimizer,
                        eager_update=self.eager_update, dry=dry)
        self.family.emit(prog, self._blocks[:k])
        prog.finish()
        return prog

    def counts(self, k: int) -> np.ndarray:
        """``int[k]``: the buffer count of the program with the first ``j + 1`` blocks."""
        counts = self.program(k, dry=True).counts
        return counts.get(-1, 0) + np.cumsum([counts.get(i, 0) for i in range(k)])

    def blocks_for(self, buffers: tuple[int, int]) -> int:
        """The number of blocks whose buffer count is closest to the target, preferring counts
        inside ``buffers`` (at least one block). Doubles the blocks until the target is passed."""
        k = 1
        while (counts := self.counts(k))[-1] < self.target and k < _MAX_BLOCKS:
            k = min(2 * k, _MAX_BLOCKS)
        lo, hi = buffers
        return 1 + min(range(k), key=lambda j: (not lo <= counts[j] <= hi, abs(int(counts[j]) - self.target), j))


def _draw(config: GeneratorConfig, seed: int) -> _Plan:
    """The seed's plan; plans whose one-block program already has more buffers than
    ``config.buffers`` allows are drawn again from the same generator (up to 100 times)."""
    rng = np.random.default_rng(seed)
    for _ in range(100):
        plan = _Plan(config, seed, rng)
        if plan.counts(1)[0] <= config.buffers[1]:
            break
    return plan


def generate(config: GeneratorConfig | str = "medium", seed: int = 0) -> Workload:
    """A seeded program-like workload: the same ``(config, seed)`` gives the same workload, bit
    for bit. ``config`` is a :class:`GeneratorConfig` or a preset name."""
    if isinstance(config, str):
        config = preset(config)
    if not isinstance(config, GeneratorConfig):
        raise ValueError(f"config must be a GeneratorConfig or a preset name, got {type(config).__name__}")
    plan = _draw(config, _index(seed, "seed"))
    return plan.program(plan.blocks_for(config.buffers)).p.build()


def _index(value, what: str) -> int:
    try:
        value = operator.index(value)
    except TypeError:
        raise ValueError(f"{what} must be an integer, got {value!r}") from None
    if value < 0:
        raise ValueError(f"{what} must be >= 0, got {value}")
    return value


# ------------------------------------------------------------------------------------- planted
def planted_workload(seed: int, *, n_buffers: int = 64, n_ops: int | None = None, capacity: int = 1 << 20,
                     hardware="tpu-v4-like") -> tuple[Workload, np.ndarray]:
    """A packing instance with a known optimum: ``(workload, offsets)``; the workload's
    ``default_capacity`` is the fast memory it was cut for (``mallocgym.scenarios.planted``
    makes it a scenario).

    The rectangle ``ops x [0, capacity)`` is cut at random, again and again (guillotine cuts in
    time or in address), until it is ``n_buffers`` pieces; each piece is a buffer live over its
    ops and stored at its address range. ``offsets`` place every buffer, so they are optimal
    (moving a buffer to fast memory never makes the program slower), and fast memory is full at
    every op: any misstep of a greedy packer loses bytes. As in MiniMalloc's instances, ops have
    no flops and each buffer is written at its first op and read at its last, so the time saved
    is proportional to the bytes placed. Buffer ids are shuffled.

    ``n_ops`` defaults to ``2 * n_buffers``; ``capacity`` (bytes) is rounded down to the
    hardware's alignment, and cuts fall on aligned addresses.
    """
    seed = _index(seed, "seed")
    n_buffers = _index(n_buffers, "n_buffers")
    hw = profile(hardware) if isinstance(hardware, str) else hardware
    n_ops = 2 * n_buffers if n_ops is None else _index(n_ops, "n_ops")
    align = hw.alignment
    units = _index(capacity, "capacity") // align
    if n_buffers < 1 or n_ops < 1 or units < 1:
        raise ValueError(f"planted: n_buffers ({n_buffers}), n_ops ({n_ops}) and capacity // alignment "
                         f"({units}) must be >= 1")
    if n_buffers > n_ops * units:
        raise ValueError(f"planted: {n_buffers} buffers do not fit {n_ops} ops x {units} aligned units")
    rng = np.random.default_rng(seed)
    # pieces: [t0, t1] inclusive ops, [a0, a1) in alignment units
    pieces = [(0, n_ops - 1, 0, units)]
    splittable = [0]  # pieces that can still be cut (longer than one op or one unit)

    def can_cut(piece):
        return piece[1] > piece[0] or piece[3] - piece[2] > 1

    while len(pieces) < n_buffers:
        pos = int(rng.integers(len(splittable)))
        i = splittable[pos]
        t0, t1, a0, a1 = pieces[i]
        if t1 > t0 and (a1 - a0 == 1 or rng.random() < 0.5):
            cut = int(rng.integers(t0 + 1, t1 + 1))
            pieces[i], new = (t0, cut - 1, a0, a1), (cut, t1, a0, a1)
        else:
            cut = int(rng.integers(a0 + 1, a1))
            pieces[i], new = (t0, t1, a0, cut), (t0, t1, cut, a1)
        pieces.append(new)
        if not can_cut(pieces[i]):
            splittable[pos] = splittable[-1]
            splittable.pop()
        if can_cut(new):
            splittable.append(len(pieces) - 1)
    arr = np.array(pieces, dtype=np.int64)[rng.permutation(n_buffers)]
    start, end = arr[:, 0], arr[:, 1]
    size, offsets = (arr[:, 3] - arr[:, 2]) * align, arr[:, 2] * align
    name = f"planted-n{n_buffers}-s{seed}"
    workload = Workload.with_default_accesses(name, np.zeros(n_ops), size, start, end,
                                              buffer_names=tuple(str(b) for b in range(n_buffers)),
                                              default_capacity=units * align)
    return workload, offsets


# --------------------------------------------------------------------------------------- stats
def workload_stats(workload: Workload, hardware=None) -> dict:
    """Buffers, ops, peak live bytes, size range and the share of compute-bound ops with every
    buffer in slow memory and with every buffer in fast memory."""
    hw = profile() if hardware is None else (profile(hardware) if isinstance(hardware, str) else hardware)
    n = workload.num_buffers
    _, bound_slow = program_time(workload, np.zeros(n, dtype=bool), hw)
    _, bound_fast = program_time(workload, np.ones(n, dtype=bool), hw)
    return {
        "name": workload.name, "buffers": n, "ops": workload.num_ops,
        "peak_live_bytes": workload.peak_live_bytes, "total_bytes": workload.total_bytes,
        "min_size": int(workload.size.min()), "max_size": int(workload.size.max()),
        "compute_bound_slow": bound_slow / workload.num_ops,
        "compute_bound_fast": bound_fast / workload.num_ops,
    }


def _human(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if nbytes < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    raise AssertionError


def _stats_table(presets: list[GeneratorConfig], seeds: int) -> str:
    lines = ["| preset | seeds | buffers min / median / max | ops median | peak live MiB median [min, max] "
             "| buffer sizes min to max | compute-bound ops, all slow: mean [min, max] | all fast: mean | families (train / infer) |",
             "|---|---|---|---|---|---|---|---|---|"]
    for config in presets:
        rows = [workload_stats(generate(config, s)) | _describe(config, s) for s in range(seeds)]
        name = config.name.removeprefix("gen-")
        col = lambda k: np.array([r[k] for r in rows], dtype=float)  # noqa: E731
        b, peak, cs = col("buffers"), col("peak_live_bytes") / 2**20, col("compute_bound_slow")
        fams: dict[str, int] = {}
        for r in rows:
            key = f"{r['family']} {'train' if r['training'] else 'infer'}"
            fams[key] = fams.get(key, 0) + 1
        lines.append(
            f"| {name} | {seeds} | {int(b.min())} / {int(np.median(b))} / {int(b.max())} | {int(np.median(col('ops')))} "
            f"| {np.median(peak):.0f} [{peak.min():.1f}, {peak.max():.0f}] "
            f"| {_human(col('min_size').min())} to {_human(col('max_size').max())} "
            f"| {cs.mean():.1%} [{cs.min():.1%}, {cs.max():.1%}] | {col('compute_bound_fast').mean():.1%} "
            f"| {', '.join(f'{k} {v}' for k, v in sorted(fams.items()))} |")
    return "\n".join(lines)


def _describe(config: GeneratorConfig | str, seed: int) -> dict:
    plan = _draw(preset(config) if isinstance(config, str) else config, seed)
    return {"family": plan.family_name, "training": plan.training, "optimizer": plan.optimizer}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mallocgym.workloads.generator",
                                     description="Generate program-like workloads; print statistics or save one.")
    parser.add_argument("--stats", action="store_true", help="print a Markdown table of each preset's statistics")
    parser.add_argument("--preset", default="small,medium,large", help="comma-separated presets (default: %(default)s)")
    parser.add_argument("--seeds", type=int, default=20,
                        help="seeds 0..N-1 per preset for --stats (default: %(default)s)")
    parser.add_argument("--families", default="",
                        help=f"comma-separated families to draw from instead of the presets' ({', '.join(FAMILIES)})")
    parser.add_argument("--seed", type=int, default=0, help="the seed to save with -o (default: %(default)s)")
    parser.add_argument("-o", "--out", help="save the first preset's workload for --seed here (.json or .npz)")
    args = parser.parse_args(argv)
    names = [p.strip() for p in args.preset.split(",") if p.strip()]
    try:
        families = parse_families(args.families)
        configs = [preset(name) for name in names]
        if families:
            configs = [replace(c, families=families) for c in configs]
        if args.stats:
            print(_stats_table(configs, args.seeds))
        if args.out:
            from .io import save

            workload = generate(configs[0], args.seed)
            print(f"wrote {save(workload, args.out)}: {workload!r}")
        if not (args.stats or args.out):
            parser.print_help()
    except ValueError as exc:
        print(f"generator: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
