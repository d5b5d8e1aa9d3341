"""The one configuration schema of tfm: every section, key, default, range and description.

Every default lives here, but those of the decoding strategies' settings, which
`tfm.decoding_options` declares once for the schema, the command line and the server. A config file
only overrides what it needs; unknown keys, wrong types and out-of-range values are errors
(`tfm.config.loading` words them).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from pydantic import (
    BaseModel,
    ConfigDict,
    Discriminator,
    Field,
    Tag,
    create_model,
    field_validator,
    model_validator,
)

from tfm.decoding_options import (
    DECODING_SETTINGS,
    DECODING_STRATEGIES,
    settings_of,
    strategy_names,
)
from tfm.errors import ConfigError, UsageError
from tfm.limits import (
    MAX_BATCH_TOKENS,
    MAX_D_FF,
    MAX_D_MODEL,
    MAX_EPOCHS,
    MAX_HEADS,
    MAX_LAYERS,
    MAX_MIN_FREQUENCY,
    MAX_POSITIONS,
    MAX_SEED,
    MAX_STEPS,
    MAX_THREADS,
    MAX_VOCAB_SIZE,
)

SPLITS = ("train", "validation", "test")
# The tag put before the source of every back-translated pair (`data.monolingual`): its source is
# a machine translation, which the model learns to tell from real text (Caswell et al., 2019).
BACK_TRANSLATION_TAG = "bt"
TAG_PATTERN = r"^[a-z0-9][a-z0-9_]{0,15}$"  # a tag's name; its token is `<name>`
MAX_CORPORA = 64  # in data.train, data.related and data.monolingual
LANGUAGE_CODE = re.compile(r"[a-z]{2,3}")  # ISO 639-1 or 639-3: `pt`, `fil`

Beta = Annotated[float, Field(ge=0.0, lt=1.0)]  # an Adam decay rate
Layers = Annotated[int, Field(ge=1, le=MAX_LAYERS)]  # a stack's depth

# The keys the recipe (`tfm.training.recipe`) derives from the training data when a config
# leaves them out. They have no default: a key is either given or derived (null given where the
# key allows it means "none": no step limit, no early stopping …).
RECIPE_KEYS = {
    "tokenizer": ("vocab_size",),
    "model": ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff", "dropout"),
    "train": (
        "max_tokens", "max_steps", "max_epochs", "lr", "warmup_steps", "schedule",
        "decay_steps", "label_smoothing", "validate_every", "patience", "checkpoint_every",
        "keep_last", "average_last", "early_stopping_metric",
    ),
    "decoding": ("strategy", "beam_size"),
}  # fmt: skip


T = TypeVar("T")


def planned(value: T | None, key: str) -> T:
    """`value` of the recipe key `key` (dotted), which a planned config has (given, or derived
    by `tfm.training.recipe`); a ConfigError where it is still unset."""
    if value is None:
        raise ConfigError(
            f"{key} is not set: give it in the config, or let `tfm train` derive it from the data"
        )
    return value


class StrictModel(BaseModel):
    """A config section: unknown keys are errors, and assignments are validated too."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class SourceConfig(StrictModel):
    """Where one split comes from.

    - `toy`: the built-in English–German corpus (`data.toy` sets its size and seed).
    - `text`: two aligned files `{path}.{lang}`, one sentence per line (Multi30k, fairseq style).
    - `tsv`: one file, source TAB target (no header); `columns` names the language of each
      column.
    - `jsonl`: one JSON object per line; `fields` maps a language code to its field name.
    - `hub`: a HuggingFace hub dataset `name` (with `split`, `fields`); needs network.
    - `disk`: a folder written by `datasets.save_to_disk` (with `split`, `fields`).
    - `held_out`: pairs held out of `data.train` (validation and test only; `pairs` sets how
      many): what a config that names a training corpus and no validation split gets.

    Relative paths are resolved from the current directory.
    """

    format: Literal["toy", "text", "tsv", "jsonl", "hub", "disk", "held_out"] = Field(
        description="Kind of source: the toy corpus, text files, TSV, JSON lines, hub, disk, or "
        "pairs held out of the training corpus."
    )
    path: str | None = Field(
        None, description="File prefix (text), file (tsv, jsonl) or folder (disk) to read."
    )
    name: str | None = Field(
        None, description="HuggingFace hub dataset name (hub), e.g. `bentrevett/multi30k`."
    )
    split: str | None = Field(
        None, description="Split of the dataset to read (hub, disk), e.g. `validation`."
    )
    fields: dict[str, str] = Field(
        default_factory=dict,
        description="Language code to the field holding its text (jsonl, hub, disk); `a.b` is "
        "nested; a language not named here is its own field name, or `translation.{code}` (the "
        "hub's translation datasets) where there is none.",
    )
    columns: list[str] | None = Field(
        None,
        description="Language code of each column in file order (tsv); null: "
        "`[src_lang, tgt_lang]`.",
    )
    pairs: int | None = Field(
        None,
        ge=1,
        le=100_000,
        description="Sentences held out of the training corpus, each with all its pairs "
        "(held_out); null: 5% of the training pairs, at most 1,000.",
    )
    tag: str | None = Field(
        None,
        pattern=TAG_PATTERN,
        description="Training corpora only: a tag token `<tag>` (reserved in the vocabulary) "
        "put before every source sentence of this corpus, so that the model tells its pairs "
        "from the others (`bt`: back-translated pairs, whose sources are machine translations); "
        "null: none.",
    )
    repeat: int = Field(
        1,
        ge=1,
        le=100,
        description="Training corpora only: every pair of this corpus is read this many times "
        "an epoch (a small corpus upsampled beside a large one).",
    )

    @model_validator(mode="after")
    def _needs(self) -> SourceConfig:
        used = {
            "toy": (),
            "text": ("path",),
            "tsv": ("path", "columns"),
            "jsonl": ("path", "fields"),
            "hub": ("name", "split", "fields"),
            "disk": ("path", "split", "fields"),
            "held_out": ("pairs",),
        }[self.format]
        keys = ("path", "name", "split", "fields", "columns", "pairs")
        ignored = [k for k in keys if k not in used]
        if self.format == "held_out" and (self.tag or self.repeat != 1):
            ignored += ["tag" if self.tag else "repeat"]
        if given := [k for k in ignored if getattr(self, k)]:
            raise ValueError(f"{', '.join(given)} has no effect with format '{self.format}'")
        if self.format in ("text", "tsv", "jsonl", "disk") and not self.path:
            raise ValueError(f"format '{self.format}' needs 'path'")
        if self.format == "hub" and not self.name:
            raise ValueError("format 'hub' needs 'name' (e.g. bentrevett/multi30k)")
        return self


