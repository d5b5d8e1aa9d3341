"""The synthetic corpus: chosen monolingual lines translated by the reverse model, written as
`synthetic.tsv` beside the run (the generated source, a tab, the monolingual line).

It is `tfm translate --file`'s path (`commands.decode.translate_batches` over batches of
`input.BATCH_LINES` lines), with the lines taken from the prepared monolingual text instead of
a file, and written a batch at a time: each batch is flushed to disk before the next is decoded,
so a run killed while generating keeps every whole line. Generating again goes on after the last
whole line (a line cut short by the kill is dropped and decoded again), so no line is lost or
written twice. Decoding stops early where it would pass its time cap, keeping what it made, or
where `stop` is asked to (SIGINT, SIGTERM), after the batch it is decoding.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tfm.commands.decode import translate_batches
from tfm.commands.input import BATCH_LINES
from tfm.data.ragged import RaggedText
from tfm.prediction.translator import Translator
from tfm.training.session import StopFlag

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Generated:
    """What generating made: `lines` written in all, in `seconds` in all (the sessions before
    this one included)."""

    lines: int
    seconds: float


def whole_lines(path: Path) -> int:
    """The whole lines of `path` (0 where it is not there), after cutting off a last line that
    a kill left without its newline."""
    if not path.exists():
        return 0
    with path.open("rb+") as file:
        data = file.read()
        end = data.rfind(b"\n") + 1
        if end != len(data):
            file.truncate(end)
    return data.count(b"\n", 0, end)


def generate(
    translator: Translator,
    lines: RaggedText,
    index: np.ndarray,
    out: Path,
    *,
    spent: float = 0.0,
    cap_s: float | None = None,
    stop: StopFlag | None = None,
    progress: bool = True,
) -> Generated:
    """Translate the lines `index` of `lines` into `out`, going on after the lines it holds
    (module docstring); `spent` seconds were spent before, and decoding stops once all of them
    pass `cap_s`, or once `stop` is requested."""
    done = whole_lines(out)
    total = len(index)
    started = time.perf_counter()

    def elapsed() -> float:
        return spent + time.perf_counter() - started

    def batches() -> Iterator[list[str]]:
        for start in range(done, total, BATCH_LINES):
            if (cap_s is not None and elapsed() >= cap_s) or (stop and stop.requested):
                return
            yield [lines[int(i)] for i in index[start : start + BATCH_LINES]]

    with (
        out.open("a", encoding="utf-8") as file,
        tqdm(total=total, initial=done, desc="back-translating", unit=" lines", leave=False,
             disable=None if progress else True, dynamic_ncols=True) as bar,
    ):  # fmt: skip
        at = done
        for sources in translate_batches(translator, batches()):
            targets = [lines[int(i)] for i in index[at : at + len(sources)]]
            rows = zip(sources, targets, strict=True)
            file.write("".join(f"{_one_line(source)}\t{target}\n" for source, target in rows))
            file.flush()
            os.fsync(file.fileno())
            at += len(sources)
            bar.update(len(sources))
    seconds = elapsed()
    if at < total and not (stop and stop.requested):
        log.warning(
            "back-translation stopped at its time cap (%.0f s) after %s of %s lines: the pair "
            "trains on those", cap_s or 0, f"{at:,}", f"{total:,}",
        )  # fmt: skip
    return Generated(lines=at, seconds=seconds)


def _one_line(text: str) -> str:
    """A generated sentence as one TSV field (decoded text holds no tab or newline, but a model
    can always be made to output the bytes of one)."""
    return text.replace("\t", " ").replace("\n", " ")
