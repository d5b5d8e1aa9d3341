"""Prediction: decoding trained models into translations.

Modules: translator (the `Translator` every decoding caller takes, and what both engines share:
blank lines, framing, distinct n-best lists; `tfm.commands.engines` opens a run or an export as
one), strategies (greedy search, beam search and sampling, chosen by name, and the one rule that
resolves what the user asked for), settings (how to decode: `DecodeSettings`, the `OutputLimit`;
what the user asked for: `DecodeRequest`), torch_translator (a torch model as a Translator),
opening (a trained run, its ensemble and reranker, as one), translate (batched decoding of many
sentences by a strategy, in input order), likelihood (teacher-forced log-probabilities and loss),
reranking (rescoring a beam with a reverse-direction model), scoring (sacreBLEU, chrF, exact
match), split_evaluation (decode a split and score it), attention_weights (the attention weights
of one translated sentence), ensemble (several trained models decoding as one).
The search itself lives in `tfm.transformer`: the model does not know how it is decoded.
"""
