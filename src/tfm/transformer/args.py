"""`ModelArgs`: the whole shape of a Transformer (§3, Table 3), in one frozen object.

The stacks and layers read what they need from it, the leaf modules get named arguments. It is
built once from the config (`ModelArgs.from_config`) and stored in checkpoints and model files as
a plain dict (`dataclasses.asdict`), read back with `ModelArgs.from_stored`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tfm.config import ModelConfig


@dataclass(frozen=True, kw_only=True)
class ModelArgs:
    """Sizes and options of the model; the sizes default to §3's base model (Table 3).

    A field added later defaults to what the model did before it existed (the paper's behaviour),
    so `from_stored` reads the model files written before it.
    """

    src_vocab_size: int
    tgt_vocab_size: int
    d_model: int = 512
    n_heads: int = 8
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    d_ff: int = 2048
    dropout: float = 0.1  # §5.4: residual dropout and dropout on the embedding sums
    attention_dropout: float = 0.0  # on the attention weights (not in the paper)
    activation: str = "relu"  # of the feed-forward network: "relu" (§3.3) or "gelu"
    activation_dropout: float = 0.0  # on the feed-forward hidden units (not in the paper)
    norm_position: str = "post"  # "post" (§3.1) or "pre" (see layers.py)
    share_embeddings: bool = False  # one embedding for source and target (a joint vocabulary)
    tie_output: bool = True  # §3.4: the pre-softmax projection is the target embedding matrix
    max_len: int = 512  # positions the sinusoidal table covers (§3.5)
    pad_id: int = 0

    def __post_init__(self) -> None:
        if self.share_embeddings and self.src_vocab_size != self.tgt_vocab_size:
            raise ValueError(
                f"share_embeddings needs src_vocab_size={self.src_vocab_size} to equal "
                f"tgt_vocab_size={self.tgt_vocab_size}"
            )
        if not 0 <= self.pad_id < min(self.src_vocab_size, self.tgt_vocab_size):
            raise ValueError(
                f"pad_id={self.pad_id} is outside the vocabularies "
                f"(src_vocab_size={self.src_vocab_size}, tgt_vocab_size={self.tgt_vocab_size})"
            )
        for name in ("n_encoder_layers", "n_decoder_layers"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name}={getattr(self, name)} must be at least 1")
        # The modules check the rest (heads, dropout rates, option strings) as they are built.

    @classmethod
    def from_config(cls, model_config: ModelConfig, **given: Any) -> ModelArgs:
        """The config's model section, with what the config does not hold `given` (the
        vocabulary sizes and the padding id, from the tokenizer): every field of the same name
        is copied, so a new model option needs no line here."""
        names = [f.name for f in fields(cls)]
        if missing := [n for n in names if n not in given and not hasattr(model_config, n)]:
            raise TypeError(f"ModelArgs.from_config needs {', '.join(missing)}")
        copied = {n: getattr(model_config, n) for n in names if n not in given}
        if unset := [f"model.{n}" for n, value in copied.items() if value is None]:
            raise TypeError(f"{', '.join(unset)} not set: a config the recipe has not planned")
        return cls(**copied, **given)

    @classmethod
    def from_stored(cls, stored: Mapping[str, Any]) -> ModelArgs:
        """The `model_args` dict of a checkpoint or model file; keys added since it was written
        take their defaults."""
        return cls(**stored)
