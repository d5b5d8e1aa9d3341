"""The data cache (`tfm.data.cache.prepared_cache`, `tfm.data.cache.entry_writer`): prepared
once per content and settings,
the same ids, texts, batches and losses as the in-memory pipeline, a seeded BPE sample, a clear
error when the disk is too small, and processes that wait for the one preparing."""

import dataclasses
import logging
import random
import threading

import numpy as np
import pytest
import torch
from builders import tiny_config

from tfm.config import load_config
from tfm.data.batching import TokenBatchSampler, collate
from tfm.data.cache import bulk_encoding, entry_encoding, entry_writer
from tfm.data.cache import prepared_cache as cache
from tfm.data.cache.cache_entry import open_entry
from tfm.data.cache.cache_folder import cache_root
from tfm.data.cache.cache_key import ContentDigests, corpus_key
from tfm.data.cache.prepared_cache import prepared_entry, training_splits
from tfm.data.epochs import EpochPlan
from tfm.data.pipeline import prepare_splits
from tfm.data.ragged import RaggedIds, RaggedText
from tfm.data.tokenizer import UNK_ID
from tfm.errors import DataError, UsageError
from tfm.training import train
from tfm.training.loss import projected_loss_sum
from tfm.training.session import Session
from tfm.transformer import ModelArgs, build_model

WORDS = "der die das Hund Katze Haus sieht läuft schnell groß klein rot blau und nicht".split()


def write_corpus(folder, n, *, seed=0, name="train", extra=()):
    """`n` random pairs as `{name}.de` / `{name}.en` (the English side is the German reversed,
    upper-cased), then the pairs `extra`; returns the path prefix."""
    rng = random.Random(seed)
    pairs = []
    for _ in range(n):
        words = rng.choices(WORDS, k=rng.randint(1, 12))
        pairs.append((" ".join(words), " ".join(reversed(words)).upper()))
    pairs += list(extra)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / f"{name}.de").write_text("".join(de + "\n" for de, _ in pairs), encoding="utf-8")
    (folder / f"{name}.en").write_text("".join(en + "\n" for _, en in pairs), encoding="utf-8")
    return str(folder / name)


def config_for(tmp_path, prefix, *sets):
    valid = write_corpus(tmp_path / "data", 20, seed=99, name="valid")
    return load_config(
        None,
        [
            f"run_dir={tmp_path / 'runs' / 'run'}",
            "data.src_lang=de",
            "data.tgt_lang=en",
            f"data.train={{format: text, path: {prefix}}}",
            f"data.validation={{format: text, path: {valid}}}",
            "data.max_length=40",
            "tokenizer.vocab_size=120",
            *sets,
        ],
    )


@pytest.fixture
def counted(monkeypatch):
    """How many times an entry was written (its BPE and ids)."""
    calls = []
    real = cache.write_encoding

    def write(*args, **kwargs):
        calls.append(args[1])
        return real(*args, **kwargs)

    monkeypatch.setattr(cache, "write_encoding", write)
    return calls


def key_of(config) -> str:
    """The entry key of `config` (its vocabulary given), from the digests remembered."""
    root = cache_root(config)
    found = corpus_key(config, ContentDigests(root))
    assert found is not None
    return found.entry(config.tokenizer.vocab_size)[0]


def test_an_entry_is_prepared_once_and_an_edited_line_misses(tmp_path, counted):
    prefix = write_corpus(tmp_path / "data", 300)
    config = config_for(tmp_path, prefix)
    first = prepared_entry(config)
    assert first.path.parent == tmp_path / "runs" / ".tfm-cache"  # beside the run directory
    again = prepared_entry(config)
    assert again.path == first.path and len(counted) == 1
    assert first.where() == f"prepared data written to {first.path}"
    assert again.where() == f"prepared data in {first.path}"
    moved = write_corpus(tmp_path / "elsewhere", 300)  # the same bytes in another place: a hit
    assert prepared_entry(config_for(tmp_path, moved)).path == first.path and len(counted) == 1
    lines = (tmp_path / "data" / "train.en").read_text().splitlines()
    lines[150] += " X"
    (tmp_path / "data" / "train.en").write_text("\n".join(lines) + "\n")
    edited = prepared_entry(config)
    assert edited.path != first.path and len(counted) == 2
    other = prepared_entry(config_for(tmp_path, prefix, "tokenizer.vocab_size=100"))
    assert len({first.path, edited.path, other.path}) == 3
    assert key_of(config_for(tmp_path, prefix, "data.max_length=5")) == edited.key


