"""The docs name only commands, options and config keys that exist.

Every `tfm ...` command in README.md, docs/*.md and bench/README.md is checked against the real
CLI (the Typer app's click commands):
- in fenced code blocks, a concrete command line (no placeholder) is parsed in full, values
  included, so an unknown command or option, a missing required option or a bad value fails;
- a line with placeholders (`FILE`, `DIR`, `[...]`, `a|b`, `…`) and a command in an inline code
  span (`tfm eval --json`) are synopses: the subcommand must exist, and every `--option` they name
  must exist on it.
Every config key that an inline code span starts with (`train.max_steps`, `train.compile: true`)
or that follows `--set ` anywhere must be a key of the schema; `*` and `<split>` stand for any key.
Problems are reported all at once, as file:line.
"""

import re
import shlex
from pathlib import Path
from typing import get_origin

import typer.main
from pydantic import BaseModel

from tfm.cli import app
from tfm.config import Config
from tfm.config.loading import section_model

ROOT = Path(__file__).resolve().parents[1]
CLI = typer.main.get_command(app)
SHELL_FENCES = {"", "bash", "sh", "shell", "console", "zsh"}
FENCE = re.compile(r"^\s*(```|~~~)\s*([\w-]*)")
# An inline code span, which may break lines but not paragraphs.
CODE_SPAN = re.compile(r"(?<!`)(`+)(?!`)((?:(?!\n\s*\n).)+?)(?<!`)\1(?!`)", re.DOTALL)
SECTIONS = "|".join(name for name in Config.model_fields if name != "run_dir")
KEY_SPAN = re.compile(rf"((?:{SECTIONS})(?:\.(?:\w+|\*|<\w+>))+)(?:$|[\s:=])")
SET_KEY = re.compile(rf"--set[ =]+['\"]?((?:{SECTIONS})(?:\.\w+)+)=")
# A dotted name ending so is a file (`tokenizer.json`, `train.en`), not a key.
FILE_SUFFIXES = {"json", "jsonl", "yaml", "yml", "pt", "safetensors", "txt", "tsv", "csv", "py"}
FILE_SUFFIXES |= {"md", "log", "png", "svg", "pdf", "gz", "en", "de", "fr", "cs"}
PLACEHOLDER = re.compile(r"\[|\]|…|\.\.\.|\||<\w+>|(?<![\w/.$-])[A-Z][A-Z0-9_]*(?![\w/.-])")
REDIRECTION = re.compile(r"^(\d?>>?|&>|<)")


def doc_files() -> list[Path]:
    files = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "bench/README.md"]
    return [path for path in files if path.is_file()]


# --- finding commands and keys in Markdown -------------------------------------------------------


def fenced_lines(text: str) -> tuple[list[tuple[int, str]], str]:
    """(line number, command line) of shell code blocks, continuation lines joined; and the text
    with every code block blanked (line numbers kept), for inline spans."""
    commands, prose, fence, pending = [], [], None, None
    for number, line in enumerate(text.splitlines(), start=1):
        opening = FENCE.match(line)
        if fence is None and opening:
            fence, shell = opening.group(1), opening.group(2).lower() in SHELL_FENCES
            prose.append("")
            continue
        if fence is not None:
            prose.append("")
            if line.strip().startswith(fence):
                fence = None
            elif shell:
                start, joined = pending or (number, "")
                joined += line.rstrip().removesuffix("\\")
                pending = (start, joined + " ") if line.rstrip().endswith("\\") else None
                if pending is None:
                    commands.append((start, joined))
            continue
        prose.append(line)
    return commands, "\n".join(prose)


def code_spans(prose: str) -> list[tuple[int, str]]:
    return [
        (prose.count("\n", 0, match.start()) + 1, " ".join(match.group(2).split()))
        for match in CODE_SPAN.finditer(prose)
    ]


