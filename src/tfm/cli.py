"""The `tfm` command: a thin Typer adapter over `tfm.commands`.

Each command parses its options, calls one function of `tfm.commands` and prints what it returns.
Results go to stdout, logs and errors to stderr. Exit codes: 0 success, 1 runtime failure,
2 usage or configuration error, 130 interrupted by SIGINT, 143 by SIGTERM.
"""

from __future__ import annotations

import errno
import functools
import inspect
import json
import logging
import os
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Final

import typer
from typer.core import TyperGroup

from tfm import __version__
from tfm.cli_options import (
    CheckpointOption,
    ConfigOption,
    DeviceOption,
    EnsembleOption,
    JsonOption,
    OutOption,
    RerankWeightOption,
    RerankWithOption,
    RunOption,
    SetOption,
    TgtLangOption,
    ThreadsOption,
    decoding_options,
)
from tfm.errors import TfmError
from tfm.limits import MAX_BEAM_SIZE

if TYPE_CHECKING:
    from tfm.prediction.settings import DecodeRequest


class _Group(TyperGroup):
    """tfm's commands. A mistake the parser finds in the options or arguments (an unknown
    option, a value out of range, a missing option) is one `tfm: error:` line and exit 2, as
    every error tfm finds itself is, rather than a framed usage message."""

    def main(
        self,
        args: Sequence[str] | None = None,
        prog_name: str | None = None,
        complete_var: str | None = None,
        standalone_mode: bool = True,
        windows_expand_args: bool = True,
        **extra: Any,
    ) -> Any:
        parse = functools.partial(super().main, args, prog_name, complete_var, False,
                                  windows_expand_args, **extra)  # fmt: skip
        if not standalone_mode:  # the caller handles what the parser raises
            return parse()
        try:
            result = parse()
        except Exception as exc:
            names = {cls.__name__ for cls in type(exc).__mro__}
            if "NoArgsIsHelpError" in names:  # the help is shown already
                sys.exit(2)
            if "Abort" in names:  # end of input at one of click's prompts
                _fail("aborted", 1)
                sys.exit(1)
            if "ClickException" not in names:  # not a mistake the parser found: a bug
                raise
            message = " ".join(exc.format_message().split())  # type: ignore[attr-defined]
            ctx = getattr(exc, "ctx", None)
            where = f" (see {ctx.command_path} -h)" if ctx is not None else ""
            code = getattr(exc, "exit_code", 1)
            _fail(f"{message}{where}", code)
            sys.exit(code)
        sys.exit(result if isinstance(result, int) else 0)


