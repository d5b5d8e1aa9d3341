"""Steps 2 and 3 of writing a data-cache entry (`entry_writer`): BPE learned from the texts it
stored, then every sentence encoded, framed and appended to `{src,tgt}.ids`."""

from __future__ import annotations

import functools
import logging
import sys
from pathlib import Path

import numpy as np
from tqdm import tqdm

from tfm.config import TokenizerConfig, planned
from tfm.data.cache.cache_key import SIDES
from tfm.data.cache.entry_files import RowWriter
from tfm.data.cache.parallel_encoding import Encoding, workers_for
from tfm.data.interruptible import interruptibly
from tfm.data.ragged import OFFSETS, RaggedText, id_dtype
from tfm.data.tokenizer import BOS_ID, EOS_ID, UNK_ID, Tokenizer, train_tokenizer

log = logging.getLogger(__name__)

CHUNK = 20_000  # pairs encoded and written at a time (read: `formats.CHUNK`)
SAMPLE_SEED = 0  # of the BPE training sample: fixed, so the same data gives the same tokenizer


def progress_bar(progress: bool, **kwargs) -> tqdm:
    """A progress bar on stderr, shown when asked for and stderr is a terminal."""
    return tqdm(disable=None if progress else True, dynamic_ncols=True, leave=False, **kwargs)


def side_dtype(tokenizer: Tokenizer, side: str) -> np.dtype:
    """The id type of `side` ("src" or "tgt"): the smallest that holds its vocabulary."""
    return id_dtype(tokenizer.src_vocab_size if side == "src" else tokenizer.tgt_vocab_size)


def learn_bpe(
    texts: dict[str, RaggedText],
    settings: TokenizerConfig,
    alphabets: dict[str, set[str]],
    *,
    tags: tuple[str, ...],
    progress: bool,
) -> Tokenizer:
    """Step 2: BPE on every pair, or on a seeded sample of `settings.train_sample` pairs."""
    n, sample = len(texts["src"]), settings.train_sample

    def learn(src, tgt, **alphabets) -> Tokenizer:  # interruptible by SIGINT and SIGTERM
        work = functools.partial(
            train_tokenizer, src, tgt,
            vocab_size=planned(settings.vocab_size, "tokenizer.vocab_size"),
            min_frequency=settings.min_frequency,
            joint=settings.joint,
            byte_fallback=settings.byte_fallback,
            tags=tags,
            progress=progress and sys.stderr.isatty(),  # the trainer's bars, on a terminal only
            **alphabets,
        )  # fmt: skip
        return interruptibly(work)

    if sample is None or n <= sample:
        log.info("learning BPE from the %s training pairs", f"{n:,}")
        return learn(texts["src"], texts["tgt"])
    index = np.sort(np.random.default_rng(SAMPLE_SEED).choice(n, size=sample, replace=False))
    log.info("learning BPE from a sample of %s of the %s training pairs", f"{sample:,}", f"{n:,}")
    src, tgt = (list(texts[side].subset(index)) for side in SIDES)
    for side in SIDES:
        texts[side].release()  # the sample's rows are spread over every page of the files
    chars = {side: sorted(c for c in alphabets[side] if not c.isspace()) for side in SIDES}
    return learn(src, tgt, alphabets=chars)


def write_ids(
    texts: dict[str, RaggedText], tokenizer: Tokenizer, folder: Path, *, progress: bool
) -> dict[str, int]:
    """Step 3: every sentence encoded and framed into `{src,tgt}.ids`; tokens per side, framing
    included, and `<unk>` tokens ("src_unknown", "tgt_unknown")."""
    models = dict(zip(SIDES, tokenizer.bpe_models, strict=True))
    tokens = {}
    workers = workers_for(len(texts["src"]))
    with Encoding(models, folder, workers=workers) as encoding:
        for side in SIDES:
            dtype = side_dtype(tokenizer, side)
            writer = RowWriter(folder / f"{side}.ids", folder / f"{side}.ids-offsets.npy")
            unknown, total = 0, 0
            with progress_bar(progress, desc=f"encoding {side}", total=len(texts[side]),
                      unit=" sentences", unit_scale=True) as bar:  # fmt: skip
                for flat, lengths in encoding.chunks(side, size=CHUNK):
                    unknown += int(np.count_nonzero(flat == UNK_ID))
                    framed, framed_lengths = frame(flat.astype(dtype), lengths, bos=side == "tgt")
                    writer.add(framed.tobytes(), framed_lengths.astype(OFFSETS))
                    total += len(framed)
                    bar.update(len(lengths))
            writer.close()
            tokens[side], tokens[f"{side}_unknown"] = total, unknown
            if unknown:
                log.warning("%d %s token(s) of the training split are <unk>", unknown, side)
    return tokens


def frame(flat: np.ndarray, lengths: np.ndarray, *, bos: bool) -> tuple[np.ndarray, np.ndarray]:
    """Rows of `flat` (lengths `lengths`) as `ids + [EOS]`, or `[BOS] + ids + [EOS]` with `bos`;
    the framed values and lengths."""
    framed_lengths = lengths + (2 if bos else 1)
    ends = np.cumsum(framed_lengths)
    out = np.empty(int(ends[-1]) if len(ends) else 0, dtype=flat.dtype)
    ids = np.ones(len(out), dtype=bool)
    ids[ends - 1] = False
    out[ends - 1] = EOS_ID
    if bos:
        starts = ends - framed_lengths
        ids[starts] = False
        out[starts] = BOS_ID
    out[ids] = flat
    return out, framed_lengths