def test_the_cached_split_is_the_in_memory_one(tmp_path):
    long_pair = (" ".join(WORDS * 3), " ".join(WORDS * 3).upper())  # over 40 tokens: dropped
    prefix = write_corpus(tmp_path / "data", 300, extra=[long_pair, ("   ", "leer")])
    config = config_for(tmp_path, prefix)
    splits, tokenizer, _ = training_splits(config)
    memory, memory_tokenizer = prepare_splits(config.data, config.tokenizer, ("train",))
    train, reference = splits["train"], memory["train"]
    assert tokenizer.fingerprint() == memory_tokenizer.fingerprint()
    assert isinstance(train.src, RaggedIds) and isinstance(train.src_text, RaggedText)
    assert train.src == reference.src and train.tgt == reference.tgt
    assert list(train.src_text) == reference.src_text and train.tgt_text == reference.tgt_text
    assert train.report.summary() == reference.report.summary()
    assert train.report.dropped == {"empty": 1, "too long": 1}
    assert train.src.values.dtype == np.uint8  # 120 ids fit in a byte


def test_validation_sources_that_training_reads_are_a_warning(tmp_path, caplog):
    """A held-out validation is quiet; one read from the training files is named."""
    prefix = write_corpus(tmp_path / "data", 300)
    held_out = config_for(tmp_path, prefix)
    leaked = load_config(None, [f"{k}={v}" for k, v in (
        ("run_dir", tmp_path / "leak"), ("data.src_lang", "de"), ("data.tgt_lang", "en"),
        ("data.train", f"{{format: text, path: {prefix}}}"),
        ("data.validation", f"{{format: text, path: {prefix}}}"),
        ("data.max_length", 40), ("tokenizer.vocab_size", 120))])  # fmt: skip
    with caplog.at_level(logging.INFO, logger="tfm"):
        training_splits(held_out)
        assert not [r for r in caplog.records if r.levelno == logging.WARNING]
        validation = training_splits(leaked)[0]["validation"]
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    n = len(validation.src_text)
    assert warning.startswith(f"data.validation: {n:,} of its {n:,} sources (100%) are training ")
    assert "hold out pairs that training does not read" in warning


def test_a_share_of_pairs_too_long_to_train_on_is_a_warning(tmp_path, caplog):
    """One pair in 300 too long is an info line; 1% or more a warning naming the key."""
    long_pair = (" ".join(WORDS * 3), " ".join(WORDS * 3).upper())
    few = config_for(tmp_path, write_corpus(tmp_path / "few", 300, extra=[long_pair]))
    many = config_for(tmp_path, write_corpus(tmp_path / "many", 300, extra=[long_pair] * 4))
    with caplog.at_level(logging.INFO, logger="tfm"):
        training_splits(few)
        assert not [r for r in caplog.records if r.levelno == logging.WARNING]
        training_splits(many)
    [warning] = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning == (
        "train: 4 of 304 pairs (1.3%) have more than data.max_length=40 BPE tokens on a side "
        "and are left out of training; raise data.max_length to train on them"
    )


def test_the_sentences_the_normalizer_changes_are_encoded_with_it(tmp_path, monkeypatch):
    messy = [("der  Hund", "THE\tDOG"), ("Gro\u0308ße Katze", "BIG\u00a0CAT"), ("rot", "RED")]
    prefix = write_corpus(tmp_path / "data", 200, extra=messy)
    config = config_for(tmp_path, prefix)
    # the messy pairs are in the fifth chunk of each side
    monkeypatch.setattr(entry_encoding, "CHUNK", 50)
    changed, real = [], bulk_encoding.needs_normalizing

    def recorded(texts):
        changed.append(real(texts))
        return changed[-1]

    monkeypatch.setattr(bulk_encoding, "needs_normalizing", recorded)
    splits, _, _ = training_splits(config)
    memory, _ = prepare_splits(config.data, config.tokenizer, ("train",))
    assert changed == [[]] * 4 + [[0, 1]] + [[]] * 4 + [[0, 1]]
    assert splits["train"].src == memory["train"].src and splits["train"].tgt == memory["train"].tgt