# Help texts are Markdown: a docstring's single line breaks join, so its paragraphs wrap to the
# terminal's width, and brackets (`tfm[deploy]`) are text, not markup.
MARKUP: Final = "markdown"
app = typer.Typer(
    cls=_Group,
    add_completion=False,
    rich_markup_mode=MARKUP,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


class _TqdmHandler(logging.Handler):
    """Log lines on stderr that do not tear through a progress bar (tqdm is imported with the
    first line: `tfm translate` often logs none). Once stderr is gone (a closed terminal, a
    reader of the pipe that stopped), its lines are dropped: nothing tfm does depends on them,
    and training keeps its own log (`tfm.training.run_log`)."""

    stderr_gone = False

    def emit(self, record: logging.LogRecord) -> None:
        if self.stderr_gone:
            return
        from tqdm import tqdm

        try:
            tqdm.write(self.format(record), file=sys.stderr)
        except (OSError, ValueError):  # EPIPE, EIO; ValueError: stderr was closed
            self.stderr_gone = True


def _setup_logging() -> None:
    root = logging.getLogger("tfm")
    if not any(isinstance(h, _TqdmHandler) for h in root.handlers):
        handler = _TqdmHandler()
        handler.setFormatter(logging.Formatter("%(message)s"))
        root.addHandler(handler)
    root.setLevel(logging.INFO)


def _fail(message: str, code: int) -> typer.Exit:
    try:
        for line in message.splitlines() or [""]:
            typer.echo(f"tfm: error: {line}", err=True)
    except (OSError, ValueError):  # stderr is gone: the exit code still says it failed
        pass
    return typer.Exit(code)


def _command(body: Callable[..., int | None]) -> Callable[..., None]:
    """A command's body run with tfm's logging on stderr, its errors mapped to one line on
    stderr and their exit codes, and its result (an exit code; None is 0) as the exit code.
    A reader of stdout that goes away (`tfm translate ... | head -1`) ends it quietly, exit 0."""

    @functools.wraps(body)
    def run(*args, **kwargs) -> None:
        _setup_logging()
        try:
            code = body(*args, **kwargs)
        except TfmError as exc:
            raise _fail(str(exc), exc.exit_code) from None
        except KeyboardInterrupt:
            typer.echo("tfm: interrupted", err=True)
            raise typer.Exit(130) from None
        except BrokenPipeError:
            _discard_stdout()
            return
        except OSError as exc:  # a path given on the command line that no file system takes
            if exc.errno != errno.ENAMETOOLONG or exc.filename is None:
                raise
            raise _fail(_too_long(Path(os.fsdecode(exc.filename))), 2) from None
        if code:
            raise typer.Exit(code)

    return run


def _option_group(
    keyword: str | None, options: dict[str, Any], defaults: dict[str, object] | None = None
) -> Callable[[Callable[..., None]], Callable[..., None]]:
    """A decorator: the command `body`'s own options followed by `options`, which `body`
    receives as one dict (keyword `keyword`), each at its value in `defaults` (None unless
    given); with no `keyword`, `body` reads them from its context's `params`."""

    def decorate(body: Callable[..., None]) -> Callable[..., None]:
        own = [p for p in inspect.signature(body).parameters.values() if p.name != keyword]
        group = [
            inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY,
                              default=(defaults or {}).get(name), annotation=option)
            for name, option in options.items()
        ]  # fmt: skip

        @functools.wraps(body)
        def run(**given) -> None:
            grouped = {name: given.pop(name) for name in options}
            return body(**given, **({} if keyword is None else {keyword: grouped}))

        hints = typing.get_type_hints(body, include_extras=True)
        run.__annotations__ = {**{p.name: hints[p.name] for p in own}, **options}
        run.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
            [p.replace(annotation=hints[p.name]) for p in own] + group, return_annotation=None
        )
        return run

    return decorate


def _serve_limit_options() -> tuple[dict[str, Any], dict[str, object]]:
    """An option of `tfm serve` for each of its limits, and their defaults
    (`tfm.serve.request_limits`, where each limit is defined)."""
    from dataclasses import fields

    from tfm.serve.request_limits import ServeLimits, option_name

    limits = fields(ServeLimits)
    options = {
        limit.name: Annotated[
            type(limit.default),
            typer.Option(
                option_name(limit.name), min=limit.metadata["min"], help=limit.metadata["help"]
            ),
        ]  # fmt: skip
        for limit in limits
    }
    return options, {limit.name: limit.default for limit in limits}


def _too_long(path: Path) -> str:
    from tfm.rundir.paths import check_path_length

    try:
        check_path_length(path, "path")
    except TfmError as exc:
        return str(exc)
    return f"path {path}: too long for the file system; choose a shorter one"


