"""Checkpoint files that load without running code, and load only as they were written.

Saves are atomic (`tfm.atomic`): a crash leaves the old file or the new one. Loads always
use `torch.load(weights_only=True)`, so a checkpoint can hold only tensors and plain containers;
anything else is refused instead of unpickled. A state holding NaN or infinity is never written;
each file carries a digest of its content, checked on loading (`tfm.rundir.integrity`), so a
corrupted or non-finite file is refused with `CorruptCheckpointError` and an earlier one is used.

What callers must convert before saving (saving refuses anything else, naming the key):
- allowed: tensors, dict/OrderedDict, list, tuple, set, str, bytes, int, float, complex, bool, None,
  torch.dtype, torch.device. Model and optimizer `state_dict()`s, `torch.get_rng_state()` (a
  ByteTensor) and Python's `random.getstate()` (a tuple of ints) are fine as they are.
- numpy arrays and scalars are not: use `torch.from_numpy(a)`, `a.tolist()` or `int(x)`. For numpy
  RNG state prefer `rng.bit_generator.state` (a dict of Python ints); `np.random.get_state()` holds
  an array, so convert it with `.tolist()`. `torch.Generator` objects: save `.get_state()`.
"""

import pickletools
import zipfile
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import IO, cast

import torch

from tfm import __version__
from tfm.atomic import PathLike, atomic_save
from tfm.errors import CheckpointError
from tfm.failure import brief_error
from tfm.rundir.integrity import DIGEST_KEY, content_digest, first_non_finite, zip_crc_mismatch

FORMAT_VERSION = 1
"""Bumped whenever a checkpoint's layout changes; files with a larger number are refused."""

_LEAVES = (type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device)
_SEQUENCES = (list, tuple, set, torch.Size)


def _check_plain(value: object, where: str) -> None:
    """Refuse at save time what `weights_only=True` would refuse at load time, naming the key."""
    kind = type(value)
    if kind in (torch.Tensor, torch.nn.Parameter) or kind in _LEAVES:
        return
    if kind in (dict, OrderedDict):
        for key, item in value.items():  # type: ignore[attr-defined]
            _check_plain(key, f"a key of {where}")
            _check_plain(item, f"{where}[{key!r}]")
        return
    if kind in _SEQUENCES:
        for i, item in enumerate(cast("Iterable[object]", value)):
            _check_plain(item, f"{where}[{i}]")
        return
    raise TypeError(
        f"{where} is a {kind.__module__}.{kind.__qualname__}, which weights_only loading refuses; "
        "convert it to tensors, lists, dicts or numbers (see the tfm.rundir.checkpoint docstring)"
    )


class NonFiniteStateError(CheckpointError):
    """A state to save holds NaN or infinity (a diverged run): nothing was written."""


def save_checkpoint(
    state: dict, path: PathLike, *, before_write: Callable[[str], None] | None = None
) -> None:
    """Atomically save state plus `format_version`, `tfm_version` and the content digest; state
    must be plain and finite (checked before anything is written). `before_write` is given the
    digest before the file is written (a run's manifest accepts it first)."""
    if not isinstance(state, dict):
        raise TypeError(f"checkpoint state must be a dict, got {type(state).__name__}")
    _check_plain(state, "state")
    if where := first_non_finite(state):
        raise NonFiniteStateError(
            f"refusing to write {path}: {where} is not finite, so nothing was written"
        )
    full = {**state, "format_version": FORMAT_VERSION, "tfm_version": __version__}
    digest = content_digest(full)
    if before_write is not None:
        before_write(digest)
    atomic_save({**full, DIGEST_KEY: digest}, path)


def _pickle_globals(file: IO[bytes]) -> list[str]:
    """The globals that the pickles at the start of file would import, read without unpickling.

    Only pickles that parse to their STOP count, so random bytes do not look like imports. Legacy
    torch files are several pickles in a row, hence the loop.
    """
    found: list[str] = []
    for _ in range(8):
        names: list[str] = []
        strings: list[str] = []
        try:
            for opcode, arg, _position in pickletools.genops(file):
                if opcode.name in ("GLOBAL", "INST"):
                    names.append(str(arg).replace(" ", "."))
                elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                    names.append(".".join(strings[-2:]))
                elif isinstance(arg, str):
                    strings.append(arg)
        except Exception:
            break
        found += names
    return found


