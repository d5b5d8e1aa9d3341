"""What a request asks of the model, worked out at the door before it is queued: its sentences
tokenized once (the worker decodes these very ids), cut to the model's positions (those cut
are reported in the answer), and its work, beam size × source tokens, checked against the
limits and against what the server decodes within its timeout."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from tfm.data.tokenizer import EOS_ID, Tokenizer
from tfm.prediction.translator import framed_nonblank, placed
from tfm.serve.bodies import ApiError
from tfm.serve.request_limits import ServeLimits, option_name


@dataclass(frozen=True)
class Work:
    """A request's sentences as the model gets them: `count` sentences, of which those at
    `todo` are not blank; their `texts` (stripped) and `sources` (ids and </s>, cut to the
    model's positions); `truncated`: the indices of the sentences that were cut."""

    count: int
    todo: list[int]
    texts: list[str]
    sources: list[list[int]]
    truncated: list[int]

    @property
    def tokens(self) -> int:
        return sum(len(ids) for ids in self.sources)

    def placed(self, found: Sequence[Any], blank: Callable[[], Any]) -> list[Any]:
        """One result per sentence: `found` for the non-blank ones, `blank()` elsewhere."""
        return placed(self.count, self.todo, found, blank)


def tokenized(
    tokenizer: Tokenizer, sentences: Sequence[str], max_len: int, *, tag: str | None = None
) -> Work:
    """`sentences` encoded once (after `tag`, the target language's in a model trained into
    several) and framed, each cut to `max_len` tokens with its </s>."""
    todo, framed = framed_nonblank(tokenizer, sentences, tag=tag)
    sources, truncated = [], []
    for i, ids in zip(todo, framed, strict=True):
        if len(ids) > max_len:
            ids = [*ids[: max_len - 1], EOS_ID]
            truncated.append(i)
        sources.append(ids)
    return Work(len(sentences), todo, [sentences[i].strip() for i in todo], sources, truncated)


def check_work(work: Work, beam: int, limits: ServeLimits, speed: float | None) -> None:
    """A 413 naming the limit when `work` at `beam` asks too much of the model, or would take
    longer than the timeout alone at `speed` (beam × tokens a second; None: not yet known)."""
    tokens, units = work.tokens, beam * work.tokens
    if tokens > limits.max_tokens:
        raise ApiError(
            413,
            f"the request has {tokens:,} source tokens; at most {limits.max_tokens:,} a "
            f"request ({option_name('max_tokens')}): send fewer or shorter sentences",
        )
    if units > limits.max_beam_tokens:
        raise ApiError(
            413,
            f"beam {beam} × {tokens:,} source tokens is {units:,}; at most "
            f"{limits.max_beam_tokens:,} a request ({option_name('max_beam_tokens')}): send "
            "fewer sentences or a narrower beam",
        )
    if speed is not None and units / speed > limits.timeout_s:
        raise ApiError(
            413,
            f"beam {beam} × {tokens:,} source tokens would take about {units / speed:.0f} s "
            f"to decode at this server's {speed:,.0f} a second, over its "
            f"{limits.timeout_s:g} s timeout ({option_name('timeout_s')}): send fewer "
            "sentences or a narrower beam",
        )