def _discard_stdout() -> None:
    """Point stdout at /dev/null, so that flushing it at exit does not fail a second time."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # no file descriptor (as under typer's CliRunner)
        pass


def _print_version(value: bool) -> None:
    if value:
        typer.echo(f"tfm {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version and exit."
        ),
    ] = False,
) -> None:
    """Train, evaluate and run a from-scratch Transformer translation model."""


@app.command()
@_command
def train(
    config: ConfigOption,
    overrides: SetOption = None,
    device: DeviceOption = None,
    threads: ThreadsOption = None,
    resume: Annotated[bool, typer.Option(help="Continue the run in run_dir exactly.")] = False,
    overwrite: Annotated[bool, typer.Option(help="Delete run_dir and start again.")] = False,
    progress: Annotated[
        bool,
        typer.Option(help="Show progress on stderr: a bar on a terminal, else a line at times."),
    ] = True,
) -> int:
    """Train a model from a YAML config; prints the run directory on stdout."""
    from tfm.commands.train import train_run

    outcome = train_run(config, overrides=overrides or [], device=device, threads=threads,
                        resume=resume, overwrite=overwrite, progress=progress)  # fmt: skip
    if outcome.run_dir is not None:
        typer.echo(outcome.run_dir)
    return outcome.exit_code


@app.command("eval")
@_command
@_option_group(None, decoding_options())
def evaluate(
    ctx: typer.Context,
    split: Annotated[str, typer.Option(help="train, validation or test.")] = "test",
    src: Annotated[Path | None, typer.Option("--src", help="Source file to score.")] = None,
    ref: Annotated[Path | None, typer.Option("--ref", help="Reference file for --src.")] = None,
    as_json: JsonOption = False,
    output: Annotated[Path | None, typer.Option(help="Write hypotheses here.")] = None,
    confidences: Annotated[
        Path | None,
        typer.Option(
            help="Write each hypothesis's confidence here: a TSV of confidence (empty without "
            "the run's confidence map), log_prob and sentence chrF, after a header line."
        ),
    ] = None,
    run: RunOption = None,
    checkpoint: CheckpointOption = None,
    device: DeviceOption = None,
    ensemble: EnsembleOption = None,
    rerank_with: RerankWithOption = None,
    rerank_weight: RerankWeightOption = None,
    threads: ThreadsOption = None,
    tgt_lang: TgtLangOption = None,
) -> None:
    """Decode a split (or --src/--ref files) and report BLEU, chrF, loss, exact match and the
    decoding time."""
    from tfm.commands.decode import check_eval_options, evaluate_run
    from tfm.commands.engines import open_translator
    from tfm.commands.input import read_aligned

    check_eval_options(split, src, ref)
    lines = read_aligned(src, ref) if src is not None and ref is not None else None
    translator = open_translator(_decode_request(ctx))
    scores, _ = evaluate_run(translator, split=split, src=src, ref=ref, output=output, lines=lines,
                             confidences=confidences)  # fmt: skip
    if as_json:
        typer.echo(json.dumps(scores, ensure_ascii=False))
        return
    for key, value in scores.items():
        typer.echo(f"{key:<16} {'n/a' if value is None else value}")


@app.command()
@_command
@_option_group(None, decoding_options())
def translate(
    ctx: typer.Context,
    sentences: Annotated[list[str] | None, typer.Argument(help="Sentences to translate.")] = None,
    file: Annotated[
        Path | None, typer.Option("--file", help="Translate each line; - reads stdin.")
    ] = None,
    n_best: Annotated[
        int | None,
        typer.Option(
            "--n-best",
            min=1,
            max=MAX_BEAM_SIZE,
            help="Print the N best distinct translations of each sentence, best first: line "
            "number (from 1), score (the strategy's: with beam search the length-normalised "
            "log-probability, else the log-probability; with --rerank-with, the reranking "
            "score) and translation, separated by tabs. They come from a beam of at least N "
            "(unless --beam-size says otherwise), or N samples.",
        ),
    ] = None,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help="Print a JSON object a line: source, translation, score and confidence (the "
            "sentence chrF expected of it; null where the run has no confidence map); with "
            "--n-best, also n_best, a list of translations with their scores and confidences.",
        ),
    ] = False,
    run: RunOption = None,
    checkpoint: CheckpointOption = None,
    device: DeviceOption = None,
    ensemble: EnsembleOption = None,
    rerank_with: RerankWithOption = None,
    rerank_weight: RerankWeightOption = None,
    threads: ThreadsOption = None,
    tgt_lang: TgtLangOption = None,
) -> None:
    """Translate sentences (arguments, --file, or lines on stdin), one output line each; at a
    terminal with no input, translate each line typed at a prompt until Ctrl-D."""
    from tfm.commands.decode import (
        translate_batches,
        translate_batches_judged,
        translate_batches_nbest,
    )
    from tfm.commands.engines import open_translator
    from tfm.commands.input import translation_input

    interactive = not sentences and file is None and sys.stdin.isatty()
    if interactive:
        typer.echo("Type a sentence, then Enter; arrow keys recall lines, Ctrl-D ends.", err=True)
    batches = translation_input(sentences or [], file, sys.stdin, ask=_ask)
    translator = open_translator(_decode_request(ctx))
    if as_json:
        for rows in translate_batches_judged(translator, batches, n_best):
            _write_lines([json.dumps(row, ensure_ascii=False) for row in rows])
    elif n_best is None:
        for translations in translate_batches(translator, batches):
            _write_lines(translations)
    else:
        _write_nbest(translate_batches_nbest(translator, batches, n_best))
    if interactive:
        typer.echo("", err=True)  # the line Ctrl-D left open


def _write_nbest(found_batches) -> None:
    """`tfm translate --n-best` output: line number, score and translation, tab-separated."""
    done = 0  # lines translated before this batch
    for found in found_batches:
        _write_lines([f"{done + i}\t{score:.4f}\t{text}"
                      for i, hypotheses in enumerate(found, start=1)
                      for text, score in hypotheses])  # fmt: skip
        done += len(found)


def _decode_request(ctx: typer.Context) -> DecodeRequest:
    """The one way a command's options become a `DecodeRequest`: by name, those it has."""
    from tfm.prediction.settings import DecodeRequest

    return DecodeRequest.from_options(ctx.params)