def tfm_arguments(command: str) -> list[str] | None:
    """The arguments after `tfm` of one shell command (`tfm ...`, `VAR=1 tfm ...`, `torchrun ...
    -m tfm ...`, `$ tfm ...`), up to a redirection or comment; None for any other command."""
    try:
        tokens = shlex.split(command, comments=True)
    except ValueError:
        tokens = command.split()
    while tokens and (tokens[0] == "$" or re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", tokens[0])):
        tokens = tokens[1:]
    if not tokens or (tokens[0] != "tfm" and tokens[0] not in ("torchrun", "python", "python3")):
        return None
    if "tfm" not in tokens:
        return None
    arguments = tokens[tokens.index("tfm") + 1 :]
    ends = [i for i, token in enumerate(arguments) if REDIRECTION.match(token)]
    return arguments[: ends[0]] if ends else arguments


def split_commands(line: str, *, pipes: bool) -> list[str]:
    """Shell commands of one line: split at &&, ||, ; and (with `pipes`) a spaced ` | ` outside
    brackets, where `a|b` and `[x | y]` are a synopsis's alternatives."""
    parts = re.split(r"&&|\|\||;", line)
    if not pipes:
        return parts
    return [piece for part in parts for piece in re.split(r" \| (?![^\[]*\])", part)]


def is_concrete(command: str) -> bool:
    unquoted = re.sub(r"'[^']*'|\"[^\"]*\"", "''", command.partition(" #")[0])
    unquoted = re.sub(r"\$\{?\w+\}?", "x", unquoted)
    unquoted = re.sub(r"^(\s*[A-Z_][A-Z0-9_]*=\S*)+", "", unquoted)  # environment assignments
    return not PLACEHOLDER.search(unquoted)


# --- checking them -------------------------------------------------------------------------------


def resolve(arguments: list[str]) -> tuple[list[str], object | None, list[str]]:
    """(command names, click command, remaining arguments); the command is None where a
    placeholder (`tfm COMMAND --help`) stands for it. Raises ValueError for no such command."""
    names, command = ["tfm"], CLI
    while hasattr(command, "commands") and arguments and not arguments[0].startswith("-"):
        name = arguments[0].strip("[]()")
        if re.fullmatch(r"[A-Z][A-Z_]*", name):
            return names, None, arguments
        if name not in command.commands:
            raise ValueError(f"no command '{' '.join(names)} {name}'")
        names, command, arguments = [*names, name], command.commands[name], arguments[1:]
    return names, command, arguments


def synopsis_problem(arguments: list[str]) -> str | None:
    """The subcommand exists and every option named exists on it."""
    try:
        names, command, rest = resolve(arguments)
    except ValueError as exc:
        return str(exc)
    if command is None:
        return None
    known = {"--help"} | {opt for p in command.params for opt in p.opts + p.secondary_opts}
    for token in rest:
        for word in re.split(r"[|\s]", token.strip("[]().,")):
            option = word.strip("[]()").partition("=")[0]
            if re.match(r"--?[A-Za-z]", option) and option not in known:
                return f"no option {option} on '{' '.join(names)}'"
    return None


def parse_problem(arguments: list[str]) -> str | None:
    """What click says about the whole command line, or None when it parses."""
    if problem := synopsis_problem(arguments):
        return problem
    names, command, rest = resolve(arguments)
    if command is None or "--help" in rest or hasattr(command, "commands"):
        return None
    try:
        command.make_context(" ".join(names), list(rest))
    except Exception as exc:  # click's UsageError (Typer vendors click, so not `click.*`)
        if not hasattr(exc, "format_message"):
            raise
        return f"'{' '.join(names)}': {exc.format_message()}"
    return None


def command_problems(text: str) -> tuple[list[tuple[int, str]], int]:
    """(line, problem) for every command line of the text that the CLI rejects; and how many
    command lines were checked."""
    lines, prose = fenced_lines(text)
    checks = [(n, part, True) for n, line in lines for part in split_commands(line, pipes=True)]
    for number, span in code_spans(prose):
        checks += [(number, part, False) for part in split_commands(span, pipes=False)]
    problems, checked = [], 0
    for number, command, fenced in checks:
        arguments = tfm_arguments(command)
        if arguments is None:
            continue
        checked += 1
        full = fenced and is_concrete(command)
        problem = parse_problem(arguments) if full else synopsis_problem(arguments)
        if problem:
            problems.append((number, f"`{command.strip()}`: {problem}"))
    return sorted(problems), checked


def key_exists(parts: list[str], model: type[BaseModel] = Config) -> bool:
    """Whether the dotted key is in the schema; `*` and `<split>` stand for any key there, and
    anything below a mapping field (`data.train.fields.en`) exists."""
    head, rest = parts[0], parts[1:]
    names = list(model.model_fields) if head == "*" or head.startswith("<") else [head]
    for name in names:
        field = model.model_fields.get(name)
        if field is None:
            continue
        annotation = field.annotation
        section = section_model(annotation)  # one, or one of a list (data.train)
        if section is not None:
            if not rest or key_exists(rest, section):
                return True
        elif not rest or get_origin(annotation) is dict:
            return True
    return False


def key_problems(text: str) -> tuple[list[tuple[int, str]], int]:
    """(line, problem) for every config key named in the text that the schema lacks; and how
    many were checked."""
    _, prose = fenced_lines(text)
    spans = [(number, KEY_SPAN.match(span)) for number, span in code_spans(prose)]
    named = [(number, match.group(1)) for number, match in spans if match]
    named += [(text.count("\n", 0, m.start()) + 1, m.group(1)) for m in SET_KEY.finditer(text)]
    problems, checked = set(), 0
    for number, key in named:
        parts = key.split(".")
        if key_exists(parts):
            checked += 1
        elif parts[-1] not in FILE_SUFFIXES:
            problems.add((number, f"no config key '{key}' in the schema"))
    return sorted(problems), checked


def report(check) -> tuple[list[str], int]:
    lines, total = [], 0
    for path in doc_files():
        problems, checked = check(path.read_text(encoding="utf-8"))
        name = path.relative_to(ROOT)
        lines += [f"{name}:{number}: {problem}" for number, problem in problems]
        total += checked
    return lines, total


# --- tests ---------------------------------------------------------------------------------------


def test_commands_in_the_docs_exist_and_parse():
    problems, checked = report(command_problems)
    assert checked >= 10, f"only {checked} tfm commands found in {doc_files()}"
    assert not problems, "commands the CLI rejects:\n" + "\n".join(problems)


def test_config_keys_in_the_docs_exist():
    problems, checked = report(key_problems)
    assert checked >= 10, f"only {checked} config keys found in {doc_files()}"
    assert not problems, "config keys the schema lacks:\n" + "\n".join(problems)


def test_the_docs_are_found():
    names = {str(path.relative_to(ROOT)) for path in doc_files()}
    assert {"README.md", "docs/configuration.md", "bench/README.md"} <= names


SAMPLE = """\
Train with `tfm train --config FILE [--sett K=V] [--resume | --overwrite]`, then
`tfm evaluate --json`; `tfm eval
--beam-size K --json` is fine, and so is `tfm average --last 5`.

```bash
tfm train --config configs/toy.yaml --set train.max_step=10
OMP_NUM_THREADS=1 tfm translate "a dog" --beam-size 2  # a comment --bogus
tfm eval --beam-size five --json > scores.json
echo "a dog" | tfm translate --beam 5
tfm eval --run DIR --beam-size K --rerank
tfm data check \\
  --config configs/toy.yaml --jsn
torchrun --standalone --nproc_per_node=2 -m tfm train --config configs/toy.yaml
tfm average --last 5
```

Set `model.d_modl`, `data.<split>.format`, `data.toy.*`, `tokenizer.json` and `train.en`;
`--set data.train.fields.en=src` and `--set decoding.beam=4` in prose.
"""


def test_command_check_names_every_rejected_line():
    problems, checked = command_problems(SAMPLE)
    assert checked == 12
    assert [(number, problem.partition("`: ")[2]) for number, problem in problems] == [
        (1, "no option --sett on 'tfm train'"),
        (2, "no command 'tfm evaluate'"),
        (8, "'tfm eval': Invalid value for '--beam-size': Input should be a valid integer, "
         "unable to parse string as an integer"),
        (9, "no option --beam on 'tfm translate'"),
        (10, "no option --rerank on 'tfm eval'"),
        (11, "no option --jsn on 'tfm data check'"),
        (14, "'tfm average': Missing option '--out'."),
    ]  # fmt: skip


def test_key_check_names_every_missing_key():
    problems, checked = key_problems(SAMPLE)
    assert problems == [
        (6, "no config key 'train.max_step' in the schema"),
        (17, "no config key 'model.d_modl' in the schema"),
        (18, "no config key 'decoding.beam' in the schema"),
    ]
    assert checked == 3  # data.<split>.format, data.toy.*, data.train.fields.en
