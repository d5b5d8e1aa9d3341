"""Warnings for a model gone degenerate, from what a validation leaves behind: its hypotheses and
the run's metric history. Small data makes all three common, and each has a usual remedy.

- identical: at least IDENTICAL_SHARE of the hypotheses are one and the same sentence (often the
  empty one): the decoder has learned the target language's most likely sentence and ignores the
  source.
- repetition: at least LOOP_SHARE of the hypotheses contain a loop, an n-gram (n <= MAX_LOOP_N
  words) repeated LOOP_REPEATS times back to back ("der der der", "a b a b a b"; in a script
  written without spaces a character is a word: "のののの").
- overfitting: validation loss rose at each of the last OVERFIT_VALIDATIONS - 1 validations while
  the training loss fell over the same steps.

Pure functions: the training session logs what `degenerate_warnings` returns, in full the first
time a kind of finding shows up in a run and as one short line when it persists.

`unusable_model` is the rule for a run that the time limit stopped before its step or epoch
budget: its model is not usable yet when its last validation scored BLEU below UNUSABLE_BLEU or
showed identical or repeating hypotheses, and `tfm train` then exits with a failure.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from itertools import pairwise
from typing import NamedTuple

from tfm.data.words import words
from tfm.rundir.metrics import series

MIN_HYPOTHESES = 10  # fewer than this: too few to call a share degenerate
IDENTICAL_SHARE = 0.3
LOOP_SHARE = 0.1
LOOP_REPEATS = 3
MAX_LOOP_N = 4
OVERFIT_VALIDATIONS = 3  # the rise must hold over this many validations (two rises in a row)
UNUSABLE_BLEU = 1.0  # below this, hardly an n-gram is right: no model to translate with
OUTPUT_FINDINGS = ("identical", "repetition")  # the findings about the output itself


class Finding(NamedTuple):
    """One sign of degeneration; str() gives the whole warning."""

    kind: str  # "identical", "repetition" or "overfitting"
    seen: str  # what was seen, with its numbers
    advice: str  # what it usually means, and the usual remedies

    def __str__(self) -> str:
        return f"{self.seen}: {self.advice}"


def degenerate_warnings(hypotheses: Sequence[str], history: Sequence[dict]) -> list[Finding]:
    """One finding per sign of degeneration (empty when the model looks healthy); `history` is
    the run's metric events in order, the current validation's included."""
    found = [identical_warning(hypotheses), repetition_warning(hypotheses)]
    found.append(overfitting_warning(history))
    return [finding for finding in found if finding]


def unusable_model(bleu: float | None, findings: Sequence[str]) -> str | None:
    """Why a model whose last validation scored `bleu` and showed the finding kinds `findings`
    is not usable yet, or None when it may be."""
    if bleu is None:
        return "it was never validated"
    if not bleu >= UNUSABLE_BLEU:  # NaN too
        return f"validation BLEU {bleu:.2f} is below {UNUSABLE_BLEU:g}"
    if shown := [kind for kind in OUTPUT_FINDINGS if kind in findings]:
        what = {"identical": "identical", "repetition": "repeating"}
        return f"its validation hypotheses are {' and '.join(what[k] for k in shown)}"
    return None


def identical_warning(hypotheses: Sequence[str]) -> Finding | None:
    if len(hypotheses) < MIN_HYPOTHESES:
        return None
    text, count = Counter(" ".join(h.split()) for h in hypotheses).most_common(1)[0]
    share = count / len(hypotheses)
    if share < IDENTICAL_SHARE:
        return None
    what = "empty" if not text else f"the same sentence, {_quote(text)}"
    return Finding(
        "identical",
        f"{share:.0%} of validation hypotheses ({count} of {len(hypotheses)}) are {what}",
        "the model ignores its source. Early in training this passes; if it persists, train longer "
        "or with more warmup (train.warmup_steps), a lower train.lr, or a smaller model "
        "(model.d_model, model.n_encoder_layers/n_decoder_layers) for this much data",
    )


def repetition_warning(hypotheses: Sequence[str]) -> Finding | None:
    if len(hypotheses) < MIN_HYPOTHESES:
        return None
    looping = [h for h in hypotheses if has_loop(words(h))]
    share = len(looping) / len(hypotheses)
    if share < LOOP_SHARE:
        return None
    return Finding(
        "repetition",
        f"{share:.0%} of validation hypotheses ({len(looping)} of {len(hypotheses)}) repeat "
        f"themselves, e.g. {_quote(looping[0])}",
        "the decoder has not yet learned when to stop. "
        "Train longer; if it persists, check the data for repeated or very long targets "
        "(tfm data check), and use more dropout (model.dropout) or label smoothing "
        "(train.label_smoothing)",
    )


def has_loop(words: Sequence[str]) -> bool:
    """True when some n-gram (n <= MAX_LOOP_N) occurs LOOP_REPEATS times in a row."""
    words = list(words)
    for n in range(1, MAX_LOOP_N + 1):
        span = n * LOOP_REPEATS
        for start in range(len(words) - span + 1):
            if words[start : start + span] == words[start : start + n] * LOOP_REPEATS:
                return True
    return False


def overfitting_warning(history: Sequence[dict]) -> Finding | None:
    val_steps, val_losses = series(list(history), "val_loss")
    if len(val_losses) < OVERFIT_VALIDATIONS:
        return None
    steps, losses = val_steps[-OVERFIT_VALIDATIONS:], val_losses[-OVERFIT_VALIDATIONS:]
    if not all(a < b for a, b in pairwise(losses)):
        return None
    before, now = _train_loss_up_to(history, steps[0]), _train_loss_up_to(history, steps[-1])
    if before is None or now is None or not now < before:
        return None
    path = " -> ".join(f"{v:.3f}" for v in losses)
    return Finding(
        "overfitting",
        f"validation loss rose at {OVERFIT_VALIDATIONS - 1} validations in a row ({path}, step "
        f"{steps[-1]:,}) while training loss fell ({before:.3f} -> {now:.3f})",
        "the model is overfitting the training data (best.pt keeps the best validation so "
        "far). Try more dropout (model.dropout), more label smoothing, a smaller model, more "
        "data, or early stopping (train.patience)",
    )


def _train_loss_up_to(history: Sequence[dict], step: int) -> float | None:
    """The last training loss logged at or before `step`."""
    steps, losses = series(list(history), "train_loss")
    earlier = [loss for s, loss in zip(steps, losses, strict=True) if s <= step]
    return earlier[-1] if earlier else None


def _quote(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")