def _ask(prompt: str) -> str:
    """One line typed at the terminal after `prompt`, which goes to stderr when stdout is not
    the terminal (`tfm translate > out.txt` keeps only translations in the file)."""
    if sys.stdout.isatty():
        return input(prompt)
    sys.stderr.write(prompt)
    sys.stderr.flush()
    return input()


def _write_lines(lines: list[str]) -> None:
    """Lines on stdout, flushed at once (a pipe's reader sees them now, not at exit)."""
    if lines:
        sys.stdout.write("".join(line + "\n" for line in lines))
        sys.stdout.flush()


@app.command("rerank-sweep")
@_command
@_option_group(None, decoding_options("beam"))
def rerank_sweep(
    ctx: typer.Context,
    rerank_with: RerankWithOption = None,
    run: RunOption = None,
    ensemble: EnsembleOption = None,
    weights: Annotated[
        list[float] | None,
        typer.Option(
            "--weight", min=0.0, help="A weight to try (repeatable; default: 0 1 2 3 3.5 4 5)."
        ),
    ] = None,
    choose_by: Annotated[
        str, typer.Option(help="The validation score that chooses: bleu_lowercase or bleu.")
    ] = "bleu_lowercase",
    checkpoint: CheckpointOption = None,
    device: DeviceOption = None,
    threads: ThreadsOption = None,
) -> None:
    """Choose --rerank-weight on the validation split: one row of validation and test BLEU per
    weight (the beam decoded and scored once per split), then the weight chosen and its test
    scores."""
    from tfm.commands.rerank_sweep import DEFAULT_WEIGHTS, format_sweep
    from tfm.commands.rerank_sweep import rerank_sweep as sweep

    request = _decode_request(ctx)
    typer.echo(format_sweep(sweep(request, weights or DEFAULT_WEIGHTS, choose_by=choose_by)))


