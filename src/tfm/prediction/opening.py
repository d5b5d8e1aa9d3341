"""A trained run opened as a `TorchTranslator`: its model (or an ensemble of it and more runs),
the decode settings its config and the user's options give, and a reranker of reverse-direction
runs."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from pathlib import Path

import torch

from tfm.config import Config
from tfm.data.tokenizer import Tokenizer
from tfm.device import resolve_precision, select_device
from tfm.errors import UsageError
from tfm.prediction.confidence import load_map
from tfm.prediction.ensemble import Ensemble, Model
from tfm.prediction.reranking import Reranker
from tfm.prediction.settings import DecodeRequest, DecodeSettings, trained_languages
from tfm.prediction.strategies import BeamSearch, asked_strategy
from tfm.prediction.torch_translator import TorchTranslator
from tfm.rundir.checkpoint import CorruptCheckpointError
from tfm.rundir.manifest import file_digest
from tfm.rundir.model_file import TrainedModel, load_trained
from tfm.rundir.paths import RunPaths, find_run, is_export
from tfm.threads import use_threads

log = logging.getLogger(__name__)

RERANK_MIN_BEAM = 5  # the beam reranking chooses from, unless --beam-size says otherwise


def open_torch(request: DecodeRequest) -> TorchTranslator:
    """The run of `request` opened for decoding (see `tfm.commands.engines.open_translator`)."""
    if request.rerank_weight is not None and not request.rerank_with:
        raise UsageError("--rerank-weight needs --rerank-with RUN (a reverse-direction run)")
    if request.rerank_with:
        request = for_reranking(request)
    paths = find_run(request.run)  # a run that is not there is the one line, before the device
    target = select_device(request.device or "auto")
    use_threads(request.threads, level=logging.DEBUG)  # translate stays a quiet filter
    trained = _load_main(paths, request.checkpoint, target)
    dtype = resolve_precision(trained.config.train.precision, target)
    settings = DecodeSettings.from_config(trained.config.decoding, target, dtype,
                                          asked=request.search, n_best=request.n_best)  # fmt: skip
    languages = trained_languages(trained.paths.plan)
    settings = settings.into(trained.config.data, request.tgt_lang, trained=languages)
    model = _ensemble_of(trained, request.ensemble, target)
    weight = 1.0 if request.rerank_weight is None else request.rerank_weight
    reranker = open_reranker(trained.config, trained.tokenizer, request.rerank_with, weight, target)
    translator = TorchTranslator(model=model, tokenizer=trained.tokenizer, config=trained.config,
                                 settings=settings, reranker=reranker, step=trained.step,
                                 run=trained.paths.root, ensemble=request.ensemble,
                                 rerank_with=request.rerank_with,
                                 model_file=trained.model_file)  # fmt: skip
    translator.tgt_langs = languages
    if request.ensemble:
        translator.unmapped = "an ensemble has no confidence map (each run's is its own model's)"
    else:
        digest = file_digest(trained.model_file)
        translator.confidence_map, translator.unmapped = load_map(trained.paths.root, digest)
    return translator


def for_reranking(request: DecodeRequest) -> DecodeRequest:
    """`request` as reranking needs it: beam search (whatever the config's strategy), of
    `RERANK_MIN_BEAM` or more unless the request gives the beam's size, which must be 2 or
    more. UsageError for another strategy or a beam of one."""
    search = request.search
    if asked_strategy(search) not in (None, BeamSearch.name):
        raise UsageError("--rerank-with reranks a beam: give --strategy beam")
    if search.get("beam_size", 2) < 2:
        raise UsageError("--rerank-with reranks a beam: give --beam-size 2 or more")
    wanted = request.n_best if "beam_size" in search else max(request.n_best, RERANK_MIN_BEAM)
    return dataclasses.replace(
        request, search={**search, "strategy": BeamSearch.name}, n_best=wanted
    )


def load_run(
    run: str | Path | None,
    target: torch.device,
    *,
    option: str = "--run",
    checkpoint: str | Path | None = None,
) -> TrainedModel:
    """The trained run `run` (None: the one last trained from here) on `target`, with its
    best.pt or `checkpoint` (see `_load_main`); an exported folder is refused, naming `option`:
    only a tfm run has the model these options need."""
    if run is not None and is_export(run):
        raise UsageError(
            f"{option} {run}: a CTranslate2 export cannot be used here; give the tfm run "
            "directory it was exported from"
        )
    return _load_main(find_run(run), checkpoint, target)


def _load_main(
    paths: RunPaths, checkpoint: str | Path | None, target: torch.device
) -> TrainedModel:
    """The run with its best.pt (or last.pt), or with `checkpoint`; a corrupt best.pt is an
    error that advises `--checkpoint` with one of the run's checkpoints."""
    if checkpoint is not None:
        return load_trained(paths, target, model_file=_checkpoint_file(paths, checkpoint))
    try:
        return load_trained(paths, target)
    except CorruptCheckpointError as exc:
        found = sorted(paths.checkpoints.glob("step-*.pt"))  # step-00000400.pt: by step
        newest = f" (newest: {found[-1]})" if found else ""
        advice = f"give --checkpoint FILE, one of the run's checkpoints in {paths.checkpoints}"
        message = str(exc).removesuffix("use an earlier checkpoint").rstrip("; ")
        raise CorruptCheckpointError(f"{message}; {advice}{newest}") from exc


def _checkpoint_file(paths: RunPaths, checkpoint: str | Path) -> Path:
    """`--checkpoint` as given, or inside the run directory when that is where it is."""
    path = Path(checkpoint)
    if not path.is_file() and not path.is_absolute() and (paths.root / path).is_file():
        return paths.root / path
    if not path.is_file():
        raise UsageError(f"--checkpoint {checkpoint}: no such file (nor in {paths.root})")
    return path


def _ensemble_of(
    trained: TrainedModel, others: Sequence[str | Path], target: torch.device
) -> Model:
    """`trained`'s model alone, or an `Ensemble` of it and the models of the runs `others`,
    which must use the same tokenizer (the same tokens under the same ids)."""
    loaded = [(other, load_run(other, target, option="--ensemble")) for other in others]
    model = _combined(trained, loaded, "--ensemble")
    if others:
        log.info("decoding with an ensemble of %d models", len(others) + 1)
    return model


def _combined(
    first: TrainedModel, others: Sequence[tuple[str | Path, TrainedModel]], option: str
) -> Model:
    """`first`'s model alone, or an `Ensemble` of it and the loaded runs `others` (named as the
    user gave them, after `option`), which must share `first`'s tokenizer."""
    if not others:
        return first.model
    fingerprint = first.tokenizer.fingerprint()
    for name, member in others:
        if member.tokenizer.fingerprint() != fingerprint:
            raise UsageError(
                f"{option} {name}: its tokenizer differs from the one in "
                f"{first.paths.root}; an ensemble's runs must share one tokenizer "
                "(train them on the same data with the same tokenizer settings)"
            )
    return Ensemble([first.model, *(member.model for _, member in others)])


def open_reranker(
    config: Config,
    tokenizer: Tokenizer,
    runs: Sequence[str | Path],
    weight: float,
    target: torch.device,
) -> Reranker | None:
    """A `Reranker` of the runs (one model, or an ensemble), which must translate the other way
    from a run of `config` (read with `tokenizer`): from its target language to its source
    language (a run trained that way, or one trained both ways in every epoch). None without
    runs."""
    if not runs:
        return None
    ours = config.data
    loaded = [(name, load_run(name, target, option="--rerank-with")) for name in runs]
    for name, reverse in loaded:
        theirs = reverse.config.data
        if not reverse.config.translates(ours.tgt_lang, ours.src_lang):
            raise UsageError(
                f"--rerank-with {name}: it translates {theirs.src_lang}→{theirs.tgt_lang}; "
                f"reranking {ours.src_lang}→{ours.tgt_lang} needs a run trained "
                f"{ours.tgt_lang}→{ours.src_lang}, or both ways in every epoch "
                "(train.bidirectional_epochs ≥ train.max_epochs)"
            )
    first = loaded[0][1]
    model = _combined(first, loaded[1:], "--rerank-with")
    dtype = resolve_precision(first.config.train.precision, target)
    settings = DecodeSettings.from_config(first.config.decoding, target, dtype)
    log.info("reranking the beam with %d reverse model(s), weight %g", len(runs), weight)
    return Reranker(model, first.tokenizer, settings, weight)
