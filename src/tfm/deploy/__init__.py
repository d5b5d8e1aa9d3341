"""Deploying a trained run: export to CTranslate2 (`export_run`) and translate with the export
(`open_exported`, which `tfm.commands.engines.open_translator` calls for an exported folder).
Needs the optional `ctranslate2` package: `pip install 'tfm[deploy]'`; without it these functions
raise a UsageError saying so."""

from tfm.deploy.ct2_decoding import ExportedModel, open_export, translate_nbest_ids
from tfm.deploy.export import ExportInfo, export_run, is_export, read_export_info

__all__ = [
    "ExportInfo",
    "ExportedModel",
    "export_run",
    "is_export",
    "open_export",
    "read_export_info",
    "translate_nbest_ids",
]