def test_batches_and_losses_equal_those_of_the_in_memory_path(tmp_path):
    prefix = write_corpus(tmp_path / "data", 300)
    config = config_for(tmp_path, prefix)
    cached = training_splits(config)[0]["train"]
    memory, tokenizer = prepare_splits(config.data, config.tokenizer, ("train",))
    samplers = [
        TokenBatchSampler(
            [len(s) for s in split.src], [len(t) for t in split.tgt], max_tokens=200, seed=1
        )  # fmt: skip
        for split in (cached, memory["train"])
    ]
    torch.manual_seed(0)
    size = tokenizer.src_vocab_size
    shape = {"d_model": 16, "n_heads": 2, "n_encoder_layers": 1, "n_decoder_layers": 1, "d_ff": 32}
    model = build_model(ModelArgs(src_vocab_size=size, tgt_vocab_size=size, **shape))
    model.eval()
    for epoch in (0, 1):
        batches = samplers[0].epoch(epoch)
        assert batches == samplers[1].epoch(epoch)
        for indices in batches[:3]:
            losses = []
            for split in (cached, memory["train"]):
                batch = collate([split.src[i] for i in indices], [split.tgt[i] for i in indices])
                hidden = model(batch.src, batch.tgt_in, keep=batch.tgt_out != 0, project=False)
                target = batch.tgt_out[batch.tgt_out != 0]
                losses.append(projected_loss_sum(hidden, model.output_projection.weight, target,
                                                 label_smoothing=0.1))  # fmt: skip
            assert torch.equal(losses[0], losses[1])


def test_bpe_learns_from_a_seeded_sample_with_every_character(tmp_path):
    rare = [("Straße ĳ", "STREET ĳ")]  # characters seen in one pair only
    prefix = write_corpus(tmp_path / "data", 400, extra=rare)
    sample = np.random.default_rng(entry_encoding.SAMPLE_SEED).choice(401, size=50, replace=False)
    assert 400 not in sample  # the rare pair is not in the sample BPE learns from
    sets = ["tokenizer.train_sample=50"]
    sampled = [
        prepared_entry(config_for(tmp_path, prefix, f"data.cache_dir={tmp_path / name}", *sets))
        for name in ("a", "b")
    ]
    whole = prepared_entry(config_for(tmp_path, prefix, "tokenizer.train_sample=null"))
    fingerprints = [entry.tokenizer().fingerprint() for entry in (*sampled, whole)]
    assert fingerprints[0] == fingerprints[1] != fingerprints[2]
    for side in ("src", "tgt"):
        assert not np.any(sampled[0].ids(side).values == UNK_ID)
    assert sampled[0].tokenizer().decode_src([sampled[0].ids("src")[-1]]) == ["Straße ĳ"]


def test_too_little_disk_space_is_one_line_with_the_space_needed(tmp_path, monkeypatch):
    prefix = write_corpus(tmp_path / "data", 300)
    usage = type("U", (), {"free": 1000})
    monkeypatch.setattr(entry_writer.shutil, "disk_usage", lambda path: usage)
    with pytest.raises(DataError) as error:
        prepared_entry(config_for(tmp_path, prefix))
    message = str(error.value)
    assert "\n" not in message and "data.cache_dir" in message
    assert "needs about 17 MB, 1 kB are free" in message  # 16 MiB of room and the corpus
    assert not any((tmp_path / "runs" / ".tfm-cache").glob("*/meta.json"))


def test_a_damaged_entry_is_prepared_again(tmp_path, counted):
    prefix = write_corpus(tmp_path / "data", 300)
    config = config_for(tmp_path, prefix)
    entry = prepared_entry(config)
    (entry.path / "tgt.ids").write_bytes(b"")  # truncated
    again = prepared_entry(config)
    assert again.path == entry.path and len(counted) == 2 and len(again.ids("tgt")) == 300


