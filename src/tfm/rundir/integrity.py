"""What makes a checkpoint's content trustworthy: a digest of everything in it, and finite numbers.

Every file `tfm.rundir.checkpoint` writes carries `content_sha256`, a SHA-256 over its whole
content (tensors by dtype, shape and bytes; other values by type and repr) computed before it is
written and checked when it is read, so a flipped bit in a tensor, a torn copy or a damaged disk is
refused instead of silently changing the weights. It hashes the values, not the file's bytes, so it
holds whatever torch version serialised them. Files written before the digest existed are checked
with the CRC-32 that torch's zip archives keep for each member.

A state with a NaN or infinite floating-point tensor (a diverged run) is never written, and one
found on reading is refused like a corrupt one.
"""

from __future__ import annotations

import hashlib
import zipfile
from collections.abc import Iterator
from pathlib import Path

import torch

DIGEST_KEY = "content_sha256"


def content_digest(state: object) -> str:
    """SHA-256 (hex) of a plain state: the same after a save and load round trip, on any device."""
    digest = hashlib.sha256()
    _feed(digest, state)
    return digest.hexdigest()


def _feed(digest: hashlib._Hash, value: object) -> None:
    if isinstance(value, torch.Tensor):
        data = value.detach().to("cpu").resolve_conj().resolve_neg().contiguous().reshape(-1)
        digest.update(f"T{data.dtype}{tuple(value.shape)}:".encode())
        digest.update(data.view(torch.uint8).numpy().data)
    elif isinstance(value, dict):
        digest.update(f"D{len(value)}:".encode())
        for key, item in value.items():
            _feed(digest, key)
            _feed(digest, item)
    elif isinstance(value, set | frozenset):  # no order survives loading: hash the sorted hashes
        digest.update(f"S{len(value)}:".encode())
        for item_digest in sorted(content_digest(item) for item in value):
            digest.update(item_digest.encode())
    elif isinstance(value, list | tuple):
        digest.update(f"L{type(value).__name__}{len(value)}:".encode())
        for item in value:
            _feed(digest, item)
    else:
        text = repr(value).encode("utf-8", "backslashreplace")
        digest.update(f"V{type(value).__name__}{len(text)}:".encode() + text)


def _floating_tensors(value: object, where: str) -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        if value.is_floating_point() or value.is_complex():
            yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _floating_tensors(item, f"{where}[{key!r}]")
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _floating_tensors(item, f"{where}[{i}]")


def first_non_finite(state: object, where: str = "state") -> str | None:
    """Where the first tensor holding a NaN or an infinity is (e.g. "state['model']['w']"), or
    None when every floating-point tensor in `state` is finite."""
    for name, tensor in _floating_tensors(state, where):
        if not bool(torch.isfinite(tensor).all()):
            return name
    return None


def zip_crc_mismatch(path: Path) -> str | None:
    """The first member of the zip archive `path` whose bytes do not match their CRC-32 (or a
    description of a damaged archive), or None when every member checks out."""
    try:
        with zipfile.ZipFile(path) as archive:
            bad = archive.testzip()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        return f"damaged archive: {exc}"
    return None if bad is None else f"CRC-32 mismatch in member {bad}"