def target_tag(lang: str) -> str:
    """The tag that asks a model trained into several languages for `lang`: `2pt` (its token
    `<2pt>`), put before the source (Johnson et al., 2017)."""
    return f"2{lang}"


def check_language_code(code: str) -> str:
    """`code`; ValueError where it is not two or three lowercase letters."""
    if not LANGUAGE_CODE.fullmatch(code):
        raise ValueError(
            f"'{code}' is not a language code of two or three lowercase letters (ISO 639, as "
            "'pt' or 'fil')"
        )
    return code


class RelatedConfig(SourceConfig):
    """A corpus of a pair related to the main one (`data.related`), in its own languages: the
    same source and another target (one-to-many), another source and the same target
    (many-to-one), or both. Read like a training corpus, by its own `src_lang` and `tgt_lang`."""

    src_lang: str = Field(description="Language code of its source side, e.g. `en`.")
    tgt_lang: str = Field(description="Language code of its target side, e.g. `pt`.")
    validation: SourceConfig | None = Field(
        None,
        description="The pair's own validation split, in its `src_lang` and `tgt_lang` (any "
        "format but `held_out`): each validation scores it too, BLEU and chrF in the log, "
        "metrics.jsonl (`val_bleu/en-pt`, `val_chrf/en-pt`) and TensorBoard, its translations "
        "in validations/; early stopping and best.pt follow the main pair alone, and a timed "
        "plan counts its decoding; null: the main pair's alone.",
    )

    @field_validator("src_lang", "tgt_lang")
    @classmethod
    def _code(cls, code: str) -> str:
        return check_language_code(code)

    @property
    def pair(self) -> str:
        """Its languages as its validation's metrics name them: `en-pt`."""
        return f"{self.src_lang}-{self.tgt_lang}"


