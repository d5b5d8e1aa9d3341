"""Encoding a prepared split's sentences on every core: chunks of rows handed to worker processes.

`BulkEncoder` is Python, so one process encodes on one core. A corpus of more than
`PARALLEL_ROWS` sentences a side is encoded by a pool of worker processes instead, one per core
(at most `MAX_WORKERS`): each maps the stored sentences itself, encodes the chunks it is given
and sends back their ids, which come back in order. The workers are started fresh (`spawn`), so
nothing of the parent (torch's threads, `tokenizers`' thread pool) is copied into them; they
ignore Ctrl-C, which the parent handles; a chunk not yet started when the parent stops is never
started, and a parent killed outright takes its workers with it.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import deque
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from multiprocessing import get_context, parent_process
from multiprocessing.connection import wait
from multiprocessing.process import BaseProcess
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer as HfTokenizer

from tfm.data.cache.bulk_encoding import BulkEncoder
from tfm.data.ragged import RaggedText

PARALLEL_ROWS = 100_000  # sentences a side from which worker processes pay for their start
MAX_WORKERS = 8


def workers_for(rows: int) -> int:
    """How many processes encode `rows` sentences a side: 1 (this one) for a small split."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return 1 if rows < PARALLEL_ROWS else max(1, min(MAX_WORKERS, cores or 1))


class Encoding:
    """Encodes the stored sentences `folder/{side}.text` chunk by chunk, with `workers`
    processes (or in this one when `workers` is 1); use as a context manager."""

    def __init__(self, models: Mapping[str, HfTokenizer], folder: Path, *, workers: int) -> None:
        self.folder, self.workers = folder, workers
        self.pool: ProcessPoolExecutor | None = None
        if workers > 1:
            specs = {side: model.to_str() for side, model in models.items()}
            self.pool = ProcessPoolExecutor(
                workers, mp_context=get_context("spawn"), initializer=_start, initargs=(specs,)
            )
        else:
            self.encoders = {side: BulkEncoder(model) for side, model in models.items()}

    def __enter__(self) -> Encoding:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.pool is not None:
            self.pool.shutdown(wait=True, cancel_futures=True)

    def chunks(self, side: str, *, size: int) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        """Each chunk of `size` sentences of `side` in order: its ids one after another (int64),
        and each sentence's number of ids."""
        stem = self.folder / side
        texts = RaggedText.open(stem)
        spans = [(start, min(start + size, len(texts))) for start in range(0, len(texts), size)]
        if self.pool is None:
            for start, stop in spans:
                yield self.encoders[side].encode(texts.read(start, stop))
            return
        waiting: deque[Future] = deque()
        for start, stop in spans:
            waiting.append(self.pool.submit(_encode, side, str(stem), start, stop))
            if len(waiting) >= 2 * self.workers:  # a few ahead, so no worker waits
                yield waiting.popleft().result()
        while waiting:
            yield waiting.popleft().result()


_encoders: dict[str, BulkEncoder] = {}  # in a worker: one per side
_texts: dict[str, RaggedText] = {}


def _start(specs: Mapping[str, str]) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent stops the work
    threading.Thread(target=_end_with, args=(parent_process(),), daemon=True).start()
    os.environ["TOKENIZERS_PARALLELISM"] = "false"  # one thread a worker: the pool is the parallel
    for side, spec in specs.items():
        _encoders[side] = BulkEncoder(HfTokenizer.from_str(spec))


def _end_with(parent: BaseProcess | None) -> None:
    """Ends this worker when its parent has ended, however it ended: a parent killed outright
    leaves the pool's queue open, and its workers would wait on it for ever."""
    if parent is not None:
        wait([parent.sentinel])
    os._exit(1)


def _encode(side: str, stem: str, start: int, stop: int) -> tuple[np.ndarray, np.ndarray]:
    if stem not in _texts:
        _texts[stem] = RaggedText.open(Path(stem))
    return _encoders[side].encode(_texts[stem].read(start, stop))
