"""`tfm data check`: what the configured corpus looks like before a model is trained on it.

Per split: pairs kept and dropped, length statistics in words (whitespace) and in subword tokens
of the tokenizer the config would train, tokens per word, the `<unk>` rate, length-ratio outliers
(likely misaligned lines), duplicate pairs, and for validation and test the sentences they share
with train (which inflate scores). `notes` says in words which of these look like a problem.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from contextlib import contextmanager

from tfm.config import SPLITS, Config
from tfm.data.pipeline import fit_tokenizer, load_texts
from tfm.data.tokenizer import UNK_ID, Tokenizer

log = logging.getLogger(__name__)

RATIO_LIMIT = 3.0  # words: (longer + 1) / (shorter + 1) above this is an outlier
OUTLIER_NOTE_SHARE = 0.01
DUPLICATE_NOTE_SHARE = 0.1
OVERLAP_NOTE_SHARE = 0.01
UNK_NOTE_RATE = 0.001
TOKENS_PER_WORD_NOTE = 2.5
EXAMPLES = 3


def check_data(config: Config) -> dict:
    """The report (JSON-ready) for the config's data and tokenizer sections."""
    texts, reports = {}, {}
    for name in SPLITS:
        src, tgt, report = load_texts(config.data, name)
        texts[name], reports[name] = (src, tgt), report
        log.info(report.summary())
    tokenizer = fit_tokenizer(*texts["train"], config.tokenizer)
    train_sources = set(texts["train"][0])
    train_pairs = set(zip(*texts["train"], strict=True))
    splits = {}
    for name, (src, tgt) in texts.items():
        stats = {"read": reports[name].read, "pairs": len(src), "dropped": reports[name].dropped}
        stats.update(_lengths(src, tgt, tokenizer, config.data.max_length))
        stats.update(_pairs(src, tgt))
        if name != "train":
            stats["src_in_train"] = sum(s in train_sources for s in src)
            stats["pairs_in_train"] = sum(p in train_pairs for p in zip(src, tgt, strict=True))
        splits[name] = stats
    result: dict = {
        "data": {"src_lang": config.data.src_lang, "tgt_lang": config.data.tgt_lang},
        "tokenizer": {
            "joint": tokenizer.joint,
            "src_vocab_size": tokenizer.src_vocab_size,
            "tgt_vocab_size": tokenizer.tgt_vocab_size,
        },
        "splits": splits,
    }
    result["notes"] = notes(result, max_length=config.data.max_length)
    return result


def _lengths(src: list[str], tgt: list[str], tokenizer: Tokenizer, max_length: int) -> dict:
    with _quiet(logging.getLogger("tfm.data.tokenizer")):  # <unk> is counted here, not warned
        src_ids, tgt_ids = tokenizer.encode_src(src), tokenizer.encode_tgt(tgt)
    out: dict = {}
    for side, sentences, ids in (("src", src, src_ids), ("tgt", tgt, tgt_ids)):
        words = [len(s.split()) for s in sentences]
        tokens = [len(i) for i in ids]
        out[f"{side}_words"] = length_stats(words)
        out[f"{side}_tokens"] = length_stats(tokens)
        out[f"{side}_tokens_per_word"] = round(sum(tokens) / max(sum(words), 1), 3)
        out[f"{side}_unk_rate"] = round(sum(i.count(UNK_ID) for i in ids) / max(sum(tokens), 1), 5)
    out["longer_than_max_length"] = sum(
        max(len(s), len(t)) > max_length for s, t in zip(src_ids, tgt_ids, strict=True)
    )
    return out


def _pairs(src: list[str], tgt: list[str]) -> dict:
    outliers = [(s, t) for s, t in zip(src, tgt, strict=True) if length_ratio(s, t) > RATIO_LIMIT]
    seen: set[tuple[str, str]] = set()
    duplicates = 0
    for pair in zip(src, tgt, strict=True):
        duplicates += pair in seen
        seen.add(pair)
    return {
        "length_ratio_outliers": len(outliers),
        "length_ratio_examples": [list(pair) for pair in outliers[:EXAMPLES]],
        "duplicate_pairs": duplicates,
    }


def length_ratio(src: str, tgt: str) -> float:
    """(longer + 1) / (shorter + 1) in words; 1.0 for equal lengths, symmetric in its sides."""
    a, b = len(src.split()) + 1, len(tgt.split()) + 1
    return max(a, b) / min(a, b)


