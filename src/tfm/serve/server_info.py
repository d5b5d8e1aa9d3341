"""What GET /info says: the model and its languages, the default decoding strategy and its
settings, the limits a request must keep to, whether translations come with confidences, whether
/attention can answer, and whether a key is needed."""

from __future__ import annotations

from tfm.prediction.translator import Translator
from tfm.serve.request_limits import MAX_SERVE_BEAM, ServeLimits


def server_info(translator: Translator, limits: ServeLimits, *, auth: bool) -> dict:
    config, settings = translator.config, translator.settings
    model = config.model
    return {
        "engine": translator.engine,
        "src_lang": config.data.src_lang,
        "tgt_lang": config.data.tgt_lang,
        # what a request's tgt_lang may ask for: the languages its training read
        "tgt_langs": list(translator.tgt_langs or config.data.target_languages()),
        "step": translator.step,
        "model": {
            "d_model": model.d_model,
            "n_heads": model.n_heads,
            "d_ff": model.d_ff,
            "n_encoder_layers": model.n_encoder_layers,
            "n_decoder_layers": model.n_decoder_layers,
            "max_len": model.max_len,
        },
        "decoding": {
            **settings.strategy.describe(),
            "max_len_a": settings.limit.a,
            "max_len_b": settings.limit.b,
        },
        "limits": {
            "max_sentences": limits.max_sentences,
            "max_chars": limits.max_chars,
            "max_body_bytes": limits.max_body_bytes,
            "max_tokens": limits.max_tokens,
            "max_beam_tokens": limits.max_beam_tokens,
            "max_beam_size": MAX_SERVE_BEAM,
            "timeout_s": limits.timeout_s,
        },
        "confidence": confidence_info(translator),
        "attention": translator.shows_attention,
        "auth": auth,
    }


def confidence_info(translator: Translator) -> dict:
    """Whether answers carry confidences, the low mark a page flags below and the strategy
    whose translations the map reads (greedy and beam search read alike); or why not."""
    found = translator.confidence_map
    if found is None:  # the reason, which names the server's files, is in its log
        return {"map": False, "why": "the model has no confidence map (tfm calibrate fits one)"}
    return {"map": True, "low": found.low, "strategy": found.strategy, "fitted": found.fitted}
