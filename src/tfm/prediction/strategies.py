"""Decoding strategies: greedy search, beam search and sampling, each one object with its own
settings, chosen by name: `decoding.strategy` in the config, `--strategy` on the command line,
"strategy" in a server request. `strategy_for` resolves all three by one rule.

A strategy searches with tfm's own model (`searcher`, over `tfm.transformer`'s search functions);
the CTranslate2 engine maps it onto its own options (`tfm.deploy.ct2_decoding`). A new strategy is
a class here, its name and settings in `tfm.decoding_options` (from which the schema, the command
line and the server take them), and its mapping there (without one, an export refuses it).
Importing this module does not import torch: an export decodes without it.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from tfm.config import RECIPE_KEYS, DecodingConfig, planned, ranges
from tfm.data.tokenizer import BOS_ID, EOS_ID
from tfm.decoding_options import DECODING_STRATEGIES, SEARCH_KEYS, option_name, settings_of
from tfm.errors import UsageError

if TYPE_CHECKING:
    import torch

    from tfm.transformer import Decodable, Hypothesis, LengthLimit

# One search call over a batch: (model, source ids (B, S), output limit, hypotheses wanted per
# source) -> per source its hypotheses, best first.
Search = Callable[["Decodable", "torch.Tensor", "LengthLimit", int], list[list["Hypothesis"]]]
Spelling = Callable[[str], str]  # a decoding key as the user writes it: "--beam-size"


class Strategy(ABC):
    """One way of choosing output tokens, with its settings (`keys`: the decoding config keys
    `tfm.decoding_options` declares for its name, its fields). `lists`: whether it finds several
    hypotheses of a source (an n-best list) or one."""

    name: ClassVar[str]
    keys: ClassVar[tuple[str, ...]] = ()
    lists: ClassVar[bool] = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls.keys = settings_of(cls.name)

    @classmethod
    def from_config(cls, decoding: DecodingConfig) -> Strategy:
        """The strategy with `decoding`'s settings; a recipe key of it must be set (planned)."""
        derived = RECIPE_KEYS["decoding"]
        return cls(**{key: planned(getattr(decoding, key), f"decoding.{key}") if key in derived
                      else getattr(decoding, key) for key in cls.keys})  # fmt: skip

    def describe(self) -> dict[str, Any]:
        """The strategy's name and settings, as decoding config keys (for reports)."""
        return {"strategy": self.name, **{key: getattr(self, key) for key in self.keys}}

    @abstractmethod
    def hypotheses(self, n_best: int, spell: Spelling = option_name) -> int:
        """How many hypotheses of a source a search finds when `n_best` are wanted (also the
        decoder rows a source takes); UsageError when it cannot give `n_best`."""

    @property
    def seeded(self) -> bool:
        """Whether it draws from a seeded random stream: it finds the same hypotheses again for
        the same sources decoded in the same batches (a server decodes such a request apart)."""
        return False

    def fitted(self, n_best: int, given: Mapping[str, Any]) -> Strategy:
        """This strategy, its settings changed (those not `given` by the user) to give
        `n_best` hypotheses of a source."""
        return self

    @abstractmethod
    def searcher(self, device: torch.device) -> Search:
        """The search for one call of a Translator on `device` (a random stream starts here)."""


@dataclass(frozen=True)
class GreedySearch(Strategy):
    """The most likely token at each step: one translation per source, scored log P(Y | X)."""

    name = "greedy"
    lists = False

    def hypotheses(self, n_best: int, spell: Spelling = option_name) -> int:
        if n_best > 1:
            raise UsageError(f"{spell('n_best')} {n_best}: greedy search finds one translation; "
                             f"choose {spell('strategy')} beam or sampling")  # fmt: skip
        return 1

    def searcher(self, device: torch.device) -> Search:
        from tfm.transformer import Hypothesis, greedy_decode

        def search(model: Decodable, src: torch.Tensor, limit: LengthLimit, n: int) -> list:
            found = greedy_decode(model, src, bos_id=BOS_ID, eos_id=EOS_ID, limit=limit)
            return [[Hypothesis(t, s)] for t, s in zip(found.tokens, found.scores, strict=True)]

        return search


@dataclass(frozen=True, kw_only=True)
class BeamSearch(Strategy):
    """§6.1's beam search: the `beam_size` best prefixes kept at each step; the whole beam is
    the n-best list, scored log P(Y | X) / GNMT's length penalty (alpha `length_penalty`)."""

    name = "beam"
    beam_size: int
    length_penalty: float

    def hypotheses(self, n_best: int, spell: Spelling = option_name) -> int:
        if n_best > self.beam_size:
            raise UsageError(f"{spell('n_best')} {n_best} needs {spell('beam_size')} {n_best} or "
                             f"more, not {self.beam_size}")  # fmt: skip
        return self.beam_size

    def fitted(self, n_best: int, given: Mapping[str, Any]) -> Strategy:
        """The beam widened to `n_best`, unless the user gave its size."""
        if "beam_size" in given or n_best <= self.beam_size:
            return self
        return dataclasses.replace(self, beam_size=n_best)

    def searcher(self, device: torch.device) -> Search:
        from tfm.transformer import beam_search

        def search(model: Decodable, src: torch.Tensor, limit: LengthLimit, n: int) -> list:
            return beam_search(model, src, bos_id=BOS_ID, eos_id=EOS_ID, limit=limit,
                               beam_size=self.beam_size, length_penalty=self.length_penalty,
                               n_best=self.beam_size)  # fmt: skip

        return search


