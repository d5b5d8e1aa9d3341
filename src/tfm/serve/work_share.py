"""How the model's time is shared between requests: each request is a `Job` of framed sources,
and each batch takes its sentences from the jobs with the least work left.

A job's work is counted in beam × source tokens (what one sentence asks of the model grows
with both; the beam is the decoder rows the strategy gives a sentence, 1 for greedy search). A
batch holds up to `budget` of it (at least one sentence), so a heavy request is decoded in
slices; a request that arrives meanwhile with less work left goes into the next batch, ahead of
the heavy one's remaining slices (shortest remaining work first: light requests are answered
first, and heavy ones are finished one after another, in arrival order when they are alike,
instead of all of them together at the end). A job that must be decoded apart (a task on the
model; seeded sampling, whose draws depend on the batch) is taken alone, in slices of its own.
Because the order is known, so is the work done before each job is finished
(`work_until_done`): what the worker uses to refuse at once a request that could not be
answered before its deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from tfm.prediction.settings import DecodeSettings


@dataclass(frozen=True)
class Options:
    """The decoding options of one request: the settings and how many hypotheses to return
    (None: the best translation only, without scores)."""

    settings: DecodeSettings
    n_best: int | None = None

    @property
    def beam(self) -> int:
        """The decoder rows a source takes: the hypotheses the strategy finds of it."""
        return self.settings.strategy.hypotheses(self.n_best or 1)


@dataclass(eq=False)
class Job:
    """One request in the worker: its non-blank sentences (`texts`, which a reranker reads) and
    their framed ids (`sources`), or a `task` to run on the model alone (its `sources` count
    its work); its results so far (`found`, one per source done) and where the last goes."""

    texts: list[str]
    sources: list[list[int]]
    options: Options | None  # None: a task
    beam: int  # what one source token costs
    deadline: float  # time.monotonic() after which nobody waits for it
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop
    task: Callable[[], Any] | None = None
    found: list[Any] = field(default_factory=list)
    served: int = 0  # work decoded so far
    abandoned: bool = False  # the caller stopped waiting
    finished: bool = False  # its result (or error) is on its way

    def cost(self, index: int) -> int:
        """The work of decoding source `index`."""
        return self.beam * len(self.sources[index])

    @property
    def alone(self) -> bool:
        """Whether it is decoded in batches of its own: a task, or a seeded strategy's
        request (the same request then draws the same samples, whatever else is waiting)."""
        return self.task is not None or (
            self.options is not None and self.options.settings.strategy.seeded
        )

    @cached_property
    def work(self) -> int:
        return sum(self.cost(i) for i in range(len(self.sources)))

    @property
    def left(self) -> int:
        """The work not decoded yet."""
        return self.work - self.served

    @property
    def done(self) -> bool:
        return len(self.found) == len(self.sources)


@dataclass(frozen=True)
class Part:
    """Sources `start` to `stop` of `job`, decoded in one batch."""

    job: Job
    start: int
    stop: int

    @property
    def cost(self) -> int:
        return sum(self.job.cost(i) for i in range(self.start, self.stop))


def next_batch(jobs: list[Job], budget: int) -> list[Part]:
    """The next batch from `jobs` (in arrival order): the next sources of the job with the least
    work left first, then of the next one's, up to `budget` work (a first source over the
    budget is taken alone). A job decoded `alone` is taken alone or not at all, so its slices
    are the same however busy the server is."""
    parts: list[Part] = []
    used = 0
    for job in shortest_first(jobs):
        if job.alone and parts:
            continue
        start = stop = len(job.found)
        while stop < len(job.sources) and (used == 0 or used + job.cost(stop) <= budget):
            used += job.cost(stop)
            stop += 1
        if stop > start:
            parts.append(Part(job, start, stop))
        if job.alone or used >= budget:
            break
    return parts


def work_until_done(jobs: Iterable[Job]) -> list[tuple[Job, int]]:
    """Each job, in the order they are finished, with the work decoded from now until it is:
    its own and that of the jobs finished before it (those later in `jobs` cut in when they
    have less left, which this cannot know)."""
    done, until = 0, []
    for job in shortest_first(jobs):
        done += job.left
        until.append((job, done))
    return until


def shortest_first(jobs: Iterable[Job]) -> list[Job]:
    """`jobs` by the work they have left, the least first; ties in arrival order (stable)."""
    return sorted(jobs, key=lambda job: job.left)
