"""Prediction: decoding trained models into translations.

Modules: settings (how to decode: `DecodeSettings`; what the user asked for: `DecodeRequest`),
translate (batched greedy and beam decoding of many sentences, in input order), likelihood
(teacher-forced log-probabilities and loss), reranking (rescoring a beam with a reverse-direction
model), evaluate (decode a split and score it), opening (a trained run, its ensemble and reranker,
ready to decode), attention (the attention weights of one translated sentence), ensemble (several
trained models decoding as one).
The search itself lives in `tfm.transformer.decoding`: the model does not know how it is decoded.
"""

from tfm.prediction.ensemble import Ensemble, EnsembleCache, mean_probability_logits

__all__ = ["Ensemble", "EnsembleCache", "mean_probability_logits"]