def _unsafe_globals(path: Path) -> list[str]:
    """The non-allow-listed globals of a file torch refused to load; [] if it looks corrupt."""
    try:
        if zipfile.is_zipfile(path):
            return torch.serialization.get_unsafe_globals_in_checkpoint(path)
        with open(path, "rb") as file:  # a plain pickle: our checkpoints are always zip archives
            return _pickle_globals(file)
    except Exception:
        return []


def _loads_on_cpu(path: Path) -> bool:
    try:
        torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:
        return False
    return True


class CorruptCheckpointError(CheckpointError):
    """The file is missing, truncated or corrupted; an earlier checkpoint may still be usable."""


def load_checkpoint(path: PathLike, map_location: str | torch.device = "cpu") -> dict:
    """Load a checkpoint written by `save_checkpoint` with weights_only=True.

    Every failure is a one-line CheckpointError naming the file; missing, truncated and corrupted
    files raise the CorruptCheckpointError subclass.
    """
    path = Path(path)
    try:
        state = torch.load(path, map_location=map_location, weights_only=True)
    except FileNotFoundError as exc:
        raise CorruptCheckpointError(f"checkpoint {path} does not exist; check the path") from exc
    except (IsADirectoryError, PermissionError) as exc:
        raise CheckpointError(
            f"cannot read checkpoint {path} ({brief_error(exc)}); "
            "check the path and its permissions"
        ) from exc
    except Exception as exc:  # the file is untrusted: whatever torch raises is the file's fault...
        if str(map_location) != "cpu" and _loads_on_cpu(path):  # ...unless it is the device's
            raise CheckpointError(
                f"cannot load checkpoint {path} onto {map_location} ({brief_error(exc)}); "
                "choose a device this machine has"
            ) from exc
        unsafe = _unsafe_globals(path)
        if unsafe:
            raise CheckpointError(
                f"checkpoint {path} was refused: it contains objects other than tensors and plain "
                f"containers, which could run code when loaded ({', '.join(sorted(set(unsafe)))}); "
                "load only checkpoints written by tfm"
            ) from exc
        raise CorruptCheckpointError(
            f"checkpoint {path} is truncated or corrupted ({brief_error(exc)}); "
            "use an earlier checkpoint"
        ) from exc
    if isinstance(state, dict):
        _check_integrity(path, state)
    version = state.get("format_version") if isinstance(state, dict) else None
    if type(version) is not int:
        held = f"format_version={version!r}" if isinstance(state, dict) else type(state).__name__
        raise CheckpointError(
            f"{path} is not a tfm checkpoint (it holds {held}); pass a file written by tfm"
        )
    if version > FORMAT_VERSION:
        raise CheckpointError(
            f"checkpoint {path} was written by a newer tfm "
            f"(format {version} > {FORMAT_VERSION}); upgrade tfm"
        )
    return state


def _check_integrity(path: Path, state: dict) -> None:
    """Remove and verify the stored digest (or the zip CRCs of a file without one); refuse
    non-finite tensors. Raises CorruptCheckpointError."""
    stored = state.pop(DIGEST_KEY, None)
    if stored is None:
        problem = zip_crc_mismatch(path) if zipfile.is_zipfile(path) else None
    elif stored != content_digest(state):
        problem = "its content does not match the digest stored in it"
    else:
        problem = None
    if problem is not None:
        raise CorruptCheckpointError(
            f"checkpoint {path} is corrupted ({problem}); use an earlier checkpoint"
        )
    if where := first_non_finite(state):
        raise CorruptCheckpointError(
            f"checkpoint {path} cannot be used: {where} is not finite (written by a run that "
            "diverged); use an earlier checkpoint"
        )
