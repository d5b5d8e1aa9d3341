"""Subword vocabularies: byte-pair encoding (BPE) trained with HuggingFace `tokenizers`.

Deviation from §5.1: the paper uses byte-pair encoding for EN-DE with a shared source-target
vocabulary of about 37000 tokens; we train BPE on the corpus at hand (default 8000 tokens), one
joint vocabulary by default (so embeddings can be shared, §3.4), separate ones as an option.

Pipeline, chosen so that `decode(encode(text))` gives back natural text:
- normalizer: NFC, every run of Unicode whitespace (tabs, non-breaking spaces) -> one space,
  leading and trailing whitespace stripped. Round trips are exact up to these three.
- pre-tokenizer: SentencePiece-style Metaspace (a space becomes "▁" glued to the next word),
  then punctuation split off words ("▁(", "Mann", ".") and digit runs off letters. Merges are
  spent on words, not on "Frau." vs "Frau,"; the decoder only concatenates pieces and turns "▁"
  back into spaces, so no space ever appears before punctuation. Pieces stay readable ("▁Mädchen")
  for attention plots, which byte-level BPE ("Ã¤") would not give.
- unseen characters: every character of the training text is in the vocabulary (min_frequency
  limits merges, never characters). With byte fallback (`BYTE_TOKENS`, ids 4-259) a character
  never seen in training encodes as the byte tokens of its UTF-8 ("<0xE7>", "<0x8C>", "<0xAB>")
  and decodes back to itself, so any text round trips; without it, as `<unk>` (a run of them as
  one), and encode_* logs a warning with the count. Byte fallback is on when the training text
  foretells unseen characters (`wants_byte_fallback`): the 256 byte tokens count in the
  vocabulary size, which a corpus with a closed alphabet (the toy's) spends better on merges.
- text without spaces (Japanese, Chinese) is one Metaspace word between punctuation marks, as
  SentencePiece treats it: BPE learns its merges inside the sentence, words and endings alike
  ("知らせを聞いて"). Splitting it where the script changes (kanji from kana) would cut words
  from their endings ("知 らせを"); docs/experiments.md has the measurements.
- special tokens `<pad>`, `<s>`, `</s>`, `<unk>` have the fixed ids 0-3 and exist only as ids:
  the literal text "<s>" in a sentence is ordinary characters, never the BOS id.
- tags (`tags`, e.g. `<bt>` before the source of a back-translated pair, `<2pt>` before one to
  translate into Portuguese) are reserved tokens after the specials and bytes, on the source
  side: tfm puts "<bt> " before a sentence, and the text "<bt>" always encodes as the tag's one
  id. Decoding drops them, so no output shows one.

File: `tokenizer.json` is ONE file for both layouts, a wrapper (see `save`) holding standard
`tokenizers` JSON objects under "shared" (joint) or "src" and "tgt" (separate).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain, islice
from pathlib import Path
from typing import cast

import numpy as np
from tokenizers import Regex, decoders, models, normalizers, pre_tokenizers, trainers
from tokenizers import Tokenizer as HfTokenizer

from tfm.atomic import atomic_write_text
from tfm.errors import DataError
from tfm.json_file import read_json

log = logging.getLogger(__name__)

PAD_ID, BOS_ID, EOS_ID, UNK_ID = 0, 1, 2, 3
SPECIAL_TOKENS = ("<pad>", "<s>", "</s>", "<unk>")  # in id order
FILE_NAME = "tokenizer.json"
FORMAT, VERSION = "tfm-tokenizer", 1
SPACE = "▁"  # U+2581, as in SentencePiece
BYTE_TOKENS = tuple(f"<0x{byte:02X}>" for byte in range(256))  # byte fallback's, after the specials
BYTE_FALLBACK_MIN_VOCAB = 8 * len(BYTE_TOKENS)  # the byte tokens take at most an eighth


def untrained(*, byte_fallback: bool = False) -> HfTokenizer:
    """tfm's pipeline (above) around an empty BPE model."""
    tok = HfTokenizer(
        models.BPE(unk_token=SPECIAL_TOKENS[UNK_ID], fuse_unk=True, byte_fallback=byte_fallback)
    )
    tok.normalizer = normalizers.Sequence(
        [normalizers.NFC(), normalizers.Replace(Regex(r"\s+"), " "), normalizers.Strip()]
    )
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Metaspace(replacement=SPACE, prepend_scheme="always", split=True),
            pre_tokenizers.Split(Regex(rf"{SPACE}?\p{{P}}"), behavior="isolated"),
            pre_tokenizers.Digits(individual_digits=False),
        ]
    )
    tok.decoder = decoders.Sequence(
        [
            decoders.ByteFallback(),  # a run of byte tokens -> its characters
            decoders.Metaspace(replacement=SPACE, prepend_scheme="always", split=True),
        ]
    )
    return tok


