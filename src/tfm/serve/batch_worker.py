"""Dynamic batching: one model worker thread decodes the requests that arrive together as one
batch, so throughput grows with load while one request alone waits only `batch_wait_ms`.

Requests wait in a bounded queue (`QueueFull` when it is full). The worker takes the first
waiting request, then gathers more for `batch_wait_ms` or until the batch holds
`batch_tokens` source tokens, and decodes the gathered requests' sentences together: one call
of the translator per distinct set of decoding options. A request whose caller stopped waiting
(its timeout passed) is skipped. Results go back to the asyncio loop of the caller.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tfm.prediction.settings import DecodeSettings
from tfm.prediction.translator import Translator

log = logging.getLogger(__name__)


class QueueFull(Exception):
    """The queue holds `max_queue` requests already."""


@dataclass(frozen=True)
class Options:
    """The decoding options of one request: the settings and how many hypotheses to return
    (None: the best translation only, without scores)."""

    settings: DecodeSettings
    n_best: int | None = None


@dataclass
class Job:
    """One request's sentences (or a `task` to run on the model alone) and where its result
    goes."""

    sentences: list[str]
    options: Options | None
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    task: Callable[[], Any] | None = None
    abandoned: bool = False  # the caller stopped waiting
    tokens: int = field(default=0)


class BatchWorker:
    """The thread that owns the translator: every decode runs here, one batch at a time."""

    def __init__(
        self, translator: Translator, *, max_queue: int, batch_wait_ms: float, batch_tokens: int
    ) -> None:
        self.translator = translator
        self.wait_s = batch_wait_ms / 1000
        self.batch_tokens = batch_tokens
        self.jobs: queue.Queue[Job | None] = queue.Queue(maxsize=max_queue)
        self.thread = threading.Thread(target=self._run, name="tfm-model-worker", daemon=True)
        self.batches = 0  # batches decoded so far
        self.sentences = 0  # sentences decoded so far

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Finish what is queued, then end the thread."""
        self.jobs.put(None)
        self.thread.join()

    def submit(
        self,
        sentences: list[str],
        options: Options | None = None,
        task: Callable[[], Any] | None = None,
    ) -> Job:
        """Queue a request (from the asyncio loop); its `future` gets the result: per sentence
        its translation, or its n-best (text, score) list; or `task()`'s result."""
        loop = asyncio.get_running_loop()
        job = Job(sentences, options, loop.create_future(), loop, task)
        try:
            self.jobs.put_nowait(job)
        except queue.Full:
            raise QueueFull from None
        return job

    def _run(self) -> None:
        while True:
            batch, stopping = self._gather()
            if batch:
                self._decode(batch)
            if stopping:
                return

    def _gather(self) -> tuple[list[Job], bool]:
        """The next batch: the first job, then what arrives within the wait, up to the token
        budget; and whether the stop signal came."""
        first = self.jobs.get()
        if first is None:
            return [], True
        batch = [first]
        if first.task is not None:
            return batch, False
        tokens = self._count(first)
        deadline = time.monotonic() + self.wait_s
        while tokens < self.batch_tokens:
            try:
                job = self.jobs.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                break
            if job is None:
                return batch, True
            if job.task is not None:  # run it on its own, after this batch
                self._decode(batch)
                return [job], False
            batch.append(job)
            tokens += self._count(job)
        return batch, False

    def _count(self, job: Job) -> int:
        job.tokens = sum(
            len(ids) + 1 for ids in self.translator.tokenizer.encode_src(job.sentences)
        )
        return job.tokens

    def _decode(self, batch: list[Job]) -> None:
        live = [job for job in batch if not job.abandoned]
        groups: dict[Options | None, list[Job]] = defaultdict(list)
        for job in live:
            groups[job.options].append(job)
        for options, jobs in groups.items():
            try:
                results = self._results(options, jobs)
            except Exception as exc:  # a bug or a resource error: the requests fail, we go on
                log.exception("decoding a batch of %d request(s) failed", len(jobs))
                for job in jobs:
                    _deliver(job, exc, failed=True)
                continue
            for job, result in zip(jobs, results, strict=True):
                _deliver(job, result)

    def _results(self, options: Options | None, jobs: list[Job]) -> list[Any]:
        if options is None:  # tasks come one at a time
            return [job.task() for job in jobs if job.task is not None]
        texts = [text for job in jobs for text in job.sentences]
        if options.n_best is None:
            found: list[Any] = self.translator.translate(texts, settings=options.settings)
        else:
            found = self.translator.nbest(texts, options.n_best, settings=options.settings)
        self.batches += 1
        self.sentences += len(texts)
        results, start = [], 0
        for job in jobs:
            results.append(found[start : start + len(job.sentences)])
            start += len(job.sentences)
        return results


def _deliver(job: Job, result: Any, *, failed: bool = False) -> None:
    def settle() -> None:
        if job.future.done():
            return
        if failed:
            job.future.set_exception(result)
        else:
            job.future.set_result(result)

    try:
        job.loop.call_soon_threadsafe(settle)
    except RuntimeError:  # the loop is closed: nobody waits any more
        pass
