"""Training with back-translation: the phases of a run whose config names `data.monolingual`.

    result = train_backtranslated(config, resume=False, overwrite=False)

0. The data: the pair's corpus prepared as for any run, its tokenizer reserving `<bt>` (one
   tokenizer for both directions), and the monolingual text (`data.monolingual`); the plan
   (`training/recipe/phase_budget.py`) divides the budget.
1. The reverse model: a run of its own in `run_dir/reverse`, the config with the direction
   reversed, no monolingual text, its share of the budget and that tokenizer; its last
   checkpoints averaged into `run_dir/reverse-averaged` as its plan says.
2. The synthetic sources: the chosen monolingual lines translated by it into
   `run_dir/synthetic.tsv` (`synthetic_corpus.py`).
3. The pair: the run in `run_dir` itself, on its corpus (read `repeat` times an epoch) and the
   synthetic corpus tagged `<bt>`, for what is left of the budget.

These are the steps a user takes by hand (docs/recipes.md): `tfm train` of the reversed config,
`tfm translate --file`, `tfm train` with the synthetic corpus in `data.train` with a tag.

`backtranslation.json` (`backtranslation_state.py`) keeps the config the run began with, the
plan and where each phase stands, so that `--resume` after a kill in any phase goes on where it
stopped and redoes no finished phase. The run's train.log gets every phase's lines once the
pair's run begins, and the reverse run has its own. Under torchrun every process trains the two
runs, in the one process group; process 0 alone prepares the data, averages and generates,
while the others wait until the state file says it is done.
"""

from __future__ import annotations

import contextlib
import logging
import time
from pathlib import Path

from tfm.commands.backtranslation_state import (
    begin,
    config_of,
    read_state,
    same_run,
    waited,
    write_state,
)
from tfm.commands.engines import open_translator
from tfm.commands.synthetic_corpus import generate
from tfm.config import Config
from tfm.data.cache.prepared_cache import prepared_entry
from tfm.data.monolingual import check_monolingual, choose_lines, prepared_monolingual
from tfm.data.pipeline import check_splits, load_texts
from tfm.data.tokenizer import Tokenizer
from tfm.errors import TrainingError, UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.averaging import average_checkpoints
from tfm.rundir.lock import remove_run_files, run_lock
from tfm.rundir.paths import BACKTRANSLATION_FILES, RunPaths
from tfm.training.distributed import from_environment, joined_group
from tfm.training.loop import TrainResult, train
from tfm.training.recipe.phase_budget import (
    PhasePlan,
    pair_config,
    reverse_config,
    without_text,
)
from tfm.training.run_log import collect_run_log
from tfm.training.run_preparation import finished_run
from tfm.training.session import StopFlag

log = logging.getLogger(__name__)

_, REVERSE_DIR, AVERAGED_DIR, SYNTHETIC_FILE = BACKTRANSLATION_FILES
MIN_PAIR_MINUTES = 1.0  # the pair trains at least this long, whatever the phases before took


