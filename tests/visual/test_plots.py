"""Pictures: the attention grid's layout, and each command writes a valid image of the expected
size. Tiny untrained models; no training."""

import xml.etree.ElementTree as ET

import matplotlib.image
import pytest
import torch
from attention_model import MODEL_ARGS, SENTENCE, attention_of, vocab_sizes
from typer.testing import CliRunner

from tfm.cli import app
from tfm.config import load_config, to_yaml
from tfm.errors import UsageError
from tfm.rundir.model_file import save_model
from tfm.visual import curves, positional
from tfm.visual.attention_map import attention_layout
from tfm.visual.figure import DPI

DECODING = {"max_len_a": 0.5, "max_len_b": 2}  # short translations: few labels to draw
PLANNED = {"strategy": "greedy"}  # a run's config has its decoding strategy


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory, tokenizer, model):
    """A run directory as training leaves it: tokenizer, best.pt, config.yaml, metrics.jsonl."""
    root = tmp_path_factory.mktemp("run")
    tokenizer.save(root)
    save_model(root / "best.pt", model, {**vocab_sizes(tokenizer), **MODEL_ARGS}, step=0,
               tokenizer_fingerprint=tokenizer.fingerprint())  # fmt: skip
    sets = [f"decoding.{key}={value}" for key, value in {**DECODING, **PLANNED}.items()]
    (root / "config.yaml").write_text(to_yaml(load_config(None, sets)), encoding="utf-8")
    lines = [f'{{"step": {s}, "train_loss": {5 - s / 100}, "lr": {s * 1e-5}}}' for s in (50, 100)]
    lines.append('{"step": 100, "val_loss": 4.5, "val_bleu": 1.5, "val_chrf": 10.0}')
    (root / "metrics.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


def invoke(*args):
    return CliRunner().invoke(app, [str(a) for a in args])


def png_size(path) -> tuple[int, int]:
    pixels = matplotlib.image.imread(path)  # decodes the whole file: a truncated PNG fails
    return pixels.shape[1], pixels.shape[0]


def test_layout_grid_and_layer_head_choice(model, tokenizer):
    view = attention_of(model, tokenizer, "cross")
    everything = attention_layout(view)
    assert (everything.rows, everything.cols, len(everything.panels)) == (2, 4, 8)
    one_layer = attention_layout(view, layer=2)
    assert one_layer.panels == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert attention_layout(view, layer=1, head=3).panels == [(0, 2)]
    with pytest.raises(UsageError, match=r"--head 5: the model has 4; choose 1 to 4"):
        attention_layout(view, head=5)


# --- the commands ----------------------------------------------------------------------------


def test_attention_command_writes_a_png_of_the_grid_size(model, tokenizer, run_dir, tmp_path):
    out = tmp_path / "cross.png"
    result = invoke("attention", SENTENCE, "--run", run_dir, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    view = attention_of(model, tokenizer, "cross", DECODING)
    assert f"{view.source} -> {view.translation}" in result.stderr  # what the picture shows
    layout = attention_layout(view)
    assert png_size(out) == (round(layout.width_in * DPI), round(layout.height_in * DPI))


def test_attention_command_decoder_view_as_svg(run_dir, tmp_path):
    out = tmp_path / "decoder.svg"
    result = invoke("attention", SENTENCE, "--run", run_dir, "--out", out, "--kind", "decoder",
                    "--layer", "2", "--head", "1")  # fmt: skip
    assert result.exit_code == 0, result.output
    root = ET.parse(out).getroot()
    assert root.tag.endswith("svg") and root.get("width").endswith("pt")


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--kind", "self"], "--kind 'self': expected one of cross, encoder, decoder"),
        (["--layer", "3"], "--layer 3: the model has 2; choose 1 to 2"),
        (["--out", "a.jpg"], "unknown picture format '.jpg'"),
    ],
)
def test_attention_command_usage_errors(run_dir, tmp_path, args, message):
    result = invoke("attention", SENTENCE, "--run", run_dir, *args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_positional_command_writes_a_png_of_the_expected_size(tmp_path):
    out = tmp_path / "pe.png"
    result = invoke("positional", "--d-model", 64, "--length", 30, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == str(out)
    expected = (round(positional.WIDTH_IN * DPI), round(positional.HEIGHT_IN * DPI))
    assert png_size(out) == expected == (1100, 800)


def test_positional_command_refuses_an_odd_d_model(tmp_path):
    result = invoke("positional", "--d-model", 7, "--out", tmp_path / "pe.png")
    assert result.exit_code == 2
    assert "--d-model 7: expected an even number" in result.stderr


def test_positional_curves_pick_fast_to_slow_sine_dimensions():
    assert positional.curve_dimensions(512) == [0, 32, 64, 128]
    assert positional.wavelength(0, 512) == pytest.approx(2 * torch.pi)
    assert positional.wavelength(511, 512) == pytest.approx(2 * torch.pi * 10000 ** (510 / 512))


def test_plot_command_writes_the_curves_into_the_run(run_dir):
    result = invoke("plot", "--run", run_dir)
    assert result.exit_code == 0, result.output
    out = run_dir / curves.FILE_NAME
    assert result.stdout.strip() == str(out)
    assert png_size(out) == (1000, 900)


def test_plot_command_without_metrics_is_a_usage_error(tmp_path):
    result = invoke("plot", "--run", tmp_path)
    assert result.exit_code == 2
    assert f"{tmp_path / 'metrics.jsonl'} does not exist" in result.stderr
