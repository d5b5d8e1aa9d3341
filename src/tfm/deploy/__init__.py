"""Deploying a trained run: export to CTranslate2 (`export_run`) and translate with the export
(`translate_with_ctranslate2`). Needs the optional `ctranslate2` package: `pip install
'tfm[deploy]'`; without it these functions raise a UsageError saying so."""

from tfm.deploy.decoding import (
    ExportedModel,
    SearchSettings,
    open_export,
    search_settings,
    translate_nbest_ids,
    translate_nbest_with_ctranslate2,
    translate_with_ctranslate2,
)
from tfm.deploy.export import ExportInfo, export_run, is_export, read_export_info

__all__ = [
    "ExportInfo",
    "ExportedModel",
    "SearchSettings",
    "export_run",
    "is_export",
    "open_export",
    "read_export_info",
    "search_settings",
    "translate_nbest_ids",
    "translate_nbest_with_ctranslate2",
    "translate_with_ctranslate2",
]
