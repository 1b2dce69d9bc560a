"""The package's layout (DESIGN.md section 4, docs/layout.md): no import cycle between mallocgym's
modules, no import from a lower layer to a higher one, and no version-suffixed module
(``*_v1.py``, ``v1_*.py``: a concern with a v0 and a v1 part is a package with a module per
version).

The import graph is read from the sources with :mod:`ast`, nothing is imported: every
``import`` and ``from ... import`` at any depth (module level, inside functions, under
``if TYPE_CHECKING:``), relative or absolute, plus the ``"mallocgym.module:name"`` strings that
name a module to import later (agent registry, Gymnasium entry points). An arrow goes from a
module to the module it imports (``from pkg import name`` goes to ``pkg.name`` when that is a
module, else to ``pkg``). Importing ``a.b.c`` also runs ``a/b/__init__.py``; that implied arrow
to a parent package is not counted (every submodule would otherwise form a cycle with a package
``__init__`` that re-exports it).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "mallocgym"

# Layers, lowest first (DESIGN.md section 4): a module may import its own layer or a lower one.
# A module's layer is that of the longest prefix listed here; every module must have one.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("mallocgym._", "mallocgym.scoreboard"),  # private helpers (_files, _validate, ...), geomeans: the bottom
    ("mallocgym.workloads", "mallocgym.hardware", "mallocgym.scenarios"),
    ("mallocgym.sim", "mallocgym.features", "mallocgym.pricing"),
    ("mallocgym.heuristics",),
    ("mallocgym.env", "mallocgym.vector", "mallocgym.render"),
    ("mallocgym.agents",),
    ("mallocgym.harness", "mallocgym.speed", "mallocgym.show", "mallocgym.plot", "mallocgym.headline"),
    ("mallocgym.cli", "mallocgym"),  # the command line, and the package's public face (__init__)
)

_ENTRY_POINT = re.compile(r"^mallocgym(\.\w+)+(:\w+)?$")


# ------------------------------------------------------------------------------------- the graph
def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package: dotted name -> file (a package is its ``__init__.py``)."""
    found = {}
    for path in sorted((src / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(src).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _resolve(name: str, known) -> str | None:
    """The module ``name`` lives in: itself if it is one, else its longest prefix that is."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str, source: str, known, *, is_package: bool = False) -> set[str]:
    """The package's modules that ``module`` (whose text is ``source``) imports."""
    package = module if is_package else module.rpartition(".")[0]
    targets: list[str] = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            targets += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)])
                where = f"{base}.{node.module}" if node.module else base
            else:
                where = node.module or ""
            targets += [f"{where}.{alias.name}" if where + "." + alias.name in known else where
                        for alias in node.names]
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and _ENTRY_POINT.match(node.value):
            targets.append(node.value.partition(":")[0])
    found = set()
    for target in targets:
        if target == PACKAGE or target.startswith(PACKAGE + "."):
            resolved = _resolve(target, known)
            if resolved is not None and resolved != module:
                found.add(resolved)
    return found


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """module -> the package's modules it imports."""
    known = modules(src)
    return {name: imports_of(name, path.read_text(encoding="utf-8"), known, is_package=path.name == "__init__.py")
            for name, path in known.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of ``graph`` as ``[a, b, ..., a]``, or None when it has none (iterative DFS)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    for root in sorted(graph):
        if state.get(root):
            continue
        path, stack = [root], [iter(sorted(graph.get(root, ())))]
        state[root] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt):] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph.get(nxt, ()))))
    return None


def layer_of(module: str) -> int | None:
    best, layer = -1, None
    for i, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if prefix == PACKAGE:  # the package's own __init__ only, not every module under it
                matches = module == PACKAGE
            else:
                matches = module == prefix or module.startswith(prefix if prefix.endswith("_") else prefix + ".")
            if matches and len(prefix) > best:
                best, layer = len(prefix), i
    return layer


def upward_imports(graph: dict[str, set[str]]) -> list[str]:
    return sorted(f"{a} (layer {layer_of(a)}) imports {b} (layer {layer_of(b)})"
                  for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a))


# ------------------------------------------------------------------------------------- the package
@pytest.fixture(scope="module")
def graph():
    return import_graph()


def test_the_graph_sees_the_package(graph):
    assert len(graph) > 50
    assert "mallocgym.pricing.v1" in graph["mallocgym"]  # the public face imports evaluate_v1
    assert "mallocgym.sim.v1" in graph["mallocgym.pricing.v1"]
    assert "mallocgym.pricing.v1" in graph["mallocgym.harness"]  # a function-level import counts
    assert "mallocgym.agents.search" in graph["mallocgym.agents"]  # "module:factory" strings count


def test_no_import_cycle(graph):
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_every_module_has_a_layer(graph):
    assert [m for m in graph if layer_of(m) is None] == []


def test_no_import_from_a_lower_layer_to_a_higher_one(graph):
    assert upward_imports(graph) == []


def test_no_version_suffixed_module():
    bad = [str(p.relative_to(SRC)) for p in (SRC / PACKAGE).rglob("*.py")
           if re.fullmatch(r".*_v\d+|v\d+_.*", p.stem)]
    assert bad == [], "a version is a module of its concern's package (env/v1.py), not a suffix: " + ", ".join(bad)


# ------------------------------------------------------------------------------------- the checks can fail
def test_find_cycle_finds_a_hand_made_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set()}
    assert find_cycle(graph) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"a", "c"}}) is None
    assert find_cycle({"x": {"x"}}) == ["x", "x"]


def test_imports_are_read_at_every_depth_and_resolved():
    known = {"mallocgym", "mallocgym.sim", "mallocgym.sim.v1", "mallocgym.env", "mallocgym.env.v0",
             "mallocgym.harness", "mallocgym.agents", "mallocgym.agents.search"}
    source = ("from .. import sim\nfrom ..sim.v1 import SLOW\nimport mallocgym.harness\n"
              "def f():\n    from .v0 import MallocGameEnv\n"
              "if TYPE_CHECKING:\n    from ..agents import Agent\n"
              "AGENTS = {'x': 'mallocgym.agents.search:search_factory'}\n")
    assert imports_of("mallocgym.env.canonical", source, known) == {
        "mallocgym.sim", "mallocgym.sim.v1", "mallocgym.harness", "mallocgym.env.v0", "mallocgym.agents",
        "mallocgym.agents.search"}
    assert imports_of("mallocgym.env", "from .v0 import X\n", known, is_package=True) == {"mallocgym.env.v0"}


def test_an_upward_import_is_named():
    graph = {"mallocgym.sim": {"mallocgym.env.v0"}, "mallocgym.env.v0": {"mallocgym.sim"}}
    assert upward_imports(graph) == ["mallocgym.sim (layer 2) imports mallocgym.env.v0 (layer 4)"]
    assert layer_of("mallocgym._jit") == 0 and layer_of("mallocgym") == layer_of("mallocgym.cli")
    assert layer_of("mallocgym.agents.muzero.v1") == layer_of("mallocgym.agents")