def wants_byte_fallback(texts: Iterable[str], alphabet: Iterable[str], vocab_size: int) -> bool:
    """Byte fallback's default: on when some character occurs only once in the training
    `texts` (or only in `alphabet`, the whole corpus's characters beyond a sample), the sign by
    Good–Turing that unseen text will hold characters training never saw, and when
    `vocab_size` leaves room (the byte tokens at most an eighth of it)."""
    if vocab_size < BYTE_FALLBACK_MIN_VOCAB:
        return False
    counts = np.zeros(0, np.int64)  # by code point
    rest = iter(texts)
    while chunk := list(islice(rest, 10_000)):
        found = np.bincount(np.frombuffer("".join(chunk).encode("utf-32-le"), dtype=np.uint32))
        if len(found) > len(counts):
            counts = np.pad(counts, (0, len(found) - len(counts)))
        counts[: len(found)] += found
    once = (chr(point) for point in np.flatnonzero(counts == 1))
    unseen = (c for c in alphabet if ord(c) >= len(counts) or not counts[ord(c)])
    return any(not c.isspace() for c in once) or next(unseen, None) is not None


def tag_token(name: str) -> str:
    """The token of the tag `name`: `<bt>` for `bt`."""
    return f"<{name}>"


def _train_one(
    texts: Sequence[str],
    side: str,
    *,
    vocab_size: int,
    min_frequency: int,
    alphabet: Sequence[str] = (),
    byte_fallback: bool | None,
    tags: Sequence[str] = (),
    progress: bool = False,
) -> HfTokenizer:
    n_lines = len(texts)
    if not any(text.strip() for text in texts):
        raise DataError(f"cannot train a tokenizer: the {side} text is empty ({n_lines} lines)")
    if byte_fallback is None:
        byte_fallback = wants_byte_fallback(texts, alphabet, vocab_size)
    bytes_ = BYTE_TOKENS if byte_fallback else ()
    tag_tokens = [tag_token(name) for name in tags]
    tok = untrained(byte_fallback=byte_fallback)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *bytes_, *tag_tokens],  # ids 0-3, bytes 4-259, tags
        show_progress=progress,
        initial_alphabet=list(alphabet),  # [] is the trainer's default
    )
    tok.train_from_iterator(texts, trainer, length=n_lines)
    if tok.get_vocab_size() > vocab_size:  # the trainer keeps every character, whatever the size
        fixed = len(SPECIAL_TOKENS) + len(bytes_) + len(tag_tokens)
        with_bytes = f" and the {len(bytes_)} byte tokens" if bytes_ else ""
        with_bytes += f" and {len(tag_tokens)} tag(s)" if tag_tokens else ""
        raise DataError(
            f"vocab_size={vocab_size} is too small: the {side} text has "
            f"{tok.get_vocab_size() - fixed} distinct characters, which with the "
            f"{len(SPECIAL_TOKENS)} special tokens{with_bytes} need at least "
            f"{tok.get_vocab_size()}"
        )
    # Specials and bytes stay in the vocabulary but are not matched in input text; tags are.
    spec = json.loads(tok.to_str())
    spec["added_tokens"] = [t for t in spec["added_tokens"] if t["content"] in tag_tokens]
    return HfTokenizer.from_str(json.dumps(spec, ensure_ascii=False))


