"""`tfm data check`: what the configured corpus looks like before a model is trained on it.

Per split: pairs kept and dropped, length statistics in words (`words.py`: between spaces, or a
character each in scripts written without spaces) and in subword tokens of the tokenizer the
config would train, tokens per word, the `<unk>` rate, length-ratio outliers (pairs far from the
split's usual ratio of source to target words: likely misaligned lines), duplicate pairs, and
for validation and test the sentences they share with train (which inflate scores). `notes`
says in words which of these look like a problem.

The training split is prepared in the data cache exactly as training prepares it (and training
then reuses it), and is read from there in one streaming pass: memory grows by a few numbers per
pair, never by the corpus's text. Duplicates and overlaps are counted on 64-bit hashes of the
sentences.
"""

from __future__ import annotations

import logging
import math
from array import array
from collections.abc import Iterable, Sequence

import numpy as np

from tfm.config import SPLITS, Config, DataConfig
from tfm.data.cache.prepared_cache import OVERLAP_SHARE, prepared_entry
from tfm.data.corpus_figures import ratio_outliers
from tfm.data.library_corpora import check_toy_split
from tfm.data.monolingual import check_monolingual, choose_lines, prepared_monolingual
from tfm.data.pipeline import check_splits, load_texts
from tfm.data.screening import report_characters
from tfm.data.tokenizer import UNK_ID, Tokenizer, untagged
from tfm.data.words import word_count
from tfm.errors import DataError
from tfm.logs import quieted

log = logging.getLogger(__name__)

RATIO_LIMIT = 3.0  # a pair this many times off the split's median words ratio is an outlier
OUTLIER_NOTE_SHARE = 0.01
DUPLICATE_NOTE_SHARE = 0.1
UNK_NOTE_RATE = 0.001
TOKENS_PER_WORD_NOTE = 2.5
EXAMPLES = 3


def check_data(config: Config) -> dict:
    """The report (JSON-ready) for the config's data and tokenizer sections. A test split left
    to the toy corpus's default beside another training corpus, or where the languages are not
    the toy's, is not checked (training does not need one) and a note says so."""
    data = config.data
    untested = data.test.format == "toy" and not _toy_tests(data)
    names = [name for name in SPLITS if not (untested and name == "test")]
    check_splits(data, names)  # before the training split is prepared
    check_monolingual(data)
    entry = prepared_entry(config)
    report_characters(entry.meta.get("characters"), split="train", policy=config.data.control_chars)
    tokenizer = entry.tokenizer()
    reports = {"train": entry.report()}
    src_ids, tgt_ids = entry.ids("src"), entry.ids("tgt")
    texts: dict[str, tuple[Sequence[str], Sequence[str]]] = {
        "train": (entry.texts("src"), entry.texts("tgt"))
    }
    counted = entry.meta["tokens"]  # <unk> was counted when the ids were written
    tokens = {"train": _tokens(src_ids.lengths - 1, tgt_ids.lengths - 2,
                               [counted["src_unknown"], counted["tgt_unknown"]])}  # fmt: skip
    for name in names[1:]:
        src, tgt, reports[name] = load_texts(config.data, name)
        log.info(reports[name].summary())
        texts[name] = (src, tgt)
        tokens[name] = _encoded(src, tgt, tokenizer)
    # the training sources as written, less the tags before them (<2it>, <bt>): a validation
    # source that training reads is the same sentence after its tag
    scans = {name: _scan(_untagged(src, tokenizer.tags if name == "train" else ()), tgt)
             for name, (src, tgt) in texts.items()}  # fmt: skip
    in_train = {key: np.sort(scans["train"][key]) for key in ("src_hash", "pair_hash")}
    splits = {}
    for name in texts:
        stats = {"read": reports[name].read, "pairs": len(texts[name][0]),
                 "dropped": reports[name].dropped}  # fmt: skip
        stats.update(_lengths(scans[name], tokens[name], config.data.max_length))
        stats.update(_pairs(scans[name], *texts[name]))
        if name != "train":
            stats["src_in_train"] = _shared(scans[name]["src_hash"], in_train["src_hash"])
            stats["pairs_in_train"] = _shared(scans[name]["pair_hash"], in_train["pair_hash"])
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
    if data.monolingual:
        references = {sentence for name in names[1:] for sentence in texts[name][1]}
        result["monolingual"] = _monolingual(config, tokenizer, references)
    result["notes"] = notes(result, max_length=config.data.max_length)
    if untested:
        result["notes"].append(
            "test: not checked: the config names no test split (the built-in toy corpus it would "
            "get tests only a model trained on it); give data.test to check one"
        )
    return result


def _monolingual(config: Config, tokenizer: Tokenizer, references: set[str]) -> dict:
    """What back-translation would find in `data.monolingual`: its lines (after the empty ones),
    those identical to a validation or test sentence (`leaks`), and those over the length limit."""
    text = prepared_monolingual(config)
    limit = config.data.max_length

    def fits(rows: list[str]) -> list[bool]:
        return [len(ids) <= limit for ids in tokenizer.encode_tgt(rows)]

    every = choose_lines(text, count=len(text), seed=0, leaks=references, fits=fits)
    return {"lang": config.data.tgt_lang, "lines": len(text), "usable": len(every.index),
            "leaks": every.leaks, "longer_than_max_length": every.long}  # fmt: skip


def _toy_tests(data: DataConfig) -> bool:
    """Whether the toy corpus can be `data`'s test split (`library_corpora.check_toy_split`)."""
    try:
        check_toy_split(data, "test")
    except DataError:
        return False
    return True


