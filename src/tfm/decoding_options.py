"""The decoding strategies and their settings, each declared once: its name, type, default, range,
help and the strategy that reads it.

Derived from these: the config schema's `decoding` section (`tfm.config.schema.decoding_fields`),
the decoding options of `tfm eval`, `tfm translate`, `tfm rerank-sweep` and `tfm serve`
(`tfm.cli_options.decoding_options`) and the fields of a server request
(`tfm.serve.bodies.TranslateBody`). A new strategy is its entry and its settings here and its class
in `tfm.prediction.strategies`; an export refuses it until `tfm.deploy.ct2_decoding` maps it.

Every number has a range within which each engine decodes: no value that passes the schema fails
later. A temperature of 1e-39 turns every float32 log-probability into -inf (nothing can be
drawn), one of 1e308 rounds them all to 0 (a tie that top-k 1 breaks by position); 0.01 to 100
spans nearly greedy to nearly uniform sampling. A top p of 1e-300 is 0 in float32, which keeps no
token at all; from 0.001 the likeliest token is always kept.

Importing this module imports neither pydantic nor torch: the command line builds its options
from it.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfm.limits import MAX_BEAM_SIZE, MAX_SEED, MAX_VOCAB_SIZE, bound_text


@dataclass(frozen=True, kw_only=True)
class DecodingSetting:
    """One setting of a decoding strategy: a key of the config's `decoding` section, an option of
    the decoding commands (`option_name`) and a field of a server request."""

    key: str
    strategy: str  # the strategy that reads it
    kind: type[int] | type[float]
    default: int | float | None  # None: unset (a recipe key, or "none": the help says which)
    low: int | float  # the range, both ends allowed
    high: int | float
    help: str

    def describe(self) -> str:
        """Its help as the config reference and `--help` show it: the strategy first."""
        return f"{self.strategy}: {self.help}"

    def span(self) -> str:
        """Its range in words: "0.01 to 100"."""
        return f"{bound_text(self.low)} to {bound_text(self.high)}"


# The strategies, by name, and what each does (the schema's `decoding` docstring lists them,
# each with its settings).
DECODING_STRATEGIES: dict[str, str] = {
    "greedy": "the most likely token at each step.",
    "beam": "§6.1's beam search, `beam_size` prefixes kept at each step, GNMT length penalty.",
    "sampling": "each token drawn from the model's distribution: varied outputs, for "
    "back-translation and data augmentation.",
}

DECODING_SETTINGS: tuple[DecodingSetting, ...] = (
    DecodingSetting(
        key="beam_size", strategy="beam", kind=int, default=None, low=1, high=MAX_BEAM_SIZE,
        help="prefixes kept at each step.",
    ),
    DecodingSetting(
        key="length_penalty", strategy="beam", kind=float, default=0.6, low=0.0, high=10.0,
        help="GNMT length penalty α; higher favours longer output.",
    ),
    DecodingSetting(
        key="temperature", strategy="sampling", kind=float, default=1.0, low=0.01, high=100.0,
        help="the model's log-probabilities are divided by it; below 1 sharper (towards "
        "greedy), above 1 flatter.",
    ),
    DecodingSetting(
        key="top_k", strategy="sampling", kind=int, default=0, low=0, high=MAX_VOCAB_SIZE,
        help="draw from the k most likely tokens only; 0: from all.",
    ),
    DecodingSetting(
        key="top_p", strategy="sampling", kind=float, default=1.0, low=0.001, high=1.0,
        help="draw from the fewest most likely tokens whose probability adds up to p "
        "(nucleus sampling); 1: from all.",
    ),
    DecodingSetting(
        key="seed", strategy="sampling", kind=int, default=None, low=0, high=MAX_SEED,
        help="the same seed draws the same samples for the same input; unset, new samples "
        "each time (a CTranslate2 export samples only so).",
    ),
)  # fmt: skip

# What a decoding command or request may ask for: the strategy by name, and its settings.
SEARCH_KEYS = ("strategy", *(setting.key for setting in DECODING_SETTINGS))


def strategy_names() -> str:
    """The strategies' names as a sentence says them: "greedy, beam or sampling"."""
    *first, last = DECODING_STRATEGIES
    return f"{', '.join(first)} or {last}" if first else last


def settings_of(strategy: str) -> tuple[str, ...]:
    """The keys of the settings `strategy` reads, in the order declared."""
    return tuple(setting.key for setting in DECODING_SETTINGS if setting.strategy == strategy)


def option_name(key: str) -> str:
    """A decoding key as the command line spells it: beam_size -> --beam-size."""
    return "--" + key.replace("_", "-")