def length_stats(lengths: Sequence[int]) -> dict:
    """mean, median, 95th percentile (nearest rank) and max of `lengths`."""
    if not lengths:
        return {"mean": 0.0, "median": 0, "p95": 0, "max": 0}
    ordered = sorted(lengths)
    rank = max(math.ceil(0.95 * len(ordered)), 1)
    return {
        "mean": round(sum(ordered) / len(ordered), 2),
        "median": ordered[(len(ordered) - 1) // 2],
        "p95": ordered[rank - 1],
        "max": ordered[-1],
    }


def notes(report: dict, *, max_length: int) -> list[str]:
    """What in the report looks like a problem, in words, with what to do about it."""
    out = []
    for name, s in report["splits"].items():
        n = max(s["pairs"], 1)
        if s["length_ratio_outliers"] / n >= OUTLIER_NOTE_SHARE:
            out.append(
                f"{name}: {_share(s['length_ratio_outliers'], n)} of pairs differ in length more "
                f"than {RATIO_LIMIT:g}:1 in words, e.g. {_pair(*s['length_ratio_examples'][0])}; "
                "misaligned lines?"
            )
        if s["duplicate_pairs"] / n >= DUPLICATE_NOTE_SHARE:
            out.append(f"{name}: {_share(s['duplicate_pairs'], n)} of pairs repeat an earlier one")
        for side in ("src", "tgt"):
            if name != "train" and s[f"{side}_unk_rate"] >= UNK_NOTE_RATE:
                out.append(
                    f"{name}: {s[f'{side}_unk_rate']:.2%} of {side} tokens are <unk> "
                    "(characters never seen in train)"
                )
            if s[f"{side}_tokens_per_word"] > TOKENS_PER_WORD_NOTE:
                out.append(
                    f"{name}: {s[f'{side}_tokens_per_word']:.2f} {side} tokens per word; a "
                    "larger tokenizer.vocab_size would give longer pieces"
                )
        if name == "train" and s["longer_than_max_length"]:
            out.append(
                f"train: {s['longer_than_max_length']:,} pairs are longer than "
                f"data.max_length={max_length} tokens and will be dropped in training"
            )
        if name != "train" and s["src_in_train"] / n >= OVERLAP_NOTE_SHARE:
            out.append(
                f"{name}: {_share(s['src_in_train'], n)} of sources also occur in train "
                f"({s['pairs_in_train']:,} identical pairs): its scores will be optimistic"
            )
    return out


def format_table(report: dict) -> str:
    """The report as a compact table, one column per split, then the tokenizer and the notes."""
    splits = report["splits"]
    rows = [(label, [cell(s) for s in splits.values()]) for label, cell in _ROWS]
    width = max(len(label) for label, _ in rows)
    columns = [max(len(name), *(len(r[1][i]) for r in rows)) for i, name in enumerate(splits)]

    def line(label: str, values) -> str:
        cells = "".join(f"  {v:>{w}}" for v, w in zip(values, columns, strict=True))
        return f"{label:<{width}}{cells}"

    lines = [line("", splits)] + [line(label, values) for label, values in rows]
    tok = report["tokenizer"]
    if tok["joint"]:
        lines.append(f"tokenizer: joint BPE, {tok['src_vocab_size']:,} tokens")
    else:
        sizes = f"{tok['src_vocab_size']:,} source / {tok['tgt_vocab_size']:,} target"
        lines.append(f"tokenizer: separate BPE, {sizes} tokens")
    lines.extend(f"note: {note}" for note in report["notes"])
    return "\n".join(lines)


def _counted(key: str):
    return lambda s: _share(s[key], s["pairs"]) if key in s else "-"


_ROWS = [
    ("pairs", lambda s: f"{s['pairs']:,}"),
    ("dropped on loading", lambda s: f"{sum(s['dropped'].values()):,}"),
    *(
        row
        for side in ("src", "tgt")
        for row in (
            (f"{side} words mean/p95/max", lambda s, k=f"{side}_words": _stats(s[k])),
            (f"{side} tokens mean/p95/max", lambda s, k=f"{side}_tokens": _stats(s[k])),
            (f"{side} tokens per word", lambda s, k=f"{side}_tokens_per_word": f"{s[k]:.2f}"),
            (f"{side} <unk> rate", lambda s, k=f"{side}_unk_rate": f"{s[k]:.2%}"),
        )
    ),
    ("longer than max_length", _counted("longer_than_max_length")),
    (f"length ratio > {RATIO_LIMIT:g}", _counted("length_ratio_outliers")),
    ("duplicate pairs", _counted("duplicate_pairs")),
    ("sources also in train", _counted("src_in_train")),
    ("pairs also in train", _counted("pairs_in_train")),
]


def _stats(stats: dict) -> str:
    return f"{stats['mean']:.1f}/{stats['p95']}/{stats['max']}"


def _pair(src: str, tgt: str, limit: int = 50) -> str:
    def cut(text: str) -> str:
        return repr(text if len(text) <= limit else text[: limit - 1] + "…")

    return f"{cut(src)} -> {cut(tgt)}"


def _share(count: int, total: int) -> str:
    return f"{count:,} ({count / max(total, 1):.1%})"


@contextmanager
def _quiet(logger: logging.Logger):
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)
