"""An exported folder opened as a `tfm.prediction.translator.Translator`: CTranslate2 searches,
tfm frames the lines and lists n-best texts (`tfm.prediction.line_search`). Needs no torch."""

from __future__ import annotations

from collections.abc import Sequence

from tfm.deploy.ct2_decoding import ExportedModel, open_export, translate_nbest_ids
from tfm.deploy.export import require_ctranslate2
from tfm.errors import UsageError
from tfm.prediction.line_search import Found, LineTranslator
from tfm.prediction.settings import DecodeRequest, DecodeSettings


class ExportTranslator(LineTranslator):
    """An export translating with CTranslate2; `exported` is the opened folder."""

    engine = "ctranslate2"

    def __init__(self, exported: ExportedModel, settings: DecodeSettings) -> None:
        self.exported, self.settings = exported, settings
        self.config = exported.config
        self.tokenizer = exported.tokenizer
        self.step: int | None = exported.info.step

    def search_best(
        self, sources: list[list[int]], settings: DecodeSettings, numbers: list[int]
    ) -> list[list[int]]:
        found = translate_nbest_ids(self.exported, sources, settings, with_scores=False)
        return [hypotheses[0][0] for hypotheses in found]

    def search_beam(
        self, sources: list[list[int]], settings: DecodeSettings, numbers: list[int]
    ) -> Sequence[Found]:
        return translate_nbest_ids(self.exported, sources, settings, settings.beam_size)

    def describe(self) -> dict[str, object]:
        """The folder, the engine and the quantization of its weights."""
        return {"run": str(self.exported.path), "engine": self.engine,
                "quantization": self.exported.info.quantization}  # fmt: skip


def open_exported(request: DecodeRequest, *, min_beam: int = 1) -> ExportTranslator:
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
    settings = DecodeSettings.from_config(
        exported.config.decoding, device, "float32", beam_size=request.beam_size,
        length_penalty=request.length_penalty, min_beam=min_beam,
    )  # fmt: skip
    return ExportTranslator(exported, settings)
