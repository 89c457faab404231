"""The package layout keeps the pipeline's shape (DESIGN.md §2): no import cycles, nothing in the
library imports the CLI, one module talks to the C++ extension, no module grows past 800 lines.

Imports are read statically (``ast``) from every module under ``src/corral``: module-level
imports only (imports inside functions are deliberate late imports, and ``if TYPE_CHECKING:``
blocks never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

import corral

SRC = Path(corral.__file__).resolve().parent
PACKAGE = "corral"


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


MODULES = _modules()


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING"
    )


def _top_level_imports(tree: ast.Module) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                found.append(node)
            elif isinstance(node, ast.If) and not _is_type_checking(node):
                visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                visit(node.body)
                for h in node.handlers:
                    visit(h.body)
                visit(node.orelse)

    visit(tree.body)
    return found


def _targets(module: str, node: ast.Import | ast.ImportFrom, path: Path) -> set[str]:
    """The corral modules an import statement loads (``from pkg import mod`` counts as pkg.mod)."""
    out: set[str] = set()
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        base = node.module or ""
        if node.level:
            pkg = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
            pkg = pkg[: len(pkg) - (node.level - 1)]
            base = ".".join(pkg + ([base] if base else []))
        names = [
            f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES or a.name == "_core" else base
            for a in node.names
        ]
    for n in names:
        if n == PACKAGE or n.startswith(PACKAGE + "."):
            out.add(n)
    return out


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        deps: set[str] = set()
        for node in _top_level_imports(tree):
            deps |= _targets(module, node, path)
        graph[module] = {d for d in deps if d != module}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in graph:
                    continue
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_the_cycle_finder_finds_cycles() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycles() -> None:
    graph = _graph()
    # The root package re-exports the public API, so it imports from everywhere; modules below it
    # that import the root would close a cycle through it.
    assert _cycles(graph) == []


def test_the_library_never_imports_the_cli() -> None:
    graph = _graph()
    offenders = {
        m: sorted(d for d in deps if d == "corral.cli" or d.startswith("corral.cli."))
        for m, deps in graph.items()
        if not (m == "corral.cli" or m.startswith("corral.cli.") or m == "corral.__main__")
    }
    # Late imports count too here: the CLI is never a dependency of the library.
    for module, path in MODULES.items():
        if module.startswith("corral.cli") or module == "corral.__main__":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("corral.cli"):
                offenders.setdefault(module, []).append(node.module or "")
    assert {m: d for m, d in offenders.items() if d} == {}


def test_one_module_talks_to_the_extension() -> None:
    users = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (
                isinstance(node, ast.ImportFrom)
                and node.module == "corral"
                and any(a.name == "_core" for a in node.names)
            ):
                users.append(module)
            elif isinstance(node, ast.ImportFrom) and (node.module or "") == "corral._core":
                users.append(module)
            elif isinstance(node, ast.Import) and any(a.name == "corral._core" for a in node.names):
                users.append(module)
    assert sorted(set(users)) == ["corral._native"]


def test_modules_stay_small() -> None:
    big = {m: n for m, p in MODULES.items() if (n := len(p.read_text(encoding="utf-8").splitlines())) > 800}
    assert big == {}


def test_the_pipeline_points_one_way() -> None:
    """Lower layers never import higher ones at module level."""
    layers = [
        (
            "corral.errors",
            "corral.progress",
            "corral.telemetry",
            "corral._native",
            "corral.tokenizer",
            "corral.models",
        ),
        ("corral.grammar",),
        ("corral.engine", "corral.schema", "corral.compile"),
        ("corral.runtime",),
        ("corral.linter",),
        ("corral.backends",),
        ("corral.generation", "corral.classification"),
        ("corral.integrations", "corral.vllm"),
        ("corral.server",),
        ("corral.cli",),
    ]

    def layer(module: str) -> int | None:
        for i, names in enumerate(layers):
            if any(module == n or module.startswith(n + ".") for n in names):
                return i
        return None

    graph = _graph()
    upward = sorted(
        (m, d)
        for m, deps in graph.items()
        for d in deps
        if layer(m) is not None and layer(d) is not None and layer(d) > layer(m)  # type: ignore[operator]
    )
    assert upward == []