@app.command()
@_command
@_option_group("limits", *_serve_limit_options())
@_option_group(None, decoding_options())
def serve(
    ctx: typer.Context,
    run: RunOption = None,
    host: Annotated[
        str,
        typer.Option(help="Address to listen on; another than loopback needs a key or --no-auth."),
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=0, max=65535, help="Port; 0 picks a free one.")] = 8000,
    api_key_file: Annotated[
        Path | None,
        typer.Option("--api-key-file", help="File holding the key clients send as a Bearer token."),
    ] = None,
    no_auth: Annotated[
        bool, typer.Option("--no-auth", help="Serve another --host without a key.")
    ] = False,
    log_text: Annotated[
        bool,
        typer.Option("--log-text", help="Log what each request says and its answer (INFO)."),
    ] = False,
    device: DeviceOption = None,
    threads: ThreadsOption = None,
    limits: dict | None = None,
) -> None:
    """Serve a run or export over HTTP: the page at /, POST /translate and /attention, GET /info
    and /health. Prints the address on stdout once it listens; Ctrl-C or SIGTERM stop it."""
    from tfm.serve.request_limits import ServeLimits
    from tfm.serve.server import ServeOptions
    from tfm.serve.server import serve as serve_run

    request = _decode_request(ctx)
    options = ServeOptions(host=host, port=port, api_key_file=api_key_file, no_auth=no_auth,
                           log_text=log_text, limits=ServeLimits(**(limits or {})))  # fmt: skip
    serve_run(request, options, on_ready=lambda address: _write_lines([address]))


# --- pictures ------------------------------------------------------------------------------------


@app.command()
@_command
def attention(
    sentence: Annotated[str, typer.Argument(help="Sentence to translate and show.")],
    run: RunOption = None,
    out: OutOption = None,
    kind: Annotated[str, typer.Option(help="cross, encoder or decoder attention.")] = "cross",
    layer: Annotated[int | None, typer.Option(help="Layer 1..L; default: all.")] = None,
    head: Annotated[int | None, typer.Option(help="Head 1..H; default: all.")] = None,
    checkpoint: CheckpointOption = None,
) -> None:
    """Translate a sentence and draw its attention weights per head; prints the file written
    (default: attention-KIND.png)."""
    from tfm.commands.input import check_arguments
    from tfm.commands.pictures import plot_attention

    [sentence] = check_arguments([sentence])
    typer.echo(
        plot_attention(run, sentence, out, kind=kind, layer=layer, head=head, checkpoint=checkpoint)
    )


@app.command()
@_command
def positional(
    d_model: Annotated[int, typer.Option("--d-model", help="Model dimension (even).")] = 512,
    length: Annotated[int, typer.Option(help="Number of positions.")] = 100,
    out: OutOption = None,
) -> None:
    """Draw the sinusoidal positional encoding; prints the file written (default:
    positional.png)."""
    from tfm.commands.pictures import plot_positional

    typer.echo(plot_positional(out, d_model=d_model, length=length))


@app.command()
@_command
def plot(run: RunOption = None, out: OutOption = None) -> None:
    """Draw loss, validation BLEU/chrF and learning rate against steps from a run's
    metrics.jsonl; prints the file written (default: curves.png in the run directory)."""
    from tfm.commands.pictures import plot_curves

    typer.echo(plot_curves(run, out))


# --- runs and corpora ----------------------------------------------------------------------------

data_app = typer.Typer(
    no_args_is_help=True, rich_markup_mode=MARKUP, help="Inspect a corpus before training on it."
)
app.add_typer(data_app, name="data")


@data_app.command("check")
@_command
def data_check(
    config: ConfigOption, overrides: SetOption = None, as_json: JsonOption = False
) -> None:
    """Counts, lengths, length-ratio outliers, duplicates, train overlap, tokens per word and
    `<unk>` rate of each split, as a table (or --json)."""
    from tfm.commands.runs import check_corpus
    from tfm.data.check import format_table

    report = check_corpus(config, overrides=overrides or [])
    typer.echo(json.dumps(report, ensure_ascii=False) if as_json else format_table(report))


