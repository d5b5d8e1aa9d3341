"""One prediction path: every caller of decoding in src/ goes through the `Translator` (an import
rule over the source, as test_imports.py's layer rule), and the decoding defaults are written once:
the output limit's in the config schema, the special ids in the tokenizer."""

import ast
from pathlib import Path

from test_imports import SRC, module_name

# The functions that decode, by the module that defines them.
SEARCHES = {
    "greedy_decode": "tfm.transformer.decoding",
    "sample_decode": "tfm.transformer.decoding",
    "beam_search": "tfm.transformer.beam",
    "search_ids": "tfm.prediction.translate",
    "attention_views": "tfm.prediction.attention_weights",
    "translate_nbest_ids": "tfm.deploy.ct2_decoding",
}
# Who may import them, and why: the Translator's engines and what they are built of.
CALLERS = {
    "tfm.transformer": "the package names its search functions",
    "tfm.prediction.strategies": "each strategy runs its search over a torch model",
    "tfm.prediction.torch_translator": "the Translator over a torch model",
    "tfm.deploy": "the package names the export's search",
    "tfm.deploy.ct2_translator": "the Translator over a CTranslate2 export",
    "tfm.api": "greedy_decode, to time the model itself (bench/model_speed.py)",
}


def imported_names(root: Path, package: str) -> dict[str, set[tuple[str, str]]]:
    """{module: the (module, name) pairs its `from ... import name` statements bring in}, every
    import statement counted (also those inside functions)."""
    found: dict[str, set[tuple[str, str]]] = {}
    for path in sorted((root / package).rglob("*.py")):
        name = module_name(path, root)
        pairs = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and not node.level:
                pairs.update((node.module, alias.name) for alias in node.names)
        found[name] = pairs
    return found


def search_callers(root: Path, package: str = "tfm") -> dict[str, set[str]]:
    """{module: the search functions it imports}, for the modules that import any."""
    found = {}
    for module, pairs in imported_names(root, package).items():
        names = {n for source, n in pairs if n in SEARCHES and source.startswith(package)}
        if names:
            found[module] = names
    return found


def test_every_caller_of_decoding_goes_through_the_translator():
    callers = search_callers(SRC)
    assert {"tfm.prediction.strategies", "tfm.prediction.torch_translator"} <= callers.keys()
    assert sorted(callers.keys() - CALLERS.keys()) == []


def test_a_command_that_decodes_around_the_translator_is_found(tmp_path):
    package = tmp_path / "tfm"
    (package / "commands").mkdir(parents=True)
    (package / "commands" / "sweep.py").write_text(
        "def f():\n    from tfm.prediction.translate import search_ids\n"
    )
    (package / "commands" / "fine.py").write_text("from tfm.prediction.translator import X\n")
    assert search_callers(tmp_path) == {"tfm.commands.sweep": {"search_ids"}}


DEFAULTED = {"max_len_a", "max_len_b", "bos_id", "eos_id"}


def defaults_given(root: Path, package: str = "tfm") -> list[str]:
    """Where a value for one of DEFAULTED is written as a default: a parameter's default, or a
    class attribute's value (a dataclass field, a config key), as "module:name"."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        module = module_name(path, root)
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                args = node.args
                positional = args.posonlyargs + args.args
                pairs = list(zip(positional[len(positional) - len(args.defaults) :],
                                 args.defaults, strict=True))  # fmt: skip
                pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True)
                          if d is not None]  # fmt: skip
                found += [f"{module}:{node.name}({a.arg})" for a, _ in pairs if a.arg in DEFAULTED]
            elif isinstance(node, ast.ClassDef):
                for item in node.body:
                    if (isinstance(item, ast.AnnAssign) and item.value is not None
                            and isinstance(item.target, ast.Name)
                            and item.target.id in DEFAULTED):  # fmt: skip
                        found.append(f"{module}:{node.name}.{item.target.id}")
    return found


def test_the_decoding_defaults_are_written_once():
    assert defaults_given(SRC) == [
        "tfm.config.schema:DecodingConfig.max_len_a",
        "tfm.config.schema:DecodingConfig.max_len_b",
    ]
    assert ids_assigned(SRC) == ["tfm.data.tokenizer"]  # the special ids' one place


def ids_assigned(root: Path, package: str = "tfm") -> list[str]:
    """The modules that assign BOS_ID or EOS_ID (at any level, tuples too)."""
    found = []
    for path in sorted((root / package).rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = node.targets if isinstance(node, ast.Assign) else []
            names = {n.id for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)}
            if names & {"BOS_ID", "EOS_ID"}:
                found.append(module_name(path, root))
    return found


def test_a_second_default_is_found(tmp_path):
    package = tmp_path / "tfm"
    package.mkdir()
    (package / "search.py").write_text(
        "def f(src, *, eos_id=2, limit=None):\n    pass\n"
        "class Settings:\n    max_len_b: int = 10\n    other: int = 1\n"
    )
    assert defaults_given(tmp_path) == ["tfm.search:f(eos_id)", "tfm.search:Settings.max_len_b"]