def train_tokenizer(
    src_texts: Sequence[str],
    tgt_texts: Sequence[str],
    *,
    vocab_size: int = 8000,
    min_frequency: int = 2,
    joint: bool = True,
    alphabets: Mapping[str, Sequence[str]] | None = None,
    byte_fallback: bool | None = None,
    tags: Sequence[str] = (),
    progress: bool = False,
) -> Tokenizer:
    """Train BPE on the training split; deterministic for the same texts and settings.

    `alphabets` ({"src": chars, "tgt": chars}) adds characters to each vocabulary that the texts
    may lack: those of a whole corpus when BPE learns from a sample of it
    (`tfm.data.cache.entry_encoding`).
    `byte_fallback` None decides it per vocabulary by `wants_byte_fallback`.
    `tags` are names of tags the source side reserves (module docstring).
    `progress` shows the `tokenizers` trainer's own progress bars on stderr.
    """
    alphabets = alphabets or {"src": (), "tgt": ()}
    if tags:  # the trainer would learn merges of a tag's characters: it learns the text only
        src_texts = untagged(src_texts, tags)
    if min_frequency < 1:
        raise ValueError(f"min_frequency={min_frequency} must be at least 1")
    start = time.perf_counter()
    if joint:
        texts = list(chain(src_texts, tgt_texts))
        shared = _train_one(
            texts,
            "source+target",
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            alphabet=sorted({*alphabets["src"], *alphabets["tgt"]}),
            byte_fallback=byte_fallback,
            tags=tags,
            progress=progress,
        )
        result = Tokenizer(src=shared, tgt=shared)
    else:
        src, tgt = (
            _train_one(
                texts,
                name,
                vocab_size=vocab_size,
                min_frequency=min_frequency,
                alphabet=alphabets[side],
                byte_fallback=byte_fallback,
                tags=tags if side == "src" else (),
                progress=progress,
            )
            for texts, name, side in ((src_texts, "source", "src"), (tgt_texts, "target", "tgt"))
        )
        result = Tokenizer(src=src, tgt=tgt)
    log.info(
        "trained %s BPE: %d source / %d target tokens (byte fallback: %s) in %.1f s",
        "joint" if joint else "separate",
        result.src_vocab_size,
        result.tgt_vocab_size,
        "/".join(dict.fromkeys("on" if _has_bytes(tok) else "off" for tok in result.bpe_models)),
        time.perf_counter() - start,
    )
    return result


def untagged(texts: Sequence[str], tags: Sequence[str]) -> list[str]:
    """`texts` without the tags (of `tags`) that start some of them, and the spaces after
    them."""
    tokens = tuple(tag_token(name) for name in tags)
    return [_after_tags(text, tokens) if text.startswith(tokens) else text for text in texts]


def _after_tags(text: str, tokens: tuple[str, ...]) -> str:
    while token := next((token for token in tokens if text.startswith(token)), None):
        text = text[len(token) :].lstrip(" ")
    return text