@data_app.command("prepare")
@_command
def data_prepare(config: ConfigOption, overrides: SetOption = None) -> None:
    """Tokenize the training split into the data cache ahead of training (BPE, token ids,
    texts); prints the cache entry's folder. Runs on the same data then start at once."""
    from tfm.commands.prepare import prepare_corpus

    typer.echo(prepare_corpus(config, overrides=overrides or []))


config_app = typer.Typer(no_args_is_help=True, rich_markup_mode=MARKUP, help="Show configurations.")
app.add_typer(config_app, name="config")


@config_app.command("show")
@_command
def config_show(
    config: Annotated[
        Path | None, typer.Option("--config", "-c", help="YAML config file (default: none).")
    ] = None,
    overrides: SetOption = None,
    defaults: Annotated[
        bool, typer.Option("--defaults", help="Every key at its default (no --config, --set).")
    ] = False,
    comments: Annotated[
        bool, typer.Option(help="Each key's description as a comment, and changed defaults.")
    ] = True,
    plan: Annotated[
        bool,
        typer.Option(
            help="Derive the keys the config leaves unset from the training data, as tfm train "
            "does (reads and prepares the data), and print the plan first."
        ),
    ] = True,
) -> None:
    """Print the effective configuration, every key, as YAML that --config reads back."""
    path = None if config is None else str(config)
    if plan and not defaults:
        from tfm.training.recipe.plan import show_planned

        shown = show_planned(path, overrides or [], comments=comments)
    else:
        from tfm.config.show import show_config

        shown = show_config(path, overrides or [], defaults=defaults, comments=comments)
    typer.echo(shown, nl=False)


@app.command()
@_command
def average(
    out: Annotated[Path, typer.Option("--out", help="New run directory for the averaged model.")],
    run: RunOption = None,
    last: Annotated[
        int | None,
        typer.Option(min=1, help="Average the N newest (default: the run's train.average_last)."),
    ] = None,
    best: Annotated[int | None, typer.Option(min=1, help="Average the N best.")] = None,
) -> None:
    """Average checkpoints of a run (§6.1) into a new run directory; prints its path."""
    from tfm.commands.runs import average_run

    typer.echo(average_run(run, out, last=last, best=best))


@app.command()
@_command
def calibrate(
    run: RunOption = None,
    device: DeviceOption = None,
    threads: ThreadsOption = None,
    as_json: JsonOption = False,
) -> None:
    """Fit the run's confidence map on its validation split (training does this at its end; an
    averaged run needs it) into confidence.json: translations then get the sentence chrF
    expected of them."""
    from tfm.commands.calibrate import calibrate_run

    found = calibrate_run(run, device=device, threads=threads)
    if as_json:
        typer.echo(json.dumps(found, ensure_ascii=False))
        return
    for key, value in found.items():
        typer.echo(f"{key:<16} {value}")


@app.command("export")
@_command
def export_run(
    out: Annotated[Path, typer.Option("--out", help="New folder for the exported model.")],
    run: RunOption = None,
    quantization: Annotated[
        str,
        typer.Option(help="Weights: none (float32), int8, int8_float32, float16 or bfloat16."),
    ] = "none",
    device: Annotated[
        str, typer.Option("--device", help="Where the export will run: cpu or cuda.")
    ] = "cpu",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace an earlier export in --out.")
    ] = False,
) -> None:
    """Export a run's model to CTranslate2 (fast CPU/GPU inference; needs tfm[deploy]); prints
    the folder, which `tfm translate --run` and `tfm eval --run` accept."""
    from tfm.commands.deployed import export

    typer.echo(export(run, out, quantization=quantization, overwrite=overwrite, device=device))


def main() -> None:
    app()
