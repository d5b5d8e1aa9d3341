"""A key's allowed range, read from its pydantic field: the bounds the configuration reference
shows, and the words an error uses, so that a wrong value of a key with a range of two ends (out
of it, not finite, not a number) is refused naming the whole range ("expected a number from 0.01
to 100") rather than the one end it crossed, or the end a NaN happened to be compared with."""

from __future__ import annotations

import types
from collections.abc import Mapping
from typing import Any, Union, get_args, get_origin

import annotated_types
from pydantic import Discriminator
from pydantic.fields import FieldInfo

from tfm.limits import bound_text

# pydantic's error types that are not about the value given: the range does not answer them
_NOT_THE_VALUE = frozenset({"missing", "extra_forbidden", "value_error", "assertion_error"})

_BOUNDS = (  # (constraint, its attribute, its symbol): two lower ends, then two upper
    (annotated_types.Gt, "gt", ">"),
    (annotated_types.Ge, "ge", "≥"),
    (annotated_types.Lt, "lt", "<"),
    (annotated_types.Le, "le", "≤"),
)


def bounds(field: FieldInfo, path: str) -> list[tuple[str, Any]]:
    """The ends of `field`'s range, lower first, as (symbol, value): [("≥", 1), ("≤", 16)]; a
    list's most items and a text's pattern after them. Any other constraint is an error naming
    `path`, so that no reader leaves one out."""
    told = [c for c in field.metadata if not isinstance(c, Discriminator)]  # not a bound
    ends = [_end(constraint) or _other(constraint) for constraint in told]
    for constraint, end in zip(told, ends, strict=True):
        if end is None:
            raise ValueError(f"{path}: the reference cannot show the constraint {constraint!r}")
    return [(symbol, value) for _, symbol, value in sorted(end for end in ends if end)]


def expected(field: FieldInfo) -> str | None:
    """What a value of `field` must be, in words, when its range has two ends: "an integer
    from 1 to 16", "a number above 0 and at most 1"; None otherwise."""
    ends = sorted(end for constraint in field.metadata if (end := _end(constraint)))
    lower = [(symbol, value) for rule, symbol, value in ends if rule < 2]
    upper = [(symbol, value) for rule, symbol, value in ends if rule >= 2]
    if len(lower) != 1 or len(upper) != 1:
        return None
    (low_symbol, low), (high_symbol, high) = lower[0], upper[0]
    kind = "an integer" if int in (field.annotation, *_members(field.annotation)) else "a number"
    if (low_symbol, high_symbol) == ("≥", "≤"):
        return f"{kind} from {bound_text(low)} to {bound_text(high)}"
    first = f"from {bound_text(low)}" if low_symbol == "≥" else f"above {bound_text(low)}"
    second = f"at most {bound_text(high)}" if high_symbol == "≤" else f"below {bound_text(high)}"
    return f"{kind} {first} and {second}"


def message(field: FieldInfo | None, error: Mapping[str, Any]) -> str:
    """The words of pydantic's `error` about a value of `field` (None: not a field): for a wrong
    value of a key with a range of two ends, "expected " and the range; else pydantic's."""
    if field is not None and error["type"] not in _NOT_THE_VALUE and (words := expected(field)):
        return f"expected {words}"
    return str(error["msg"])


def _end(constraint: Any) -> tuple[int, str, Any] | None:
    """(which end of `_BOUNDS`, its symbol, its value), or None for another constraint."""
    for rule, (kind, attribute, symbol) in enumerate(_BOUNDS):
        if isinstance(constraint, kind):
            return rule, symbol, getattr(constraint, attribute)
    return None


def _other(constraint: Any) -> tuple[int, str, Any] | None:
    """A list's most items or a text's pattern, as `_end` gives an end (after the four ends)."""
    if isinstance(constraint, annotated_types.MaxLen):
        return len(_BOUNDS), "at most", f"{constraint.max_length} items"
    if pattern := getattr(constraint, "pattern", None):
        return len(_BOUNDS) + 1, "matches", f"`{pattern}`"
    return None


def _members(annotation: Any) -> tuple[Any, ...]:
    return get_args(annotation) if get_origin(annotation) in (Union, types.UnionType) else ()
