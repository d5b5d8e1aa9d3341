"""One line saying why a file could not be written or read, for errors that name the file."""

import errno


def brief_error(exc: BaseException) -> str:
    """One line for a cause: torch's messages run over several lines and sentences."""
    cause: BaseException | None = exc
    for _ in range(4):  # torch wraps a full disk in a RuntimeError
        if isinstance(cause, OSError) and cause.errno == errno.ENOSPC:
            return "no space left on device; free some disk space and retry"
        cause = None if cause is None else cause.__cause__ or cause.__context__
    context = exc.__context__
    if str(exc).startswith("Weights only load failed") and context is not None:
        exc = context  # the unpickler's own reason is in the chained exception
    lines = str(exc).strip().splitlines()
    text = lines[0].split(". ")[0] if lines else ""
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
