"""`export_run`: a trained run as a self-contained CTranslate2 model folder.

    out_dir/
      model.bin, config.json        the CTranslate2 model (tfm.deploy.convert)
      shared_vocabulary.json        token strings in id order (source_ and target_vocabulary.json
                                    for separate vocabularies)
      tokenizer.json                the run's tokenizer, to encode and detokenise as tfm does
      config.yaml                   the run's resolved config (its decoding settings are the
                                    defaults of the Translator over the export)
      plan.json                     the run's plan (the mix of a model of related pairs)
      tfm_export.json               the marker: format version, tfm and CTranslate2 versions,
                                    quantization, the model file and step it came from

The folder is written beside `out_dir` under a temporary name and renamed into place when
complete, so an interrupted export leaves no half-written model behind.
"""

from __future__ import annotations

import importlib.util
import json
import logging
import os
import secrets
import shutil
from dataclasses import asdict, dataclass
from pathlib import Path

from tfm import __version__
from tfm.data.tokenizer import FILE_NAME as TOKENIZER_FILE
from tfm.errors import UsageError
from tfm.json_file import read_json
from tfm.rundir.paths import EXPORT_MARKER as MARKER
from tfm.rundir.paths import is_export

log = logging.getLogger(__name__)

FORMAT, VERSION = "tfm-ctranslate2", 1
QUANTIZATIONS = ("none", "int8", "int8_float32", "float16", "bfloat16")
INSTALL_HINT = "pip install 'tfm[deploy]'"


@dataclass(frozen=True)
class ExportInfo:
    """What `tfm_export.json` records about an exported folder."""

    format: str
    version: int
    tfm_version: str
    ctranslate2_version: str
    quantization: str  # one of QUANTIZATIONS
    model_file: str  # best.pt or last.pt of the run
    step: int
    tokenizer_fingerprint: str
    max_len: int  # the positional table: the longest source and output the model takes


def compute_type(quantization: str) -> str:
    """The CTranslate2 compute type that runs weights exported with `quantization` as stored."""
    return "float32" if quantization == "none" else quantization


def require_ctranslate2():
    """The `ctranslate2` module, or a UsageError saying how to install it."""
    if importlib.util.find_spec("ctranslate2") is None:
        raise UsageError(f"CTranslate2 is not installed; install it with `{INSTALL_HINT}`")
    import ctranslate2

    return ctranslate2


def check_compute_type(kind: str, device: str) -> None:
    """Refuse a compute type (or quantization) that CTranslate2 cannot run on `device`."""
    ctranslate2 = require_ctranslate2()
    if device == "cuda" and ctranslate2.get_cuda_device_count() == 0:
        raise UsageError(
            "--device cuda: CTranslate2 finds no CUDA GPU on this machine; export with "
            "--device cpu, or export on the machine with the GPU"
        )
    try:
        supported = sorted(ctranslate2.get_supported_compute_types(device))
    except (RuntimeError, ValueError) as exc:
        raise UsageError(f"CTranslate2 cannot use device {device!r}: {exc}") from None
    if kind not in supported:
        raise UsageError(
            f"quantization {kind} is not supported by CTranslate2 on {device} "
            f"(supported there: {', '.join(supported)})"
        )