def _scan(src: Iterable[str], tgt: Iterable[str]) -> dict[str, np.ndarray]:
    """One pass over a split's pairs: words per side, and hashes of each source and pair."""
    names = ("src_words", "tgt_words", "src_hash", "pair_hash")
    columns = {name: array("q") for name in names}  # 8 bytes a number, not a Python int
    add = [columns[name].append for name in names]
    for s, t in zip(src, tgt, strict=True):
        add[0](word_count(s))
        add[1](word_count(t))
        add[2](hash(s))
        add[3](hash((s, t)))
    return {name: np.frombuffer(values, dtype=np.int64) for name, values in columns.items()}


def _untagged(texts: Iterable[str], tags: Sequence[str]) -> Iterable[str]:
    if not tags:
        return texts
    starts = tuple(f"<{tag}>" for tag in tags)
    return (untagged([text], tags)[0] if text.startswith(starts) else text for text in texts)


def _tokens(src: np.ndarray, tgt: np.ndarray, unknown: Sequence[int]) -> dict:
    """Subword tokens per sentence (unframed) and `<unk>` counts, per side."""
    return {"src": src, "tgt": tgt, "src_unk": unknown[0], "tgt_unk": unknown[1]}


def _encoded(src: list[str], tgt: list[str], tokenizer: Tokenizer) -> dict:
    with quieted("tfm.data.tokenizer"):  # <unk> is counted here, not warned
        sides = tokenizer.encode_src(src), tokenizer.encode_tgt(tgt)
    lengths = [np.fromiter(map(len, ids), dtype=np.int64, count=len(ids)) for ids in sides]
    unknown = [sum(row.count(UNK_ID) for row in ids) for ids in sides]
    return _tokens(lengths[0], lengths[1], unknown)


def _lengths(scan: dict[str, np.ndarray], tokens: dict, max_length: int) -> dict:
    out: dict = {}
    for side in ("src", "tgt"):
        words, counts = scan[f"{side}_words"], tokens[side]
        out[f"{side}_words"] = length_stats(words)
        out[f"{side}_tokens"] = length_stats(counts)
        out[f"{side}_tokens_per_word"] = round(int(counts.sum()) / max(int(words.sum()), 1), 3)
        out[f"{side}_unk_rate"] = round(tokens[f"{side}_unk"] / max(int(counts.sum()), 1), 5)
    out["longer_than_max_length"] = int(
        np.count_nonzero(np.maximum(tokens["src"], tokens["tgt"]) > max_length)
    )
    return out


def _pairs(scan: dict[str, np.ndarray], src: Sequence[str], tgt: Sequence[str]) -> dict:
    outliers, median = ratio_outliers(scan["src_words"], scan["tgt_words"], RATIO_LIMIT)
    hashes = scan["pair_hash"]
    return {
        "words_ratio_median": round(median, 3),
        "length_ratio_outliers": len(outliers),
        "length_ratio_examples": [[src[i], tgt[i]] for i in outliers[:EXAMPLES].tolist()],
        "duplicate_pairs": _repeats(hashes),
    }


def _repeats(hashes: np.ndarray) -> int:
    """How many of `hashes` repeat an earlier one (sorted: numpy's hash-based unique is several
    times slower on millions of 64-bit hashes)."""
    ordered = np.sort(hashes)
    return int(np.count_nonzero(ordered[1:] == ordered[:-1]))


def _shared(hashes: np.ndarray, train: np.ndarray) -> int:
    """How many of `hashes` occur in `train`, which is sorted."""
    if not len(train):
        return 0
    at = np.minimum(np.searchsorted(train, hashes), len(train) - 1)
    return int(np.count_nonzero(train[at] == hashes))


def length_stats(lengths: Sequence[int] | np.ndarray) -> dict:
    """mean, median, 95th percentile (nearest rank) and max of `lengths`."""
    if not len(lengths):
        return {"mean": 0.0, "median": 0, "p95": 0, "max": 0}
    ordered = np.sort(np.asarray(lengths, dtype=np.int64))
    rank = max(math.ceil(0.95 * len(ordered)), 1)
    return {
        "mean": round(float(ordered.mean()), 2),
        "median": int(ordered[(len(ordered) - 1) // 2]),
        "p95": int(ordered[rank - 1]),
        "max": int(ordered[-1]),
    }


def notes(report: dict, *, max_length: int) -> list[str]:
    """What in the report looks like a problem, in words, with what to do about it."""
    out = []
    for name, s in report["splits"].items():
        n = max(s["pairs"], 1)
        if s["length_ratio_outliers"] / n >= OUTLIER_NOTE_SHARE:
            out.append(
                f"{name}: {_share(s['length_ratio_outliers'], n)} of pairs are more than "
                f"{RATIO_LIMIT:g} times off the median ratio of source to target words "
                f"({s['words_ratio_median']:.2f}), e.g. {_pair(*s['length_ratio_examples'][0])}; "
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
        if name != "train" and s["src_in_train"] / n >= OVERLAP_SHARE:
            out.append(
                f"{name}: {_share(s['src_in_train'], n)} of sources also occur in train "
                f"({s['pairs_in_train']:,} identical pairs): its scores will be optimistic"
            )
    mono = report.get("monolingual")
    if mono and mono["leaks"]:
        out.append(
            f"monolingual: {mono['leaks']:,} line(s) identical to a validation or test sentence; "
            "back-translation leaves them out (they would leak a reference)"
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
    mono = report.get("monolingual")
    if mono:
        lines.append(
            f"monolingual {mono['lang']}: {mono['lines']:,} lines, {mono['usable']:,} usable "
            f"({mono['leaks']:,} a validation or test sentence, "
            f"{mono['longer_than_max_length']:,} over data.max_length)"
        )
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
    ("src/tgt words median", lambda s: f"{s['words_ratio_median']:.2f}"),
    (f"src/tgt words {RATIO_LIMIT:g}× off", _counted("length_ratio_outliers")),
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
