"""Regenerate the XLA dump fixtures of tests/test_xla_import.py (needs JAX; tests do not run this).

    python tests/data/xla/make_fixtures.py [NAME ...]   # all fixtures, or only those named

Each fixture folder holds, per module, only the three files the importer reads: the
after-optimizations HLO text, its ``-live-range.txt`` and its ``-buffer-assignment.txt``.
``graph_net`` (used by tests/test_graph_net.py) was made with jax/jaxlib 0.10.2 on CPU by
``python tests/data/xla/make_fixtures.py graph_net``.
"""

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).parent
SUFFIXES = ("after_optimizations.txt", "after_optimizations-live-range.txt",
            "after_optimizations-buffer-assignment.txt")

PROGRAMS = {
    # a dot (fused), a convolution, tanh and exp: flops checked by hand in the tests; JAX also
    # compiles a small broadcast module first, so the folder holds two modules
    "dot_conv": """
import jax, jax.numpy as jnp
def f(x, w, k):
    y = jnp.tanh(x @ w)
    z = jax.lax.conv_general_dilated(y.reshape(1, 8, 8, 4), k, (1, 1), "SAME",
                                     dimension_numbers=("NHWC", "HWIO", "NHWC"))
    return jnp.exp(z).sum() + y.sum()
jax.jit(f)(jnp.ones((16, 32)), jnp.ones((32, 16)), jnp.ones((3, 3, 4, 8))).block_until_ready()
""",
    # a training step through a 5-step scan: while loops with known trip counts, tuples, phis
    "rnn_train": """
import jax, jax.numpy as jnp
def loss(p, x):
    def cell(h, xt):
        h = jnp.tanh(xt @ p["wx"] + h @ p["wh"])
        return h, h
    _, hs = jax.lax.scan(cell, jnp.zeros((4, 16)), x)
    return (hs ** 2).mean()
def step(p, x):
    l, g = jax.value_and_grad(loss)(p, x)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), l
jax.jit(step).lower({"wx": jnp.ones((8, 16)), "wh": jnp.ones((16, 16))}, jnp.ones((5, 4, 8))).compile()
""",
    # a conditional, a sort and gathers
    "cond_sort": """
import jax, jax.numpy as jnp
def f(x, w, c):
    y = jax.lax.cond(c > 0, lambda a: jnp.exp(a @ w), lambda a: a * 2.0, x)
    z = y[jnp.argsort(y[:, 0])]
    return jax.nn.softmax(z, axis=-1), jnp.take(y, jnp.array([1, 3]), axis=0)
jax.jit(f).lower(jnp.ones((64, 64)), jnp.ones((64, 64)), 1.0).compile()
""",
    # a training step of a 2-layer message-passing graph network (gather by sender, segment_sum
    # by receiver, relu) on 384 nodes x 192 features: the node features x (384 x 192 x 4 =
    # 294912 bytes) and the per-edge messages are larger than 256 KiB of fast memory
    "graph_net": """
import jax, jax.numpy as jnp
N, F, H, C, E = 384, 192, 64, 16, 1536
def layer(h, w, senders, receivers):
    return jax.ops.segment_sum((h @ w)[senders], receivers, num_segments=N)
def loss(p, x, senders, receivers, y):
    h = jax.nn.relu(layer(x, p["w1"], senders, receivers) + p["b1"])
    return ((layer(h, p["w2"], senders, receivers) - y) ** 2).mean()
def step(p, x, senders, receivers, y):
    l, g = jax.value_and_grad(loss)(p, x, senders, receivers, y)
    return jax.tree.map(lambda a, b: a - 0.1 * b, p, g), l
p = {"w1": jnp.ones((F, H)), "b1": jnp.zeros((H,)), "w2": jnp.ones((H, C))}
edges = jnp.arange(E, dtype=jnp.int32)
jax.jit(step).lower(p, jnp.ones((N, F)), edges % N, (edges * 7 + 1) % N, jnp.ones((N, C))).compile()
""",
}

MODULES = {"dot_conv": ("jit_f", "jit_broadcast_in_dim"), "rnn_train": ("jit_step",), "cond_sort": ("jit_f",),
           "graph_net": ("jit_step",)}


def main(names: list[str]) -> None:
    for name in names or PROGRAMS:
        program = PROGRAMS[name]
        with tempfile.TemporaryDirectory() as tmp:
            env = dict(os.environ, JAX_PLATFORMS="cpu", XLA_FLAGS=(
                f"--xla_dump_to={tmp} --xla_dump_hlo_as_text --xla_dump_buffer_assignment_analysis"))
            subprocess.run([sys.executable, "-c", program], check=True, env=env)
            out = HERE / name
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            files = sorted(p for p in Path(tmp).iterdir() if p.name.endswith(SUFFIXES))
            for module_name in MODULES[name]:  # the first module of that name
                first = min(p.name.split(".")[0] for p in files if p.name.split(".")[1] == module_name)
                for path in files:
                    if path.name.startswith(f"{first}.{module_name}."):
                        shutil.copy(path, out / path.name)
            print(name, sorted(p.name for p in out.iterdir()))


if __name__ == "__main__":
    main(sys.argv[1:])