class ToyConfig(StrictModel):
    """Size and seed of the built-in toy English–German corpus (sources of format `toy`)."""

    n_train: int = Field(
        20_000, ge=1, le=1_000_000, description="Sentence pairs in the toy training split."
    )
    n_validation: int = Field(
        1_000, ge=1, le=100_000, description="Sentence pairs in the toy validation split."
    )
    n_test: int = Field(
        1_000, ge=1, le=100_000, description="Sentence pairs in the toy test split."
    )
    seed: int = Field(
        0,
        ge=0,
        le=MAX_SEED,
        description="Seed of the toy corpus generator; another seed, other pairs.",
    )


def _toy() -> SourceConfig:
    return SourceConfig(format="toy")


def _format_of(source: object) -> object:
    """The `format` of a source as a config gives it (a dict or a SourceConfig, or the first
    of a list of them), or None."""
    if isinstance(source, list):
        return _format_of(source[0]) if source else None
    if isinstance(source, dict):
        return source.get("format")
    return getattr(source, "format", None)


def _one_or_many(value: object) -> str:
    return "corpora" if isinstance(value, list) else "corpus"


# `data.train`: one corpus, or a list of them. The tags name the branch in pydantic's errors,
# which `loading` leaves out of the key path it shows.
_Several = Annotated[list[SourceConfig], Field(min_length=1, max_length=MAX_CORPORA)]
Corpora = Annotated[
    Annotated[SourceConfig, Tag("corpus")] | Annotated[_Several, Tag("corpora")],
    Discriminator(_one_or_many),
]
UNION_TAGS = ("corpus", "corpora")


class MonolingualConfig(StrictModel):
    """A file of text in one language of the pair, one sentence a line (UTF-8), for
    back-translation: a model of the reverse direction translates it into synthetic sources,
    and the pair trains on those synthetic pairs too (`data.monolingual`)."""

    path: str = Field(description="The text file, one sentence a line.")
    lang: str = Field(
        description="Its language: the pair's target language (`data.tgt_lang`), whose text "
        "is back-translated into synthetic sources."
    )


@dataclass(frozen=True)
class TrainingCorpus:
    """One corpus that training reads: its config key, its source, its languages, and the tags
    put before each of its sources, in order (`DataConfig.training_corpora`)."""

    key: str
    source: SourceConfig
    src_lang: str
    tgt_lang: str
    tags: tuple[str, ...]


