"""tfm's modules import each other without cycles: the import graph of src/tfm, read from the
source (every import statement, also those inside functions), has no cycle."""

import ast
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def import_graph(root: Path, package: str) -> dict[str, set[str]]:
    """{module: the package's modules it imports}. `from a.b import c` imports a.b.c when that
    is a module, else a.b; importing a.b.c also runs the packages a and a.b, which count unless
    the importer is inside them (a package's own modules are imported while it is set up)."""
    files = sorted((root / package).rglob("*.py"))
    modules = {module_name(path, root): path for path in files}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        is_package = path.name == "__init__.py"
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found.update(alias.name for alias in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:  # relative: from the importer's package, up level - 1
                    parts = name.split(".")[: len(name.split(".")) - node.level + is_package]
                    base = ".".join(filter(None, [*parts, base]))
                found.add(base)
                found.update(f"{base}.{alias.name}" for alias in node.names)
        targets = set()
        for imported in found:
            parts = imported.split(".")
            for end in range(1, len(parts) + 1):
                target = ".".join(parts[:end])
                inside = name == target or name.startswith(target + ".")
                if target in modules and target != name and not inside:
                    targets.add(target)
        graph[name] = targets
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle of the graph as [a, b, ..., a], or None (depth-first search, three colours)."""
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        path.pop()
        state[node] = 2
        return None

    for start in sorted(graph):
        if start not in state and (cycle := visit(start)):
            return cycle
    return None


def test_tfm_has_no_import_cycle():
    graph = import_graph(SRC, "tfm")
    assert {"tfm.cli", "tfm.commands.decode", "tfm.prediction.translator"} <= graph.keys()
    assert "tfm.prediction.translator" in graph["tfm.commands.decode"]
    assert {"tfm.prediction.opening", "tfm.deploy.translator"} <= graph["tfm.prediction.translator"]
    cycle = find_cycle(graph)
    assert cycle is None, " -> ".join(cycle)


def test_a_cycle_through_a_function_level_import_is_found(tmp_path):
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "sub" / "__init__.py").write_text("from pkg.sub import a\n")  # its own module
    (package / "sub" / "a.py").write_text("from pkg.b import thing\n")
    (package / "b.py").write_text("def f():\n    from .sub.a import other\n")
    (package / "c.py").write_text("import pkg.b\n")
    graph = import_graph(tmp_path, "pkg")
    assert graph["pkg.sub"] == {"pkg.sub.a"} and graph["pkg.c"] == {"pkg.b"}
    assert find_cycle(graph) == ["pkg.b", "pkg.sub", "pkg.sub.a", "pkg.b"]
    (package / "b.py").write_text("def f():\n    pass\n")
    assert find_cycle(import_graph(tmp_path, "pkg")) is None
