"""The encoder-decoder Transformer of "Attention Is All You Need" (Vaswani et al., 2017), from
scratch: one module per section of the paper, plus decoding.

Shape legend, used in every docstring and trailing shape comment:

    B  batch size                 S  source length           T  target length
    D  d_model                    H  number of heads         K  d_k = d_v = D / H
    F  d_ff                       V  vocabulary size

Masks are boolean, True = may attend, broadcastable to (B, H, Tq, Tk).

Modules: attention (§3.2), feed_forward (§3.3), embedding (§3.4, §3.5), layers (§3.1),
dropout (§5.4), args (the model's shape), model (§3), packing (batches without padding, for
training), decoding (search over any `Decodable`: greedy and sampling), beam (beam search as in
§6.1).
"""

from tfm.transformer.args import ModelArgs
from tfm.transformer.beam import beam_search, gnmt_length_penalty
from tfm.transformer.decoding import (
    Decodable,
    DecodeResult,
    Hypothesis,
    LengthLimit,
    greedy_decode,
    sample_decode,
)
from tfm.transformer.dropout import Dropout
from tfm.transformer.embedding import PositionalEncoding, TokenEmbedding, sinusoidal_table
from tfm.transformer.feed_forward import PositionwiseFeedForward
from tfm.transformer.layers import Decoder, DecoderCache, DecoderLayer, Encoder, EncoderLayer
from tfm.transformer.model import Transformer, build_model, parameter_count
from tfm.transformer.multihead_attention import (
    KeyValue,
    KeyValueCache,
    MultiHeadAttention,
    scaled_dot_product_attention,
)
from tfm.transformer.packing import PackedBatch, PackedMask, Packing

__all__ = [
    "Decodable",
    "DecodeResult",
    "Decoder",
    "Dropout",
    "DecoderCache",
    "DecoderLayer",
    "Encoder",
    "EncoderLayer",
    "Hypothesis",
    "KeyValue",
    "LengthLimit",
    "KeyValueCache",
    "ModelArgs",
    "MultiHeadAttention",
    "PackedBatch",
    "PackedMask",
    "Packing",
    "PositionalEncoding",
    "PositionwiseFeedForward",
    "TokenEmbedding",
    "Transformer",
    "beam_search",
    "build_model",
    "gnmt_length_penalty",
    "greedy_decode",
    "parameter_count",
    "sample_decode",
    "scaled_dot_product_attention",
    "sinusoidal_table",
]
