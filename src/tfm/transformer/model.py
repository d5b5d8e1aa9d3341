"""§3 Model Architecture: the encoder-decoder Transformer, and `build_model`, its one builder.

Deviation from §3 (not in the paper): every weight matrix starts Xavier-uniform and every bias at
zero; the output projection has no bias.
"""

from typing import Any, NamedTuple

import torch
from torch import Tensor, nn

from tfm.transformer.args import ModelArgs
from tfm.transformer.dropout import Dropout
from tfm.transformer.embedding import PositionalEncoding, TokenEmbedding
from tfm.transformer.layers import Decoder, DecoderCache, Encoder
from tfm.transformer.packing import PackedBatch, PackedMask


class DecodeStep(NamedTuple):
    logits: Tensor  # (B, V), for the last target position only
    cross_weights: list[Tensor]  # per layer (B, H, T_new, S); empty unless asked for
    cache: Any  # the cache including the new positions (a DecoderCache for one model)


class Transformer(nn.Module):
    """Source ids (B, S) and shifted target ids (B, T) -> logits (B, T, V); build with
    `build_model`.

    Padding is given by `args.pad_id`; sources may be padded anywhere, targets only on the right
    (the causal mask then hides target padding from every real position).
    With `share_embeddings`, source and target share one embedding (a joint vocabulary); with
    `tie_output`, the pre-softmax projection uses the target embedding matrix (§3.4).
    """

    def __init__(self, args: ModelArgs) -> None:
        super().__init__()
        self.args = args
        self.pad_id = args.pad_id
        self.src_embedding = TokenEmbedding(vocab_size=args.src_vocab_size, d_model=args.d_model)
        self.tgt_embedding = (
            self.src_embedding
            if args.share_embeddings
            else TokenEmbedding(vocab_size=args.tgt_vocab_size, d_model=args.d_model)
        )
        self.positional_encoding = PositionalEncoding(d_model=args.d_model, max_len=args.max_len)
        self.embedding_dropout = Dropout(args.dropout)  # §5.4: on the sums of embeddings and PE
        self.encoder = Encoder(args)
        self.decoder = Decoder(args)
        self.output_projection = nn.Linear(args.d_model, args.tgt_vocab_size, bias=False)
        self._init_parameters()
        if args.tie_output:
            self.output_projection.weight = self.tgt_embedding.weight

    def _init_parameters(self) -> None:
        for name, parameter in self.named_parameters():
            if parameter.dim() > 1:
                nn.init.xavier_uniform_(parameter)
            elif name.endswith("bias") and "norm" not in name:
                nn.init.zeros_(parameter)

    @property
    def max_len(self) -> int:
        """The longest source or target the positional table covers."""
        return self.positional_encoding.max_len

    def source_mask(self, src_ids: Tensor) -> Tensor | None:
        """Key padding mask (B, 1, 1, S), True = real token; None when nothing is padding, so
        attention can skip masking altogether (on the CPU, not under torch.compile)."""
        is_real = src_ids != self.pad_id  # (B, S)
        if skips_unneeded_masks(src_ids) and bool(is_real.all()):
            return None
        return is_real[:, None, None, :]  # (B, 1, 1, S)

    def _embed(
        self,
        ids: Tensor,
        embedding: TokenEmbedding,
        offset: int = 0,
        positions: Tensor | None = None,
    ) -> Tensor:
        x = self.positional_encoding(embedding(ids), offset=offset, positions=positions)
        return self.embedding_dropout(x)  # (B, T, D)

    def encode(self, src_ids: Tensor) -> Tensor:
        """src_ids (B, S) long -> memory (B, S, D)."""
        memory, _ = self.encoder(
            self._embed(src_ids, self.src_embedding), mask=self.source_mask(src_ids)
        )
        return memory

    def decode(
        self,
        tgt_ids: Tensor,
        memory: Tensor,
        src_ids: Tensor,
        *,
        keep: Tensor | None = None,
        project: bool = True,
    ) -> Tensor:
        """tgt_ids (B, T) long, memory (B, S, D) from `encode(src_ids)`, and src_ids (B, S) itself,
        used only for the cross-attention padding mask -> logits (B, T, V), or (N, V) for the N
        positions where `keep` (B, T) bool is True, in row-major order. Without `project`, the
        decoder's output (…, D) instead of the logits, for a loss that applies
        `output_projection` itself."""
        output = self.decoder(
            self._embed(tgt_ids, self.tgt_embedding), memory, memory_mask=self.source_mask(src_ids)
        )
        hidden = output.hidden  # (B, T, D)
        if keep is not None:
            hidden = hidden[keep]  # (N, D)
        if not project:
            return hidden
        return self.output_projection(hidden)  # (B, T, V) or (N, V)

    def forward(
        self,
        src_ids: Tensor,
        tgt_ids: Tensor,
        *,
        keep: Tensor | None = None,
        project: bool = True,
        packed: PackedBatch | None = None,
    ) -> Tensor:
        """src_ids (B, S) long, tgt_ids (B, T) long (shifted right) -> logits (B, T, V).

        With `keep` (B, T) bool, only the logits of the kept positions, (N, V) in row-major
        order: training keeps the positions with a real target, so that padding costs no
        vocabulary projection (the largest matrix product of a step) and no softmax. Without
        `project`, the decoder's output instead of logits (see `decode`).

        With `packed`, a packed batch (packing.py): src_ids (1, M) and tgt_ids (1, N) are its
        real tokens in row-major order, and the result is (N, V) (or (N, D)): what `keep` of
        its real target positions gives for the padded batch, with nothing computed for
        padding."""
        if packed is not None:
            return self._forward_packed(src_ids, tgt_ids, packed, project=project)
        return self.decode(tgt_ids, self.encode(src_ids), src_ids, keep=keep, project=project)

    def _forward_packed(
        self, src_ids: Tensor, tgt_ids: Tensor, packed: PackedBatch, *, project: bool
    ) -> Tensor:
        src, tgt = packed.src, packed.tgt
        if max(src.width, tgt.width) > self.max_len:
            raise ValueError(
                f"input length {max(src.width, tgt.width)} is longer than the positional "
                f"encoding table max_len={self.max_len}"
            )
        memory, _ = self.encoder(
            self._embed(src_ids, self.src_embedding, positions=src.positions),
            mask=PackedMask(src, src),
        )  # (1, M, D)
        output = self.decoder(
            self._embed(tgt_ids, self.tgt_embedding, positions=tgt.positions),
            memory,
            memory_mask=PackedMask(tgt, src),
        )
        hidden = output.hidden[0]  # (N, D)
        return self.output_projection(hidden) if project else hidden

    def start_cache(self, memory: Tensor, src_ids: Tensor, *, capacity: int = 64) -> DecoderCache:
        """An empty decoding cache for memory (B, S, D) of src_ids (B, S), with room for
        `capacity` target positions before it grows; the cross-attention keys and values are
        computed here, once."""
        return self.decoder.start_cache(memory, self.source_mask(src_ids), capacity=capacity)

    def decode_step(
        self, tgt_ids: Tensor, cache: DecoderCache, *, need_weights: bool = False
    ) -> DecodeStep:
        """Decode the next target positions tgt_ids (B, T_new), given the cache of the earlier
        ones. Returns the logits of the last position (B, V), the cross-attention weights if asked
        for and the extended cache."""
        x = self._embed(tgt_ids, self.tgt_embedding, offset=cache.length)  # (B, T_new, D)
        output = self.decoder(x, None, cache=cache, need_weights=need_weights)
        logits = self.output_projection(output.hidden[:, -1])  # (B, V)
        return DecodeStep(logits, output.cross_weights, output.cache)

    @torch.no_grad()
    def attention_maps(self, src_ids: Tensor, tgt_ids: Tensor) -> dict[str, list[Tensor]]:
        """Per-head attention weights of every layer, computed with the explicit path, for plots:
        {"encoder": per layer (B, H, S, S), "decoder": per layer (B, H, T, T),
        "cross": per layer (B, H, T, S)}. Call `eval()` first for dropout-free maps."""
        src_mask = self.source_mask(src_ids)
        memory, encoder_weights = self.encoder(
            self._embed(src_ids, self.src_embedding), mask=src_mask, need_weights=True
        )
        output = self.decoder(
            self._embed(tgt_ids, self.tgt_embedding),
            memory,
            memory_mask=src_mask,
            need_weights=True,
        )
        return {
            "encoder": encoder_weights,
            "decoder": output.self_weights,
            "cross": output.cross_weights,
        }