def export_run(
    run_dir: str | Path,
    out_dir: str | Path,
    *,
    quantization: str = "none",
    overwrite: bool = False,
    device: str = "cpu",
) -> ExportInfo:
    """Convert the run's model (best.pt, else last.pt) to CTranslate2 in `out_dir`, with the
    tokenizer, config, the run's confidence map of that model (if it has one) and marker beside
    it. `quantization` "none" keeps float32 weights;
    `device` ("cpu" or "cuda") is where the export will run, and must support the quantization.

    Raises UsageError for a missing run or model file, an unknown or unsupported quantization,
    an existing `out_dir` without `overwrite` (or one that is not an export), a model that
    CTranslate2 cannot represent, or CTranslate2 not installed; CheckpointError for a corrupt
    model file."""
    if quantization not in QUANTIZATIONS:
        raise UsageError(f"quantization {quantization!r} is not one of {', '.join(QUANTIZATIONS)}")
    ctranslate2 = require_ctranslate2()
    check_compute_type(compute_type(quantization), device)
    out = Path(out_dir)
    _check_target(out, overwrite=overwrite)
    # Here, not at the top: translating with an export (tfm.deploy.ct2_decoding) needs no torch.
    import torch

    from tfm.deploy.convert import TfmConverter, check_representable
    from tfm.prediction.confidence import CONFIDENCE_FILE, load_map
    from tfm.rundir.manifest import file_digest
    from tfm.rundir.model_file import load_model_file, load_trained
    from tfm.rundir.paths import find_run

    paths = find_run(run_dir)
    model_file = paths.best if paths.best.is_file() else paths.last
    model_args = load_model_file(model_file)["model_args"]
    check_representable(model_args)  # before building: an unknown option cannot be built
    trained = load_trained(paths, torch.device("cpu"))
    info = ExportInfo(
        format=FORMAT,
        version=VERSION,
        tfm_version=__version__,
        ctranslate2_version=ctranslate2.__version__,
        quantization=quantization,
        model_file=model_file.name,
        step=trained.step,
        tokenizer_fingerprint=trained.tokenizer.fingerprint(),
        max_len=trained.model.max_len,
    )
    converter = TfmConverter(trained.model, trained.tokenizer, model_args)
    files = [paths.root / TOKENIZER_FILE, paths.config]
    if paths.plan.is_file():  # the languages a model of related pairs was trained into
        files.append(paths.plan)
    found, why = load_map(paths.root, file_digest(model_file))
    if found is None:
        log.warning("the export gives no confidences: %s, then export again", why)
    else:  # the map of the model exported: its translations' figures, as the export reads them
        files.append(paths.root / CONFIDENCE_FILE)
    _write_folder(out, converter, quantization, files, info)
    log.info(
        "exported %s (step %d) to %s, quantization %s", model_file, info.step, out, quantization
    )
    return info


def _write_folder(
    out: Path, converter, quantization: str, files: list[Path], info: ExportInfo
) -> None:
    """Convert into a staging folder beside `out`, add `files` (tokenizer.json, config.yaml)
    and the marker, then rename it to `out` (an earlier export there is moved aside first)."""
    staging = out.with_name(f".{out.name}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
    replaced = staging.with_name(staging.name + "-old")
    try:
        converter.convert(
            str(staging), quantization=None if quantization == "none" else quantization
        )
        for file in files:
            shutil.copyfile(file, staging / file.name)
        (staging / MARKER).write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
        if out.exists():
            os.replace(out, replaced)
        os.replace(staging, out)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
        shutil.rmtree(replaced, ignore_errors=True)


def _check_target(out: Path, *, overwrite: bool) -> None:
    """`out` must not exist, or, with `overwrite`, be an earlier export or an empty folder (a
    mistyped path never deletes anything else)."""
    if not out.exists():
        return
    if not overwrite:
        raise UsageError(f"output folder {out} already exists; use --overwrite to replace it")
    if not out.is_dir() or (any(out.iterdir()) and not is_export(out)):
        raise UsageError(
            f"output folder {out} exists and is not a tfm CTranslate2 export; "
            "refusing to overwrite it, choose another folder"
        )


def read_export_info(path: str | Path) -> ExportInfo:
    """The marker of an exported folder; a UsageError if it is missing, malformed or written
    by a newer format version."""
    marker = Path(path) / MARKER
    missing = f"{path} is not a tfm CTranslate2 export (no {MARKER})"
    data = read_json(marker, error=UsageError, missing=missing, what="the export marker")
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{marker}: not a {FORMAT} marker")
    if data.get("version") != VERSION:
        raise UsageError(
            f"{marker}: format version {data.get('version')!r}, this tfm reads version {VERSION}"
        )
    try:
        return ExportInfo(**data)
    except TypeError as exc:
        raise UsageError(f"{marker}: malformed export marker ({exc})") from None
