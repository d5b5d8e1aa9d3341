"""`tfm export`, and `tfm eval` / `tfm translate` given an exported folder as `--run`: the same
contracts (output lines, n-best format, JSON scores, exit codes), decoded by CTranslate2 with the
run's tokenizer and decoding settings (`tfm.deploy`)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from tfm.commands import input as input_lines
from tfm.commands.input import line_chunks, read_aligned
from tfm.data.pipeline import prepare_splits
from tfm.deploy import (
    ExportedModel,
    SearchSettings,
    export_run,
    is_export,
    open_export,
    search_settings,
    translate_nbest_with_ctranslate2,
)
from tfm.deploy.export import require_ctranslate2
from tfm.errors import UsageError
from tfm.evaluation import score_translations
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.metrics import json_safe
from tfm.rundir.paths import find_run


def export(
    run: str | Path | None, out: Path, *, quantization: str, overwrite: bool, device: str
) -> Path:
    """Export the run (None: the run last trained from here) to CTranslate2 in `out`."""
    export_run(find_run(run).root, out, quantization=quantization, overwrite=overwrite,
               device=device)  # fmt: skip
    return out


def is_exported(request: DecodeRequest) -> bool:
    """Whether `--run` names a folder written by `tfm export`."""
    return request.run is not None and is_export(request.run)


def _open(request: DecodeRequest, *, min_beam: int = 1) -> tuple[ExportedModel, SearchSettings]:
    """The export opened on the requested device with `--threads` threads (default 1), and the
    search settings: the requested ones, else the exported config's."""
    if request.ensemble or request.rerank_with:
        option = "--ensemble" if request.ensemble else "--rerank-with"
        raise UsageError(f"{option} decodes tfm runs; {request.run} is a CTranslate2 export")
    device = request.device or "auto"
    if device == "auto":
        device = "cuda" if require_ctranslate2().get_cuda_device_count() > 0 else "cpu"
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: a CTranslate2 export runs on cpu or cuda")
    model = open_export(request.run or "", device=device, threads=request.threads or 1)
    beam_size = request.beam_size or max(model.config.decoding.beam_size, min_beam)
    settings = search_settings(model, beam_size=beam_size, length_penalty=request.length_penalty)
    return model, settings


def translate_exported(
    request: DecodeRequest,
    batches: Iterable[Sequence[str]],
) -> Iterator[list[str]]:
    """`tfm translate` with an export: each batch's translations, as the batches come."""
    model, settings = _open(request)
    for lines in batches:
        yield [found[0][0] for found in translate_nbest_with_ctranslate2(model, lines, settings, 1)]


def translate_exported_nbest(
    request: DecodeRequest,
    batches: Iterable[Sequence[str]],
    n_best: int,
) -> Iterator[list[list[tuple[str, float]]]]:
    """`tfm translate --n-best` with an export: per line its n best (text, tfm's score)."""
    model, settings = _open(request, min_beam=n_best)
    for lines in batches:
        yield translate_nbest_with_ctranslate2(model, lines, settings, n_best)


def evaluate_exported(
    request: DecodeRequest,
    *,
    split: str,
    src: Path | None,
    ref: Path | None,
    output: Path | None,
) -> tuple[dict, list[str]]:
    """`tfm eval` with an export: the translation scores of a split or of aligned files. The
    loss and perplexity need tfm's model, so they are null."""
    model, settings = _open(request)
    if src is not None and ref is not None:
        sources, references = read_aligned(src, ref)
        name = str(src)
    else:
        config = model.config
        splits, _ = prepare_splits(config.data, config.tokenizer, (split,),
                                   tokenizer=model.tokenizer)  # fmt: skip
        sources, references, name = splits[split].src_text, splits[split].tgt_text, split
    hypotheses = [
        best[0][0]
        for part in line_chunks(len(sources), input_lines.EVAL_LINES)
        for best in translate_nbest_with_ctranslate2(model, sources[part], settings, 1)
    ]
    if output is not None:
        output.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
    scores = score_translations(hypotheses, list(references))
    header = {"run": str(request.run), "split": name, "engine": "ctranslate2",
              "quantization": model.info.quantization}  # fmt: skip
    options = {"beam_size": settings.beam_size, "length_penalty": settings.length_penalty}
    return json_safe({**header, **options, **scores, "loss": None, "perplexity": None}), hypotheses
