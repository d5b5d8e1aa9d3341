"""The metrics log: events appended one per line, read back past torn lines, cut at a step."""

import json

from tfm.rundir.metrics import append_event, read_metrics, series, truncate_metrics


def test_appended_events_read_back_in_order_and_a_torn_last_line_is_skipped(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    events = [{"step": 1, "train_loss": 2.5}, {"step": 2, "val_bleu": 10.0}]
    for event in events:
        append_event(path, event)
    with path.open("a") as file:
        file.write('{"step": 3}\n["no step"]\n{"step": 4, "train_lo')  # the writer was killed

    assert read_metrics(path) == [*events, {"step": 3}]
    assert "metrics.jsonl:4: skipped a line without an integer 'step'" in caplog.text
    assert "metrics.jsonl:5: skipped a line that is not JSON" in caplog.text


def test_series_keeps_the_events_with_a_number_under_the_key():
    events = [
        {"step": 1, "val_bleu": 3},
        {"step": 2, "train_loss": 1.0},
        {"step": 3, "val_bleu": True},
        {"step": 4, "val_bleu": None},
        {"step": 5, "val_bleu": 7.5},
    ]
    assert series(events, "val_bleu") == ([1, 5], [3.0, 7.5])


def test_truncation_drops_the_events_past_the_step_and_keeps_the_rest_as_written(tmp_path):
    path = tmp_path / "metrics.jsonl"
    lines = ['{"step": 1, "lr": 1e-4}', '{"step":2}', "", '{"step": 3}', '{"step": 2, "x": 1}']
    path.write_text("\n".join(lines) + "\n")

    truncate_metrics(path, 2)

    assert path.read_text().splitlines() == [lines[0], lines[1], lines[4]]
    assert [json.loads(line)["step"] for line in path.read_text().splitlines()] == [1, 2, 2]
    truncate_metrics(tmp_path / "absent.jsonl", 2)
    assert not (tmp_path / "absent.jsonl").exists()
