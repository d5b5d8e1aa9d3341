"""The options that several `tfm` commands share, declared once for `tfm.cli`."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tfm.limits import MAX_BEAM_SIZE, MAX_THREADS

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
BeamOption = Annotated[
    int | None,
    typer.Option(
        "--beam-size",
        min=1,
        max=MAX_BEAM_SIZE,
        help="Beam search width; 1 is greedy (default: config).",
    ),
]
LengthPenaltyOption = Annotated[
    float | None,
    typer.Option(
        "--length-penalty",
        min=0.0,
        help="GNMT length penalty alpha for beam search; higher favours longer output "
        "(default: config).",
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
