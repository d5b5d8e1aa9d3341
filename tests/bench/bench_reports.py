"""Reading figures out of a bench script's printed report."""

import re


def numbers(pattern: str, text: str) -> list[float]:
    """The groups of `pattern`'s first match in `text`, as numbers (fails when it is missing)."""
    found = re.search(pattern, text)
    assert found, f"no line matches {pattern!r} in:\n{text}"
    return [float(group) for group in found.groups()]
