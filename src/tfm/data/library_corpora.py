"""Pairs from the sources that are not files: a HuggingFace hub dataset, a folder that
`datasets.save_to_disk` wrote, and the built-in toy corpus; each read whole.

Only `hub` touches the network, and only `hub` and `disk` import `datasets` (with pandas and
pyarrow, a second of start-up that the other formats do not pay). `corpus.stream_split` cleans
what these read as it cleans the files' pairs.
"""

from __future__ import annotations

import functools
from pathlib import Path
from typing import TYPE_CHECKING

from tfm.config import DataConfig, SourceConfig, ToyConfig
from tfm.data.formats import Pairs, field_names, nested_default
from tfm.errors import DataError
from tfm.logs import quieted

if TYPE_CHECKING:
    import datasets

_STRING_TYPES = ("string", "large_string")


# --- hub and disk: one path from a Dataset(Dict) to pairs ------------------------------------


def read_hub(source: SourceConfig, *, split: str, key: str, **langs: str) -> Pairs:
    import datasets

    name = source.split or split
    try:
        with quieted("huggingface_hub", "datasets"):  # their retries: tfm's error says it
            dataset = datasets.load_dataset(source.name, split=name)
    except datasets.exceptions.DatasetNotFoundError:
        raise DataError(f"hub dataset '{source.name}' not found; check {key}.name") from None
    except OSError as exc:  # ConnectionError, timeouts, offline mode
        raise DataError(
            f"could not reach the HuggingFace hub for '{source.name}' ({type(exc).__name__}); "
            f"use a local copy instead: {key}.format: disk with {key}.path: <folder from "
            f"save_to_disk>, or {key}.format: text with {key}.path: <prefix of the "
            f"{{path}}.{langs['src_lang']} and {{path}}.{langs['tgt_lang']} files>"
        ) from None
    except ValueError as exc:
        if "split" not in str(exc).lower():
            raise
        raise DataError(
            f"hub dataset '{source.name}' has no split '{name}'; set {key}.split"
        ) from None
    return _from_dataset(dataset, source, split=split, key=key, origin=str(source.name), **langs)


def check_disk_folder(source: SourceConfig, *, key: str) -> None:
    if not Path(source.path or "").is_dir():  # the schema requires a path for format disk
        raise DataError(f"{source.path}: no such folder (check {key}.path)")


def read_disk(source: SourceConfig, *, split: str, key: str, **langs: str) -> Pairs:
    check_disk_folder(source, key=key)
    path = source.path or ""
    import datasets

    try:
        dataset = datasets.load_from_disk(path)
    except FileNotFoundError:
        raise DataError(
            f"{source.path}: not a folder written by datasets' save_to_disk (check {key}.path)"
        ) from None
    return _from_dataset(dataset, source, split=split, key=key, origin=path, **langs)


def _from_dataset(
    dataset: datasets.Dataset | datasets.DatasetDict,
    source: SourceConfig,
    *,
    split: str,
    key: str,
    origin: str,
    src_lang: str,
    tgt_lang: str,
) -> Pairs:
    """Pick the split (of a DatasetDict) and the two columns named by `source.fields`."""
    import datasets

    if isinstance(dataset, datasets.DatasetDict):
        name = source.split or split
        if name not in dataset:
            available = ", ".join(dataset)
            raise DataError(f"{origin}: no split '{name}' (splits: {available}); set {key}.split")
        dataset, origin = dataset[name], f"{origin} [{name}]"
    elif source.format == "disk" and source.split:
        raise DataError(f"{origin} holds one Dataset without splits; remove {key}.split")
    names = field_names(source.fields, src_lang=src_lang, tgt_lang=tgt_lang, key=key)
    if any(name not in dataset.column_names for name in names):
        dataset = dataset.flatten()  # nested columns become "translation.de" etc.
        names = [
            nested_default(source.fields, lang, name, dataset.column_names.__contains__)
            for lang, name in zip((src_lang, tgt_lang), names, strict=True)
        ]
    for lang, name in zip((src_lang, tgt_lang), names, strict=True):
        if name not in dataset.column_names:
            columns = ", ".join(dataset.column_names)
            raise DataError(
                f"{origin}: no column '{name}' for '{lang}' (columns: {columns}); set {key}.fields"
            )
        feature = dataset.features[name]
        if getattr(feature, "dtype", None) not in _STRING_TYPES:
            raise DataError(f"{origin}: column '{name}' holds {feature}, expected strings")
    columns = dataset.select_columns(names).to_dict()
    src, tgt = ([text or "" for text in columns[name]] for name in names)  # null: empty side
    return Pairs(src, tgt, origin, "row")


# --- toy -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=4)
def _toy_corpus(n_train: int, n_validation: int, n_test: int, seed: int) -> dict:
    """All three toy splits come from one `generate` call, made once per sizes and seed."""
    from tfm.data.toy import generator as toy  # here, not at the top: only the toy format needs it

    return toy.generate(n_train=n_train, n_validation=n_validation, n_test=n_test, seed=seed)


def toy_has_languages(src_lang: str, tgt_lang: str) -> bool:
    """Whether the built-in toy corpus (English–German, either way) is in these languages."""
    return {src_lang, tgt_lang} == {"en", "de"}


def check_toy_split(data: DataConfig, split: str) -> None:
    """DataError where the toy corpus cannot be `split` of `data`: the languages are not the
    toy's, or the model trains on another corpus (toy sentences would score it on a grammar it
    never saw: what `tfm eval` of a config that names no test split would do)."""
    _check_toy_languages(split, src_lang=data.src_lang, tgt_lang=data.tgt_lang)
    if split != "train" and data.corpus.format != "toy":
        instead = " (or score files: tfm eval --src FILE --ref FILE)" if split == "test" else ""
        raise DataError(
            f"data.{split} is the built-in toy corpus (what a config that names no {split} split "
            f"gets beside a validation split), which can only {split} a model trained on it, "
            f"not on data.train's '{data.corpus.format}' source: give data.{split} in the "
            f"config{instead}"
        )


def _check_toy_languages(split: str, *, src_lang: str, tgt_lang: str) -> None:
    if not toy_has_languages(src_lang, tgt_lang):
        instead = " (or score files: tfm eval --src FILE --ref FILE)" if split == "test" else ""
        raise DataError(
            f"data.{split} is the built-in toy corpus (what a config that names no {split} split "
            f"gets), which is English–German, but src_lang/tgt_lang are '{src_lang}'/"
            f"'{tgt_lang}': give data.{split} in the config{instead}"
        )


def read_toy(toy: ToyConfig, *, split: str, src_lang: str, tgt_lang: str) -> Pairs:
    _check_toy_languages(split, src_lang=src_lang, tgt_lang=tgt_lang)
    try:
        corpus = _toy_corpus(toy.n_train, toy.n_validation, toy.n_test, toy.seed)
    except ValueError as exc:  # sizes the grammar cannot reach
        raise DataError(f"data.toy: {exc}") from None
    if split not in corpus:
        raise DataError(f"the toy corpus has splits {', '.join(corpus)}, not '{split}'")
    english, german = zip(*corpus[split], strict=True) if corpus[split] else ((), ())
    src, tgt = (english, german) if src_lang == "en" else (german, english)
    origin = f"the toy corpus (seed {toy.seed})"
    return Pairs(list(src), list(tgt), origin, "row")
