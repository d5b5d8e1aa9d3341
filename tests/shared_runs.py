"""Runs trained once for the whole test session and read by many tests (fixtures in conftest.py).

A shared run is built by the first process that asks for it, under a file lock, in a folder that
every pytest-xdist worker of the session sees (the parent of the workers' temporary folders); the
others wait and use it. Tests never change a shared run: `copy_run` gives one to damage or resume.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import resource
import shutil
from collections.abc import Callable
from pathlib import Path

import yaml
from builders import BOTH_WAYS, TRAINED, tiny_config_file
from typer.testing import CliRunner

from tfm.cli import app

DONE = "built.json"  # written last: a folder without it is a build that did not finish


def session_folder(base: Path) -> Path:
    """Where this session keeps its shared runs: `base` (the session's temporary folder), or its
    parent, which all of pytest-xdist's workers share."""
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def built_once(folder: Path, build: Callable[[Path], dict]) -> dict:
    """What `build(folder)` returned (saved as JSON in `folder`), building it unless a process of
    this session already did."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    with open(folder.parent / f"{folder.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        done = folder / DONE
        if not done.is_file():
            shutil.rmtree(folder, ignore_errors=True)  # a build that failed half-way
            folder.mkdir()
            done.write_text(json.dumps(build(folder)), encoding="utf-8")
        return json.loads(done.read_text(encoding="utf-8"))


def train_with_tfm(folder: Path, *recipes: dict, **overrides: object) -> dict:
    """`tfm train` in this process of the tiny config (`builders.tiny_settings`) into `folder/run`,
    from `folder`, where tfm remembers the run: its stdout, its stderr and this process's peak
    memory afterwards, in MiB."""
    config = tiny_config_file(folder, *recipes, **overrides)
    with contextlib.chdir(folder):
        result = CliRunner().invoke(app, ["train", "--config", str(config), "--no-progress"])
    assert result.exit_code == 0, result.output
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    return {"stdout": result.stdout, "stderr": result.stderr, "peak_mib": peak_mib}


def build_trained(folder: Path) -> dict:
    return train_with_tfm(folder, TRAINED)


def build_both_ways(folder: Path) -> dict:
    return train_with_tfm(folder, TRAINED, BOTH_WAYS)


def copy_run(run: Path, to: Path) -> Path:
    """A copy of the run directory `run` at `to` whose config.yaml names `to` as its run_dir, so
    that `tfm train --resume` of it writes there; returns `to`."""
    shutil.copytree(run, to)
    config_file = to / "config.yaml"
    settings = yaml.safe_load(config_file.read_text(encoding="utf-8"))
    settings["run_dir"] = str(to)
    config_file.write_text(
        yaml.safe_dump(settings, sort_keys=False, allow_unicode=True), encoding="utf-8"
    )
    return to
