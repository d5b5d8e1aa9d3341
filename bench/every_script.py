"""Every script: how tfm's BPE treats each language pair's writing system.

    OMP_NUM_THREADS=1 python bench/every_script.py --data ../shared/data/tatoeba
    python bench/every_script.py --quick      # toy German and a few Japanese lines

For each English–X corpus (tfm's `text` format: `{split}.en` and `{split}.X`, one sentence a
line; by default Tatoeba's six pairs: French, Italian, Turkish, Ukrainian, Hebrew, Japanese) it
learns tfm's joint BPE (--vocab-size, 8,000) on the training split and reports, for the X side:
    characters   distinct characters of train and those seen there only once, and whether
                 byte fallback is on by default (`tokenizer.byte_fallback: null`, decided on
                 both sides' text)
    unknown      on the test split, the share of tokens that are `<unk>` and of sentences that
                 decode back exactly, with byte fallback off and on
    pieces       tokens a sentence and characters a token on the test split, BPE learning time
For unspaced text (Japanese, Chinese) it also learns BPE with the text first split where its
script changes (kanji, hiragana, katakana runs) and into single characters, and reports their
tokens a sentence and learning time against tfm's whole-sentence pieces, as ratios.

A sentence counts as an exact round trip when it decodes back to the very text; one the
normalizer changes (NFC, for instance marks written out of Unicode's canonical order) decodes
as its normalized form and does not count, with byte fallback or without.
"""

import argparse
import re
import time
from collections import Counter
from pathlib import Path

from tokenizers import Regex, pre_tokenizers, trainers

from tfm.api import (
    BYTE_TOKENS,
    SPECIAL_TOKENS,
    UNK_ID,
    Tokenizer,
    generate_toy_corpus,
    train_tokenizer,
    untrained,
    wants_byte_fallback,
)

PAIRS = ("en-fr", "en-it", "en-tr", "en-uk", "en-he", "en-ja")
UNSPACED = re.compile("[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff]")  # kana, kanji/hanzi
SPLITS = {  # how unspaced text is cut before BPE, besides tfm's whole-sentence pieces
    "script runs": r"\p{Han}+|[\p{Hiragana}ー]+|[\p{Katakana}ー]+",
    "characters": r"[\p{Han}\p{Hiragana}\p{Katakana}ー]",
}
JAPANESE = [  # quick mode's unspaced side: (English, Japanese), the last two pairs test only
    ("The dog sees the cat.", "犬が猫を見ています。"),
    ("A woman reads a book in the garden.", "女性が庭で本を読んでいます。"),
    ("My brother bought a new car yesterday.", "兄は昨日新しい車を買いました。"),
    ("Where is the station?", "駅はどこですか。"),
    ("I like green tea very much.", "私は緑茶がとても好きです。"),
    ("I want to eat sushi.", "私は寿司を食べたい。"),
    ("The whale sleeps.", "鯨が寝ています。"),
]


def read_pair(folder: Path) -> dict[str, tuple[list[str], list[str]]]:
    """{split: (English lines, X lines)} for train and test of the folder `en-X`."""
    lang = folder.name.split("-")[1]

    def lines(name: str) -> list[str]:
        return (folder / name).read_text(encoding="utf-8").splitlines()

    return {s: (lines(f"{s}.en"), lines(f"{s}.{lang}")) for s in ("train", "test")}


def quick_pairs() -> dict[str, dict[str, tuple[list[str], list[str]]]]:
    pairs = generate_toy_corpus(n_train=300, n_validation=0, n_test=50, seed=3)
    japanese = {"train": JAPANESE[:5] * 20, "test": JAPANESE[3:]}
    return {
        "en-de (toy)": {s: sides(pairs[s]) for s in ("train", "test")},
        "en-ja (a few lines)": {s: sides(japanese[s]) for s in ("train", "test")},
    }


def sides(pairs: list[tuple[str, str]]) -> tuple[list[str], list[str]]:
    return [src for src, _ in pairs], [tgt for _, tgt in pairs]


