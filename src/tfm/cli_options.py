"""The options that several `tfm` commands share, declared once for `tfm.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from tfm.decoding_options import DECODING_SETTINGS, option_name, strategy_names
from tfm.limits import MAX_THREADS

RunOption = Annotated[
    Path | None,
    typer.Option("--run", help="Run directory; default: the run last trained from this directory."),
]
CheckpointOption = Annotated[
    Path | None,
    typer.Option(
        "--checkpoint",
        help="Decode with this model file of the run instead of best.pt: a step checkpoint "
        "(checkpoints/step-N.pt, also relative to the run) or last.pt.",
    ),
]
DECODING = "Decoding (default: the run's config)"


def decoding_options(strategy: str | None = None) -> dict[str, Any]:
    """The options of the decoding keys, by key, from their declarations
    (`tfm.decoding_options`): --strategy and every strategy's settings, or only `strategy`'s
    settings. Their ranges are checked with the config schema's (`strategy_for`); a value not
    given is the run's config's."""
    options: dict[str, Any] = {}
    if strategy is None:
        help_text = (f"How tokens are chosen: {strategy_names()}. Without it, a setting of one "
                     "strategy below chooses that strategy.")  # fmt: skip
        options["strategy"] = Annotated[
            str | None,
            typer.Option(option_name("strategy"), help=help_text, rich_help_panel=DECODING),
        ]
    for setting in DECODING_SETTINGS:
        if strategy in (None, setting.strategy):
            help_text = f"{setting.describe()} Allowed: {setting.span()}."
            option = typer.Option(
                option_name(setting.key), help=help_text, rich_help_panel=DECODING
            )
            options[setting.key] = Annotated[setting.kind | None, option]
    return options


EnsembleOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--ensemble",
        help="Another run to decode with, as one ensemble with --run (repeatable): each next "
        "token from the mean of the models' probabilities. The runs must share one tokenizer.",
    ),
]
RerankWithOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--rerank-with",
        help="A run trained in the reverse direction (target to source language) that reranks "
        "the beam's hypotheses by how well each explains the source (repeatable: an ensemble). "
        "The beam is at least 5 unless --beam-size says otherwise.",
    ),
]
RerankWeightOption = Annotated[
    float | None,
    typer.Option(
        "--rerank-weight",
        min=0.0,
        help="Weight of the reverse model's per-token log-probability against the beam's "
        "score; 0 keeps the beam's order (default 1; choose it on the validation split).",
    ),
]
DeviceOption = Annotated[
    str | None, typer.Option("--device", help="auto, cpu, cuda or mps (default: the config's).")
]
ThreadsOption = Annotated[
    int | None,
    typer.Option(
        "--threads",
        min=1,
        max=MAX_THREADS,
        help="CPU threads for torch (default: OMP_NUM_THREADS, else the physical cores).",
    ),
]
SetOption = Annotated[
    list[str] | None,
    typer.Option("--set", help="Override a config key: section.key=value (repeatable)."),
]
ConfigOption = Annotated[Path, typer.Option("--config", "-c", help="YAML config file.")]
JsonOption = Annotated[bool, typer.Option("--json", help="Print one JSON object.")]
OutOption = Annotated[
    Path | None, typer.Option("--out", help="Picture file: .png (default), .svg or .pdf.")
]

TgtLangOption = Annotated[
    str | None,
    typer.Option(
        "--tgt-lang",
        help="The language to translate into, for a run trained into several "
        "(data.related): a code it was trained for (default: the main pair's target).",
    ),
]
