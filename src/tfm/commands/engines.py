"""Opening what the user named, a trained run or a `tfm export` folder, as one Translator: the one
place that branches on the engine, so every command and the server above it take a Translator."""

from __future__ import annotations

from tfm.prediction.settings import DecodeRequest
from tfm.prediction.translator import Translator
from tfm.rundir.paths import is_export


def open_translator(request: DecodeRequest) -> Translator:
    """The run or export of `request`, opened once on its device, with its decode settings: the
    requested strategy and settings over the config's, able to give `request.n_best`
    hypotheses (`tfm.prediction.strategies.strategy_for`)."""
    if request.run is not None and is_export(request.run):  # the one branch on the engine
        from tfm.deploy.ct2_translator import open_exported  # CTranslate2, without torch

        return open_exported(request)
    from tfm.prediction.opening import open_torch

    return open_torch(request)
