"""Small models and batches for the tests that decode (transformer/, prediction/): random ids,
a random model whose outputs vary with the source, and a model trained briefly to copy."""

from collections.abc import Iterator
from contextlib import contextmanager

import torch
import torch.nn.functional as F
from torch import Tensor

from tfm.config import DecodingConfig
from tfm.prediction.settings import DecodeSettings, OutputLimit
from tfm.prediction.translate import search_ids
from tfm.transformer import ModelArgs, Transformer, build_model


def search_options(a: float = 1.0, b: int = 5, *, eos_id: int = 2) -> dict:
    """The keywords every search function takes: BOS 1, `eos_id` (one out of the vocabulary
    runs each output to its limit) and the output limit a · S + b."""
    return {"bos_id": 1, "eos_id": eos_id, "limit": OutputLimit(a, b)}


def decode_settings(decoding: dict | None = None, **asked: object) -> DecodeSettings:
    """Decode settings on the CPU in float32: the config's `decoding` keys (default: the
    schema's, greedy search, and a beam of 5 when one is asked for), with the strategy `asked`
    for as a user asks (`beam_size=4`: a beam of 4)."""
    config = DecodingConfig(**{"strategy": "greedy", "beam_size": 5, **(decoding or {})})
    return DecodeSettings.from_config(config, "cpu", "float32", asked=asked)


def padded_batch(lengths: list[int], *, vocab_size: int, pad_id: int = 0, seed: int = 0) -> Tensor:
    """Right-padded random ids (B, max(lengths)) with no pad id among the real tokens."""
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(pad_id + 1, vocab_size, (len(lengths), max(lengths)), generator=generator)
    for row, length in enumerate(lengths):
        ids[row, length:] = pad_id
    return ids


@contextmanager
def single_thread() -> Iterator[None]:
    """These models are tiny: a second thread buys nothing, and when other processes share the
    two cores, threads waiting on each other make small ops many times slower."""
    previous = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def lively_model(norm_position: str = "pre", *, vocab_size: int = 16, seed: int = 0) -> Transformer:
    """A random model with larger weights, so that its greedy outputs vary with the source
    (Xavier-initialised tiny models tend to repeat one token whatever the input)."""
    torch.manual_seed(seed)
    model = build_model(ModelArgs(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=32, n_heads=4,
        n_encoder_layers=2, n_decoder_layers=2, d_ff=64, dropout=0.0, max_len=64,
        norm_position=norm_position,
    ))  # fmt: skip
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.normal_(0.0, 2.0 / parameter.shape[-1] ** 0.5)
    return model.eval()


def copy_batch(
    n: int, generator: torch.Generator, *, vocab_size: int = 16
) -> tuple[Tensor, Tensor]:
    """Sources of 1..9 content ids (4..V-1) and targets BOS + source + EOS, right-padded."""
    lengths = torch.randint(1, 10, (n,), generator=generator).tolist()
    src = torch.zeros(n, 9, dtype=torch.long)
    tgt = torch.zeros(n, 11, dtype=torch.long)
    for row, length in enumerate(lengths):
        content = torch.randint(4, vocab_size, (length,), generator=generator)
        src[row, :length] = content
        tgt[row, : length + 2] = torch.cat([torch.tensor([1]), content, torch.tensor([2])])
    return src, tgt


def train_copy_model(*, vocab_size: int = 16, steps: int = 100) -> Transformer:
    """A post-norm model trained briefly to copy its source: its outputs depend on the source
    and end with an EOS at different steps."""
    torch.manual_seed(0)
    model = build_model(ModelArgs(
        src_vocab_size=vocab_size, tgt_vocab_size=vocab_size, d_model=32, n_heads=4,
        n_encoder_layers=1, n_decoder_layers=1, d_ff=64, dropout=0.0, max_len=64,
    ))  # fmt: skip
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    generator = torch.Generator().manual_seed(0)
    for _ in range(steps):
        src, tgt = copy_batch(32, generator, vocab_size=vocab_size)
        logits = model(src, tgt[:, :-1])
        loss = F.cross_entropy(
            logits.reshape(-1, vocab_size), tgt[:, 1:].reshape(-1), ignore_index=0
        )
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    return model.eval()


def best_ids(model, sources: list[list[int]], settings: DecodeSettings) -> list[list[int]]:
    """The best output ids of each framed source (ids + EOS): the first hypothesis of each that
    `search_ids` finds, in input order."""
    return [found[0].tokens for found in search_ids(model, sources, settings)]
