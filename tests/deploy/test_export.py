"""`export_run` writes a self-contained CTranslate2 folder, and refuses with one line each: a
run without a model, a corrupt model file, an existing folder, a quantization the device cannot
run, a model option it cannot represent, and CTranslate2 missing."""

import json
import shutil
import sys

import pytest

from tfm.data.pipeline import load_texts
from tfm.errors import CheckpointError, UsageError
from tfm.prediction.scoring import score_translations
from tfm.rundir.checkpoint import load_checkpoint, save_checkpoint
from tfm.rundir.manifest import record_manifest

pytest.importorskip("ctranslate2")

import ctranslate2  # noqa: E402

from tfm.deploy import (  # noqa: E402
    export_run,
    is_export,
    open_export,
    read_export_info,
)
from tfm.deploy.export import MARKER, QUANTIZATIONS  # noqa: E402


def translate_with_export(folder, lines: list[str]) -> list[str]:
    """The lines translated by the export in `folder`, with its own decode settings."""
    from tfm.commands.engines import open_translator
    from tfm.prediction.settings import DecodeRequest

    return open_translator(DecodeRequest(run=folder, device="cpu")).translate(lines)


def one_line_error(kind, call) -> str:
    with pytest.raises(kind) as caught:
        call()
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_folder_holds_model_tokenizer_config_and_marker(exported, toy_run, toy_model):
    names = {p.name for p in exported.iterdir()}
    assert {"model.bin", "config.json", "shared_vocabulary.json", "tokenizer.json"} <= names
    assert {"config.yaml", MARKER} <= names
    assert (exported / "config.yaml").read_text() == (toy_run / "config.yaml").read_text()
    info = read_export_info(exported)
    assert (info.quantization, info.model_file, info.step) == ("none", "best.pt", 400)
    assert info.max_len == toy_model.model.max_len == 256
    assert info.tokenizer_fingerprint == toy_model.tokenizer.fingerprint()
    assert is_export(exported) and not is_export(toy_run)
    config = json.loads((exported / "config.json").read_text())
    norm = toy_model.model.encoder.layers[0].feed_forward_residual.norm
    assert config["layer_norm_epsilon"] == norm.eps == 1e-5  # PyTorch's, not CTranslate2's 1e-6
    assert (config["decoder_start_token"], config["add_source_eos"]) == ("<s>", True)
    vocabulary = json.loads((exported / "shared_vocabulary.json").read_text())
    assert vocabulary == toy_model.tokenizer.tgt_pieces(range(toy_model.tokenizer.tgt_vocab_size))
    assert vocabulary[:4] == ["<pad>", "<s>", "</s>", "<unk>"]


def test_the_folder_translates_after_the_run_is_gone(toy_run, held_out, tmp_path):
    run = shutil.copytree(toy_run, tmp_path / "run")
    export_run(run, tmp_path / "first")
    lines = held_out[0][:10]
    before = translate_with_export(tmp_path / "first", lines)
    moved = shutil.copytree(tmp_path / "first", tmp_path / "elsewhere" / "model")
    shutil.rmtree(run)
    shutil.rmtree(tmp_path / "first")
    assert translate_with_export(moved, lines) == before


def test_int8_export_is_smaller_and_scores_nearly_alike(toy_run, exported, toy_model, tmp_path):
    export_run(toy_run, tmp_path / "int8", quantization="int8")
    assert read_export_info(tmp_path / "int8").quantization == "int8"
    size = (tmp_path / "int8" / "model.bin").stat().st_size
    assert size < 0.5 * (exported / "model.bin").stat().st_size
    english, german, _ = load_texts(toy_model.config.data, "test")
    int8 = translate_with_export(tmp_path / "int8", english)
    float32 = translate_with_export(exported, english)
    assert sum(a == b for a, b in zip(int8, float32, strict=True)) >= 0.7 * len(english)
    bleu = [score_translations(out, german)["bleu"] for out in (int8, float32)]
    assert bleu[0] == pytest.approx(bleu[1], abs=1.5) and bleu[1] > 10


