"""The run manifest: a digest of each text file a run's use depends on, checked when it is opened.

Model files and checkpoints carry a digest of their own content (`tfm.rundir.integrity`), but
config.yaml and tokenizer.json are plain text that loads whatever it says: a changed digit in the
config or a changed rule in the tokenizer's normalizer, pre-tokenizer or merges would change
translations silently. `manifest.json` records, for each of them, the digests it may have:

    {"format": "tfm-manifest", "version": 1,
     "files": {"config.yaml": ["<sha256>"], "tokenizer.json": ["<sha256>"]}}

tokenizer.json is hashed byte for byte. config.yaml is hashed as the values it holds, without
`run_dir`, so that a run moved or copied (and its run_dir set to the new place) still opens, and
a comment or a reformatting changes nothing. A file is replaced in two steps, each atomic: the
manifest first accepts the old and the new digest, then the file is written, then the manifest
keeps the new one; a crash anywhere leaves files that pass.

A run directory without manifest.json is opened unchecked (one assembled by hand); deleting it is
how to use a run whose files were changed on purpose.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from pathlib import Path

from tfm.config import read_yaml
from tfm.errors import CheckpointError, ConfigError
from tfm.rundir.atomic import atomic_write_text

MANIFEST_FILE = "manifest.json"
FORMAT, VERSION = "tfm-manifest", 1
CONFIG_FILE, TOKENIZER_FILE = "config.yaml", "tokenizer.json"
COVERED = (CONFIG_FILE, TOKENIZER_FILE)


def text_digest(name: str, text: str) -> str:
    """The digest the manifest keeps for the file `name` holding `text` (see the module
    docstring)."""
    if name == CONFIG_FILE:
        values, _ = read_yaml(text, name)
        if isinstance(values, dict):
            values = {key: value for key, value in values.items() if key != "run_dir"}
        text = json.dumps(values, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def file_digest(path: Path) -> str:
    return text_digest(path.name, path.read_text(encoding="utf-8"))


def record_manifest(root: Path, names: Iterable[str] = COVERED) -> None:
    """Record the digests of the files `names` of the run directory `root` as they are now
    (the others keep their entries); a run's files are complete once it is recorded."""
    files = _read(root) or {}
    for name in names:
        if (root / name).is_file():
            files[name] = [file_digest(root / name)]
    _write(root, files)


def replace_text(root: Path, name: str, text: str) -> None:
    """Write `text` to `root/name` atomically, the manifest accepting the file before, during
    and after (see the module docstring); a run without a manifest stays without one."""
    files = _read(root)
    if files is None:
        atomic_write_text(text, root / name)
        return
    new = text_digest(name, text)
    files[name] = [*files.get(name, []), new]
    _write(root, files)
    atomic_write_text(text, root / name)
    files[name] = [new]
    _write(root, files)


def check_manifest(root: Path, names: Iterable[str] = COVERED) -> None:
    """Refuse (CheckpointError, one line naming the file) a file of `names` that is not as the
    run wrote it; a run directory without a manifest passes."""
    files = _read(root)
    if files is None:
        return
    for name in names:
        if name not in files:
            continue
        path = root / name
        try:
            found = file_digest(path)
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            raise CheckpointError(f"cannot read {path} ({exc}); restore it") from None
        if found not in files[name]:
            raise CheckpointError(
                f"{path} was changed after the run wrote it (it does not match the digest in "
                f"{root / MANIFEST_FILE}); restore it, or delete {MANIFEST_FILE} to use the run "
                "as it is now"
            )


def _read(root: Path) -> dict[str, list[str]] | None:
    path = root / MANIFEST_FILE
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise CheckpointError(f"cannot read {path} ({exc}); restore it or delete it") from None
    if (
        not isinstance(manifest, dict)
        or manifest.get("format") != FORMAT
        or manifest.get("version") != VERSION
        or not isinstance(manifest.get("files"), dict)
    ):
        raise CheckpointError(f"{path} is not a {FORMAT} version {VERSION} file; delete it")
    return manifest["files"]


def _write(root: Path, files: dict[str, list[str]]) -> None:
    manifest = {"format": FORMAT, "version": VERSION, "files": files}
    atomic_write_text(json.dumps(manifest, indent=1) + "\n", root / MANIFEST_FILE)
