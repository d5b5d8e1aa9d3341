"""Prediction: decoding trained models into translations.

Modules: translator (the `Translator` every decoding command takes; `tfm.commands.engines` opens a
run or an export as one), line_search (what both engines share: blank lines, framing,
distinct n-best lists), opening (a trained run, its ensemble and reranker, as a Translator),
settings (how to decode: `DecodeSettings`; what the user asked for: `DecodeRequest`), translate
(batched greedy and beam decoding of many sentences, in input order), likelihood (teacher-forced
log-probabilities and loss), reranking (rescoring a beam with a reverse-direction model),
scoring (sacreBLEU, chrF, exact match), split_evaluation (decode a split and score it),
attention_weights (the attention weights of one translated sentence),
ensemble (several trained models decoding as one).
The search itself lives in `tfm.transformer.decoding`: the model does not know how it is decoded.
"""
