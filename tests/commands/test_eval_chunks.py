"""`tfm eval --src --ref` reads long files in chunks: the scores, the hypotheses and the warnings
that name lines are those of the whole input, as if it had been decoded in one piece, and each
chunk is encoded only when the previous one is done. The session's trained run decodes."""

import json

import pytest
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands import decode
from tfm.commands import input as input_lines
from tfm.data import pipeline
from tfm.prediction import torch_translator

SENTENCES = [
    ("i see the dog", "Ich sehe den Hund"),
    ("the big dog sees the small cat", "Der große Hund sieht die kleine Katze"),
    ("the mother does not answer", "Die Mutter antwortet nicht"),
    ("a man walks home", "Ein Mann geht nach Hause"),
    ("the small cat sleeps", "Die kleine Katze schläft"),
]
LONG = " ".join(["the dog sees the small cat"] * 60)  # 300 words: beyond 256 positions


def evaluate(run, folder, pairs, *extra: str) -> tuple[dict, list[str], str]:
    src, ref, out = folder / "src.txt", folder / "ref.txt", folder / "hyp.txt"
    src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
    ref.write_text("".join(r + "\n" for _, r in pairs), encoding="utf-8")
    args = ["eval", "--run", str(run), "--src", str(src), "--ref", str(ref), "--json"]
    result = CliRunner().invoke(app, [*args, "--output", str(out), *extra])
    assert result.exit_code == 0, result.output
    scores = json.loads(result.stdout)
    for timing in ("decode_seconds", "sentences_per_second"):
        scores.pop(timing)
    return scores, out.read_text(encoding="utf-8").splitlines(), result.stderr


@pytest.mark.parametrize("beam", [[], ["--beam-size", "3"]], ids=["greedy", "beam"])
def test_chunks_score_and_translate_as_one_piece(trained_run, tmp_path, monkeypatch, beam):
    pairs = SENTENCES * 3  # 15 lines
    whole, whole_hyps, _ = evaluate(trained_run, tmp_path, pairs, *beam)
    monkeypatch.setattr(input_lines, "EVAL_LINES", 4)  # chunks of 4, 4, 4 and 3 lines
    chunked, chunked_hyps, _ = evaluate(trained_run, tmp_path, pairs, *beam)
    assert chunked_hyps == whole_hyps and len(whole_hyps) == 15
    loss = chunked.pop("loss")
    assert loss == pytest.approx(whole.pop("loss"), abs=2e-4)  # summed in another order
    chunked.pop("perplexity"), whole.pop("perplexity")
    assert chunked == whole and whole["sentences"] == 15


def test_over_long_lines_are_named_by_their_line_in_the_whole_file(
    trained_run, tmp_path, monkeypatch
):
    monkeypatch.setattr(input_lines, "EVAL_LINES", 2)
    pairs = [SENTENCES[0], SENTENCES[1], SENTENCES[2], (LONG, "Der Hund"), SENTENCES[3]]
    _, hyps, stderr = evaluate(trained_run, tmp_path, [*pairs, (LONG, "Der Hund")])
    assert len(hyps) == 6
    assert "line(s) 4: longer than 256 tokens, cut to fit the model" in stderr
    assert "line(s) 6: longer than 256 tokens, cut to fit the model" in stderr


def test_a_chunk_is_encoded_after_the_previous_one_is_decoded(trained_run, tmp_path, monkeypatch):
    monkeypatch.setattr(input_lines, "EVAL_LINES", 2)
    events = []
    encode, search = pipeline.encode_split, torch_translator.search_ids

    def encoding(name, src_text, *args, **kwargs):
        events.append(("encode", len(src_text)))
        return encode(name, src_text, *args, **kwargs)

    def decoding(model, sources, *args, **kwargs):
        events.append(("decode", len(sources)))
        return search(model, sources, *args, **kwargs)

    monkeypatch.setattr(decode, "encode_split", encoding)
    monkeypatch.setattr(torch_translator, "search_ids", decoding)
    evaluate(trained_run, tmp_path, SENTENCES)
    assert events == [("encode", 2), ("decode", 2), ("encode", 2), ("decode", 2),
                      ("encode", 1), ("decode", 1)]  # fmt: skip
