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
    engines = graph["tfm.commands.engines"]
    assert {"tfm.prediction.opening", "tfm.deploy.ct2_translator"} <= engines
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


# tfm's layers, lowest first: a module imports from its own layer or lower ones, never higher.
LAYERS = [
    (
        "base",
        [
            "tfm",
            "tfm.errors",
            "tfm.limits",
            "tfm.decoding_options",
            "tfm.threads",
            "tfm.device",
            "tfm.atomic",
            "tfm.failure",
            "tfm.json_file",
            "tfm.logs",
        ],
    ),  # fmt: skip
    ("configuration", ["tfm.config"]),
    ("model and data", ["tfm.transformer", "tfm.data", "tfm.training.loss"]),
    ("run directory", ["tfm.rundir"]),
    ("prediction", ["tfm.prediction"]),
    (
        "export, training and its recipe, pictures",
        ["tfm.deploy", "tfm.training", "tfm.visual"],
    ),
    ("commands", ["tfm.commands", "tfm.serve"]),
    ("entry points", ["tfm.cli", "tfm.cli_options", "tfm.api", "tfm.__main__"]),
]
# Imports that still go up: (importer, the package it imports from) and why it has not moved yet.
UPWARD: dict[tuple[str, str], str] = {}


def layer_of(module: str) -> int:
    """The index in LAYERS of the layer whose longest prefix names `module`."""
    found = [
        (len(prefix), index)
        for index, (_, prefixes) in enumerate(LAYERS)
        for prefix in prefixes
        if module == prefix or (prefix != "tfm" and module.startswith(prefix + "."))
    ]
    assert found, f"{module} is in no layer: add it to LAYERS in tests/test_imports.py"
    return max(found)[1]


def upward_imports(graph: dict[str, set[str]]) -> set[tuple[str, str]]:
    return {(a, b) for a, targets in graph.items() for b in targets if layer_of(b) > layer_of(a)}


def excuse(importer: str, imported: str) -> tuple[str, str] | None:
    """The key of UPWARD that lists the import of `imported` by `importer`, if any."""
    for key in UPWARD:
        if importer == key[0] and (imported == key[1] or imported.startswith(key[1] + ".")):
            return key
    return None


def test_no_module_imports_from_a_higher_layer():
    graph = import_graph(SRC, "tfm")
    assert layer_of("tfm.data.tokenizer") < layer_of("tfm.rundir.store") < layer_of("tfm.cli")
    upward = upward_imports(graph)
    assert sorted((a, b) for a, b in upward if excuse(a, b) is None) == []
    assert sorted(UPWARD.keys() - {excuse(a, b) for a, b in upward}) == []  # moved: unlist it


def test_an_import_from_a_higher_layer_is_found(tmp_path):
    package = tmp_path / "tfm"
    (package / "data").mkdir(parents=True)
    for path in ("__init__.py", "data/__init__.py", "cli.py"):
        (package / path).write_text("")
    (package / "data" / "reader.py").write_text("def f():\n    from tfm.cli import app\n")
    assert upward_imports(import_graph(tmp_path, "tfm")) == {("tfm.data.reader", "tfm.cli")}


def test_every_module_file_name_is_unique():
    """A file name says which module it is: no two modules in src/tfm share one (a package's
    __init__.py and the entry points' __main__.py aside)."""
    seen: dict[str, list[str]] = {}
    for path in sorted((SRC / "tfm").rglob("*.py")):
        if path.name not in ("__init__.py", "__main__.py"):
            seen.setdefault(path.name, []).append(str(path.relative_to(SRC)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
    assert "multihead_attention.py" in seen