class DataConfig(StrictModel):
    """The language pair, where each split comes from, and the training length limit.

    A config that names a training corpus (not the toy corpus) and no validation split gets one
    held out of the corpus (`held_out`); where validation is held out, a test split not named is
    too. A split left out otherwise is the toy corpus's.
    """

    src_lang: str = Field("en", description="Language code of the source side, e.g. `en`.")
    tgt_lang: str = Field(
        "de", description="Language code of the target side; not the same as `src_lang`."
    )
    train: Corpora = Field(
        default_factory=_toy,
        description="Source of the training split: one corpus, or a list of corpora read one "
        "after the other (each may take a `tag` and a `repeat`); the first is the pair's own, "
        "which validation and test are held out of where they are not given.",
    )
    validation: SourceConfig = Field(
        default_factory=_toy,
        description="Source of the validation split (early stopping, best); not given: held out "
        "of `data.train` (the toy corpus's where `data.train` is the toy corpus).",
    )
    test: SourceConfig = Field(
        default_factory=_toy,
        description="Source of the test split (`tfm eval`); not given: held out of `data.train` "
        "where the validation split is, else the toy corpus's (which tests only a model trained "
        "on the toy corpus).",
    )
    toy: ToyConfig = Field(
        default_factory=ToyConfig, description="The toy corpus, for sources of format `toy`."
    )
    monolingual: list[MonolingualConfig] = Field(
        default_factory=list,
        max_length=MAX_CORPORA,
        description="Files of text in the target language for back-translation: `tfm train` "
        "trains a model of the reverse direction, translates the text with it into synthetic "
        "sources and trains the pair on its own pairs and those, each step planned inside "
        "`train.max_minutes` (docs/recipes.md); empty: none.",
    )
    related: list[RelatedConfig] = Field(
        default_factory=list,
        max_length=MAX_CORPORA,
        description="Corpora of related pairs trained in the same model, each with its own "
        "`src_lang` and `tgt_lang` and the keys of a training corpus: other targets of the "
        "same source (one-to-many: every source, the main pair's too, then begins with the tag "
        "of its target language, `<2pt>`), other sources of the same target (many-to-one), or "
        "both. The main pair stays `src_lang`→`tgt_lang` for validation, early stopping, "
        "`tfm eval` and `tfm translate`; `tfm train` plans how often each corpus is read "
        "(`main_share`; docs/recipes.md); empty: none.",
    )
    main_share: float | None = Field(
        None,
        gt=0.0,
        lt=1.0,
        description="With `related`: the main pair's share of the pairs of an epoch, which its "
        "corpora are read more often to reach; null: the plan's rule (docs/recipes.md).",
    )
    max_length: int = Field(
        128,
        ge=1,
        le=MAX_POSITIONS,
        description="Training pairs with more BPE tokens than this on either side are dropped "
        "(counted and reported); validation and test keep every pair.",
    )
    control_chars: Literal["warn", "refuse"] = Field(
        "warn",
        description="Control characters (C0 but tab, DEL, C1) and U+FFFD (text that was not "
        "decoded cleanly) in a split: warn with their count and first file:line, or refuse the "
        "data with that line.",
    )
    cache_dir: str | None = Field(
        None,
        description="Folder of the data cache: the training split tokenized once and "
        "memory-mapped, reused by every run on the same data; null: `.tfm-cache` beside "
        "`run_dir`.",
    )

    @model_validator(mode="before")
    @classmethod
    def _held_out_by_default(cls, values: object) -> object:
        """No validation split named beside a training corpus (not the toy corpus): hold it out
        of the corpus, and the test split too where that is not named and validation is held
        out. A split given only `pairs` (`--set data.test.pairs=500`) is held out."""
        if not isinstance(values, dict):
            return values
        given = {split: values.get(split) for split in SPLITS[1:]}
        for split, source in given.items():
            if isinstance(source, dict) and source and set(source) <= {"pairs"}:
                given[split] = {"format": "held_out", **source}
        if _format_of(values.get("train")) not in (None, "toy"):
            if given["validation"] is None:
                given["validation"] = {"format": "held_out"}
            if given["test"] is None and _format_of(given["validation"]) == "held_out":
                given["test"] = {"format": "held_out"}
        return {**values, **{split: v for split, v in given.items() if v is not None}}

    @property
    def corpora(self) -> list[SourceConfig]:
        """The training corpora, in the order they are read."""
        return self.train if isinstance(self.train, list) else [self.train]

    def train_key(self, index: int) -> str:
        """The config key of `data.train`'s corpus `index`: `data.train`, or `data.train[1]`
        in a list."""
        return f"data.train[{index}]" if isinstance(self.train, list) else "data.train"

    @property
    def corpus(self) -> SourceConfig:
        """The pair's own training corpus (the first), which held-out splits come from."""
        return self.corpora[0]

    def tags(self) -> tuple[str, ...]:
        """The tags the vocabulary reserves: those the training corpora take, the
        back-translation tag where there is monolingual text to back-translate, and a tag for
        each target language where there are several."""
        tags = {source.tag for source in self.corpora if source.tag}
        if self.monolingual:
            tags.add(BACK_TRANSLATION_TAG)
        if len(self.target_languages()) > 1:
            tags.update(target_tag(lang) for lang in self.target_languages())
        return tuple(sorted(tags))

    def target_languages(self) -> tuple[str, ...]:
        """The languages a model of this data translates into: the main pair's target, then the
        related corpora's others, in order."""
        return tuple(dict.fromkeys([self.tgt_lang, *(c.tgt_lang for c in self.related)]))

    def target_tag(
        self,
        tgt_lang: str | None = None,
        *,
        option: str = "--tgt-lang",
        trained: tuple[str, ...] | None = None,
    ) -> str | None:
        """The tag that asks the model for `tgt_lang` (None: the main pair's target), or None
        where it translates into one language; UsageError naming `option` where it was not
        trained to translate into `tgt_lang` (`trained`: the languages its training read, where
        known; a related corpus may have been left out)."""
        languages = self.target_languages()  # tagged where there are several, read or not
        allowed = trained or languages
        if tgt_lang is not None and tgt_lang not in allowed:
            raise UsageError(
                f"{option} {tgt_lang}: the model was trained to translate into "
                f"{', '.join(allowed)}, not {tgt_lang}"
            )
        return target_tag(tgt_lang or self.tgt_lang) if len(languages) > 1 else None

    def training_corpora(self) -> list[TrainingCorpus]:
        """Every corpus training reads, in order: `data.train`'s in the main pair's languages,
        then `data.related`'s in their own, each with the tags put before its sources."""
        main = target_tag(self.tgt_lang) if len(self.target_languages()) > 1 else None
        found = [
            TrainingCorpus(self.train_key(i), source, self.src_lang, self.tgt_lang,
                           tuple(t for t in (main, source.tag) if t))
            for i, source in enumerate(self.corpora)
        ]  # fmt: skip
        for i, source in enumerate(self.related):
            tag = target_tag(source.tgt_lang) if main else None
            found.append(TrainingCorpus(f"data.related[{i}]", source, source.src_lang,
                                        source.tgt_lang, (tag,) if tag else ()))  # fmt: skip
        return found

    @model_validator(mode="after")
    def _train_is_read(self) -> DataConfig:
        for i, source in enumerate(self.corpora):
            key = self.train_key(i)
            if source.format == "held_out":
                raise ValueError(
                    f"{key}: format 'held_out' is for validation and test, held out of data.train"
                )
        if self.corpus.tag:
            raise ValueError(
                "data.train[0]: the first training corpus is the pair's own (validation and test "
                "are held out of it) and takes no tag; put tagged corpora after it"
            )
        for split in SPLITS[1:]:
            source = getattr(self, split)
            if source.tag or source.repeat != 1:
                key = "tag" if source.tag else "repeat"
                raise ValueError(f"data.{split}.{key}: only training corpora take a {key}")
        for i, text in enumerate(self.monolingual):
            if text.lang == self.tgt_lang:
                continue
            pair = f"{self.src_lang}→{self.tgt_lang}"
            what = (
                f"is the source language of {pair}: tfm back-translates text in the target "
                f"language ('{self.tgt_lang}')"
                if text.lang == self.src_lang
                else f"is neither language of the pair {pair}; expected '{self.tgt_lang}'"
            )
            raise ValueError(f"data.monolingual[{i}].lang: '{text.lang}' {what}")
        return self

    @model_validator(mode="after")
    def _related_pairs(self) -> DataConfig:
        if self.main_share is not None and not self.related:
            raise ValueError("data.main_share has no effect without data.related")
        if not self.related:
            return self
        for key in ("src_lang", "tgt_lang"):
            try:
                check_language_code(getattr(self, key))
            except ValueError as exc:
                raise ValueError(f"data.{key}: {exc}, which data.related needs") from None
        if self.monolingual:
            raise ValueError(
                "data.related and data.monolingual do not go together: train the model with "
                "related pairs, or back-translate into the main pair alone"
            )
        main = f"{self.src_lang}→{self.tgt_lang}"
        for i, source in enumerate(self.related):
            key, pair = f"data.related[{i}]", f"{source.src_lang}→{source.tgt_lang}"
            if source.src_lang == source.tgt_lang:
                raise ValueError(f"{key}: src_lang and tgt_lang are both '{source.src_lang}'")
            if pair == main:
                raise ValueError(
                    f"{key}: {pair} is the main pair itself: put the corpus in data.train (a "
                    "list of corpora), which trains the main pair"
                )
            if source.format == "held_out":
                raise ValueError(f"{key}: format 'held_out' is for validation and test")
            if source.tag:
                raise ValueError(
                    f"{key}.tag: a related corpus takes no tag of its own; where the model "
                    "translates into several languages, every source gets the tag of its "
                    "target language (<2xx>)"
                )
            _check_related_validation(self.related, i)
        return self


