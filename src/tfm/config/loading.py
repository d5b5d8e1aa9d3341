"""Loading a config: the file read by `read_yaml`, `--set section.key=value` overrides applied,
the schema validated, and every problem reported at once, one line each, naming the key path, the
file's line (or the --set that typed it), and for a misspelt key the closest valid one.
"""

from __future__ import annotations

import difflib
import logging
import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_args

import yaml
from pydantic import BaseModel, ValidationError

from tfm.config import ranges
from tfm.config.schema import UNION_TAGS, Config
from tfm.config.yaml_reader import read_yaml
from tfm.errors import ConfigError

log = logging.getLogger(__name__)


def load_config(
    path: str | Path | None, overrides: list[str] | tuple[str, ...] = (), *, stored: bool = False
) -> Config:
    """Read a YAML config (or none: all defaults), apply `section.key=value` overrides, validate.
    With `stored`, the file is one a run wrote (its config.yaml), which may not be empty.

    Raises ConfigError whose message has one line per problem, each naming the key path.
    """
    name = str(path) if path is not None else "<defaults>"
    data: Any = {}
    lines: dict[tuple, int] = {}
    if path is not None:
        data, lines = read_yaml(_read_config_text(Path(path)), name)
        if stored and not data:  # all defaults would be another run's settings (the toy corpus)
            raise ConfigError(
                f"{name} is empty: a run's config.yaml holds every setting it was trained with; "
                "restore it"
            )
        if data is None:  # no document: an empty file, or comments only
            log.warning(
                "%s is empty: every key%s takes its default (a config that names no data trains "
                "on the built-in toy corpus); write {} in it to mean that without this warning",
                name,
                " not given with --set" if overrides else "",
            )
            data = {}
        if not isinstance(data, dict):
            found = type(data).__name__
            raise ConfigError(f"{name}: expected a mapping of sections, found {found}")
    set_lines: dict[tuple, str] = {}
    for override in overrides:
        _check_sections(data, override, set_lines)
        key_path = apply_override(data, override)
        set_lines[key_path] = override
    try:
        config = Config.model_validate(data)
    except ValidationError as exc:
        problems = [_describe(err, name, lines, set_lines) for err in exc.errors()]
        raise ConfigError("\n".join(problems)) from None
    train = config.train
    given_null = train.decay_steps is None and "decay_steps" in train.model_fields_set
    if given_null and train.schedule == "cosine":  # left out, the recipe would plan it
        key = ("train", "decay_steps")
        where = f"--set {set_lines[key]}" if key in set_lines else f"{name}, line {lines.get(key)}"
        raise ConfigError(
            f"{where}: train.decay_steps: null with train.schedule: cosine: leave decay_steps out "
            "(the recipe plans it from the training's length) or give the decay's steps"
        )
    return config


MAX_CONFIG_BYTES = 1 << 20  # a config is a few kilobytes


def _read_config_text(path: Path) -> str:
    """The text of the config file `path`; a file that is not a regular file (a device, a pipe,
    a folder) or is larger than MAX_CONFIG_BYTES is refused before it is read."""
    try:
        # Non-blocking: opening a FIFO must not wait for a writer before it is refused.
        with open(os.open(path, os.O_RDONLY | os.O_NONBLOCK), "rb") as file:
            if not stat.S_ISREG(os.fstat(file.fileno()).st_mode):
                raise ConfigError(f"config file {path} is not a regular file; give a YAML file")
            data = file.read(MAX_CONFIG_BYTES + 1)
    except FileNotFoundError as exc:
        raise ConfigError(f"config file {path} does not exist") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config file {path} is a folder; give a YAML file") from exc
    except OSError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(
            f"config file {path} is larger than {MAX_CONFIG_BYTES // 2**20} MB; a config is a "
            "few kilobytes of YAML: is this the right file?"
        )
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"cannot read config file {path}: {exc}") from exc