def unknown_and_exact(tokenizer: Tokenizer, texts: list[str]) -> tuple[float, float, list[int]]:
    """The share of `<unk>` among the tokens of `texts`, the share decoded back exactly, and
    each text's number of tokens."""
    ids = tokenizer.encode_tgt(texts)
    lengths = [len(seq) for seq in ids]
    unknown = sum(seq.count(UNK_ID) for seq in ids) / max(sum(lengths), 1)
    exact = sum(a == b for a, b in zip(tokenizer.decode_tgt(ids), texts, strict=True))
    return unknown, exact / max(len(texts), 1), lengths


def split_first(src: list[str], tgt: list[str], pattern: str, vocab_size: int) -> Tokenizer:
    """tfm's joint BPE with byte fallback, but unspaced text first cut by `pattern`."""
    tok = untrained(byte_fallback=True)
    extra = pre_tokenizers.Split(Regex(pattern), behavior="isolated")
    tok.pre_tokenizer = pre_tokenizers.Sequence([tok.pre_tokenizer, extra])
    specials = [*SPECIAL_TOKENS, *BYTE_TOKENS]
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size, min_frequency=2, special_tokens=specials, show_progress=False
    )
    tok.train_from_iterator([*src, *tgt], trainer)
    return Tokenizer(src=tok, tgt=tok)


def timed_bpe(learn, *args, **kwargs) -> tuple[Tokenizer, float]:
    start = time.perf_counter()
    tokenizer = learn(*args, **kwargs)
    return tokenizer, time.perf_counter() - start


def report(name: str, data: dict, vocab_size: int) -> None:
    (src, tgt), (_, test) = data["train"], data["test"]
    counts = Counter("".join(tgt))
    once = sum(n == 1 for c, n in counts.items() if not c.isspace())
    default = wants_byte_fallback([*src, *tgt], (), vocab_size)  # on both sides: joint BPE
    print(f"pair {name}: {len(counts)} target characters, {once} seen once in train; "
          f"byte fallback by default: {'on' if default else 'off'}")  # fmt: skip
    found = {}
    for byte_fallback in (False, True):
        tokenizer, seconds = timed_bpe(
            train_tokenizer, src, tgt, vocab_size=vocab_size, byte_fallback=byte_fallback
        )
        found[byte_fallback] = (tokenizer, seconds, *unknown_and_exact(tokenizer, test))
    (_, _, unk_off, exact_off, _), (tokenizer, seconds, unk_on, exact_on, lengths) = found.values()
    print(f"  test: <unk> rate {100 * unk_off:.2f}% without byte fallback, {100 * unk_on:.2f}% "
          f"with; exact round trips {100 * exact_off:.1f}% / {100 * exact_on:.1f}%")  # fmt: skip
    n_tokens, n_chars = sum(lengths), sum(map(len, test))
    print(f"  test: {n_tokens / len(test):.2f} tokens a sentence, {n_chars / n_tokens:.2f} "
          f"characters a token; BPE learnt in {seconds:.2f} s")  # fmt: skip
    if not any(UNSPACED.search(text) for text in tgt[:1000]):
        return
    for way, pattern in SPLITS.items():
        other, other_seconds = timed_bpe(split_first, src, tgt, pattern, vocab_size)
        other_tokens = sum(map(len, other.encode_tgt(test)))
        print(f"  unspaced text cut into {way} first: {other_tokens / n_tokens:.2f}x the tokens, "
              f"BPE time {other_seconds / seconds:.2f}x")  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, help="folder of en-X folders (Tatoeba's six)")
    parser.add_argument("--pairs", nargs="+", default=list(PAIRS))
    parser.add_argument("--vocab-size", type=int, default=8000)
    parser.add_argument("--quick", action="store_true", help="toy data, seconds")
    args = parser.parse_args(argv)
    if args.quick:
        pairs, vocab_size = quick_pairs(), 2048
    elif args.data is None:
        parser.error("--data is needed unless --quick")
    else:
        pairs = {p: read_pair(args.data / p) for p in args.pairs}
        vocab_size = args.vocab_size
    print(f"joint BPE of {vocab_size} tokens on each pair's training split")
    for name, data in pairs.items():
        report(name, data, vocab_size)


if __name__ == "__main__":
    main()
