"""The configuration reference, docs/configuration.md, generated from the schema (config/schema.py).

    python -m tfm.config.reference > docs/configuration.md

`config_keys` lists every key with its type, default, allowed values and description, read from
the pydantic fields of `Config`; `render` writes them as Markdown, one table per section. A
section model used at several keys (the three splits' `SourceConfig`) is documented once, its
keys written with a placeholder: `data.<split>.format`.
"""

from __future__ import annotations

import inspect
import sys
import types
from dataclasses import dataclass
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import yaml
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from tfm.config import RECIPE_KEYS, SPLITS, Config
from tfm.config.loading import section_model
from tfm.config.ranges import bounds

_RECIPE = {f"{section}.{key}" for section, keys in RECIPE_KEYS.items() for key in keys}

COMMAND = "python -m tfm.config.reference > docs/configuration.md"


@dataclass(frozen=True)
class Key:
    """One configuration key as the reference shows it (values as YAML, without backticks)."""

    path: str  # dotted: "train.max_steps"; in a shared section "data.<split>.format"
    type: str  # "int or null"; "section" for a nested section
    default: str  # "null", "[0.9, 0.98]"; "" when required
    choices: tuple[str, ...]  # of a Literal: ("relu", "gelu"); () for any value of the type
    bounds: str  # "≥ 0.0 and < 1.0"; "" when unbounded
    description: str


@dataclass(frozen=True)
class Section:
    """One section model and the keys where it is used (none for the top level)."""

    model: type[BaseModel]
    paths: tuple[str, ...]  # ("data.train", "data.validation", "data.test")
    prefix: str  # what its keys start with: "data.<split>"; "" at the top level
    keys: tuple[Key, ...]


def sections(root: type[BaseModel] = Config) -> list[Section]:
    """Every section of `root` (itself first), each model once, in the order of the fields."""
    uses: dict[type[BaseModel], list[str]] = {root: []}
    _collect_uses(root, "", uses)
    found = []
    for model, paths in uses.items():
        prefix = _prefix(paths)
        keys = tuple(
            _key(f"{prefix}.{name}" if prefix else name, field)
            for name, field in model.model_fields.items()
        )
        found.append(Section(model=model, paths=tuple(paths), prefix=prefix, keys=keys))
    return found


def config_keys(root: type[BaseModel] = Config) -> list[Key]:
    """Every key of every section of `root`, in the order of the reference."""
    return [key for section in sections(root) for key in section.keys]


def _collect_uses(model: type[BaseModel], prefix: str, uses: dict) -> None:
    for name, field in model.model_fields.items():
        sub = section_model(field.annotation)
        if sub is None:
            continue
        path = f"{prefix}.{name}" if prefix else name
        if get_origin(field.annotation) is list:  # a list of sections: its items' keys
            path += "[i]"
        first_use = sub not in uses
        uses.setdefault(sub, []).append(path)
        if first_use:
            _collect_uses(sub, path, uses)


def _prefix(paths: list[str]) -> str:
    """The one path, or for a model used at several keys `parent.<split>` (or `parent.<key>`),
    the parent of its first use: a use under another parent (`data.related[i].validation`, a
    split too) is named in the heading and takes the same keys."""
    if len(paths) <= 1:
        return paths[0] if paths else ""
    parent = paths[0].rpartition(".")[0]
    names = {path.rpartition(".")[2] for path in paths if path.rpartition(".")[0] == parent}
    if len(names) == 1:
        return paths[0]
    placeholder = "split" if names == set(SPLITS) else "key"
    return f"{parent}.<{placeholder}>"


def _key(path: str, field: FieldInfo) -> Key:
    return Key(
        path=path,
        type=_type_name(field.annotation),
        default=_default(field),
        choices=tuple(_yaml(value) for value in _literals(field.annotation)),
        bounds=_bounds(path, field),
        description=field.description or "",
    )


def _type_name(annotation: Any) -> str:
    origin, args = get_origin(annotation), get_args(annotation)
    if annotation is type(None):
        return "null"
    if origin is Literal:
        return " or ".join(dict.fromkeys(type(value).__name__ for value in args))
    if origin is Annotated:  # an element with its own bounds (train.betas): the description says
        return _type_name(args[0])
    if origin in (Union, types.UnionType):
        return " or ".join(_type_name(arg) for arg in args)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return "section"
    if origin is list and section_model(annotation) is not None:
        return "list of sections"
    if origin is not None:
        return f"{origin.__name__}[{', '.join(_type_name(arg) for arg in args)}]"
    return annotation.__name__