class Tokenizer:
    """Source and target subword vocabularies; `joint` when both sides share one (src is tgt)."""

    def __init__(self, *, src: HfTokenizer, tgt: HfTokenizer) -> None:
        self._src, self._tgt = src, tgt

    @property
    def joint(self) -> bool:
        return self._src is self._tgt

    @property
    def src_vocab_size(self) -> int:
        return self._src.get_vocab_size()

    @property
    def tgt_vocab_size(self) -> int:
        return self._tgt.get_vocab_size()

    @property
    def tags(self) -> tuple[str, ...]:
        """The names of the tags the source side reserves (`bt` for `<bt>`), in id order."""
        return tuple(token[1:-1] for _, token in sorted(_tag_tokens(self._src).items()))

    def tag_id(self, name: str) -> int:
        """The id of the tag `name`; KeyError where the vocabulary does not reserve it."""
        found = {token: i for i, token in _tag_tokens(self._src).items()}
        return found[tag_token(name)]

    @property
    def bpe_models(self) -> tuple[HfTokenizer, HfTokenizer]:
        """The source and target `tokenizers` objects (the same one when joint)."""
        return self._src, self._tgt

    # --- text <-> ids -------------------------------------------------------------------------

    def encode_src(self, texts: Sequence[str], *, tag: str | None = None) -> list[list[int]]:
        """Subword ids per sentence, without BOS/EOS (the pipeline frames them); with `tag`,
        the tag's id first (what a model that translates into several languages reads)."""
        ids = _encode(self._src, texts, "source")
        if tag is None:
            return ids
        first = self.tag_id(tag)
        return [[first, *row] for row in ids]

    def encode_tgt(self, texts: Sequence[str]) -> list[list[int]]:
        return _encode(self._tgt, texts, "target")

    def decode_src(self, ids: Sequence[Sequence[int]]) -> list[str]:
        """Natural text per sequence; pad, BOS and EOS ids are dropped, `<unk>` stays visible."""
        return _decode(self._src, ids)

    def decode_tgt(self, ids: Sequence[Sequence[int]]) -> list[str]:
        return _decode(self._tgt, ids)

    def src_pieces(self, ids: Sequence[int]) -> list[str]:
        """One readable subword per id ("▁Mann", "."), e.g. for attention plot axes."""
        return _pieces(self._src, ids)

    def tgt_pieces(self, ids: Sequence[int]) -> list[str]:
        return _pieces(self._tgt, ids)

    # --- identity and files -------------------------------------------------------------------

    def fingerprint(self) -> str:
        """SHA-256 over the tokens in id order (per side) and the special tokens.

        Equal fingerprints mean every id maps to the same token, whatever `tokenizers` version
        wrote the file, so a checkpoint can check it was trained with this tokenizer.
        """
        sides = {"shared": self._tgt} if self.joint else {"src": self._src, "tgt": self._tgt}
        content = {
            "format": [FORMAT, VERSION],
            "specials": list(SPECIAL_TOKENS),
            "vocabularies": {name: _tokens_by_id(tok) for name, tok in sides.items()},
        }
        if self.tags:  # matched in text as well as held in the vocabulary
            content["tags"] = list(self.tags)
        canonical = json.dumps(content, ensure_ascii=False, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()

    def save(self, directory: Path) -> list[Path]:
        """Write `directory/tokenizer.json` (atomically) and return the paths written.

        Layout: {"format": "tfm-tokenizer", "version": 1, "joint": bool, "fingerprint": str,
        "tokenizers": {"shared": T} or {"src": T, "tgt": T}}, where each T is a standard
        `tokenizers` JSON object (`tokenizers.Tokenizer.from_str(json.dumps(T))` loads it).
        """
        if self.joint:
            sides = {"shared": self._tgt}
        else:
            sides = {"src": self._src, "tgt": self._tgt}
        wrapper = {
            "format": FORMAT,
            "version": VERSION,
            "joint": self.joint,
            "fingerprint": self.fingerprint(),
            "tokenizers": {name: json.loads(tok.to_str()) for name, tok in sides.items()},
        }
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        path = directory / FILE_NAME
        atomic_write_text(json.dumps(wrapper, ensure_ascii=False) + "\n", path)
        return [path]

    @classmethod
    def load(cls, directory: Path) -> Tokenizer:
        """Read what `save` wrote; a missing, corrupt or foreign file raises DataError."""
        path = Path(directory) / FILE_NAME
        missing = f"{path}: tokenizer file not found"
        wrapper = read_json(path, error=DataError, missing=missing, what="tokenizer file")
        try:
            if wrapper.get("format") != FORMAT or wrapper.get("version") != VERSION:
                raise ValueError(f"not a {FORMAT} version {VERSION} file")
            sides = {k: _from_json(v) for k, v in wrapper["tokenizers"].items()}
            if wrapper["joint"]:
                result = cls(src=sides["shared"], tgt=sides["shared"])
            else:
                result = cls(src=sides["src"], tgt=sides["tgt"])
        except Exception as err:  # the Rust side raises plain Exception
            raise DataError(
                f"{path}: corrupt tokenizer file ({type(err).__name__}: {err})"
            ) from None
        if result.fingerprint() != wrapper.get("fingerprint"):
            raise DataError(f"{path}: corrupt tokenizer file (fingerprint does not match content)")
        return result


def _from_json(spec: object) -> HfTokenizer:
    tok = HfTokenizer.from_str(json.dumps(spec, ensure_ascii=False))
    found = [tok.id_to_token(i) for i in range(len(SPECIAL_TOKENS))]
    if found != list(SPECIAL_TOKENS):
        raise ValueError(f"ids 0-3 are {found}, expected {list(SPECIAL_TOKENS)}")
    return tok


def _tag_tokens(tok: HfTokenizer) -> dict[int, str]:
    """The tags `tok` matches in text, by id: its only added tokens (see `_train_one`)."""
    return {i: added.content for i, added in tok.get_added_tokens_decoder().items()}


def _has_bytes(tok: HfTokenizer) -> bool:
    return bool(json.loads(tok.to_str())["model"].get("byte_fallback"))


def _tokens_by_id(tok: HfTokenizer) -> list[str]:
    return _pieces(tok, range(tok.get_vocab_size()))


def _pieces(tok: HfTokenizer, ids: Sequence[int]) -> list[str]:
    """The token string of each id (every id below the vocabulary size has one)."""
    return [cast(str, tok.id_to_token(i)) for i in ids]


def _encode(tok: HfTokenizer, texts: Sequence[str], side: str) -> list[list[int]]:
    if isinstance(texts, str):
        raise TypeError("encode_* takes a sequence of sentences, not one string")
    ids = [e.ids for e in tok.encode_batch_fast(list(texts), add_special_tokens=False)]
    n_unknown = sum(seq.count(UNK_ID) for seq in ids)
    if n_unknown:
        log.warning(
            "%d %s token(s) in %d sentences are <unk>: characters not seen in training",
            n_unknown,
            side,
            len(ids),
        )
    return ids


def _decode(tok: HfTokenizer, ids: Sequence[Sequence[int]]) -> list[str]:
    framing = {PAD_ID, BOS_ID, EOS_ID, *_tag_tokens(tok)}  # no output shows a tag
    kept = [[i for i in map(int, seq) if i not in framing] for seq in ids]
    return tok.decode_batch(kept, skip_special_tokens=False)
