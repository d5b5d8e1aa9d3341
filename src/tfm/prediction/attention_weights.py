"""The attention weights of one translated sentence, ready to draw.

The sentence is translated greedily (cached, fast path); then the model runs once more over the
source and the tokens it produced with `Transformer.attention_maps`, the explicit
softmax(Q K^T / sqrt(d_k)) path, which returns the very weights the fast path multiplies the
values with (tests/prediction/test_attention_weights.py checks that against the fused kernel's
output).

Rows and columns, for each kind:
- encoder: source token attends to source token; both axes are the source pieces (with </s>).
- decoder: masked self-attention over the decoder's input (<s> and the tokens produced); query j
  sees keys 0..j only, so everything above the diagonal is exactly 0 (§3.2.3).
- cross:   row j is the query that produced output token j (the last one is </s> when the model
  stopped by itself); columns are the source pieces.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

import torch
from torch import Tensor

from tfm.data.tokenizer import BOS_ID, EOS_ID, Tokenizer
from tfm.errors import UsageError
from tfm.prediction.settings import OutputLimit
from tfm.prediction.strategies import GreedySearch
from tfm.transformer import Transformer

log = logging.getLogger(__name__)

KINDS = ("cross", "encoder", "decoder")


@dataclass(frozen=True)
class AttentionView:
    """One kind of attention for one sentence: weights (L, H, Tq, Tk), one row per query token,
    one column per key token; each row sums to 1. `src_ids` and `tgt_ids` are the model's
    inputs the weights were computed from (source with </s>, decoder input with <s>)."""

    kind: str
    weights: Tensor  # (L, H, Tq, Tk)
    query_tokens: list[str]
    key_tokens: list[str]
    source: str
    translation: str
    src_ids: list[int]
    tgt_ids: list[int]

    @property
    def n_layers(self) -> int:
        return self.weights.size(0)

    @property
    def n_heads(self) -> int:
        return self.weights.size(1)


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise UsageError(f"--kind {kind!r}: expected one of {', '.join(KINDS)}")
    return kind


def attention_views(
    model: Transformer,
    tokenizer: Tokenizer,
    sentence: str,
    *,
    limit: OutputLimit,
    source: list[int] | None = None,
    tag: str | None = None,
) -> dict[str, AttentionView]:
    """Translate `sentence` once (greedily, its output at most `limit` tokens) and return every
    kind of its attention weights, by kind; `source`: its ids as the caller already encoded and
    cut them (with </s>), else they are encoded here (after `tag`, the target language's in a
    model trained into several). Logs nothing of the sentence: a server
    calls it with what its users type."""
    if not sentence.strip():
        raise UsageError("the sentence is empty; give the text to translate")
    model.eval()
    device = next(model.parameters()).device
    if source is not None:
        src = source
    else:
        pieces = tokenizer.encode_src([sentence.strip()], tag=tag)[0]
        if len(pieces) >= model.max_len:
            log.warning("the sentence has %d tokens; cut to the model's %d", len(pieces),
                        model.max_len)  # fmt: skip
        src = pieces[: model.max_len - 1] + [EOS_ID]
    src_ids = torch.tensor([src], device=device)  # (1, S)
    [[(tokens, _)]] = GreedySearch().searcher(device)(model, src_ids, limit, 1)
    stopped = len(tokens) < limit.tokens(len(src), model.max_len)
    if stopped:  # the model stopped with </s>: the last query produced it
        decoder_input, produced = [BOS_ID, *tokens], [*tokens, EOS_ID]
    else:  # cut at the length limit: the query after the last token never ran
        decoder_input, produced = [BOS_ID, *tokens[:-1]], tokens
    tgt_ids = torch.tensor([decoder_input], device=device)  # (1, T)
    maps = model.attention_maps(src_ids, tgt_ids)
    source_tokens = tokenizer.src_pieces(src)
    axes = {
        "encoder": (source_tokens, source_tokens),
        "decoder": (tokenizer.tgt_pieces(decoder_input), tokenizer.tgt_pieces(decoder_input)),
        "cross": (tokenizer.tgt_pieces(produced), source_tokens),
    }
    translation = tokenizer.decode_tgt([tokens])[0]
    return {
        kind: AttentionView(
            kind,
            torch.cat(maps[kind], dim=0).float().cpu(),  # (L, H, Tq, Tk)
            query_tokens,
            key_tokens,
            sentence.strip(),
            translation,
            src,
            decoder_input,
        )
        for kind, (query_tokens, key_tokens) in axes.items()
    }
