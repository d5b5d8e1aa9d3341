"""The options that several `tfm` commands share, declared once for `tfm.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

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
# The decoding strategy and its settings: each checked by the config schema's `decoding`
# section (the one place their ranges are written), defaults from the run's config.
DECODING = "Decoding (default: the run's config)"
StrategyOption = Annotated[
    str | None,
    typer.Option(
        "--strategy",
        help="How tokens are chosen: greedy, beam or sampling. Without it, a setting of one "
        "strategy below chooses that strategy.",
        rich_help_panel=DECODING,
    ),
]
BeamOption = Annotated[
    int | None,
    typer.Option("--beam-size", help="beam: prefixes kept at each step.", rich_help_panel=DECODING),
]
LengthPenaltyOption = Annotated[
    float | None,
    typer.Option(
        "--length-penalty",
        help="beam: GNMT length penalty alpha; higher favours longer output.",
        rich_help_panel=DECODING,
    ),
]
TemperatureOption = Annotated[
    float | None,
    typer.Option(
        "--temperature",
        help="sampling: below 1 sharper (towards greedy), above 1 flatter.",
        rich_help_panel=DECODING,
    ),
]
TopKOption = Annotated[
    int | None,
    typer.Option(
        "--top-k", help="sampling: from the k most likely tokens; 0: all.", rich_help_panel=DECODING
    ),
]
TopPOption = Annotated[
    float | None,
    typer.Option(
        "--top-p",
        help="sampling: from the fewest most likely tokens whose probability adds up to p.",
        rich_help_panel=DECODING,
    ),
]
SeedOption = Annotated[
    int | None,
    typer.Option(
        "--seed",
        help="sampling: the same seed draws the same samples for the same input (not with an "
        "export).",
        rich_help_panel=DECODING,
    ),
]
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
