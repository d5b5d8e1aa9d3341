"""The run manifest: a digest of each file a run's use depends on, checked when it is opened.

config.yaml and tokenizer.json are plain text that loads whatever it says: a changed digit in the
config or a changed rule in the tokenizer's normalizer, pre-tokenizer or merges would change
translations silently. Model files carry a digest of their own content (`tfm.rundir.integrity`),
which finds a damaged file but not one put in place of the run's. `manifest.json` records, for
each of these files, the digests it may have:

    {"format": "tfm-manifest", "version": 1,
     "files": {"config.yaml": ["<sha256>"], "tokenizer.json": ["<sha256>"],
               "best.pt": ["<content digest>"], "last.pt": ["<content digest>"],
               "confidence.json": ["<sha256>"]}}

tokenizer.json and confidence.json (the confidence map, `tfm.prediction.confidence`, which `tfm
average` does not copy: it belongs to one model) are hashed byte for byte, a model file by the
content digest stored in it (read without reading its tensors). config.yaml is hashed as the values
it holds, without `run_dir`, so that a run moved or copied (and its run_dir set to the new place)
still opens, and a comment or a reformatting changes nothing. A file is replaced in two steps, each
atomic: the manifest first accepts the old and the new digest, then the file is written, then the
manifest keeps the new one; a crash anywhere leaves files that pass. Training checkpoints
(checkpoints/) are not listed: `--resume` compares their config and fingerprints with the run's.

A run directory without manifest.json is opened unchecked (one assembled by hand); deleting it is
how to use a run whose files were changed on purpose.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.config import read_yaml
from tfm.errors import CheckpointError, ConfigError

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


def file_digest(path: Path) -> str | None:
    """The digest the manifest keeps for `path`: a model file's is the content digest stored in
    it (None when it has none or cannot be read: loading it then says what is wrong)."""
    if path.suffix == ".pt":
        return _stored_digest(path)
    return text_digest(path.name, path.read_text(encoding="utf-8"))


def _stored_digest(path: Path) -> str | None:
    import torch  # here: translating with an export needs no torch

    from tfm.rundir.integrity import DIGEST_KEY

    try:  # memory-mapped: the tensors are not read
        state = torch.load(path, map_location="cpu", weights_only=True, mmap=True)
    except Exception:  # the loader refuses a damaged file with the reason
        return None
    digest = state.get(DIGEST_KEY) if isinstance(state, dict) else None
    return digest if isinstance(digest, str) else None


def record_manifest(root: Path, names: Iterable[str] = COVERED) -> None:
    """Record the digests of the files `names` of the run directory `root` as they are now
    (the others keep their entries); a run's files are complete once it is recorded."""
    files = _read(root) or {}
    for name in names:
        if (root / name).is_file() and (digest := file_digest(root / name)) is not None:
            files[name] = [digest]
    _write(root, files)


@contextlib.contextmanager
def replacing(path: Path) -> Iterator[Callable[[str], None]]:
    """For a model file written atomically in the body: a callback that the writer gives the
    new file's digest before writing (the manifest then accepts the old and the new file), and
    after the body the manifest keeps the new one (see the module docstring)."""
    root, name = path.parent, path.name
    written: list[str] = []

    def before_write(digest: str) -> None:
        files = _read(root)
        if files is not None:
            files[name] = [*files.get(name, []), digest]
            _write(root, files)
            written.append(digest)

    yield before_write
    if written:
        files = _read(root) or {}
        files[name] = written[-1:]
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


def check_manifest(root: Path, names: Iterable[str] | None = None) -> None:
    """Refuse (CheckpointError, one line naming the file) a file of `names` (default: every
    file the manifest lists) that is not as the run wrote it; a run directory without a
    manifest passes, and so does a model file whose own digest cannot be read (loading it says
    why)."""
    files = _read(root)
    if files is None:
        return
    for name in files if names is None else names:
        path = root / name
        if name not in files or (path.suffix == ".pt" and not path.is_file()):
            continue
        try:
            found = file_digest(path)
        except (OSError, UnicodeDecodeError, ConfigError) as exc:
            raise CheckpointError(f"cannot read {path} ({exc}); restore it") from None
        if found is not None and found not in files[name]:
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
