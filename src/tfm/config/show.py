"""A configuration as text: the keys that differ from the defaults (what training logs at its
start), and the whole effective configuration as YAML with each key's description as a comment
(`tfm config show`), which `tfm train --config` reads back as the same configuration.
"""

from __future__ import annotations

import json
import textwrap
from typing import Any

import yaml
from pydantic import BaseModel

from tfm.config import Config, load_config, read_yaml
from tfm.errors import ConfigError, UsageError

WIDTH = 100


def changed_keys(config: Config) -> list[tuple[str, str]]:
    """(dotted key, value as YAML) for every key whose value differs from its default, in
    schema order; a section (such as a data split) set as a whole counts key by key."""
    return _changes(config, Config(), "")


def _changes(model: BaseModel, default: BaseModel, prefix: str) -> list[tuple[str, str]]:
    found = []
    for name in type(model).model_fields:
        value, base = getattr(model, name), getattr(default, name)
        path = f"{prefix}{name}"
        if isinstance(value, BaseModel) and type(value) is type(base):
            found += _changes(value, base, f"{path}.")
        elif value != base:
            found.append((path, yaml_value(value)))
    return found


def show_config(
    config: str | None, overrides: list[str], *, defaults: bool, comments: bool = True
) -> str:
    """`tfm config show --no-plan`: the effective configuration of `config` (a YAML file, or
    None) and `overrides`, every key, as YAML; with `defaults`, every key at its default.
    (`tfm.training.recipe.plan.show_planned` is the same with the recipe's keys derived.)"""
    if defaults and (config is not None or overrides):
        raise UsageError("--defaults shows the schema's defaults; leave out --config and --set")
    return render_yaml(load_config(config, overrides), comments=comments)


def render_yaml(config: Config, *, comments: bool = True) -> str:
    """Every key of `config` as YAML, sections in schema order; with `comments`, each key's
    description above it, and its default beside a key that differs from it."""
    return "\n".join(_render(config, Config(), 0, comments)) + "\n"


def _render(model: BaseModel, default: BaseModel, depth: int, comments: bool) -> list[str]:
    indent = "  " * depth
    lines = []
    for name, field in type(model).model_fields.items():
        value, base = getattr(model, name), getattr(default, name)
        if comments and field.description:
            wrapped = textwrap.wrap(field.description, WIDTH - len(indent) - 2)
            lines += [f"{indent}# {line}" for line in wrapped]
        if isinstance(value, BaseModel):
            lines.append(f"{indent}{name}:")
            lines += _render(value, base, depth + 1, comments)
            continue
        note = f"  # default: {yaml_value(base)}" if comments and value != base else ""
        lines.append(f"{indent}{name}: {yaml_value(value)}{note}")
    return lines


def yaml_value(value: Any) -> str:
    """`value` as a config file writes it, on one line, read back by tfm as the same value."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return value if _reads_back(value) else json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple | list):  # a list of sections (data.train) as their keys set
        value = [_keys_of(v) if isinstance(v, BaseModel) else v for v in value]
    return yaml.safe_dump(
        value, default_flow_style=True, width=1_000_000, allow_unicode=True
    ).strip()


def _keys_of(section: BaseModel) -> dict:
    return section.model_dump(mode="json", exclude_defaults=True)


def _reads_back(text: str) -> bool:
    try:
        return bool(text) and read_yaml(text, "value")[0] == text and "#" not in text
    except ConfigError:
        return False
