"""A tag token (`<bt>` before a back-translated source) never shows in a translation: not in
tfm translate's, not in the server's, not in a CTranslate2 export's. The run's model is rigged so
that it writes the tag wherever it would write one word: the tag's output row is that word's,
a little longer, so it wins every step the word would have won. Its translations are then the
plain model's without that word."""

from __future__ import annotations

import shutil

import pytest
import torch
from builders import tiny_config_file
from http_client import call, served
from typer.testing import CliRunner

from tfm.api import generate_toy_corpus
from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.data.tokenizer import Tokenizer
from tfm.prediction.settings import DecodeRequest
from tfm.rundir.model_file import load_model_file, save_weights
from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits

LEARNS = {
    "model": {"d_model": 32, "d_ff": 64, "dropout": 0.0},
    "train": {"max_steps": 150, "max_epochs": None, "lr": 5e-3, "warmup_steps": 20,
              "max_tokens": 1500, "validate_every": 150},
}  # fmt: skip
SENTENCES = ["the small dog sees the big cat", "a bird sleeps under the old tree"]


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A run whose second training corpus is tagged `<bt>`, and a copy of it rigged as above;
    with the word rigged."""
    folder = tmp_path_factory.mktemp("tagged")
    corpus = generate_toy_corpus(n_train=300, n_validation=8, n_test=8, seed=1)
    for split, pairs in corpus.items():
        rows = "".join(f"{en}\t{de}\n" for en, de in pairs)
        (folder / f"{split}.tsv").write_text(rows, encoding="utf-8")
    split = {"format": "tsv", "columns": ["en", "de"]}
    data = {
        "train": [{**split, "path": str(folder / "train.tsv")},
                  {**split, "path": str(folder / "train.tsv"), "tag": "bt"}],
        "validation": {**split, "path": str(folder / "validation.tsv")},
        "test": {**split, "path": str(folder / "test.tsv")},
    }  # fmt: skip
    config = tiny_config_file(folder, LEARNS, data=data)
    done = CliRunner().invoke(app, ["train", "--config", str(config), "--no-progress"])
    assert done.exit_code == 0, done.output
    plain, rigged = folder / "run", folder / "rigged"
    shutil.copytree(plain, rigged)
    tokenizer = Tokenizer.load(plain)
    word = tokenizer.encode_tgt(open_translator(request(plain)).translate(SENTENCES[:1]))[0][1]
    stored = load_model_file(rigged / "best.pt")
    weights = stored["model"]
    for name in ("output_projection.weight", "tgt_embedding.weight"):
        if name in weights:  # a tied model stores the matrix once
            weights[name][tokenizer.tag_id("bt")] = weights[name][word] * 1.05
    save_weights(rigged / "best.pt", weights, stored["model_args"], step=stored["step"],
                 tokenizer_fingerprint=stored["tokenizer_fingerprint"])  # fmt: skip
    return plain, rigged, word


def request(run, **settings) -> DecodeRequest:
    return DecodeRequest(run=run, device="cpu", threads=1, **settings)


def without(run, word: int) -> list[str]:
    """The plain run's translations with every `word` left out."""
    tokenizer = Tokenizer.load(run)
    ids = tokenizer.encode_tgt(open_translator(request(run)).translate(SENTENCES))
    return tokenizer.decode_tgt([[i for i in seq if i != word] for seq in ids])


def test_tfm_translate_leaves_the_tag_out(runs):
    plain, rigged, word = runs
    translator = open_translator(request(rigged))
    with torch.no_grad():
        found = translator.translate(SENTENCES)
    assert found == without(plain, word) != open_translator(request(plain)).translate(SENTENCES)
    assert not any("<bt>" in text or "bt>" in text for text in found)
    result = CliRunner().invoke(app, ["translate", "--run", str(rigged), *SENTENCES])
    assert result.exit_code == 0 and result.stdout.splitlines() == found


def test_the_server_leaves_the_tag_out(runs):
    _, rigged, _ = runs
    translator = open_translator(request(rigged))
    limits = ServeLimits(max_sentences=4, timeout_s=30)
    with served(create_app(translator, limits), limits) as base:
        answer = call(base, "POST", "/translate", {"sentences": SENTENCES}).json()
    assert answer["translations"] == translator.translate(SENTENCES)
    assert not any("bt>" in text for text in answer["translations"])


def test_a_ctranslate2_export_leaves_the_tag_out(runs, tmp_path):
    pytest.importorskip("ctranslate2")
    from tfm.deploy import export_run

    _, rigged, _ = runs
    export_run(rigged, tmp_path / "export")
    exported = open_translator(DecodeRequest(run=tmp_path / "export", threads=1))
    found = exported.translate(SENTENCES)
    assert found == open_translator(request(rigged)).translate(SENTENCES)
    assert not any("bt>" in text for text in found)
