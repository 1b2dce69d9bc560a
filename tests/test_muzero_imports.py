"""No import cycle inside mallocgym.agents.muzero, function-local imports included (issue 31)."""

import ast
from pathlib import Path

import mallocgym.agents.muzero as package

PACKAGE = Path(package.__file__).parent
NAME = "mallocgym.agents.muzero"


def imports(path: Path) -> set[str]:
    """The package's modules that ``path`` imports, anywhere in the file."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 1:
                base = node.module
            elif node.level == 0 and (node.module or "").startswith(NAME + "."):
                base = node.module[len(NAME) + 1:]
            else:
                continue
            if base is None:   # from . import tree
                out.update(alias.name for alias in node.names)
            else:
                out.add(base.split(".")[0])
        elif isinstance(node, ast.Import):
            out.update(a.name[len(NAME) + 1:].split(".")[0] for a in node.names if a.name.startswith(NAME + "."))
    return out


def graph() -> dict[str, set[str]]:
    modules = {p.stem: p for p in PACKAGE.glob("*.py")}
    return {name: imports(path) & set(modules) - {"__init__"} for name, path in modules.items()}


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module, and modules importing themselves."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1 or v in edges.get(v, ()):
                out.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return out


def test_the_checker_finds_a_cycle():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_no_module_of_the_package_imports_one_that_imports_it_back():
    edges = graph()
    assert "agent" in edges and "make_env" not in edges
    assert edges["networks"] >= {"config", "transforms"}
    assert cycles(edges) == []
