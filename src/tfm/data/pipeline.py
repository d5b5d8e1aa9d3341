"""From the data section of a config to encoded, framed splits, tokenized once and kept in memory.

Framing: a source is `ids + [EOS]`; a target is `[BOS] + ids + [EOS]`, so a batch's decoder input
is `tgt[:-1]` and its output `tgt[1:]` (see `batching.collate`). Training pairs longer than
`data.max_length` subword tokens on either side are dropped, counted and reported; validation and
test pairs are never dropped for length, so their scores stay comparable across settings.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from tfm.config import DataConfig, TokenizerConfig, planned
from tfm.data.corpus import LoadReport, check_splits_readable, load_split
from tfm.data.held_out import held_out, withhold
from tfm.data.interruptible import interruptibly
from tfm.data.library_corpora import check_toy_split
from tfm.data.related import mix_record, training_stream
from tfm.data.tokenizer import BOS_ID, EOS_ID, Tokenizer, train_tokenizer
from tfm.errors import DataError

log = logging.getLogger(__name__)


@dataclass
class EncodedSplit:
    """One split: the raw sentences (for scoring) and their framed token ids (for the model)."""

    name: str
    src_text: list[str]
    tgt_text: list[str]
    src: list[list[int]]
    tgt: list[list[int]]
    report: LoadReport

    def __len__(self) -> int:
        return len(self.src)


def check_splits(data: DataConfig, splits: Sequence[str]) -> None:
    """Before any split is read: the files of `splits` are there and readable in these
    languages (`corpus.check_splits_readable`). A corpus too small to hold out validation and
    test is named at the end of the one pass over it, before BPE."""
    check_splits_readable(data, splits)


def load_texts(config: DataConfig, split: str) -> tuple[list[str], list[str], LoadReport]:
    """Read one split's sentence pairs as two aligned lists, with its load report; the training
    split without the pairs held out of it, a held-out split from the training corpus."""
    if split == "train":
        held = withhold(config)
        stream, report_of = training_stream(
            config, control_chars=config.control_chars, withhold=held
        )
        pairs = [pair for chunk in stream for pair in chunk]
        if held is not None and held.rows:  # held out once the read was over
            left_out = set(held.rows)
            pairs = [pair for i, pair in enumerate(pairs) if i not in left_out]
        return [src for src, _ in pairs], [tgt for _, tgt in pairs], report_of()
    source = getattr(config, split)
    if source.format == "held_out":
        try:
            found = held_out(config)
        except DataError as error:  # e.g. the training files moved since the run trained
            raise DataError(f"data.{split} is held out of data.train: {error}") from None
        assert found is not None  # a split of this format is held out
        src, tgt = found.pairs[split]
        return src[:], tgt[:], found.report(split)
    if source.format == "toy":
        check_toy_split(config, split)
    texts, report = load_split(
        source, split=split, src_lang=config.src_lang, tgt_lang=config.tgt_lang, toy=config.toy,
        control_chars=config.control_chars,
    )  # fmt: skip
    return texts["src"][:], texts["tgt"][:], report


def fit_tokenizer(
    src: list[str], tgt: list[str], config: TokenizerConfig, *, tags: Sequence[str] = ()
) -> Tokenizer:
    """Train the BPE tokenizer on the training sentences, reserving `tags` (interruptible by
    SIGINT and SIGTERM: `tfm.data.interruptible`)."""
    work = functools.partial(
        train_tokenizer,
        src,
        tgt,
        vocab_size=planned(config.vocab_size, "tokenizer.vocab_size"),
        min_frequency=config.min_frequency,
        joint=config.joint,
        byte_fallback=config.byte_fallback,
        tags=tags,
    )
    return interruptibly(work)


def encode_split(
    name: str,
    src_text: list[str],
    tgt_text: list[str],
    report: LoadReport,
    tokenizer: Tokenizer,
    *,
    max_length: int | None = None,
    tag: str | None = None,
) -> EncodedSplit:
    """Tokenize a split once, its sources after `tag` where given (the target language's, in a
    model that translates into several); with `max_length`, drop (and count) pairs longer than
    that."""
    src_ids = tokenizer.encode_src(src_text, tag=tag)
    tgt_ids = tokenizer.encode_tgt(tgt_text)
    keep: Sequence[int] = range(len(src_ids))
    if max_length is not None:
        fits = [len(src_ids[i]) <= max_length and len(tgt_ids[i]) <= max_length for i in keep]
        long = [i for i, fit in enumerate(fits) if not fit]
        keep = [i for i, fit in enumerate(fits) if fit]
        report.drop("too long", len(long), at=long)
        if not keep:
            raise DataError(f"{name}: no pairs left after filtering: {report.summary()}")
    return EncodedSplit(
        name=name,
        src_text=[src_text[i] for i in keep],
        tgt_text=[tgt_text[i] for i in keep],
        src=[src_ids[i] + [EOS_ID] for i in keep],
        tgt=[[BOS_ID, *tgt_ids[i], EOS_ID] for i in keep],
        report=report,
    )


def prepare_splits(
    data: DataConfig,
    tokenizer_config: TokenizerConfig,
    splits: Iterable[str],
    *,
    tokenizer: Tokenizer | None = None,
) -> tuple[dict[str, EncodedSplit], Tokenizer]:
    """Load and encode `splits`; train the tokenizer on "train" when none is given. Validation
    and test are the main pair's: their sources take its target language's tag where the model
    translates into several (the training split's have it in their text)."""
    raw = {name: load_texts(data, name) for name in splits}
    if tokenizer is None:
        if "train" not in raw:
            raise ValueError("a tokenizer is needed when the training split is not loaded")
        tokenizer = fit_tokenizer(*raw["train"][:2], tokenizer_config, tags=data.tags())
    encoded = {
        name: encode_split(
            name,
            src,
            tgt,
            report,
            tokenizer,
            max_length=data.max_length if name == "train" else None,
            tag=None if name == "train" else data.target_tag(),
        )
        for name, (src, tgt, report) in raw.items()
    }
    for split in encoded.values():  # once per split, with every drop
        log.info(split.report.summary())
    return encoded, tokenizer


@dataclass
class RelatedValidation:
    """A related pair's own validation split (`data.related[i].validation`), encoded as the
    main pair's is: scored at each validation beside it."""

    pair: str  # `en-pt`, as its metrics name it
    tgt_lang: str
    split: EncodedSplit


def related_validations(
    data: DataConfig, tokenizer: Tokenizer, report: LoadReport
) -> list[RelatedValidation]:
    """The validation splits of the related corpora that the training `report` read, each
    source after its target language's tag where the model translates into several. A corpus
    the mix left out (another script) is not scored: the model was not trained on it; the log
    says so."""
    mix = mix_record(data, report)
    if mix is None:
        return []
    times = [c["times"] for c in mix["corpora"][len(data.corpora) :]]
    found = []
    for i, (related, read) in enumerate(zip(data.related, times, strict=True)):
        if related.validation is None:
            continue
        key = f"data.related[{i}].validation"
        if not read:
            log.info("%s: not scored, the mix left its corpus out", key)
            continue
        texts, split_report = load_split(
            related.validation, split="validation", src_lang=related.src_lang,
            tgt_lang=related.tgt_lang, toy=data.toy, control_chars=data.control_chars,
        )  # fmt: skip
        split = encode_split(key, texts["src"][:], texts["tgt"][:], split_report, tokenizer,
                             tag=data.target_tag(related.tgt_lang))  # fmt: skip
        read_line = split_report.summary().removeprefix("validation: ")
        log.info("%s, %s: %s", key, related.pair, read_line)
        found.append(RelatedValidation(related.pair, related.tgt_lang, split))
    return found