def train_backtranslated(
    config: Config,
    *,
    resume: bool = False,
    overwrite: bool = False,
    progress_bar: bool = True,
    stop: StopFlag | None = None,
) -> TrainResult:
    """Train `config` (which names `data.monolingual`) in its phases (module docstring)."""
    check_splits(config.data, ("train", "validation"))
    check_monolingual(config.data)
    root, replicas = Path(config.run_dir), from_environment()
    main = replicas.is_main
    if replicas.active and main:
        log.info("under torchrun: every process trains the reverse model and the pair; process 0 "
                 "prepares the data and back-translates while the other %d wait",
                 replicas.world_size - 1)  # fmt: skip
    with run_lock(root) if main else contextlib.nullcontext(), joined_group(config):
        state = begin(config, root, resume=resume, overwrite=overwrite, main=main)
        config = config_of(state, config)
        plan = PhasePlan.from_record(state["plan"])
        for line in plan.describe() if main else ():
            log.info("%s", line)
        if plan.skipped:
            return train(without_text(config), resume=_started(root), progress_bar=progress_bar,
                         stop=stop)  # fmt: skip
        tokenizer = prepared_entry(config, announce=False).tokenizer()  # a cache hit after phase 0
        stop = stop or StopFlag()
        reverse = reverse_config(config, plan, tokenizer)
        if not state["reverse"]["done"]:
            interrupted = _train_reverse(reverse, root, state, tokenizer, main=main,
                                         progress_bar=progress_bar, stop=stop)  # fmt: skip
            if interrupted is not None:
                return interrupted
            state = read_state(root) or state
        if not state["generation"]["done"]:
            state = _generate(config, reverse, plan, tokenizer, root, state, main=main,
                              progress=progress_bar, stop=stop)  # fmt: skip
            if stop.requested:
                return _interrupted(root, stop)
        state = _decided(root, state, main=main, minutes=_pair_minutes(plan, state))
        pair = pair_config(config, plan, tokenizer, state["pair"]["minutes"])
        notes = {"backtranslation": {key: state[key] for key in ("plan", "reverse", "generation")}}
        return train(pair, resume=_started(root), progress_bar=progress_bar, stop=stop,
                     tokenizer=tokenizer, plan_notes=notes)  # fmt: skip


def finished_backtranslation(config: Config) -> str | None:
    """Where `config.run_dir` holds a run begun with this config whose last phase has trained to
    its end: the line that says so; else None."""
    root = Path(config.run_dir)
    state = read_state(root)
    if state is None or not same_run(state, config):
        return None
    plan = PhasePlan.from_record(state["plan"])
    if plan.skipped:
        return finished_run(without_text(config))
    if "pair" not in state:
        return None
    tokenizer = Tokenizer.load(root / REVERSE_DIR)
    return finished_run(pair_config(config, plan, tokenizer, state["pair"]["minutes"]))


# --- phases 1 and 2 ------------------------------------------------------------------------


def _train_reverse(
    reverse: Config,
    root: Path,
    state: dict,
    tokenizer: Tokenizer,
    *,
    main: bool,
    progress_bar: bool,
    stop: StopFlag,
) -> TrainResult | None:
    """Phase 1: train the reverse run (going on where it stopped) with a train.log of its own,
    then average it and write the state; the reverse run's result where it was interrupted."""
    started = time.perf_counter()
    with collect_run_log():
        result = train(reverse, resume=_started(root / REVERSE_DIR), progress_bar=progress_bar,
                       stop=stop, tokenizer=tokenizer)  # fmt: skip
    if result.interrupted_by:
        return result  # its checkpoint is written: --resume goes on from it
    if not main:
        waited(root, lambda state: state["reverse"]["done"])
        return None
    kept = len(list((root / REVERSE_DIR / "checkpoints").glob("step-*.pt")))
    last = min(reverse.train.average_last or 1, kept)
    if last >= 2:
        averaged = root / AVERAGED_DIR
        remove_run_files(averaged) if averaged.exists() else None  # one a kill left half-made
        average_checkpoints(RunPaths(root / REVERSE_DIR), averaged, last=last)
    averaging = max(time.perf_counter() - started - result.elapsed_s, 0.0)
    state["reverse"] = {"done": True, "seconds": round(result.elapsed_s + averaging, 2),
                        "steps": result.steps}  # fmt: skip
    write_state(root, state)
    return None