def _check_sections(data: dict, override: str, set_lines: dict[tuple, str]) -> None:
    """Refuse an override inside a section that an earlier --set replaced by a value, naming
    that --set (`--set train=5 --threads 1`: the first is the mistake, the second is fine)."""
    parts = tuple(override.partition("=")[0].strip().split("."))
    node: Any = data
    for end in range(1, len(parts)):
        node = node.get(parts[end - 1]) if isinstance(node, dict) else None
        if node is not None and not isinstance(node, dict) and parts[:end] in set_lines:
            earlier = set_lines[parts[:end]]
            raise ConfigError(
                f"--set {earlier!r}: '{'.'.join(parts[:end])}' is a section, not a value; set "
                f"one of its keys: --set {'.'.join(parts[:end])}.KEY=VALUE"
            )


def apply_override(data: dict, override: str) -> tuple:
    """Set `a.b.c=value` in nested `data`; the value is YAML, typed later by the schema."""
    key, sep, raw = override.partition("=")
    if not sep or not key.strip():
        raise ConfigError(f"--set {override!r}: expected section.key=value")
    parts = tuple(key.strip().split("."))
    value, _ = read_yaml(raw, f"--set {key}") if raw.strip() else (None, {})
    node = data
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise ConfigError(f"--set {override!r}: '{part}' is not a section")
        node = child
    node[parts[-1]] = value
    return parts


def _describe(
    err: Mapping[str, Any], name: str, lines: dict[tuple, int], set_lines: dict[tuple, str]
) -> str:
    loc = tuple(
        p
        for p in err["loc"]
        if not (isinstance(p, str) and (p.startswith("function-") or p in UNION_TAGS))
    )
    dotted = key_path(loc)
    where = _where(loc, name, lines, set_lines)
    kind = err["type"]
    if kind == "extra_forbidden":
        hint = _suggest(loc)
        return f"{where}unknown key '{dotted}'{hint}"
    if kind == "value_error":
        message = str(err.get("ctx", {}).get("error", err["msg"]))
        return f"{where}{dotted}: {message}"
    model = _section_at(loc)
    said = ranges.message(model.model_fields.get(str(loc[-1])) if model else None, err)
    found = err.get("input")
    return f"{where}{dotted}: {said[0].lower()}{said[1:]} (found {found!r})"


def key_path(loc: tuple) -> str:
    """A key's path as tfm writes it: `data.train[1].format` (list items by index)."""
    path = ""
    for part in loc:
        path += f"[{part}]" if isinstance(part, int) else f".{part}" if path else str(part)
    return path or "(top level)"


def _where(loc: tuple, name: str, lines: dict[tuple, int], set_lines: dict[tuple, str]) -> str:
    """Where the problem at `loc` was typed: the --set that set it (or a key inside it, as
    `--set nosuch.key=1` makes the unknown section `nosuch`), else the file's line."""
    inside = [typed for path, typed in set_lines.items() if path[: len(loc)] == loc]
    if loc and inside:
        return f"--set {inside[-1]}: "
    for end in range(len(loc), 0, -1):
        if loc[:end] in set_lines:
            return f"--set {set_lines[loc[:end]]}: "
        if loc[:end] in lines:
            return f"{name}:{lines[loc[:end]]}: "
    return f"{name}: "


def _suggest(loc: tuple) -> str:
    """'; did you mean X?' for a misspelt key, from the fields valid at that place."""
    model = _section_at(loc)
    if model is None:
        return ""
    close = difflib.get_close_matches(str(loc[-1]), list(model.model_fields), n=1, cutoff=0.6)
    valid = ", ".join(model.model_fields)
    return f"; did you mean '{close[0]}'?" if close else f"; valid keys: {valid}"


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The section model a field holds: itself, or the one of a list of them or of a union
    (`data.train`: one corpus or a list), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := section_model(arg)) is not None:
            return found
    return None


def _section_at(loc: tuple) -> type[BaseModel] | None:
    """The section model that holds the key at `loc`; None where `loc` is not in a section
    (an item of a list of sections is in that section)."""
    model: type[BaseModel] | None = Config
    for part in loc[:-1]:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part)) if model else None
        model = section_model(field.annotation) if field else None
    return model


def to_yaml(config: Config) -> str:
    """The resolved config as YAML (what a run directory keeps)."""
    return yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False, allow_unicode=True)
