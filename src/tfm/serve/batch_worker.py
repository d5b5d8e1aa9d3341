"""Dynamic batching: one model worker thread decodes the requests that arrive together as one
batch, so throughput grows with load while one request alone waits only `batch_wait_ms`.

Requests come as `Job`s of framed sources (tokenized once, by the caller). With nothing to
do, the worker waits for a job, then gathers more for `batch_wait_ms` or until they hold
`batch_tokens` of work; each batch is chosen by `tfm.serve.work_share.next_batch` (the
requests with the least work left first, a heavy one in slices) and decoded with one call of
the translator per distinct set of decoding options. Between batches it drops the jobs whose
caller stopped waiting or whose deadline passed.

Work that cannot be finished before its deadline is not started. The worker measures its speed
(beam × tokens a second) on its batches, and the order of the batches is known
(`tfm.serve.work_share.work_until_done`): a request that would not be answered in time after
the work ahead of it, that wait counted `MARGIN` longer, is refused with `Busy` when it is
submitted, and so is one not started yet whose turn has moved past its deadline (lighter
requests cut in, or the machine slowed down), rather than decoded and timed out late.

A failure is the failing request's alone: a batch that fails is decoded again request by
request, and the request that fails alone gets the exception (logged, unless it is a
`TfmError`: what the engine refuses to do, such as a seed a CTranslate2 export cannot
repeat). Were the thread ever to end otherwise, every waiting request gets `WorkerStopped` at
once, and so does every later one (`alive` says so, for /health). At most `max_queue`
requests are in the worker at once (`QueueFull` beyond); its inbox itself is unbounded, so
stopping never waits for room.
"""

from __future__ import annotations

import logging
import math
import queue
import threading
import time
from collections import defaultdict, deque
from typing import Any

from tfm.errors import TfmError
from tfm.prediction.translator import Translator
from tfm.serve.request_limits import ServeLimits
from tfm.serve.work_share import Job, Part, next_batch, work_until_done

log = logging.getLogger(__name__)

MEASURED = 32  # the batches the speed is measured on, the last ones
# How much longer than estimated a request's wait is counted when it is admitted: the speed is
# that of recent batches, and a machine shared with other work may be slower meanwhile.
MARGIN = 0.5


class QueueFull(Exception):
    """`max_queue` requests are in the worker already."""


class Busy(Exception):
    """The work ahead of a request would not let it be answered in time: it would wait `wait_s`
    seconds for it, and its deadline leaves `allowed_s` for waiting."""

    def __init__(self, wait_s: float, allowed_s: float) -> None:
        super().__init__(f"it would wait {wait_s:.1f} s, {allowed_s:.1f} s allowed")
        self.wait_s, self.allowed_s = wait_s, max(allowed_s, 0.0)

    @property
    def retry_after_s(self) -> int:
        """Whole seconds until the work ahead leaves it time, at least 1."""
        return max(math.ceil(self.wait_s - self.allowed_s), 1)


class WorkerStopped(Exception):
    """The model worker is not running (stopping, or ended by a failure): nothing is decoded."""