def _check_related_validation(related: list[RelatedConfig], i: int) -> None:
    """`data.related[i].validation`: a split of files (not held out), no training keys, and
    the only one of its pair (their metrics are named by the pair)."""
    validation = related[i].validation
    if validation is None:
        return
    key = f"data.related[{i}].validation"
    if validation.format == "held_out":
        raise ValueError(
            f"{key}: format 'held_out' holds out of data.train, the main pair's; name the "
            "related pair's own validation files"
        )
    if validation.tag or validation.repeat != 1:
        name = "tag" if validation.tag else "repeat"
        raise ValueError(f"{key}.{name}: only training corpora take a {name}")
    pair = related[i].pair
    for j, other in enumerate(related[:i]):
        if other.validation is not None and other.pair == pair:
            raise ValueError(
                f"{key}: {pair} is validated by data.related[{j}].validation already; "
                "give a pair one validation split"
            )


class TokenizerConfig(StrictModel):
    """The byte-pair encoding (BPE) vocabulary learnt from the training split."""

    vocab_size: int | None = Field(
        None,
        ge=64,
        le=MAX_VOCAB_SIZE,
        description="BPE vocabulary size, special tokens included (each, if separate).",
    )
    min_frequency: int = Field(
        2,
        ge=1,
        le=MAX_MIN_FREQUENCY,
        description="Fewest occurrences of a pair of pieces for BPE to merge it.",
    )
    joint: bool = Field(
        True, description="One vocabulary for source and target (needed to share embeddings)."
    )
    byte_fallback: bool | None = Field(
        None,
        description="A character never seen in training encodes as the 256 byte tokens of its "
        "UTF-8 (which count in `vocab_size`) instead of `<unk>`; null: on when some character "
        "occurs only once in the training text and `vocab_size` is at least 2048.",
    )
    train_sample: int | None = Field(
        200_000,
        ge=1,
        description="BPE is learnt from at most this many training pairs, a fixed random sample "
        "of a larger corpus (every character is kept); null: from every pair.",
    )


