"""The `tfm` command: a thin Typer adapter over tfm's library functions.

Results go to stdout, logs and errors to stderr. Exit codes: 0 success, 1 runtime failure,
2 usage or configuration error, 130 interrupted by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import json
import logging
import shlex
import signal
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from tqdm import tqdm

from tfm.errors import TfmError, UsageError

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    help="Train, evaluate and run a from-scratch Transformer translation model.",
)
log = logging.getLogger("tfm")

RunOption = Annotated[
    Path | None,
    typer.Option("--run", help="Run directory; default: the run last trained from this directory."),
]
BeamOption = Annotated[
    int | None,
    typer.Option("--beam-size", min=1, help="Beam search width; 1 is greedy (default: config)."),
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


class _TqdmHandler(logging.Handler):
    """Log lines on stderr that do not tear through a progress bar."""

    def emit(self, record: logging.LogRecord) -> None:
        tqdm.write(self.format(record), file=sys.stderr)


def _setup_logging(verbose: bool = False) -> None:
    root = logging.getLogger("tfm")
    if not any(isinstance(h, _TqdmHandler) for h in root.handlers):
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.DEBUG if verbose else logging.INFO)


def _fail(message: str, code: int) -> typer.Exit:
    for line in message.splitlines() or [""]:
        typer.echo(f"tfm: error: {line}", err=True)
    return typer.Exit(code)


def _guard(action: Callable[[], int | None]) -> None:
    """Run a command body, mapping tfm's errors to one-line messages and exit codes."""
    try:
        code = action()
    except TfmError as exc:
        raise _fail(str(exc), exc.exit_code) from None
    except KeyboardInterrupt:
        typer.echo("tfm: interrupted", err=True)
        raise typer.Exit(130) from None
    if code:
        raise typer.Exit(code)


@app.command()
def train(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config file.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config key: section.key=value (repeatable)."),
    ] = None,
    device: DeviceOption = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in run_dir exactly.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Delete run_dir and start again.")] = False,
    progress: Annotated[bool, typer.Option(help="Show a progress bar on stderr.")] = True,
) -> None:
    """Train a model from a YAML config; prints the run directory on stdout."""
    _setup_logging()

    def body() -> int:
        from tfm.config import load_config
        from tfm.training import StopFlag
        from tfm.training import train as run_training

        if resume and overwrite:
            raise UsageError("--resume and --overwrite cannot be used together")
        sets = list(overrides or []) + ([f"train.device={device}"] if device else [])
        cfg = load_config(config, sets)
        stop = StopFlag()
        previous = _install_stop_handlers(stop)
        try:
            result = run_training(
                cfg, resume=resume, overwrite=overwrite, progress_bar=progress, stop=stop
            )
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)
        if result.interrupted_by:
            # With --set or --device, the run's own resolved config holds them (run_dir too).
            resume_config = Path(cfg.run_dir) / "config.yaml" if sets else config
            log.info(
                "interrupted by %s at step %d; checkpoint written. Resume with:\n"
                "  tfm train --config %s --resume", result.interrupted_by, result.steps,
                shlex.quote(str(resume_config)),
            )  # fmt: skip
            return 143 if result.interrupted_by == "SIGTERM" else 130
        metric = cfg.train.early_stopping_metric
        sign = -1 if metric == "loss" else 1  # a loss is tracked negated, so higher is better
        best = "none" if result.best_score is None else f"{sign * result.best_score:.2f}"
        log.info("done: %d steps (%s); best validation %s %s at step %s; peak memory %.0f MiB",
                 result.steps, result.stopped_because, metric, best, result.best_step,
                 result.peak_mib)  # fmt: skip
        if result.rank == 0:  # under torchrun, one line from the whole job
            typer.echo(result.run_dir)
        return 0

    _guard(body)


