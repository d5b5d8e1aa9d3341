"""Scoring translations against references: sacreBLEU on detokenized text (cased, with its
signature, and lowercased), chrF, exact match, and the lengths behind BLEU's brevity penalty.

Decoding lives in `tfm.prediction`; this module only compares texts. sacreBLEU is imported when
something is scored, so that `tfm translate` does not load it.
"""

from __future__ import annotations

from collections.abc import Sequence

SCORE_CHUNK = 5_000  # sentences whose sacreBLEU statistics are taken at a time


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU on detokenized cased text (with signature), lowercased BLEU, chrF, exact match,
    and the lengths behind BLEU's brevity penalty: hypothesis and reference tokens (sacreBLEU's
    tokenizer), their ratio (null when the references are empty) and the penalty itself.

    The scores are corpus-level, as sacreBLEU's `corpus_score` gives them: its sentence
    statistics (n-gram matches and totals, lengths) are summed over chunks of `SCORE_CHUNK`
    sentences and the scores computed once from the sums, so memory holds one chunk's n-grams,
    not the whole corpus's (about 15 MiB a thousand sentences). The statistics come from the two
    steps that `corpus_score` takes in one go (`_extract_corpus_statistics`, then
    `_compute_score_from_stats`); the tests hold the result to `corpus_score`'s."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    import sacrebleu

    metrics = {
        "bleu": sacrebleu.metrics.BLEU(),
        "bleu_lowercase": sacrebleu.metrics.BLEU(lowercase=True),
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