class ModelConfig(StrictModel):
    """The encoder–decoder Transformer's shape and regularisation (§3, §5.4)."""

    d_model: int | None = Field(
        None,
        ge=8,
        le=MAX_D_MODEL,
        description="Width of embeddings and every layer's output.",
    )
    n_heads: int | None = Field(
        None,
        ge=1,
        le=MAX_HEADS,
        description="Attention heads per layer; must divide `d_model`.",
    )
    n_encoder_layers: Layers | None = Field(None, description="Layers in the encoder stack.")
    n_decoder_layers: Layers | None = Field(None, description="Layers in the decoder stack.")
    d_ff: int | None = Field(
        None, ge=1, le=MAX_D_FF, description="Hidden width of each feed-forward block."
    )
    dropout: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="Residual dropout, on each sub-layer's output and the "
        "embeddings plus positions (§5.4).",
    )
    attention_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="Dropout on the attention weights."
    )
    activation_dropout: float = Field(
        0.0, ge=0.0, lt=1.0, description="Dropout on the feed-forward hidden units."
    )
    activation: Literal["relu", "gelu"] = Field("relu", description="Feed-forward activation.")
    norm_position: Literal["post", "pre"] = Field(
        "post", description="Layer norm after each residual sum (post, §3.1) or before (pre)."
    )
    share_embeddings: bool = Field(
        True, description="One embedding table for source and target; needs `tokenizer.joint`."
    )
    tie_output: bool = Field(
        True, description="The output projection reuses the target embedding weights (§3.4)."
    )
    max_len: int = Field(
        256,
        ge=8,
        le=MAX_POSITIONS,
        description="Positions in the positional table: the longest source and output, in tokens.",
    )

    @model_validator(mode="after")
    def _heads_divide(self) -> ModelConfig:
        if self.d_model is not None and self.n_heads is not None and self.d_model % self.n_heads:
            raise ValueError(f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}")
        return self


