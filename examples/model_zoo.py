"""Compile real ML programs with XLA (JAX, CPU) and write them as mallocgym workloads.

This script made the bundled suite (``src/mallocgym/data/suite``)::

    pip install -e '.[zoo]'          # jax and jaxlib, pinned in constraints.txt
    python examples/model_zoo.py --out src/mallocgym/data/suite

For every model it starts a fresh Python process that builds the program in plain JAX and
compiles it (no run, no data) with
``XLA_FLAGS="--xla_dump_to=DIR --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis"``;
then it imports the dump with :func:`mallocgym.workloads.xla.import_xla_dump`, writes
``NAME.npz`` (byte for byte reproducible: fixed zip timestamps) and ``manifest.json`` (name,
family, split, capacity fractions, sizes, SHA-256 of each file). ``--only NAME`` rebuilds some
models; ``--keep-dumps DIR`` keeps the raw dumps; ``--list`` prints the models.

The programs are compiled by XLA's CPU backend (that is what this machine has), so the schedule,
fusion decisions and buffer live ranges are the CPU compiler's. Sizes are chosen so that each
program has a few hundred to a few thousand buffers.

``--group large`` builds the large suite instead (``src/mallocgym/data/large``, its own
manifest): whole networks of 5,000 to 50,000 buffers (ResNet-152, GPT-2 large and ViT-g/14
training steps), each also played on real chips' fast memories (the manifest's ``profiles``).
See ``docs/suite.md``, "The large suite".
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

FRACTIONS = ("1/8", "1/2")
DUMP_FLAGS = "--xla_dump_to={dump} --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis " \
             "--xla_dump_hlo_module_re=jit_main"


@dataclass(frozen=True)
class Model:
    """One zoo entry: ``build()`` returns ``(main, args)``, compiled as ``jax.jit(main)``."""

    name: str
    family: str
    split: str
    description: str


MODELS = [
    Model("mlp-train", "mlp", "train", "6-layer MLP (2048 wide, batch 2048): forward, backward, Adam update"),
    Model("alexnet-infer", "alexnet", "train", "AlexNet-like CNN, two towers (5 conv, LRN, 3 dense; 8 x 128x128x3): inference on image and mirror"),
    Model("alexnet-train", "alexnet", "test", "AlexNet-like CNN: training step (SGD with momentum)"),
    Model("resnet-block-infer", "resnet", "train", "6 ResNet bottleneck blocks (stage 3: 1024-256-1024 channels) with batch norm (32 x 14x14x1024): inference"),
    Model("resnet-block-train", "resnet", "train", "6 ResNet bottleneck blocks: training step (SGD with momentum)"),
    Model("transformer-encoder-fwd", "transformer", "train", "6 transformer encoder blocks (d 1024, 16 heads, ff 4096, 4 x 512 tokens): forward"),
    Model("transformer-encoder-bwd", "transformer", "test", "6 transformer encoder blocks: forward and backward (gradients)"),
    Model("gpt-decode-kvcache", "gpt", "train", "GPT-style decoder, 6 layers (d 512, 8 heads): one token step with a 512-entry KV cache, batch 8"),
    Model("lstm-infer", "lstm", "train", "2-layer LSTM (hidden 512, 24 steps unrolled, batch 32): inference"),
    Model("lstm-train", "lstm", "test", "2-layer LSTM: training step through time"),
    Model("unet-infer", "unet", "test", "U-Net, 4 levels with batch norm (4 x 96x96x3, 32-256 channels): inference"),
    Model("moe-layer-fwd", "moe", "train", "4 mixture-of-experts layers (8 experts, top-2, capacity 1280, d 1024, ff 4096, 4096 tokens): forward"),
    Model("moe-layer-train", "moe", "train", "4 mixture-of-experts layers: training step"),
    Model("strassen2-matmul", "alphatensor", "test", "8192x8192 matmul through two levels of Strassen (49 products of 2048x2048 blocks)"),
]

# The large group skips LLVM's optimisations of the CPU code (which we never run): the HLO
# schedule and buffers that the dump holds are the same (checked on a ViT-H/14 training step:
# identical workload), and compiling takes half the time.
LARGE_FLAGS = " --xla_backend_optimization_level=0"
# Batch sizes (they change the buffers' sizes, not their number) and gradient-accumulation
# micro-batches, unrolled (1: none; each more one repeats the forward and backward pass).
GPT2_MICRO, GPT2_BATCH, GPT2_SEQ = 1, 1, 1024
RESNET_MICRO, RESNET_BATCH = 1, 8
VIT_MICRO, VIT_BATCH = 1, 8
LARGE_MODELS = [
    Model("resnet152-train", "resnet", "test", "ResNet-152 (50 bottleneck blocks, batch norm; 8 x 224x224x3, "
          "1000 classes): training step (SGD with momentum)"),
    Model("gpt2-large-train", "gpt", "test", "GPT-2 large (36 pre-LN causal blocks, d 1280, 20 heads, vocabulary "
          "50257, tied embeddings; 1 x 1024 tokens): training step (AdamW)"),
    Model("vit-g14-train", "vit", "test", "ViT-g/14 (40 pre-LN blocks, width 1408, MLP 6144, 16 heads; 8 x "
          "224x224x3, 257 tokens): training step (AdamW)"),
]
# The large suite's absolute fast memories (mallocgym.hardware.PROFILES): TPU v4i's 16 MiB VMEM
# and 128 MiB CMEM, scenarios WORKLOAD@16MiB and WORKLOAD@128MiB beside the fractions.
LARGE_PROFILES = ("tpu-v4i-vmem", "tpu-v4i-cmem")


@dataclass(frozen=True)
class Group:
    """A set of models written to one folder with one manifest."""

    models: list
    out: str
    extra_flags: str = ""
    profiles: tuple = ()


GROUPS = {
    "default": Group(MODELS, "src/mallocgym/data/suite"),
    "large": Group(LARGE_MODELS, "src/mallocgym/data/large", LARGE_FLAGS, LARGE_PROFILES),
}


# ------------------------------------------------------------------------------ the programs
def _programs():
    """Model name -> builder; imported lazily so that the parent process never imports JAX."""
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32

    def spec(*shape):
        return jax.ShapeDtypeStruct(shape, f32)

    def dense(n_in, n_out):
        return {"w": spec(n_in, n_out), "b": spec(n_out)}

    def conv(x, w, stride=1, padding="SAME"):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), padding,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def max_pool(x, k=3, s=2):
        return jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, k, k, 1), (1, s, s, 1), "VALID")

    def cross_entropy(logits, labels):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))

    def sgd_momentum(loss_fn):
        def step(params, mom, *batch):
            loss, grads = jax.value_and_grad(loss_fn)(params, *batch)
            mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
            params = jax.tree.map(lambda p, m: p - 0.01 * m, params, mom)
            return params, mom, loss
        return step

    # -- MLP with Adam
    def mlp():
        widths = [2048] * 7
        params = [dense(a, b) for a, b in zip(widths[:-1], widths[1:])]

        def loss_fn(params, x, y):
            for layer in params[:-1]:
                x = jax.nn.gelu(x @ layer["w"] + layer["b"])
            return cross_entropy(x @ params[-1]["w"] + params[-1]["b"], y)

        def main(params, m, v, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
            v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
            params = jax.tree.map(lambda p, a, b: p - 1e-3 * a / (jnp.sqrt(b) + 1e-8), params, m, v)
            return params, m, v, loss
        return main, (params, params, params, spec(2048, 2048), spec(2048, 2048))

    # -- AlexNet-like: the original two-tower layout (conv3 and the dense layers see both
    # towers), local response normalisation after conv1 and conv2, max pooling
    alex_convs = [(11, 3, 48, 4), (5, 48, 128, 1), (3, 256, 192, 1), (3, 192, 192, 1), (3, 192, 128, 1)]
    alex_params = {
        "conv": [[{"w": spec(k, k, cin, cout), "b": spec(cout)} for _ in range(2)] for k, cin, cout, _ in alex_convs],
        "fc": [dense(2 * 128 * 3 * 3, 1024), dense(1024, 1024), dense(1024, 100)],
    }

    def lrn(x, size=5, alpha=1e-4, beta=0.75, k=2.0):
        sq = jax.lax.reduce_window(x * x, 0.0, jax.lax.add, (1, 1, 1, size), (1, 1, 1, 1), "SAME")
        return x / (k + alpha / size * sq) ** beta

    def alexnet_apply(params, x):
        towers = [x, x]
        for i, (layer, (_, _, _, stride)) in enumerate(zip(params["conv"], alex_convs)):
            if i == 2:  # conv3 reads both towers
                both = jnp.concatenate(towers, axis=-1)
                towers = [both, both]
            towers = [jax.nn.relu(conv(t, p["w"], stride) + p["b"]) for t, p in zip(towers, layer)]
            if i in (0, 1):
                towers = [lrn(t) for t in towers]
            if i in (0, 1, 4):
                towers = [max_pool(t) for t in towers]
        x = jnp.concatenate([t.reshape(t.shape[0], -1) for t in towers], axis=-1)
        for layer in params["fc"][:-1]:
            x = jax.nn.relu(x @ layer["w"] + layer["b"])
        return x @ params["fc"][-1]["w"] + params["fc"][-1]["b"]

    def alexnet_infer():
        def main(params, x):  # the AlexNet paper averages predictions over views: image and mirror
            views = (x, x[:, :, ::-1, :])
            return sum(jax.nn.softmax(alexnet_apply(params, v)) for v in views) / len(views)
        return main, (alex_params, spec(8, 128, 128, 3))

    def alexnet_train():
        step = sgd_momentum(lambda p, x, y: cross_entropy(alexnet_apply(p, x), y))

        def main(params, mom, x, y):
            return step(params, mom, x, y)
        return main, (alex_params, alex_params, spec(8, 128, 128, 3), spec(8, 100))

    # -- ResNet bottleneck blocks
    def bn_params(c):
        return {"scale": spec(c), "shift": spec(c)}

    res_params = [{"w1": spec(1, 1, 1024, 256), "bn1": bn_params(256), "w2": spec(3, 3, 256, 256), "bn2": bn_params(256),
                   "w3": spec(1, 1, 256, 1024), "bn3": bn_params(1024)} for _ in range(6)]

    def batch_norm(x, p):
        mean = jnp.mean(x, axis=(0, 1, 2))
        var = jnp.var(x, axis=(0, 1, 2))
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["shift"]

    def resnet_apply(params, x):
        for block in params:
            h = jax.nn.relu(batch_norm(conv(x, block["w1"]), block["bn1"]))
            h = jax.nn.relu(batch_norm(conv(h, block["w2"]), block["bn2"]))
            x = jax.nn.relu(x + batch_norm(conv(h, block["w3"]), block["bn3"]))
        return x

    def resnet_infer():
        def main(params, x):
            return resnet_apply(params, x)
        return main, (res_params, spec(32, 14, 14, 1024))

    def resnet_train():
        step = sgd_momentum(lambda p, x, y: jnp.mean((resnet_apply(p, x) - y) ** 2))

        def main(params, mom, x, y):
            return step(params, mom, x, y)
        return main, (res_params, res_params, spec(32, 14, 14, 1024), spec(32, 14, 14, 1024))

    # -- Transformer encoder
    d_model, n_heads, d_ff = 1024, 16, 4096

    def layer_norm(x, p):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.var(x, -1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["shift"]

    def attention(x, p, mask=None, kv=None):
        b, s, d = x.shape
        q = (x @ p["wq"]).reshape(b, s, n_heads, d // n_heads)
        src = x if kv is None else kv
        k = (src @ p["wk"]).reshape(b, src.shape[1], n_heads, d // n_heads)
        v = (src @ p["wv"]).reshape(b, src.shape[1], n_heads, d // n_heads)
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // n_heads).astype(f32)
        if mask is not None:
            logits = jnp.where(mask, logits, -1e9)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v).reshape(b, s, d)
        return out @ p["wo"]

    def encoder_params(d):
        return {"attn": {k: spec(d, d) for k in ("wq", "wk", "wv", "wo")}, "ln1": bn_params(d), "ln2": bn_params(d),
                "ff1": dense(d, d_ff), "ff2": dense(d_ff, d)}

    enc_params = [encoder_params(d_model) for _ in range(6)]

    def encoder_apply(params, x):
        for p in params:
            x = layer_norm(x + attention(x, p["attn"]), p["ln1"])
            h = jax.nn.gelu(x @ p["ff1"]["w"] + p["ff1"]["b"])
            x = layer_norm(x + h @ p["ff2"]["w"] + p["ff2"]["b"], p["ln2"])
        return x

    def encoder_fwd():
        def main(params, x):
            return encoder_apply(params, x)
        return main, (enc_params, spec(4, 512, d_model))

    def encoder_bwd():
        def main(params, x, y):
            return jax.value_and_grad(lambda p: jnp.mean((encoder_apply(p, x) - y) ** 2))(params)
        return main, (enc_params, spec(4, 512, d_model), spec(4, 512, d_model))

    # -- GPT decoder step with a KV cache
    def gpt_decode():
        layers, d, cache_len, batch, heads = 6, 512, 512, 8, 8
        hd = d // heads
        params = {
            "embed": spec(8192, d),
            "layers": [{"wqkv": spec(d, 3 * d), "wo": spec(d, d), "ln1": bn_params(d), "ln2": bn_params(d),
                        "ff1": dense(d, 4 * d), "ff2": dense(4 * d, d)} for _ in range(layers)],
            "ln_f": bn_params(d),
        }
        cache = jax.ShapeDtypeStruct((layers, 2, batch, cache_len, heads, hd), f32)

        def main(params, cache, token, pos):
            x = params["embed"][token]  # [batch, d]
            new_cache = cache
            for i, p in enumerate(params["layers"]):
                h = layer_norm(x, p["ln1"])
                q, k, v = jnp.split(h @ p["wqkv"], 3, axis=-1)
                q, k, v = (t.reshape(batch, heads, hd) for t in (q, k, v))
                new_cache = jax.lax.dynamic_update_slice(
                    new_cache, jnp.stack([k, v])[None, :, :, None], (i, 0, 0, pos, 0, 0))
                keys, values = new_cache[i, 0], new_cache[i, 1]  # [batch, cache_len, heads, hd]
                logits = jnp.einsum("bhd,bkhd->bhk", q, keys) / jnp.sqrt(float(hd))
                logits = jnp.where(jnp.arange(cache_len) <= pos, logits, -1e9)
                att = jnp.einsum("bhk,bkhd->bhd", jax.nn.softmax(logits, -1), values).reshape(batch, d)
                x = x + att @ p["wo"]
                h = layer_norm(x, p["ln2"])
                x = x + jax.nn.gelu(h @ p["ff1"]["w"] + p["ff1"]["b"]) @ p["ff2"]["w"] + p["ff2"]["b"]
            logits = layer_norm(x, params["ln_f"]) @ params["embed"].T
            return jnp.argmax(logits, -1), new_cache
        return main, (params, cache, jax.ShapeDtypeStruct((batch,), jnp.int32), jax.ShapeDtypeStruct((), jnp.int32))

    # -- LSTM
    lstm_hidden, lstm_steps, lstm_batch, lstm_in = 512, 24, 32, 256
    lstm_params = [{"wx": spec(n_in, 4 * lstm_hidden), "wh": spec(lstm_hidden, 4 * lstm_hidden),
                    "b": spec(4 * lstm_hidden)} for n_in in (lstm_in, lstm_hidden)]

    def lstm_apply(params, xs):
        for p in params:
            h = jnp.zeros((lstm_batch, lstm_hidden), f32)
            c = jnp.zeros((lstm_batch, lstm_hidden), f32)
            outs = []
            for t in range(lstm_steps):
                gates = xs[t] @ p["wx"] + h @ p["wh"] + p["b"]
                i, f, g, o = jnp.split(gates, 4, axis=-1)
                c = jax.nn.sigmoid(f) * c + jax.nn.sigmoid(i) * jnp.tanh(g)
                h = jax.nn.sigmoid(o) * jnp.tanh(c)
                outs.append(h)
            xs = outs
        return jnp.stack(xs)

    def lstm_infer():
        def main(params, xs):
            return lstm_apply(params, xs)
        return main, (lstm_params, spec(lstm_steps, lstm_batch, lstm_in))

    def lstm_train():
        step = sgd_momentum(lambda p, xs, y: jnp.mean((lstm_apply(p, xs)[-1] - y) ** 2))

        def main(params, mom, xs, y):
            return step(params, mom, xs, y)
        return main, (lstm_params, lstm_params, spec(lstm_steps, lstm_batch, lstm_in), spec(lstm_batch, lstm_hidden))

    # -- U-Net: 4 levels, two 3x3 convs with batch norm per level, transposed-conv upsampling
    def unet_infer():
        chans = [32, 64, 128, 256]
        down, up = [], []
        cin = 3
        for c in chans:
            down.append({"w1": spec(3, 3, cin, c), "bn1": bn_params(c), "w2": spec(3, 3, c, c), "bn2": bn_params(c)})
            cin = c
        for c in reversed(chans[:-1]):
            up.append({"up": spec(2, 2, cin, c), "w1": spec(3, 3, 2 * c, c), "bn1": bn_params(c),
                       "w2": spec(3, 3, c, c), "bn2": bn_params(c)})
            cin = c
        params = {"down": down, "up": up, "head": spec(1, 1, chans[0], 2)}

        def double_conv(x, p):
            x = jax.nn.relu(batch_norm(conv(x, p["w1"]), p["bn1"]))
            return jax.nn.relu(batch_norm(conv(x, p["w2"]), p["bn2"]))

        def main(params, x):
            skips = []
            for i, p in enumerate(params["down"]):
                x = double_conv(x, p)
                if i < len(params["down"]) - 1:
                    skips.append(x)
                    x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 2, 2, 1), (1, 2, 2, 1), "VALID")
            for p, skip in zip(params["up"], reversed(skips)):
                x = jax.lax.conv_transpose(x, p["up"], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
                x = double_conv(jnp.concatenate([x, skip], axis=-1), p)
            return jax.nn.sigmoid(conv(x, params["head"]))
        return main, (params, spec(4, 96, 96, 3))

    # -- Mixture of experts: 4 layers of top-2 routing to 8 experts, each expert gathering its
    # (capacity-limited) tokens and scatter-adding its weighted outputs back
    n_experts, moe_d, moe_ff, moe_tokens, capacity, moe_layers = 8, 1024, 4096, 4096, 1280, 4
    moe_params = [{"router": spec(moe_d, n_experts), "w1": spec(n_experts, moe_d, moe_ff),
                   "w2": spec(n_experts, moe_ff, moe_d), "ln": bn_params(moe_d)} for _ in range(moe_layers)]

    def moe_layer(p, x):
        probs = jax.nn.softmax(layer_norm(x, p["ln"]) @ p["router"], -1)  # [T, E]
        top_p, top_e = jax.lax.top_k(probs, 2)  # [T, 2]
        out = x
        for e in range(n_experts):
            weight = jnp.sum(jnp.where(top_e == e, top_p, 0.0), -1)  # [T]
            _, tokens = jax.lax.top_k(weight, capacity)  # this expert's tokens
            h = jax.nn.gelu(x[tokens] @ p["w1"][e]) @ p["w2"][e]
            out = out.at[tokens].add(h * weight[tokens, None])
        return out

    def moe_apply(params, x):
        for p in params:
            x = moe_layer(p, x)
        return x

    def moe_fwd():
        def main(params, x):
            return moe_apply(params, x)
        return main, (moe_params, spec(moe_tokens, moe_d))

    def moe_train():
        step = sgd_momentum(lambda p, x, y: jnp.mean((moe_apply(p, x) - y) ** 2))

        def main(params, mom, x, y):
            return step(params, mom, x, y)
        return main, (moe_params, moe_params, spec(moe_tokens, moe_d), spec(moe_tokens, moe_d))

    # -- AlphaTensor-style: block matmul through a rank-7 decomposition, two levels deep
    def strassen(a, b, levels):
        if levels == 0:
            return a @ b
        n = a.shape[0] // 2
        a11, a12, a21, a22 = a[:n, :n], a[:n, n:], a[n:, :n], a[n:, n:]
        b11, b12, b21, b22 = b[:n, :n], b[:n, n:], b[n:, :n], b[n:, n:]
        m1 = strassen(a11 + a22, b11 + b22, levels - 1)
        m2 = strassen(a21 + a22, b11, levels - 1)
        m3 = strassen(a11, b12 - b22, levels - 1)
        m4 = strassen(a22, b21 - b11, levels - 1)
        m5 = strassen(a11 + a12, b22, levels - 1)
        m6 = strassen(a21 - a11, b11 + b12, levels - 1)
        m7 = strassen(a12 - a22, b21 + b22, levels - 1)
        top = jnp.concatenate([m1 + m4 - m5 + m7, m3 + m5], axis=1)
        bottom = jnp.concatenate([m2 + m4, m1 - m2 + m3 + m6], axis=1)
        return jnp.concatenate([top, bottom], axis=0)

    def strassen2():
        def main(a, b):
            return strassen(a, b, 2)
        return main, (spec(8192, 8192), spec(8192, 8192))

    return {
        "mlp-train": mlp, "alexnet-infer": alexnet_infer, "alexnet-train": alexnet_train,
        "resnet-block-infer": resnet_infer, "resnet-block-train": resnet_train,
        "transformer-encoder-fwd": encoder_fwd, "transformer-encoder-bwd": encoder_bwd,
        "gpt-decode-kvcache": gpt_decode, "lstm-infer": lstm_infer, "lstm-train": lstm_train,
        "unet-infer": unet_infer, "moe-layer-fwd": moe_fwd, "moe-layer-train": moe_train,
        "strassen2-matmul": strassen2,
    }


# ------------------------------------------------------------------------------ the large group
def _large_programs():
    """Large model name -> builder: whole networks at the scale users compile (5k-50k buffers)."""
    import jax
    import jax.numpy as jnp

    f32 = jnp.float32

    def spec(*shape, dtype=f32):
        return jax.ShapeDtypeStruct(shape, dtype)

    def dense(n_in, n_out):
        return {"w": spec(n_in, n_out), "b": spec(n_out)}

    def norm_params(c):
        return {"scale": spec(c), "shift": spec(c)}

    def layer_norm(x, p):
        mean = jnp.mean(x, -1, keepdims=True)
        var = jnp.var(x, -1, keepdims=True)
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["shift"]

    def batch_norm(x, p):
        mean = jnp.mean(x, axis=(0, 1, 2))
        var = jnp.var(x, axis=(0, 1, 2))
        return (x - mean) * jax.lax.rsqrt(var + 1e-5) * p["scale"] + p["shift"]

    def conv(x, w, stride=1, padding="SAME"):
        return jax.lax.conv_general_dilated(x, w, (stride, stride), padding,
                                            dimension_numbers=("NHWC", "HWIO", "NHWC"))

    def xent_onehot(logits, labels):
        return -jnp.mean(jnp.sum(jax.nn.log_softmax(logits) * labels, axis=-1))

    def xent_ids(logits, ids):
        logp = jax.nn.log_softmax(logits)
        return -jnp.mean(jnp.take_along_axis(logp, ids[..., None], axis=-1))

    def accumulate(loss_fn, micro):
        """Loss and gradients summed over ``micro`` micro-batches (gradient accumulation, unrolled)."""
        def grads_of(params, *batch):
            total, grads = None, None
            for i in range(micro):
                part = [b.reshape(micro, b.shape[0] // micro, *b.shape[1:])[i] for b in batch]
                loss, g = jax.value_and_grad(loss_fn)(params, *part)
                total = loss if total is None else total + loss
                grads = g if grads is None else jax.tree.map(jnp.add, grads, g)
            return total / micro, jax.tree.map(lambda g: g / micro, grads)
        return grads_of

    def adamw_step(loss_fn, micro=1):
        grads_of = accumulate(loss_fn, micro)

        def step(params, m, v, *batch):
            loss, grads = grads_of(params, *batch)
            m = jax.tree.map(lambda a, g: 0.9 * a + 0.1 * g, m, grads)
            v = jax.tree.map(lambda a, g: 0.999 * a + 0.001 * g * g, v, grads)
            params = jax.tree.map(lambda p, a, b: p - 3e-4 * (a / (jnp.sqrt(b) + 1e-8) + 0.01 * p), params, m, v)
            return params, m, v, loss
        return step

    def sgd_momentum_step(loss_fn, micro=1):
        grads_of = accumulate(loss_fn, micro)

        def step(params, mom, *batch):
            loss, grads = grads_of(params, *batch)
            mom = jax.tree.map(lambda m, g: 0.9 * m + g, mom, grads)
            params = jax.tree.map(lambda p, m: p - 0.1 * m, params, mom)
            return params, mom, loss
        return step

    def attention(x, p, heads, causal):
        b, s, d = x.shape
        qkv = x @ p["qkv"]["w"] + p["qkv"]["b"]
        q, k, v = (t.reshape(b, s, heads, d // heads) for t in jnp.split(qkv, 3, axis=-1))
        logits = jnp.einsum("bqhd,bkhd->bhqk", q, k) / jnp.sqrt(d // heads).astype(f32)
        if causal:
            logits = jnp.where(jnp.tril(jnp.ones((s, s), bool)), logits, -1e9)
        out = jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(logits, -1), v).reshape(b, s, d)
        return out @ p["proj"]["w"] + p["proj"]["b"]

    def pre_ln_block(x, p, heads, causal):
        x = x + attention(layer_norm(x, p["ln1"]), p["attn"], heads, causal)
        h = jax.nn.gelu(layer_norm(x, p["ln2"]) @ p["fc"]["w"] + p["fc"]["b"])
        return x + h @ p["out"]["w"] + p["out"]["b"]

    def block_params(d, ff):
        return {"ln1": norm_params(d), "attn": {"qkv": dense(d, 3 * d), "proj": dense(d, d)},
                "ln2": norm_params(d), "fc": dense(d, ff), "out": dense(ff, d)}

    # -- GPT-2 large: token and position embeddings, 36 pre-LN causal blocks, tied output layer
    vocab, n_pos, gpt_d, gpt_heads, gpt_layers = 50257, 1024, 1280, 20, 36
    gpt_params = {"wte": spec(vocab, gpt_d), "wpe": spec(n_pos, gpt_d), "ln_f": norm_params(gpt_d),
                  "blocks": [block_params(gpt_d, 4 * gpt_d) for _ in range(gpt_layers)]}

    def gpt2_loss(params, tokens, targets):
        x = params["wte"][tokens] + params["wpe"][: tokens.shape[1]]
        for p in params["blocks"]:
            x = pre_ln_block(x, p, gpt_heads, causal=True)
        return xent_ids(layer_norm(x, params["ln_f"]) @ params["wte"].T, targets)

    def gpt2_train():
        step = adamw_step(gpt2_loss, GPT2_MICRO)

        def main(params, m, v, tokens, targets):
            return step(params, m, v, tokens, targets)
        batch = GPT2_MICRO * GPT2_BATCH
        ids = spec(batch, GPT2_SEQ, dtype=jnp.int32)
        return main, (gpt_params, gpt_params, gpt_params, ids, ids)

    # -- ResNet-152: 7x7 stem, 50 bottleneck blocks in 4 stages (3, 8, 36, 3), batch norm, 1000 classes
    stages = [(3, 64, 256, 1), (8, 128, 512, 2), (36, 256, 1024, 2), (3, 512, 2048, 2)]

    def resnet152_params():
        blocks, cin = [], 64
        for n, mid, out, stride in stages:
            for i in range(n):
                p = {"w1": spec(1, 1, cin, mid), "bn1": norm_params(mid), "w2": spec(3, 3, mid, mid),
                     "bn2": norm_params(mid), "w3": spec(1, 1, mid, out), "bn3": norm_params(out)}
                if i == 0:
                    p["proj"], p["bnp"] = spec(1, 1, cin, out), norm_params(out)
                blocks.append(p)
                cin = out
        return {"stem": spec(7, 7, 3, 64), "bn": norm_params(64), "blocks": blocks, "fc": dense(2048, 1000)}

    strides = [s if i == 0 else 1 for n, _, _, s in stages for i in range(n)]

    def resnet152_apply(params, x):
        x = jax.nn.relu(batch_norm(conv(x, params["stem"], 2), params["bn"]))
        x = jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, 3, 3, 1), (1, 2, 2, 1), "SAME")
        for p, stride in zip(params["blocks"], strides):
            h = jax.nn.relu(batch_norm(conv(x, p["w1"]), p["bn1"]))
            h = jax.nn.relu(batch_norm(conv(h, p["w2"], stride), p["bn2"]))
            h = batch_norm(conv(h, p["w3"]), p["bn3"])
            skip = batch_norm(conv(x, p["proj"], stride), p["bnp"]) if "proj" in p else x
            x = jax.nn.relu(h + skip)
        x = jnp.mean(x, axis=(1, 2))
        return x @ params["fc"]["w"] + params["fc"]["b"]

    def resnet152_train():
        step = sgd_momentum_step(lambda p, x, y: xent_onehot(resnet152_apply(p, x), y), RESNET_MICRO)
        params = resnet152_params()

        def main(params, mom, x, y):
            return step(params, mom, x, y)
        batch = RESNET_MICRO * RESNET_BATCH
        return main, (params, params, spec(batch, 224, 224, 3), spec(batch, 1000))

    # -- ViT-g/14 (Zhai et al. 2022, "Scaling Vision Transformers"): 14x14 patches of 224x224
    # images (256 tokens + class token), 40 pre-LN blocks, width 1408, MLP 6144, 16 heads
    vit_patch, vit_d, vit_heads, vit_layers, vit_mlp = 14, 1408, 16, 40, 6144
    vit_tokens = (224 // vit_patch) ** 2 + 1
    vit_params = {"patch": spec(vit_patch, vit_patch, 3, vit_d), "patch_b": spec(vit_d), "cls": spec(1, 1, vit_d),
                  "pos": spec(1, vit_tokens, vit_d), "ln_f": norm_params(vit_d), "head": dense(vit_d, 1000),
                  "blocks": [block_params(vit_d, vit_mlp) for _ in range(vit_layers)]}

    def vit_apply(params, images):
        x = conv(images, params["patch"], vit_patch, "VALID") + params["patch_b"]
        x = x.reshape(x.shape[0], -1, vit_d)
        x = jnp.concatenate([jnp.broadcast_to(params["cls"], (x.shape[0], 1, vit_d)), x], axis=1) + params["pos"]
        for p in params["blocks"]:
            x = pre_ln_block(x, p, vit_heads, causal=False)
        return layer_norm(x[:, 0], params["ln_f"]) @ params["head"]["w"] + params["head"]["b"]

    def vit_train():
        step = adamw_step(lambda p, x, y: xent_onehot(vit_apply(p, x), y), VIT_MICRO)

        def main(params, m, v, x, y):
            return step(params, m, v, x, y)
        batch = VIT_MICRO * VIT_BATCH
        return main, (vit_params, vit_params, vit_params, spec(batch, 224, 224, 3), spec(batch, 1000))

    return {"gpt2-large-train": gpt2_train, "resnet152-train": resnet152_train, "vit-g14-train": vit_train}


def compile_one(name: str) -> None:
    """In a child process whose XLA_FLAGS dump to a directory: compile model ``name``."""
    import jax

    builders = {**_programs(), **_large_programs()}
    main, args = builders[name]()
    main.__name__ = "main"
    jax.jit(main).lower(*args).compile()


# ------------------------------------------------------------------------------ the parent
def build(model: Model, out: Path, keep_dumps: Path | None, extra_flags: str = "", profiles: tuple = ()) -> dict:
    """Compile ``model`` in a child process, import its dump, write ``NAME.npz``; its manifest row
    (``extra_flags``: more XLA flags; ``profiles``: hardware profiles named in the row)."""
    from mallocgym.workloads import save_npz
    from mallocgym.workloads.xla import import_xla_dump

    with tempfile.TemporaryDirectory(prefix=f"zoo-{model.name}-") as tmp:
        dump = Path(keep_dumps) / model.name if keep_dumps else Path(tmp) / "dump"
        env = dict(os.environ, XLA_FLAGS=DUMP_FLAGS.format(dump=dump) + extra_flags, JAX_PLATFORMS="cpu",
                   TF_CPP_MIN_LOG_LEVEL="3", PYTHONHASHSEED="0")
        subprocess.run([sys.executable, __file__, "--compile", model.name], check=True, env=env)
        workload = import_xla_dump(dump, module="jit_main", name=model.name)
    path = out / f"{model.name}.npz"
    save_npz(workload, path)
    path.chmod(0o644)
    from mallocgym.workloads import load_npz

    back = load_npz(path)  # the file must read back as the same workload
    assert back.name == workload.name and back.op_names == workload.op_names
    for key in ("flops", "transcendentals", "size", "start", "end", "access_ptr", "access_op", "access_bytes"):
        assert np.array_equal(getattr(back, key), getattr(workload, key)), (path, key)
    row = {
        "name": model.name, "file": path.name, "family": model.family, "split": model.split,
        "fractions": list(FRACTIONS), "description": model.description,
        "ops": workload.num_ops, "buffers": workload.num_buffers, "accesses": workload.num_accesses,
        "peak_live_bytes": workload.peak_live_bytes, "total_bytes": workload.total_bytes,
        "flops": float(workload.flops.sum()),
        "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
    }
    if profiles:
        row["profiles"] = list(profiles)
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", choices=sorted(GROUPS), default="default",
                        help="which models: default (the bundled suite) or large (5k-50k buffers, the large "
                             "suite) (default: %(default)s)")
    parser.add_argument("--out", type=Path,
                        help="where to write NAME.npz and manifest.json (default: src/mallocgym/data/suite, "
                             "or src/mallocgym/data/large with --group large)")
    parser.add_argument("--only", action="append", help="rebuild only this model (repeatable)")
    parser.add_argument("--keep-dumps", type=Path, help="keep the XLA dumps in this directory")
    parser.add_argument("--list", action="store_true", help="list the models and exit")
    parser.add_argument("--compile", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.compile:
        compile_one(args.compile)
        return 0
    group = GROUPS[args.group]
    if args.list:
        for m in group.models:
            print(f"{m.name:26} {m.family:12} {m.split:5}  {m.description}")
        return 0
    known = {m.name for m in group.models}
    for name in args.only or ():
        if name not in known:
            parser.error(f"unknown model {name!r} in group {args.group}; see --group {args.group} --list")
    if args.out is None:
        args.out = Path(group.out)
    args.out.mkdir(parents=True, exist_ok=True)
    manifest_path = args.out / "manifest.json"
    old = {}
    if args.only and manifest_path.is_file():
        old = {row["name"]: row for row in json.loads(manifest_path.read_text())["workloads"]}
    rows = []
    for model in group.models:
        if args.only and model.name not in args.only:
            if model.name in old:
                rows.append(old[model.name])
            continue
        row = build(model, args.out, args.keep_dumps, group.extra_flags, group.profiles)
        print(f"{row['name']:26} ops {row['ops']:6d}  buffers {row['buffers']:5d}  "
              f"peak {row['peak_live_bytes'] / 2**20:8.2f} MiB  {row['file']}", flush=True)
        rows.append(row)
    manifest = {
        "format": "mallocgym-suite", "version": 1,
        "generator": "python examples/model_zoo.py" + ("" if args.group == "default" else f" --group {args.group}"),
        "compiler": "XLA CPU via JAX " + _jax_version(),
        "workloads": rows,
    }
    from mallocgym._files import atomic_write

    with atomic_write(manifest_path, "w") as handle:
        json.dump(manifest, handle, indent=1)
        handle.write("\n")
    manifest_path.chmod(0o644)
    print(f"wrote {manifest_path}")
    return 0


def _jax_version() -> str:
    out = subprocess.run([sys.executable, "-c", "import jax, jaxlib; print(jax.__version__, jaxlib.__version__)"],
                         capture_output=True, text=True, check=True).stdout.split()
    return f"{out[0]} (jaxlib {out[1]})"


if __name__ == "__main__":
    sys.exit(main())
