"""bench/ uses only tfm's public surface: every import of tfm in a benchmark script names
`tfm.api` and only names that `tfm.api.__all__` lists (read from the source, imports inside
functions and under TYPE_CHECKING included)."""

import ast
from pathlib import Path

import tfm.api

BENCH = Path(__file__).resolve().parents[2] / "bench"


def tfm_imports(source: str) -> list[tuple[int, str, str]]:
    """(line, module, name) of every import of tfm or of a module in it in `source`; name is ""
    for a plain `import tfm...`."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, "") for a in node.names if in_tfm(a.name)]
        elif isinstance(node, ast.ImportFrom) and in_tfm(node.module or ""):
            found += [(node.lineno, node.module or "", a.name) for a in node.names]
    return found


def in_tfm(module: str) -> bool:
    return module == "tfm" or module.startswith("tfm.")


def test_benchmarks_import_only_what_tfm_api_exports():
    scripts = sorted(BENCH.glob("*.py"))
    assert len(scripts) >= 10
    public = set(tfm.api.__all__)
    outside = [
        f"{path.name}:{line}: {module} {name}".rstrip()
        for path in scripts
        for line, module, name in tfm_imports(path.read_text(encoding="utf-8"))
        if module != "tfm.api" or name not in public
    ]
    assert outside == []
    assert sum(len(tfm_imports(path.read_text(encoding="utf-8"))) for path in scripts) > 30


def test_an_internal_import_is_found_wherever_it_stands():
    source = (
        "from tfm.api import load_config\n"
        "if TYPE_CHECKING:\n    from tfm.training.session import Session\n"
        "def f():\n    import tfm.cli\n    from tfm.api import train\n"
    )
    assert tfm_imports(source) == [
        (1, "tfm.api", "load_config"),
        (3, "tfm.training.session", "Session"),
        (5, "tfm.cli", ""),
        (6, "tfm.api", "train"),
    ]


def test_every_listed_name_exists():
    assert [name for name in tfm.api.__all__ if not hasattr(tfm.api, name)] == []