class TrainConfig(StrictModel):
    """Budgets, optimizer, schedule, validation, checkpoints and hardware of a training run."""

    seed: int = Field(
        0, ge=0, le=MAX_SEED, description="Seed of initial weights, batch order and dropout."
    )
    max_steps: int | None = Field(
        None,
        ge=1,
        description="Stop after this many optimizer steps; null: no step limit.",
    )
    max_epochs: int | None = Field(
        None,
        ge=1,
        le=MAX_EPOCHS,
        description="Stop after this many epochs; null: no epoch limit.",
    )
    max_minutes: float | None = Field(
        None, gt=0, description="Stop after this many minutes of training; null: no time limit."
    )
    max_tokens: int | None = Field(
        None,
        ge=16,
        le=MAX_BATCH_TOKENS,
        description="Tokens per batch: sentences times the longer side's padded length.",
    )
    accumulate: int = Field(
        1, ge=1, description="Batches whose gradients are summed into one optimizer step."
    )
    lr: float | None = Field(
        None,
        gt=0,
        description="Peak learning rate, reached at the end of warm-up; null: "
        "`d_model`^-0.5 · `warmup_steps`^-0.5 (§5.3).",
    )
    warmup_steps: int | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description="Steps of linear warm-up to the peak learning rate (§5.3).",
    )
    schedule: Literal["inverse_sqrt", "cosine"] | None = Field(
        None,
        description="Decay after warm-up: inverse_sqrt, as 1/sqrt(step) (§5.3); cosine, from the "
        "peak down to 30% of it over `decay_steps`, then flat.",
    )
    decay_steps: int | None = Field(
        None,
        ge=1,
        le=MAX_STEPS,
        description="Steps from the end of warm-up to the end of the cosine decay; left out, "
        "the recipe plans it (the planned steps less the warm-up).",
    )
    betas: tuple[Beta, Beta] = Field(
        (0.9, 0.98),
        description="AdamW's β1 and β2, the decay rates of its moment estimates; each ≥ 0 and < 1.",
    )
    eps: float = Field(1e-9, gt=0, description="AdamW's ε, added to the denominator.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW's decoupled weight decay; 0: off.")
    label_smoothing: float | None = Field(
        None,
        ge=0.0,
        lt=1.0,
        description="Label smoothing ε_ls (§5.4): the share of each target's probability spread "
        "over the vocabulary.",
    )
    bidirectional_epochs: int = Field(
        0,
        ge=0,
        description="The first N epochs also train on every pair reversed (needs "
        "`tokenizer.joint`); 0: off.",
    )
    clip_norm: float | None = Field(
        1.0, gt=0, description="Largest gradient norm before clipping; null: no clipping."
    )
    validate_every: int | None = Field(
        None,
        ge=1,
        description="Steps between validations, each of which writes a checkpoint; training also "
        "validates when it stops.",
    )
    checkpoint_every: int | None = Field(
        None,
        ge=1,
        description="Steps between extra checkpoints (for averaging); null: only at validations.",
    )
    validation_samples: int = Field(
        3, ge=0, description="Sample translations logged at each validation."
    )
    early_stopping_metric: Literal["bleu", "chrf", "loss"] | None = Field(
        None,
        description="Validation score that decides the best model and early stopping.",
    )
    patience: int | None = Field(
        None,
        ge=1,
        description="Stop after this many validations without improvement (under the cosine "
        "decay, after a cool-down); null: never.",
    )
    device: Literal["auto", "cpu", "cuda", "mps"] = Field(
        "auto", description="Device to train on; auto: CUDA, else Apple MPS, else CPU."
    )
    precision: Literal["auto", "fp32", "bf16"] = Field(
        "auto",
        description="Arithmetic: fp32, or bf16 autocast; auto: bf16 when training on a CUDA GPU "
        "that supports it, fp32 elsewhere and for decoding (measured faster on the CPU).",
    )
    compile: bool = Field(False, description="torch.compile the model for training steps.")
    static_shapes: bool = Field(
        False,
        description="Pad each training batch to one of a few fixed shapes (both sides to a "
        "width of 8, 12, 16, 24, 32, …; as many sentences as `max_tokens` allows), so that "
        "compiled steps are reused; with `compile` on a CUDA GPU, replayed as CUDA graphs. "
        "Costs the padding; for models bound by kernel launches.",
    )
    layout: Literal["padded", "packed"] = Field(
        "padded",
        description="How a training batch reaches the model: `padded`, its sentences padded to "
        "the longest, attention masked; or `packed`, only its real tokens, end to end, so that "
        "nothing is computed for padding and on a CUDA GPU attention runs on variable-length "
        "kernels (flash attention in bf16) instead of masked ones. Both compute the same. "
        "`packed` excludes `static_shapes`.",
    )
    threads: int | None = Field(
        None,
        ge=1,
        le=MAX_THREADS,
        description="CPU threads for torch's operations; null: OMP_NUM_THREADS when set, else "
        "the physical cores this process may run on (at most torch's default).",
    )
    log_every: int = Field(50, ge=1, description="Steps between training log lines.")
    tensorboard: bool = Field(
        True,
        description="Also write train_loss, lr and the validation scores as TensorBoard event "
        "files to `run_dir`/tensorboard/, when the `tensorboard` package is installed.",
    )
    keep_last: int | None = Field(None, ge=1, description="Newest checkpoints kept.")
    average_last: int | None = Field(
        None,
        ge=1,
        description="Newest checkpoints that `tfm average` averages when given neither --last "
        "nor --best; 1: none.",
    )
    keep_best: int = Field(1, ge=1, description="Best checkpoints kept, by validation score.")
    max_nonfinite: int = Field(
        5,
        ge=1,
        description="Consecutive updates skipped for a non-finite loss or gradient before "
        "training stops with an error.",
    )

    @model_validator(mode="after")
    def _layout_fits_shapes(self) -> TrainConfig:
        if self.layout == "packed" and self.static_shapes:
            raise ValueError(
                "train.layout: packed and train.static_shapes: true exclude each other (a packed "
                "batch has no padding to give it a fixed shape); choose one"
            )
        return self