def _default(field: FieldInfo) -> str:
    if field.is_required():
        return ""
    value = field.get_default(call_default_factory=True)
    if isinstance(value, BaseModel):  # a section: only what differs from its own defaults
        value = value.model_dump(mode="json", exclude_defaults=True)
        return _yaml(value) if value else ""
    return _yaml(value)


def _yaml(value: Any) -> str:
    """A value as it would be written in a config file (flow style for lists and mappings)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, tuple):
        value = list(value)
    return yaml.safe_dump(value, default_flow_style=True, width=1_000_000).strip()


def _bounds(path: str, field: FieldInfo) -> str:
    """Bounds from ge/gt/le/lt, lower first; any other constraint is an error, so that the
    reference never leaves one out."""
    return " and ".join(f"{symbol} {value}" for symbol, value in bounds(field, path))


def _literals(annotation: Any) -> list[Any]:
    if get_origin(annotation) is Literal:
        return list(get_args(annotation))
    return [value for arg in get_args(annotation) for value in _literals(arg)]


# --- Markdown ------------------------------------------------------------------------------------


def render(root: type[BaseModel] = Config) -> str:
    """docs/configuration.md for the schema `root`."""
    lines = [
        "# Configuration reference",
        "",
        "Generated from the schema in `src/tfm/config/schema.py`; do not edit by hand. "
        f"Regenerate with `{COMMAND}`.",
        "",
        "A config file is YAML with the sections below and sets only what differs from the "
        "defaults. One key can be set on the command line too: `tfm train --config FILE --set "
        "train.max_steps=600`. An unknown key, a wrong type or a value out of range is an error "
        "that names the key. `null` is YAML's empty value (none, off). `{}` is a config with "
        "every key at its default (the built-in toy corpus); an empty file means the same but is "
        "warned about, as it is more often a mistake.",
        "",
        "A key marked *recipe* has no default: it is either given or derived from the training "
        "data, the device and the budget (`src/tfm/training/recipe/`): vocabulary, model shape, "
        "batch, learning rate and schedule, training length, validation and checkpoint "
        "cadence, averaging and beam. `tfm config show --config FILE` prints the plan with the "
        "rule behind each key, and a run's config.yaml and plan.json hold it.",
    ]
    for section in sections(root):
        lines += ["", *_render_section(section)]
    return "\n".join(lines) + "\n"


def _render_section(section: Section) -> list[str]:
    title = ", ".join(f"`{path}`" for path in section.paths) or "Top level"
    doc = inspect.cleandoc(section.model.__dict__.get("__doc__") or "")
    lines = [f"## {title}", ""]
    if doc:
        lines += [doc, ""]
    if len(section.paths) > 1:
        placeholder = section.prefix.rpartition(".")[2]
        parent = section.prefix.rpartition(".")[0]
        names = ", ".join(f"`{path.rpartition('.')[2]}`" for path in section.paths
                          if path.rpartition(".")[0] == parent)  # fmt: skip
        elsewhere = [f"`{path}`" for path in section.paths if path.rpartition(".")[0] != parent]
        also = f" ({', '.join(elsewhere)} takes the same keys)" if elsewhere else ""
        lines += [f"In the keys below, `{placeholder}` is one of {names}{also}.", ""]
    lines += ["| key | type | default | allowed | description |", "|---|---|---|---|---|"]
    for key in section.keys:
        default = (
            f"`{key.default}`" if key.default else ("required" if key.type != "section" else "")
        )
        if key.path in _RECIPE:
            default = "*recipe*"
        allowed = "; ".join(filter(None, [", ".join(f"`{c}`" for c in key.choices), key.bounds]))
        cells = [f"`{key.path}`", key.type, default, allowed, key.description]
        lines.append("| " + " | ".join(cell.replace("|", "\\|") for cell in cells) + " |")
    return lines


if __name__ == "__main__":
    sys.stdout.buffer.write(render().encode("utf-8"))
