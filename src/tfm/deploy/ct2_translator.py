"""An exported folder opened as a `tfm.prediction.translator.Translator`: CTranslate2 searches
and scores given translations, tfm frames the lines, lists n-best texts and reads confidences
with the map the run had for the model exported. Needs no torch."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from tfm.deploy.ct2_decoding import (
    ExportedModel,
    ct2_search,
    open_export,
    score_ids,
    translate_nbest_ids,
)
from tfm.deploy.export import require_ctranslate2
from tfm.errors import UsageError
from tfm.prediction.confidence import CONFIDENCE_FILE, read_map
from tfm.prediction.settings import DecodeRequest, DecodeSettings, trained_languages
from tfm.prediction.translator import Found, Translator

if TYPE_CHECKING:
    from tfm.prediction.attention_weights import AttentionView


class ExportTranslator(Translator):
    """An export translating with CTranslate2; `exported` is the opened folder. It has no
    attention weights to show."""

    engine = "ctranslate2"

    def __init__(self, *, exported: ExportedModel, settings: DecodeSettings) -> None:
        ct2_search(settings.strategy, 1)  # a strategy CTranslate2 cannot do fails now
        self.exported, self.settings = exported, settings
        self.config = exported.config
        self.tokenizer = exported.tokenizer
        self.step: int | None = exported.info.step

    def search(
        self,
        sources: list[list[int]],
        settings: DecodeSettings,
        numbers: list[int],
        *,
        n_best: int,
        scored: bool,
    ) -> Sequence[Found]:
        return translate_nbest_ids(self.exported, sources, settings, n_best, with_scores=scored)

    def log_probs(self, sources: list[list[int]], outputs: Sequence[list[int]]) -> list[float]:
        return score_ids(self.exported, sources, outputs, self.settings)

    def attention_views(
        self, sentence: str, source: list[int] | None = None
    ) -> dict[str, AttentionView]:
        raise UsageError(
            f"--run {self.exported.path}: a CTranslate2 export has no attention weights to "
            "show; give the tfm run directory it was exported from"
        )

    def describe(self) -> dict[str, object]:
        """The folder, the engine and the quantization of its weights."""
        return {"run": str(self.exported.path), "engine": self.engine,
                "quantization": self.exported.info.quantization}  # fmt: skip


def open_exported(request: DecodeRequest) -> ExportTranslator:
    """The export `request.run` opened on the requested device (auto: cuda where CTranslate2
    sees a GPU, else cpu) with `--threads` threads (default 1), and its decode settings (see
    `tfm.commands.engines.open_translator`)."""
    for option, given in (("--ensemble", request.ensemble), ("--rerank-with", request.rerank_with),
                          ("--checkpoint", request.checkpoint)):  # fmt: skip
        if given:
            raise UsageError(
                f"{option} needs a tfm run directory; {request.run} is a CTranslate2 export "
                "(pass the run it was exported from as --run)"
            )
    if request.rerank_weight is not None:
        raise UsageError("--rerank-weight needs --rerank-with RUN (a reverse-direction run)")
    device = request.device or "auto"
    if device == "auto":
        device = "cuda" if require_ctranslate2().get_cuda_device_count() > 0 else "cpu"
    if device not in ("cpu", "cuda"):
        raise UsageError(f"--device {device}: a CTranslate2 export runs on cpu or cuda")
    exported = open_export(request.run or "", device=device, threads=request.threads or 1)
    settings = DecodeSettings.from_config(exported.config.decoding, device, "float32",
                                          asked=request.search, n_best=request.n_best)  # fmt: skip
    languages = trained_languages(exported.path / "plan.json")
    settings = settings.into(exported.config.data, request.tgt_lang, trained=languages)
    translator = ExportTranslator(exported=exported, settings=settings)
    translator.tgt_langs = languages
    if (exported.path / CONFIDENCE_FILE).is_file():  # written with the model: it is the model's
        translator.confidence_map, _ = read_map(exported.path / CONFIDENCE_FILE)
    else:
        translator.unmapped = (
            f"{exported.path} has no confidence map: its run had none for the model exported; "
            "`tfm calibrate` the run, then export it again"
        )
    return translator