def test_a_run_without_a_model_file_is_refused(toy_run, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(toy_run / "config.yaml", run)
    message = one_line_error(UsageError, lambda: export_run(run, tmp_path / "out"))
    assert message == (
        f"run directory {run} has no trained model (best.pt or last.pt); "
        "train it first with `tfm train`"
    )
    assert not (tmp_path / "out").exists()


def test_a_corrupt_model_file_is_refused(toy_run, tmp_path):
    run = shutil.copytree(toy_run, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints"))
    data = (run / "best.pt").read_bytes()
    (run / "best.pt").write_bytes(data[: len(data) // 2])
    message = one_line_error(CheckpointError, lambda: export_run(run, tmp_path / "out"))
    assert str(run / "best.pt") in message
    assert not (tmp_path / "out").exists()


def test_an_existing_folder_is_replaced_only_with_overwrite(toy_run, tmp_path):
    out = tmp_path / "out"
    export_run(toy_run, out)
    message = one_line_error(UsageError, lambda: export_run(toy_run, out, quantization="int8"))
    assert message == f"output folder {out} already exists; use --overwrite to replace it"
    assert read_export_info(out).quantization == "none"
    export_run(toy_run, out, quantization="int8", overwrite=True)
    assert read_export_info(out).quantization == "int8"
    assert [p.name for p in tmp_path.iterdir()] == ["out"]  # no staging folder left behind
    other = tmp_path / "notes"
    other.mkdir()
    (other / "keep.txt").write_text("mine")
    message = one_line_error(UsageError, lambda: export_run(toy_run, other, overwrite=True))
    assert "is not a tfm CTranslate2 export; refusing to overwrite it" in message
    assert (other / "keep.txt").read_text() == "mine"


def test_a_quantization_the_device_cannot_run_is_refused(toy_run, exported, tmp_path):
    supported = ctranslate2.get_supported_compute_types("cpu")
    unsupported = [q for q in QUANTIZATIONS if q != "none" and q not in supported]
    if not unsupported:
        pytest.skip("this CPU runs every quantization")
    refused = f"quantization {unsupported[0]} is not supported by CTranslate2 on cpu"
    out = tmp_path / "out"
    message = one_line_error(
        UsageError, lambda: export_run(toy_run, out, quantization=unsupported[0])
    )
    assert message.startswith(refused)
    message = one_line_error(UsageError, lambda: export_run(toy_run, out, quantization="int4"))
    assert message == f"quantization 'int4' is not one of {', '.join(QUANTIZATIONS)}"
    copied = shutil.copytree(exported, tmp_path / "copied")
    marker = json.loads((copied / MARKER).read_text())
    (copied / MARKER).write_text(json.dumps(marker | {"quantization": unsupported[0]}))
    assert one_line_error(UsageError, lambda: open_export(copied)).startswith(refused)


def test_a_model_option_ctranslate2_lacks_is_refused_by_name(toy_run, tmp_path):
    run = shutil.copytree(toy_run, tmp_path / "run", ignore=shutil.ignore_patterns("checkpoints"))
    state = load_checkpoint(run / "best.pt")
    state["model_args"]["relative_positions"] = 16
    save_checkpoint({k: v for k, v in state.items() if k not in ("format_version", "tfm_version")},
                    run / "best.pt")  # fmt: skip
    record_manifest(run, ["best.pt"])  # as a tfm with that option would have written it
    message = one_line_error(UsageError, lambda: export_run(run, tmp_path / "out"))
    assert message == (
        "cannot export to CTranslate2: model option(s) relative_positions=16 have no "
        "CTranslate2 equivalent in this exporter"
    )


def test_missing_ctranslate2_says_how_to_install_it(toy_run, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ctranslate2", None)
    message = one_line_error(UsageError, lambda: export_run(toy_run, tmp_path / "out"))
    assert message == "CTranslate2 is not installed; install it with `pip install 'tfm[deploy]'`"


def test_a_folder_that_is_not_an_export_or_newer_is_refused(toy_run, exported, tmp_path):
    message = one_line_error(UsageError, lambda: open_export(toy_run))
    assert message == f"{toy_run} is not a tfm CTranslate2 export (no {MARKER})"
    copied = shutil.copytree(exported, tmp_path / "copied")
    marker = json.loads((copied / MARKER).read_text())
    (copied / MARKER).write_text(json.dumps(marker | {"version": 2}))
    message = one_line_error(UsageError, lambda: read_export_info(copied))
    assert message == f"{copied / MARKER}: format version 2, this tfm reads version 1"
