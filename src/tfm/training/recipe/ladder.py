"""The model shapes a recipe chooses from, smallest first, and what each costs.

Every rung is an encoder–decoder of §3 with shared embeddings: first the small model that small
corpora and short CPU budgets train best, then the 7.6M model of the Multi30k recipes, a step
between it and the paper's base model, the base model, and its big model (Table 3), which only a
GPU trains in a useful time. A corpus may take a rung only when it has enough target tokens for
the rung's weights (`TOKENS_PER_WEIGHT`): a model far larger than its data learns it by heart.
There is no rung of the small model's width with more layers: on Tatoeba's corpora (110,000 to
145,000 target tokens) an hour of 3 + 3 layers ended level with an hour of xs's 2 + 2 on French
and 1.4 and 2.5 chrF below it on Turkish and Japanese (docs/experiments.md), so a longer budget
gives such a corpus more epochs of xs, not depth.
"""

from __future__ import annotations

from dataclasses import dataclass

from tfm.data.tokenizer import PAD_ID
from tfm.transformer import ModelArgs

TOKENS_PER_WEIGHT = 0.05  # a rung needs 1 target token per 20 weights outside the embeddings
SHAPE_KEYS = ("d_model", "n_heads", "n_encoder_layers", "n_decoder_layers", "d_ff")


@dataclass(frozen=True)
class Shape:
    """One rung: the model section's shape keys."""

    name: str
    d_model: int
    n_heads: int
    n_encoder_layers: int
    n_decoder_layers: int
    d_ff: int

    def weights(self) -> int:
        """Weights outside the embeddings: per encoder layer, self-attention (4 D²) and the
        feed-forward block (2 D F); per decoder layer, cross-attention too (4 D² more)."""
        d, f = self.d_model, self.d_ff
        encoder = 4 * d * d + 2 * d * f
        decoder = 8 * d * d + 2 * d * f
        return self.n_encoder_layers * encoder + self.n_decoder_layers * decoder

    def parameters(self, vocab_size: int) -> int:
        """All parameters with one shared embedding table of `vocab_size` rows."""
        return self.weights() + vocab_size * self.d_model

    def describe(self) -> str:
        return f"{self.name} {self.dimensions()}"

    def dimensions(self) -> str:
        return (
            f"(d_model {self.d_model}, {self.n_heads} heads, "
            f"{self.n_encoder_layers}+{self.n_decoder_layers} layers, d_ff {self.d_ff})"
        )

    def model_args(self, *, vocab_size: int, max_len: int) -> ModelArgs:
        """The model of this shape with one shared vocabulary of `vocab_size` tokens."""
        return ModelArgs(
            src_vocab_size=vocab_size,
            tgt_vocab_size=vocab_size,
            share_embeddings=True,
            max_len=max_len,
            pad_id=PAD_ID,
            d_model=self.d_model,
            n_heads=self.n_heads,
            n_encoder_layers=self.n_encoder_layers,
            n_decoder_layers=self.n_decoder_layers,
            d_ff=self.d_ff,
        )

    def keys(self) -> dict[str, int]:
        return {key: getattr(self, key) for key in SHAPE_KEYS}

    @property
    def layers(self) -> int:
        """The deeper stack's layers."""
        return max(self.n_encoder_layers, self.n_decoder_layers)


LADDER = (
    Shape("xs", 128, 4, 2, 2, 512),
    Shape("m", 256, 8, 3, 3, 1024),
    Shape("l", 384, 6, 4, 4, 1536),
    Shape("base", 512, 8, 6, 6, 2048),
    Shape("big", 1024, 16, 6, 6, 4096),
)
GPU_ONLY = ("big",)  # 176M weights: weeks of a CPU


def largest_for(tgt_tokens: int, *, gpu: bool = False) -> int:
    """The index of the largest rung the corpus has enough target tokens for (at least 0), of
    those the device trains (`GPU_ONLY` rungs on a GPU)."""
    fits = [
        i
        for i, shape in enumerate(LADDER)
        if shape.weights() * TOKENS_PER_WEIGHT <= tgt_tokens and (gpu or shape.name not in GPU_ONLY)
    ]
    return fits[-1] if fits else 0