def decoding_fields(
    *, unset: bool = False, ceilings: Mapping[str, int] | None = None
) -> dict[str, Any]:
    """The pydantic fields of the decoding strategy and its settings, from their declarations
    (`tfm.decoding_options`), in order: `strategy`, then each setting with its type, default,
    range and description. With `unset`, every default is None (a request's: the server's
    settings); `ceilings` lowers a setting's upper bound (a server request's beam)."""
    names = tuple(DECODING_STRATEGIES)
    fields: dict[str, Any] = {
        "strategy": (
            Literal[names] | None,
            Field(None, description=f"How tokens are chosen: {strategy_names()}."),
        )
    }
    for setting in DECODING_SETTINGS:
        default = None if unset else setting.default
        kind = setting.kind if default is not None else setting.kind | None
        high = (ceilings or {}).get(setting.key, setting.high)
        field = Field(default, ge=setting.low, le=high, description=setting.describe())
        fields[setting.key] = (kind, field)
    return fields


def _settings(strategy: str) -> str:
    keys = settings_of(strategy)
    return f" Settings: {', '.join(f'`{key}`' for key in keys)}." if keys else ""


# The strategy and its settings, as a model that `DecodingConfig` extends with what every
# strategy shares. Its fields are built at run time: to a type checker, any attribute.
if TYPE_CHECKING:

    class _DecodingStrategy(StrictModel):
        def __getattr__(self, key: str) -> Any: ...

else:
    _DecodingStrategy = create_model("DecodingStrategy", __base__=StrictModel, **decoding_fields())


class DecodingConfig(_DecodingStrategy):
    __doc__ = "\n".join(
        [
            "How `tfm eval`, `tfm translate`, `tfm serve` and validation decode: a strategy, "
            "chosen by name, with its settings; the output length limit; the batch size.",
            "",
            *(f"- `{name}`: {what}{_settings(name)}" for name, what in DECODING_STRATEGIES.items()),
        ]
    )

    max_len_a: float = Field(
        1.5, ge=0, le=1000, description="Output limit a · source length + b tokens: the a."
    )
    max_len_b: int = Field(
        10, ge=1, le=MAX_POSITIONS, description="Output limit a · source length + b tokens: the b."
    )
    max_tokens: int = Field(
        8000, ge=16, le=MAX_BATCH_TOKENS, description="Source tokens per decoding batch."
    )


class Config(StrictModel):
    """A whole tfm configuration: the run directory and one section per concern."""

    run_dir: str = Field(
        "runs/default", description="Directory of the run: checkpoints, logs, tokenizer, model."
    )
    data: DataConfig = Field(default_factory=DataConfig, description="The corpus.")
    tokenizer: TokenizerConfig = Field(
        default_factory=TokenizerConfig, description="The subword vocabulary."
    )
    model: ModelConfig = Field(default_factory=ModelConfig, description="The Transformer.")
    train: TrainConfig = Field(default_factory=TrainConfig, description="Training.")
    decoding: DecodingConfig = Field(
        default_factory=DecodingConfig, description="Decoding for evaluation and translation."
    )

    @model_validator(mode="after")
    def _consistent(self) -> Config:
        if self.model.share_embeddings and not self.tokenizer.joint:
            raise ValueError("model.share_embeddings needs tokenizer.joint: true")
        if self.train.bidirectional_epochs and not self.tokenizer.joint:
            raise ValueError(
                "train.bidirectional_epochs needs tokenizer.joint: true (a reversed pair feeds "
                "target ids to the encoder)"
            )
        if self.data.src_lang == self.data.tgt_lang:
            raise ValueError(f"data.src_lang and data.tgt_lang are both '{self.data.src_lang}'")
        return self

    def translates(self, src_lang: str, tgt_lang: str) -> bool:
        """Whether a model trained with this config translates src_lang→tgt_lang: its own
        direction, or the reverse when every epoch trained both ways (`bidirectional_epochs` ≥
        `max_epochs`, data/bidirectional), which teaches the reverse as much as the direction."""
        data, train = self.data, self.train
        if (src_lang, tgt_lang) == (data.src_lang, data.tgt_lang):
            return True
        both_ways = train.max_epochs is not None and train.bidirectional_epochs >= train.max_epochs
        return both_ways and (src_lang, tgt_lang) == (data.tgt_lang, data.src_lang)
