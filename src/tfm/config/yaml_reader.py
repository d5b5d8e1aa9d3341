"""The hardened YAML reader: the only place tfm parses YAML.

YAML traps handled by `read_yaml`: duplicate keys are an error; `1e-4` is a number (YAML 1.1
reads it as a string); only `true`/`false` are booleans, so a language code such as `no` stays
a string; an integer too long for Python's int() is a number out of every key's range. Nesting
and alias expansion are bounded, so a hostile file cannot exhaust memory.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from tfm.errors import ConfigError


class _Loader(yaml.SafeLoader):
    """SafeLoader with YAML 1.2 booleans and floats, and duplicate keys refused."""


_Loader.yaml_implicit_resolvers = {
    first: [(tag, rx) for tag, rx in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:\d[\d_]*)?(?:\.\d*)?[eE][-+]?\d+$|^[-+]?\d[\d_]*\.\d*$|^[-+]?\.\d+$"),
    list("-+0123456789."),
)


def _construct_mapping(loader: _Loader, node: yaml.MappingNode, deep: bool = False) -> dict:
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if key in seen:
            where = f"{key_node.start_mark.name}:{line}"
            raise ConfigError(f"{where}: duplicate key '{key}' (first at line {seen[key]})")
        seen[key] = line
    return loader.construct_mapping(node, deep=deep)


_Loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)


def _construct_int(loader: _Loader, node: yaml.ScalarNode) -> int | float:
    """An integer; one of more digits than Python's int() reads (4,300) is read as the float it
    is near, infinite from 309 digits, which every key's range then refuses by name."""
    try:
        return loader.construct_yaml_int(node)
    except ValueError:
        return float(str(loader.construct_scalar(node)).replace("_", ""))


_Loader.add_constructor("tag:yaml.org,2002:int", _construct_int)


MAX_YAML_DEPTH = 64  # nested mappings and lists; a config needs about four
MAX_YAML_VALUES = 100_000  # values after aliases are expanded; a config has a few hundred


def read_yaml(text: str, name: str) -> tuple[Any, dict[tuple, int]]:
    """Parse YAML text; return the data and a map from key path to line number.

    Nesting deeper than MAX_YAML_DEPTH, aliases expanding to more than MAX_YAML_VALUES values
    (a "billion laughs" bomb) and an alias inside itself are one-line errors, found before
    anything is built.
    """
    try:
        _check_nesting(text, name)
        loader = _Loader(text)
        loader.name = name
        try:
            node = loader.get_single_node()
            if node is not None:
                _expanded_size(node, name, {}, set())
            data = loader.construct_document(node) if node is not None else None
        finally:
            loader.dispose()
    except yaml.YAMLError as exc:
        raise ConfigError(f"{name}: not valid YAML: {' '.join(str(exc).split())}") from exc
    except RecursionError:  # a nesting the checks above did not see coming: still one line
        raise _too_deep(name, None) from None
    lines: dict[tuple, int] = {}
    _collect_lines(node, (), lines)
    return data, lines


def _check_nesting(text: str, name: str) -> None:
    """Refuse nesting deeper than MAX_YAML_DEPTH from the event stream, which the parser produces
    without recursion (composing such a document would exhaust Python's stack). libyaml's parser,
    where installed, is much faster on deep flow nesting; its other syntax errors are left to the
    parse that follows, so that they read the same with or without it."""
    depth = 0
    try:
        for event in yaml.parse(text, Loader=getattr(yaml, "CSafeLoader", _Loader)):
            if isinstance(event, yaml.CollectionStartEvent):
                depth += 1
                if depth > MAX_YAML_DEPTH:
                    raise _too_deep(name, event.start_mark)
            elif isinstance(event, yaml.CollectionEndEvent):
                depth -= 1
    except yaml.MarkedYAMLError as exc:
        if "maximum nesting depth" in str(exc.problem):  # libyaml's own limit (1000) came first
            raise _too_deep(name, exc.problem_mark) from None


def _too_deep(name: str, mark: Any) -> ConfigError:  # mark: PyYAML's or libyaml's Mark, or None
    line = f":{mark.line + 1}" if mark is not None else ""
    return ConfigError(
        f"{name}{line}: nested more than {MAX_YAML_DEPTH} levels deep; a config is a few levels "
        "of sections and lists"
    )


def _expanded_size(node: yaml.Node, name: str, sizes: dict[int, int], open_: set[int]) -> int:
    """How many values `node` stands for once aliases are expanded, counted without expanding
    them (each node once); refuses more than MAX_YAML_VALUES and an alias inside itself."""
    key = id(node)
    if key in sizes:
        return sizes[key]
    where = f"{name}:{node.start_mark.line + 1}"
    if key in open_:
        raise ConfigError(f"{where}: an alias refers to a list or mapping that contains it")
    open_.add(key)
    children = node.value if isinstance(node, yaml.SequenceNode) else []
    if isinstance(node, yaml.MappingNode):
        children = [child for pair in node.value for child in pair]
    total = 1
    for child in children:
        total += _expanded_size(child, name, sizes, open_)
        if total > MAX_YAML_VALUES:
            raise ConfigError(
                f"{where}: the aliases here expand to more than {MAX_YAML_VALUES} values; "
                "write the config out without aliases nested in aliases"
            )
    open_.discard(key)
    sizes[key] = total
    return total


def _collect_lines(node: yaml.Node | None, path: tuple, lines: dict[tuple, int]) -> None:
    if isinstance(node, yaml.MappingNode):
        for key_node, value_node in node.value:
            sub = (*path, key_node.value)
            lines[sub] = key_node.start_mark.line + 1
            _collect_lines(value_node, sub, lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[(*path, i)] = item.start_mark.line + 1
            _collect_lines(item, (*path, i), lines)