def _generate(
    config: Config,
    reverse: Config,
    plan: PhasePlan,
    tokenizer: Tokenizer,
    root: Path,
    state: dict,
    *,
    main: bool,
    progress: bool,
    stop: StopFlag,
) -> dict:
    """Phase 2 (process 0; the others wait): the synthetic corpus, going on where it stopped;
    the state after it (as it was where `stop` was asked for)."""
    if not main:
        return waited(root, lambda state: state["generation"]["done"])
    text = prepared_monolingual(config)
    if text.path.name != state["monolingual"]:
        raise UsageError(
            f"data.monolingual has changed since {root} began back-translating it; start the "
            "run again with --overwrite"
        )
    limit = config.data.max_length
    references = {
        sentence
        for split in ("validation", "test")
        if getattr(config.data, split).format != "toy"
        for sentence in load_texts(config.data, split)[1]
    }

    def fits(rows: list[str]) -> list[bool]:
        return [len(ids) <= limit for ids in tokenizer.encode_tgt(rows)]

    chosen = choose_lines(text, count=plan.lines, seed=config.train.seed, leaks=references,
                          fits=fits)  # fmt: skip
    log.info("back-translating %s", chosen.summary(len(text)))
    model = root / AVERAGED_DIR if (root / AVERAGED_DIR).is_dir() else root / REVERSE_DIR
    request = DecodeRequest(run=model, search={"strategy": plan.strategy},
                            device=reverse.train.device, threads=reverse.train.threads)  # fmt: skip
    made = generate(open_translator(request), text.lines(), chosen.index, root / SYNTHETIC_FILE,
                    spent=state["generation"]["seconds"], cap_s=plan.generation_cap_s,
                    stop=stop, progress=progress)  # fmt: skip
    if stop.requested:
        state["generation"]["seconds"] = round(made.seconds, 2)
        write_state(root, state)
        return state
    log.info("generated %s synthetic sources in %.0f s (%.0f sentences/s)", f"{made.lines:,}",
             made.seconds, made.lines / max(made.seconds, 1e-9))  # fmt: skip
    _check_sources(root, made.lines)
    state["generation"] = {"done": True, "lines": made.lines, "seconds": round(made.seconds, 2),
                           "examined": chosen.examined, "leaks": chosen.leaks,
                           "long": chosen.long}  # fmt: skip
    write_state(root, state)
    return state


def _check_sources(root: Path, lines: int) -> None:
    """Say how many generated sources came out empty (the pair drops those lines when it reads
    the corpus); stop where all did, since the pair would have nothing to learn from them."""
    with (root / SYNTHETIC_FILE).open(encoding="utf-8") as file:
        empty = sum(1 for line in file if line.startswith("\t"))
    if empty and empty == lines:
        raise TrainingError(
            f"the reverse model in {root / REVERSE_DIR} translated all {lines:,} monolingual "
            "lines to nothing: it learned too little to back-translate; give the run more time "
            "(train.max_minutes, train.max_steps) or leave data.monolingual out"
        )
    if empty:
        log.warning("%s of %s synthetic sources came out empty: the pair leaves those lines out",
                    f"{empty:,}", f"{lines:,}")  # fmt: skip


def _interrupted(root: Path, stop: StopFlag) -> TrainResult:
    """What `tfm train` reports of a run stopped while it back-translated."""
    return TrainResult(run_dir=str(root), steps=0, epochs_completed=0,
                       stopped_because="back-translating", best_score=None, best_step=None,
                       interrupted_by=stop.signal_name)  # fmt: skip


def _pair_minutes(plan: PhasePlan, state: dict) -> float | None:
    """Phase 3's budget: what the phases before left of the whole, at least
    `MIN_PAIR_MINUTES`."""
    if plan.budget_s is None:
        return None
    left = plan.budget_s - state["reverse"]["seconds"] - state["generation"]["seconds"]
    return max(left / 60, MIN_PAIR_MINUTES)


def _decided(root: Path, state: dict, *, main: bool, minutes: float | None) -> dict:
    """The state with phase 3's budget in it: decided once, by process 0."""
    if "pair" in state:
        return state
    if not main:
        return waited(root, lambda state: "pair" in state)
    state["pair"] = {"minutes": minutes}
    write_state(root, state)
    return state


def _started(root: Path) -> bool:
    """Whether the run in `root` has a checkpoint to go on from."""
    return (root / "checkpoints").is_dir() and any((root / "checkpoints").glob("step-*.pt"))
