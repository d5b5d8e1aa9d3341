"""Helpers of the reliability tests: the real `tfm` command in this process or in a child
process, the one error line it prints, and damage done to files."""

from __future__ import annotations

import os
import resource
import signal
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

import torch
from typer.testing import CliRunner

from tfm.cli import app

SRC = str(Path(__file__).resolve().parents[2] / "src")


def invoke(*args: str | Path):
    """`tfm ARGS` in this process; the result has exit_code, stdout and stderr."""
    return CliRunner().invoke(app, [str(a) for a in args])


def resume_args(run: Path, *sets: str) -> list[str | Path]:
    """The arguments of `tfm train --resume` of `run`, with `--set` for each of `sets`."""
    overrides = [arg for key_value in sets for arg in ("--set", key_value)]
    return ["train", "--config", run / "config.yaml", "--no-progress", "--resume", *overrides]


def resume(run: Path, *sets: str):
    """`tfm train --resume` of `run` in this process, with `--set` for each of `sets`."""
    return invoke(*resume_args(run, *sets))


def start_tfm(
    *args: str | Path, file_size_limit: int | None = None, sigint_ignored: bool = False
) -> subprocess.Popen:
    """`tfm ARGS` in a child process; with `file_size_limit`, no file it writes may grow past
    that many bytes (a write beyond fails with EFBIG, as a full disk fails with ENOSPC); with
    `sigint_ignored`, started with SIGINT ignored, as a shell starts a background job."""

    def limit() -> None:
        if sigint_ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
        if file_size_limit:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # fail the write instead of killing us
            resource.setrlimit(resource.RLIMIT_FSIZE, (file_size_limit, file_size_limit))

    path = SRC + os.pathsep + os.environ.get("PYTHONPATH", "")
    env = {**os.environ, "PYTHONPATH": path, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "tfm", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        preexec_fn=limit if file_size_limit or sigint_ignored else None,
    )


def run_tfm(*args: str | Path, file_size_limit: int | None = None) -> tuple[int, str, str]:
    """Run `tfm ARGS` in a child process to its end: exit code, stdout, stderr."""
    process = start_tfm(*args, file_size_limit=file_size_limit)
    stdout, stderr = process.communicate(timeout=300)
    return process.returncode, stdout, stderr


def error_line(stderr: str) -> str:
    """The one `tfm: error:` line of a failed command, which printed no traceback."""
    assert "Traceback" not in stderr, stderr
    errors = [line for line in stderr.splitlines() if line.startswith("tfm: error: ")]
    assert len(errors) == 1, stderr
    return errors[0]


def tensor_data_offsets(path: Path) -> list[int]:
    """The offsets in the torch zip file `path` of every byte of tensor data."""
    offsets = []
    with zipfile.ZipFile(path) as archive, open(path, "rb") as raw:
        for member in archive.infolist():
            if "/data/" not in member.filename or member.file_size == 0:
                continue
            raw.seek(member.header_offset + 26)
            name_length, extra_length = struct.unpack("<HH", raw.read(4))
            start = member.header_offset + 30 + name_length + extra_length
            offsets.extend(range(start, start + member.file_size))
    return offsets


def flip_bit(path: Path, offset: int, bit: int = 0) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 1 << bit
    path.write_bytes(bytes(data))


def non_finite_files(run: Path) -> list[Path]:
    """The .pt files under `run` that hold a NaN or infinite floating-point tensor."""

    def tensors(value):
        if isinstance(value, torch.Tensor):
            yield value
        elif isinstance(value, dict):
            for item in value.values():
                yield from tensors(item)
        elif isinstance(value, list | tuple):
            for item in value:
                yield from tensors(item)

    bad = []
    for path in sorted(run.rglob("*.pt")):
        state = torch.load(path, weights_only=True)
        if any(t.is_floating_point() and not torch.isfinite(t).all() for t in tensors(state)):
            bad.append(path)
    return bad