def test_a_second_process_waits_for_the_first_and_maps_its_entry(tmp_path, monkeypatch):
    prefix = write_corpus(tmp_path / "data", 300)
    config = config_for(tmp_path, prefix)
    writing, release = threading.Event(), threading.Event()
    real, calls = cache.write_encoding, []

    def slow_write(*args, **kwargs):
        calls.append(threading.current_thread().name)
        writing.set()
        assert release.wait(30)
        return real(*args, **kwargs)

    monkeypatch.setattr(cache, "write_encoding", slow_write)
    found = {}

    def open_as(name):
        found[name] = prepared_entry(config)

    first = threading.Thread(target=open_as, args=("rank 0",), name="rank 0")
    first.start()
    assert writing.wait(30)
    second = threading.Thread(target=open_as, args=("rank 1",), name="rank 1")
    second.start()
    second.join(1.0)
    assert second.is_alive()  # waiting on the lock, not preparing a copy of its own
    release.set()
    first.join(30)
    second.join(30)
    assert calls == ["rank 0"] and found["rank 0"].path == found["rank 1"].path
    assert len(found["rank 1"].ids("src")) == 300


def test_resuming_with_another_tokenizer_gets_an_entry_of_its_own(tmp_path):
    prefix = write_corpus(tmp_path / "data", 300)
    config = config_for(tmp_path, prefix)
    entry = prepared_entry(config)
    other = prepared_entry(config_for(tmp_path, prefix, "tokenizer.vocab_size=100")).tokenizer()
    own = prepared_entry(config, tokenizer=other)
    assert own.path.name.startswith(entry.path.name + "-")
    assert own.tokenizer().fingerprint() == other.fingerprint()
    assert open_entry(entry.path) is not None  # the first is left as it was


def test_bad_input_is_named_by_file_and_line_and_leaves_no_entry(tmp_path):
    path = tmp_path / "train.tsv"
    lines = [f"wort {i}\tword {i}" for i in range(500)]
    lines[349] = "a line without a tab"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    config = config_for(tmp_path, "unused", f"data.train={{format: tsv, path: {path}}}")
    with pytest.raises(DataError, match=rf"^{path}:350: expected 2 tab-separated fields"):
        prepared_entry(config)
    assert not (tmp_path / "runs" / ".tfm-cache").exists()  # nor a cache folder it made


def test_a_checkpoint_fingerprinted_before_the_cache_still_resumes(tmp_path, monkeypatch):
    def legacy(self):  # what a checkpoint written before the data cache stored
        return dataclasses.replace(identity(self), data_fingerprint=self.epochs.fingerprint())

    identity = Session.identity
    monkeypatch.setattr(Session, "identity", legacy)
    first = train(tiny_config(tmp_path / "run", max_steps=2, validate_every=2), progress_bar=False)
    monkeypatch.undo()
    monkeypatch.setattr(EpochPlan, "fingerprint", lambda self: "other data")
    with pytest.raises(UsageError, match="training data differ"):
        train(tiny_config(tmp_path / "run", max_steps=3), resume=True, progress_bar=False)
    monkeypatch.undo()
    resumed = train(
        tiny_config(tmp_path / "run", max_steps=3, validate_every=2),
        resume=True,
        progress_bar=False,
    )
    assert (first.steps, resumed.steps) == (2, 3)


def test_an_entry_prepared_before_the_alignment_figures_measures_them_when_opened(tmp_path):
    """An entry whose meta.json lacks `off_ratio` and `length_correlation` (prepared by an older
    tfm) gets them from its first pairs, as preparing measures them: lines out of step in such a
    cache are still named."""
    folder = tmp_path / "data"
    prefix = write_corpus(folder, 400)
    english = (folder / "train.en").read_text(encoding="utf-8").splitlines()
    (folder / "train.en").write_text("\n".join(["EXTRA", *english[:-1]]) + "\n", encoding="utf-8")
    entry = prepared_entry(config_for(tmp_path, prefix))
    measured = entry.figures()
    assert measured.off_ratio > 0.2 and measured.length_correlation < 0.3  # one line behind
    for key in ("off_ratio", "length_correlation"):
        del entry.meta["figures"][key]
    assert entry.figures() == measured
