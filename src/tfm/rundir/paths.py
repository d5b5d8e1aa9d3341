"""A run directory: what training leaves behind and what eval/translate need.

    run_dir/
      config.yaml        the resolved config the run was trained with
      plan.json          each key the recipe derived, with its rule (tfm.training.run_plan)
      tokenizer.json     the BPE tokenizer (see tfm.data.tokenizer for separate vocabularies)
      best.pt            model weights with the best validation score (+ how to build the model)
      last.pt            model weights after the last step
      checkpoints/       full training states (model, optimizer, RNGs, data position) for --resume
      metrics.jsonl      one JSON object per event, each with "step"
      train.log          every line training logged, with its time (tfm.training.run_log)
      validations/       step-N.tsv: each validation's source, reference and hypothesis
                         (step-N.en-pt.tsv: a related pair's, `data.related[i].validation`)
      confidence.json    the map from a translation's figure to its expected chrF, fitted for
                         best.pt (tfm.prediction.confidence)
      .lock              held by the process training in it; holds its PID (tfm.rundir.lock)

A run with monolingual text (`data.monolingual`) holds beside these the phases before it
(tfm.commands.backtranslated): backtranslation.json (its plan and where each phase stands),
reverse/ (the reverse model's run), reverse-averaged/ (its last checkpoints averaged) and
synthetic.tsv (the synthetic corpus: a generated source, a tab, the monolingual line).

The run most recently trained from a directory is remembered in `.tfm/last_run` there, so that
`tfm train && tfm eval && tfm translate` works without naming the run. A folder `tfm export`
wrote holds `tfm_export.json` instead (`is_export`), so commands can tell the two apart.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tfm.atomic import atomic_write_text
from tfm.errors import UsageError
from tfm.rundir.manifest import COVERED, check_manifest

LAST_RUN_FILE = Path(".tfm") / "last_run"
BACKTRANSLATION_FILES = ("backtranslation.json", "reverse", "reverse-averaged", "synthetic.tsv")
EXPORT_MARKER = "tfm_export.json"  # the file that makes a folder a CTranslate2 export (tfm.deploy)


@dataclass(frozen=True)
class RunPaths:
    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def plan(self) -> Path:
        return self.root / "plan.json"

    @property
    def best(self) -> Path:
        return self.root / "best.pt"

    @property
    def last(self) -> Path:
        return self.root / "last.pt"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def metrics(self) -> Path:
        return self.root / "metrics.jsonl"

    def validation_output(self, step: int, pair: str | None = None) -> Path:
        """The hypotheses of the validation at `step`, beside their sources and references
        (`pair`: a related pair's own validation split, `en-pt`)."""
        return self.root / "validations" / f"step-{step:08d}{f'.{pair}' if pair else ''}.tsv"


NAME_MAX, PATH_MAX = 255, 4096  # bytes in one name and in a whole path, as Linux allows


def check_path_length(path: Path, what: str) -> None:
    """Refuse a path that no file system call would accept (ENAMETOOLONG), naming `what` it is
    (e.g. "run_dir") and the name that is too long."""
    for name in path.parts:
        if len(os.fsencode(name)) > NAME_MAX:
            shown = name if len(name) <= 40 else f"{name[:40]}…"
            raise UsageError(
                f"{what} {shown!r}: a name in the path is {len(os.fsencode(name))} bytes long, "
                f"more than the {NAME_MAX} a file system allows; choose a shorter {what}"
            )
    if len(os.fsencode(str(path.absolute()))) > PATH_MAX:
        raise UsageError(
            f"{what}: the path is more than {PATH_MAX} bytes long; choose a shorter {what}"
        )


def remember_run(run_dir: Path, cwd: Path | None = None) -> None:
    """Record `run_dir` as the most recent run trained from `cwd`."""
    pointer = (cwd or Path.cwd()) / LAST_RUN_FILE
    pointer.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(str(run_dir.resolve()) + "\n", pointer)


def find_run(run: str | Path | None, cwd: Path | None = None) -> RunPaths:
    """The run named by `--run`, or the one most recently trained from `cwd`."""
    if run is None:
        pointer = (cwd or Path.cwd()) / LAST_RUN_FILE
        if not pointer.is_file():
            raise UsageError(
                "no run given and none trained from this directory yet; "
                "run `tfm train --config CONFIG` first or pass --run DIR"
            )
        run = pointer.read_text(encoding="utf-8").strip()
    paths = RunPaths(Path(run))
    check_path_length(paths.root, "--run")
    if not paths.root.is_dir():
        raise UsageError(
            f"run directory {paths.root} does not exist; pass --run DIR of a trained run"
        )
    if not paths.best.is_file() and not paths.last.is_file():
        raise UsageError(
            f"run directory {paths.root} has no trained model (best.pt or last.pt); "
            "train it first with `tfm train`"
        )
    check_manifest(paths.root, COVERED)  # a model file is checked when it is chosen
    return paths


def is_export(path: str | Path) -> bool:
    """Whether `path` is a folder written by `tfm export` (it has the marker file)."""
    return (Path(path) / EXPORT_MARKER).is_file()