def build_model(args: ModelArgs) -> Transformer:
    """The one way to build the model: from its `ModelArgs`, with freshly initialised weights.

    Raises ValueError, naming the values, for inconsistent sizes or unknown option strings.
    """
    return Transformer(args)


def parameter_count(args: ModelArgs) -> int:
    """The trainable parameters `build_model(args)` has, a shared or tied matrix counted once,
    without building it: an attention block is `w_qkv` (3D × D, bias 3D) and `w_o` (D × D, bias
    D); a feed-forward block two layers (D × F, F × D, biases); a residual a LayerNorm (2D); a
    pre-norm stack one more at its end."""
    d, f = args.d_model, args.d_ff
    attention, feed_forward, norm = 4 * d * d + 4 * d, 2 * d * f + f + d, 2 * d
    last_norm = norm if args.norm_position == "pre" else 0
    encoder = args.n_encoder_layers * (attention + feed_forward + 2 * norm) + last_norm
    decoder = args.n_decoder_layers * (2 * attention + feed_forward + 3 * norm) + last_norm
    embeddings = args.src_vocab_size * d + (0 if args.share_embeddings else args.tgt_vocab_size * d)
    projection = 0 if args.tie_output else args.tgt_vocab_size * d
    return embeddings + encoder + decoder + projection


def skips_unneeded_masks(ids: Tensor) -> bool:
    """Whether to look for padding before masking: only where the ids are in host memory. On a
    GPU, the look would make the host wait for the device at every forward; under torch.compile,
    a branch on the data would break the graph."""
    return ids.device.type == "cpu" and not torch.compiler.is_compiling()
