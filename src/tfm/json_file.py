"""Reading one small JSON file that tfm wrote, with a one-line error naming it when it cannot."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_json(path: Path, *, error: type[Exception], missing: str, what: str) -> Any:
    """The parsed content of `path`; `error(missing)` if there is no such file, and
    `error("PATH: cannot read WHAT (cause)")` if it cannot be read or parsed."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise error(missing) from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise error(f"{path}: cannot read {what} ({exc})") from None
