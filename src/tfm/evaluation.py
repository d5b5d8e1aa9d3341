"""Scoring translations against references: sacreBLEU on detokenized text (cased, with its
signature, and lowercased), chrF, exact match, and the lengths behind BLEU's brevity penalty.

Decoding lives in `tfm.prediction`; this module only compares texts. sacreBLEU is imported when
something is scored, so that `tfm translate` does not load it.
"""

from __future__ import annotations

from collections.abc import Sequence


def score_translations(hypotheses: Sequence[str], references: Sequence[str]) -> dict:
    """sacreBLEU on detokenized cased text (with signature), lowercased BLEU, chrF, exact match,
    and the lengths behind BLEU's brevity penalty: hypothesis and reference tokens (sacreBLEU's
    tokenizer), their ratio (null when the references are empty) and the penalty itself."""
    if len(hypotheses) != len(references):
        raise ValueError(f"{len(hypotheses)} hypotheses but {len(references)} references")
    import sacrebleu

    hyps, refs = list(hypotheses), [list(references)]
    bleu = sacrebleu.metrics.BLEU()
    cased = bleu.corpus_score(hyps, refs)
    lower = sacrebleu.metrics.BLEU(lowercase=True).corpus_score(hyps, refs)
    chrf = sacrebleu.metrics.CHRF().corpus_score(hyps, refs)
    pairs = zip(hyps, refs[0], strict=True)
    same = sum(" ".join(h.split()) == " ".join(r.split()) for h, r in pairs)
    return {
        "bleu": round(cased.score, 2),
        "bleu_signature": str(bleu.get_signature()),
        "bleu_lowercase": round(lower.score, 2),
        "chrf": round(chrf.score, 2),
        "exact_match": round(same / max(len(hyps), 1), 4),
        "sentences": len(hyps),
        "hyp_len": cased.sys_len,
        "ref_len": cased.ref_len,
        "length_ratio": round(cased.ratio, 4) if cased.ref_len else None,  # sacreBLEU says 0
        "brevity_penalty": round(cased.bp, 4),
    }