@dataclass(frozen=True, kw_only=True)
class Sampling(Strategy):
    """Each token drawn from the model's distribution, reshaped by `temperature`, `top_k` and
    `top_p` (`tfm.transformer.decoding.sampling_weights`); n-best lists are that many samples,
    scored log P(Y | X). With a `seed`, each call draws the same samples for the same input;
    without, new ones."""

    name = "sampling"
    temperature: float
    top_k: int
    top_p: float
    seed: int | None

    def hypotheses(self, n_best: int, spell: Spelling = option_name) -> int:
        return n_best

    @property
    def seeded(self) -> bool:
        return self.seed is not None

    def searcher(self, device: torch.device) -> Search:
        import torch

        from tfm.transformer import sample_decode

        generator = torch.Generator(device=device)
        if self.seed is None:
            generator.seed()  # a new random stream
        else:
            generator.manual_seed(self.seed)

        def search(model: Decodable, src: torch.Tensor, limit: LengthLimit, n: int) -> list:
            return sample_decode(model, src, bos_id=BOS_ID, eos_id=EOS_ID, limit=limit,
                                 samples=n, temperature=self.temperature, top_k=self.top_k,
                                 top_p=self.top_p, generator=generator)  # fmt: skip

        return search


STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (GreedySearch, BeamSearch, Sampling)
}
assert list(STRATEGIES) == list(DECODING_STRATEGIES), "a class for each strategy declared"


def strategy_for(
    decoding: DecodingConfig,
    asked: Mapping[str, Any],
    *,
    n_best: int = 1,
    spell: Spelling = option_name,
) -> Strategy:
    """The strategy the user `asked` for (decoding keys: "strategy" and settings; None is not
    asked), over `decoding`'s: the strategy named, else the one whose settings were given, else
    `decoding`'s; each setting as given, else `decoding`'s. A list (`n_best` > 1) from a strategy
    that finds one translation, not asked for by name, comes from the beam; a beam whose size
    was not given is widened to `n_best`. Errors name the keys as `spell` writes them
    (UsageError)."""
    given = checked(asked, spell)
    chosen = asked_strategy(given, spell) or planned(decoding.strategy, "decoding.strategy")
    if "strategy" not in given and n_best > 1 and not STRATEGIES[chosen].lists:
        chosen = BeamSearch.name
    cls = STRATEGIES[chosen]
    if stray := sorted(given.keys() - {"strategy", *cls.keys}):
        raise UsageError(f"{spell(stray[0])} is a setting of {_owners_of(stray[0])}; "
                         f"{spell('strategy')} {chosen} does not use it")  # fmt: skip
    resolved = decoding.model_copy(update={**given, "strategy": chosen})  # each checked
    strategy = cls.from_config(resolved).fitted(n_best, given)
    strategy.hypotheses(n_best, spell)
    return strategy


def checked(asked: Mapping[str, Any], spell: Spelling = option_name) -> dict[str, Any]:
    """The decoding keys `asked` gives (None: not given), each checked against the range the
    config schema gives it, the strategy's name against the strategies', and the settings as
    those of one strategy; UsageError naming the first key that is not, as `spell` writes it."""
    given = {key: value for key, value in asked.items() if value is not None}
    if unknown := sorted(given.keys() - set(SEARCH_KEYS)):
        raise ValueError(f"not decoding keys: {unknown}")
    if given.get("strategy", GreedySearch.name) not in STRATEGIES:
        raise UsageError(f"{spell('strategy')} {given['strategy']!r}: expected one of "
                         f"{', '.join(STRATEGIES)}")  # fmt: skip
    try:
        DecodingConfig.model_validate(given)
    except ValidationError as exc:
        error = exc.errors()[0]
        key = str(error["loc"][0])
        said = ranges.message(DecodingConfig.model_fields.get(key), error)
        raise UsageError(f"{spell(key)} {given.get(key)}: {said}") from None
    asked_strategy(given, spell)
    return given


def asked_strategy(asked: Mapping[str, Any], spell: Spelling = option_name) -> str | None:
    """The strategy `asked` names, else the one whose settings it gives, else None."""
    given = {key: value for key, value in asked.items() if value is not None}
    if "strategy" in given:
        return given["strategy"]
    owners = sorted({cls.name for cls in STRATEGIES.values() for key in given if key in cls.keys})
    if len(owners) > 1:
        keys = ", ".join(spell(key) for key in given if key != "strategy")
        raise UsageError(f"{keys}: settings of different strategies ({' and '.join(owners)}); "
                         f"choose one with {spell('strategy')}")  # fmt: skip
    return owners[0] if owners else None


def _owners_of(key: str) -> str:
    return " and ".join(cls.name for cls in STRATEGIES.values() if key in cls.keys)
