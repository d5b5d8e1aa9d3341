"""Prediction: turning trained models into translations. `ensemble`: several trained models
decoding as one."""

from tfm.prediction.ensemble import Ensemble, EnsembleCache, mean_probability_logits

__all__ = ["Ensemble", "EnsembleCache", "mean_probability_logits"]