def _install_stop_handlers(stop) -> dict:
    """First SIGINT/SIGTERM: finish the step, checkpoint, exit. Second: stop at once."""

    def handler(signum, frame):
        if stop.requested:
            raise KeyboardInterrupt
        stop.request(signum)
        tqdm.write(
            f"tfm: {signal.Signals(signum).name} received: finishing the step and writing a "
            "checkpoint (send it again to stop at once)",
            file=sys.stderr,
        )

    return {s: signal.signal(s, handler) for s in (signal.SIGINT, signal.SIGTERM)}


@app.command("eval")
def evaluate(
    run: RunOption = None,
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    src: Annotated[Path | None, typer.Option("--src", help="Source file to score.")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="Reference file for --src.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
    output: Annotated[Path | None, typer.Option(help="Write hypotheses here.")] = None,
    device: DeviceOption = None,
    beam_size: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    ensemble: EnsembleOption = None,
    rerank_with: RerankWithOption = None,
    rerank_weight: RerankWeightOption = None,
) -> None:
    """Decode a split (or --src/--ref files) and report BLEU, chrF, loss and exact match."""
    _setup_logging()

    def body() -> int:
        from tfm.commands import evaluate_run

        if (src is None) != (ref is None):
            raise UsageError("--src and --ref go together")
        if split not in ("train", "validation", "test"):
            raise UsageError(f"--split {split!r}: expected train, validation or test")
        scores, hypotheses = evaluate_run(
            run,
            split=split,
            src=src,
            ref=ref,
            device=device,
            beam_size=beam_size,
            length_penalty=length_penalty,
            ensemble=ensemble or [],
            rerank_with=rerank_with or [],
            rerank_weight=rerank_weight,
        )
        if output is not None:
            output.write_text("".join(h + "\n" for h in hypotheses), encoding="utf-8")
        if as_json:
            typer.echo(json.dumps(scores, ensure_ascii=False))
        else:
            for key, value in scores.items():
                typer.echo(f"{key:<16} {'n/a' if value is None else value}")
        return 0

    _guard(body)


@app.command()
def translate(
    sentences: Annotated[list[str] | None, typer.Argument(help="Sentences to translate.")] = None,
    run: RunOption = None,
    file: Annotated[Path | None, typer.Option("--file", help="Translate each line.")] = None,
    device: DeviceOption = None,
    beam_size: BeamOption = None,
    length_penalty: LengthPenaltyOption = None,
    ensemble: EnsembleOption = None,
    rerank_with: RerankWithOption = None,
    rerank_weight: RerankWeightOption = None,
    n_best: Annotated[
        int | None,
        typer.Option(
            "--n-best",
            min=1,
            help="Print the N best beam hypotheses of each sentence, best first: line number "
            "(from 1), score (length-normalised log-probability; with --rerank-with, the "
            "reranking score) and translation, separated by tabs; the beam is at least N.",
        ),
    ] = None,
) -> None:
    """Translate sentences (arguments, --file, or lines on stdin), one output line each."""
    _setup_logging()

    def body() -> int:
        from tfm.commands import read_lines, translate_lines, translate_lines_nbest

        if sentences and file:
            raise UsageError("give sentences or --file, not both")
        if sentences:
            lines = list(sentences)
        elif file is not None:
            lines = read_lines(file)
        elif not sys.stdin.isatty():
            text = sys.stdin.read()
            lines = text.split("\n")
            if text.endswith("\n"):
                lines.pop()
        else:
            raise UsageError("nothing to translate: give sentences, --file PATH, or pipe lines in")
        decoding = {"device": device, "beam_size": beam_size, "length_penalty": length_penalty}
        decoding["ensemble"] = ensemble or []
        decoding.update(rerank_with=rerank_with or [], rerank_weight=rerank_weight)
        if n_best is not None:
            found = translate_lines_nbest(run, lines, n_best, **decoding)
            for number, hypotheses in enumerate(found, start=1):
                for text, score in hypotheses:
                    typer.echo(f"{number}\t{score:.4f}\t{text}")
            return 0
        for line in translate_lines(run, lines, **decoding):
            typer.echo(line)
        return 0

    _guard(body)


# --- pictures and diagnostics (issue 8) ---------------------------------------------------------

OutOption = Annotated[
    Path | None, typer.Option("--out", help="Picture file: .png (default), .svg or .pdf.")
]


@app.command()
def attention(
    sentence: Annotated[str, typer.Argument(help="Sentence to translate and show.")],
    run: RunOption = None,
    out: OutOption = None,
    kind: Annotated[str, typer.Option(help="cross, encoder or decoder attention.")] = "cross",
    layer: Annotated[int | None, typer.Option(help="Layer 1..L; default: all.")] = None,
    head: Annotated[int | None, typer.Option(help="Head 1..H; default: all.")] = None,
) -> None:
    """Translate a sentence and draw its attention weights per head; prints the file written
    (default: attention-KIND.png)."""
    _setup_logging()

    def body() -> int:
        from tfm.visual.attention import plot_sentence_attention

        path = plot_sentence_attention(run, sentence, out, kind=kind, layer=layer, head=head)
        typer.echo(path)
        return 0

    _guard(body)


@app.command()
def positional(
    d_model: Annotated[int, typer.Option("--d-model", help="Model dimension (even).")] = 512,
    length: Annotated[int, typer.Option(help="Number of positions.")] = 100,
    out: OutOption = None,
) -> None:
    """Draw the sinusoidal positional encoding; prints the file written (default:
    positional.png)."""
    _setup_logging()

    def body() -> int:
        from tfm.visual.positional import draw_positional

        typer.echo(draw_positional(out, d_model=d_model, length=length))
        return 0

    _guard(body)


@app.command()
def plot(run: RunOption = None, out: OutOption = None) -> None:
    """Draw loss, validation BLEU/chrF and learning rate against steps from a run's
    metrics.jsonl; prints the file written (default: curves.png in the run directory)."""
    _setup_logging()

    def body() -> int:
        from tfm.visual.curves import plot_run

        typer.echo(plot_run(run, out))
        return 0

    _guard(body)


data_app = typer.Typer(no_args_is_help=True, help="Inspect a corpus before training on it.")
app.add_typer(data_app, name="data")


@data_app.command("check")
def data_check(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config file.")],
    as_json: Annotated[bool, typer.Option("--json", help="Print one JSON object.")] = False,
) -> None:
    """Counts, lengths, length-ratio outliers, duplicates, train overlap, tokens per word and
    <unk> rate of each split, as a table (or --json)."""
    _setup_logging()

    def body() -> int:
        from tfm.config import load_config
        from tfm.data.check import check_data, format_table

        report = check_data(load_config(config))
        typer.echo(json.dumps(report, ensure_ascii=False) if as_json else format_table(report))
        return 0

    _guard(body)


@app.command()
def average(
    out: Annotated[Path, typer.Option("--out", help="New run directory for the averaged model.")],
    run: RunOption = None,
    last: Annotated[int | None, typer.Option(min=1, help="Average the N newest.")] = None,
    best: Annotated[int | None, typer.Option(min=1, help="Average the N best.")] = None,
) -> None:
    """Average checkpoints of a run (§6.1) into a new run directory; prints its path."""
    _setup_logging()

    def body() -> int:
        from tfm.rundir.averaging import average_checkpoints
        from tfm.rundir.paths import find_run

        typer.echo(average_checkpoints(find_run(run), out, last=last, best=best))
        return 0

    _guard(body)


def main() -> None:
    app()


@data_app.command("prepare")
def data_prepare(
    config: Annotated[Path, typer.Option("--config", "-c", help="YAML config file.")],
    overrides: Annotated[
        list[str] | None,
        typer.Option("--set", help="Override a config key: section.key=value (repeatable)."),
    ] = None,
) -> None:
    """Tokenize the training split into the data cache ahead of training (BPE, token ids,
    texts); prints the cache entry's folder. Runs on the same data then start at once."""
    _setup_logging()

    def body() -> int:
        from tfm.config import load_config
        from tfm.data.cache import prepared_entry

        typer.echo(prepared_entry(load_config(config, list(overrides or []))).path)
        return 0

    _guard(body)