class BatchWorker:
    """The thread that owns the translator: every decode runs here, one batch at a time."""

    def __init__(self, translator: Translator, limits: ServeLimits) -> None:
        self.translator = translator
        self.max_queue, self.budget = limits.max_queue, limits.batch_tokens
        self.wait_s = limits.batch_wait_ms / 1000
        self.inbox: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self.active: list[Job] = []  # taken from the inbox, not finished
        self.jobs: list[Job] = []  # submitted, not finished (in the inbox or active)
        self.lock = threading.Lock()
        self.stopping = False
        self.failure: str | None = None  # why the thread ended, if it failed
        self.speed: float | None = None  # work a second, of the recent batches
        self.measured: deque[tuple[int, float]] = deque(maxlen=MEASURED)  # (work, seconds)
        self.thread = threading.Thread(target=self._run, name="tfm-model-worker", daemon=True)
        self.batches = 0  # decoding calls so far
        self.sentences = 0  # sentences decoded so far

    @property
    def pending(self) -> int:
        """Requests submitted and not finished."""
        return len(self.jobs)

    @property
    def alive(self) -> bool:
        return self.thread.is_alive() and not self.stopping

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Finish what was submitted, then end the thread; later submits are refused."""
        self.stopping = True
        self.inbox.put(None)
        self.thread.join()

    def submit(self, job: Job) -> None:
        """Hand `job` to the worker (from the asyncio loop); its `future` gets the result: per
        source its n-best list (one translation without `n_best`) of `Rating`s; or `task()`'s
        result. Raises `QueueFull`, or `Busy` when the work ahead would not let it
        be answered in time."""
        if not self.alive:
            raise WorkerStopped(self.failure or "the server is stopping")
        with self.lock:
            if len(self.jobs) >= self.max_queue:
                raise QueueFull
            if self.speed is not None:
                done = dict(work_until_done([*self.jobs, job]))[job]
                busy = self._late(job, done, time.monotonic(), MARGIN)
                if busy is not None:
                    raise busy
            self.jobs.append(job)
        self.inbox.put(job)
        if not self.thread.is_alive():  # it ended meanwhile: nobody else will answer
            self._fail_waiting()

    def _run(self) -> None:
        try:
            while True:
                self._collect()
                self._drop_late()
                if self.active:
                    self._decode(next_batch(self.active, self.budget))
                elif self.stopping:
                    return
        except BaseException as exc:  # not a request's failure: the worker cannot go on
            self.failure = f"the model worker stopped ({type(exc).__name__}: {exc})"
            log.critical("%s; /health answers 503 and requests are refused", self.failure,
                         exc_info=True)  # fmt: skip
        finally:
            self.stopping = True
            self._fail_waiting()

    def _collect(self) -> None:
        """Take what is in the inbox; with nothing to do, wait for a job, then gather more for
        `wait_s` or until a batch's work is there."""
        if not self.active and not self.stopping:
            self._admit(self.inbox.get())
            end = time.monotonic() + self.wait_s
            while self.active and sum(job.work for job in self.active) < self.budget:
                try:
                    self._admit(self.inbox.get(timeout=max(end - time.monotonic(), 0)))
                except queue.Empty:
                    break
        while True:
            try:
                self._admit(self.inbox.get_nowait())
            except queue.Empty:
                return

    def _admit(self, job: Job | None) -> None:
        if job is None:
            self.stopping = True
        else:
            self.active.append(job)

    def _drop_late(self) -> None:
        """Drop the jobs whose caller stopped waiting or whose deadline passed, and refuse
        those not started whose turn comes too late (those started go on: what was decoded of
        them would be lost)."""
        now = time.monotonic()
        for job in [job for job in self.active if job.abandoned or now > job.deadline]:
            self._finish(job, TimeoutError(), failed=True)
        if self.speed is None:
            return
        refused = 0  # work of jobs refused here: those after them are done sooner
        for job, done in work_until_done(self.active):
            busy = self._late(job, done - refused, now, 0.0) if job.served == 0 else None
            if busy is not None:
                refused += job.left
                self._finish(job, busy, failed=True)

    def _late(self, job: Job, done: int, now: float, margin: float) -> Busy | None:
        """`Busy` if `job`, finished once `done` work is decoded from `now` (its own last),
        would be answered after its deadline, its wait counted `margin` longer; else None."""
        assert self.speed is not None
        wait_s, decode_s = (done - job.left) / self.speed, job.left / self.speed
        allowed_s = (job.deadline - now - decode_s) / (1 + margin)
        return Busy(wait_s, allowed_s) if wait_s > allowed_s else None

    def _decode(self, batch: list[Part]) -> None:
        groups: dict[Any, list[Part]] = defaultdict(list)
        for part in batch:
            key = id(part.job) if part.job.alone else part.job.options
            groups[key].append(part)
        for parts in groups.values():
            self._decode_group(parts)

    def _decode_group(self, parts: list[Part]) -> None:
        started = time.perf_counter()
        try:
            results = self._results(parts)
        except Exception as exc:  # a bug or a resource error: find whose, fail only that one
            if len(parts) > 1:
                for part in parts:
                    self._decode_group([part])
                return
            if not isinstance(exc, TfmError):  # what tfm refuses is the request's, not a bug
                log.exception("decoding a request of %d sentence(s) failed",
                              len(parts[0].job.texts))  # fmt: skip
            self._finish(parts[0].job, exc, failed=True)
            return
        self._measure(sum(part.cost for part in parts), time.perf_counter() - started)
        for part, found in zip(parts, results, strict=True):
            part.job.found.extend(found)
            part.job.served += part.cost
            if part.job.done:
                self._finish(part.job, part.job.found)

    def _results(self, parts: list[Part]) -> list[list[Any]]:
        """Each part's results, from one call of the translator (or the task's own)."""
        job = parts[0].job
        if job.task is not None:
            return [[job.task()]]
        texts = [text for part in parts for text in part.job.texts[part.start : part.stop]]
        sources = [ids for part in parts for ids in part.job.sources[part.start : part.stop]]
        numbers = [i + 1 for part in parts for i in range(part.start, part.stop)]
        options = job.options
        assert options is not None
        found = self.translator.rated_beams(texts, sources, options.settings, numbers,
                                            options.n_best or 1)  # fmt: skip
        self.batches += 1
        self.sentences += len(texts)
        results, start = [], 0
        for part in parts:
            results.append(found[start : start + part.stop - part.start])
            start += part.stop - part.start
        return results

    def _measure(self, work: int, seconds: float) -> None:
        """The speed: the work of the last `MEASURED` batches over their time (one batch's
        speed moves with its sentences and the machine's other work, several times over; the
        time of the work ahead of a request is the sum of its batches' times). Only batches of
        half the budget or more count: small ones are mostly fixed overhead, and the speed is
        what a heavy request would be decoded at."""
        if seconds > 0 and work >= self.budget / 2:
            self.measured.append((work, seconds))
            self.speed = sum(w for w, _ in self.measured) / sum(s for _, s in self.measured)

    def _finish(self, job: Job, result: Any, *, failed: bool = False) -> None:
        with self.lock:  # the worker, or a submit that found the worker ended
            if job.finished:
                return
            job.finished = True
            self.jobs.remove(job)
            if job in self.active:
                self.active.remove(job)
        _deliver(job, result, failed=failed)

    def _fail_waiting(self) -> None:
        """Every job the worker holds or will never take gets `WorkerStopped`."""
        stopped = WorkerStopped(self.failure or "the model worker stopped")
        for job in list(self.active):
            self._finish(job, stopped, failed=True)
        while True:
            try:
                waiting = self.inbox.get_nowait()
            except queue.Empty:
                return
            if waiting is not None:
                self._finish(waiting, stopped, failed=True)


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
