"""Monolingual text for back-translation: read once into the data cache, cleaned (blank and
overlong lines dropped and counted, tabs made spaces), found again by content; the lines a run
back-translates chosen without validation or test sentences and within the length limit, the
same ones for the same seed, in file order."""

import numpy as np
import pytest
from builders import tiny_config

from tfm.data.cache.cache_key import DIGESTS
from tfm.data.check import check_data, format_table
from tfm.data.monolingual import choose_lines, prepared_monolingual
from tfm.data.pipeline import load_texts
from tfm.errors import DataError
from tfm.limits import MAX_LINE_CHARS

LINES = [f"ligne numéro {i} ." for i in range(100)]


def mono_config(tmp_path, *texts: str):
    paths = []
    for i, text in enumerate(texts):
        path = tmp_path / f"mono{i}.de"
        path.write_text(text, encoding="utf-8")
        paths.append({"path": str(path), "lang": "de"})
    return tiny_config(tmp_path / "run", **{"data.monolingual": paths})


def test_lines_are_cleaned_counted_and_read_from_the_cache_after(tmp_path, monkeypatch):
    text = "\n".join(["  une\tligne  ", "", "x" * (MAX_LINE_CHARS + 1), *LINES[:3]]) + "\n"
    config = mono_config(tmp_path, text, "\n".join(LINES[3:6]))
    prepared = prepared_monolingual(config, progress=False)
    assert list(prepared.lines()) == ["une ligne", *LINES[:6]]
    assert (prepared.meta["read"], len(prepared)) == (9, 7)
    assert prepared.summary().endswith(
        f"kept 7, dropped 2 (empty: 1, over {MAX_LINE_CHARS:,} characters: 1)"
    )
    assert (tmp_path / ".tfm-cache" / DIGESTS).is_file()
    opened = []
    real = type(tmp_path).open
    monkeypatch.setattr(
        type(tmp_path), "open", lambda p, *a, **k: opened.append(p) or real(p, *a, **k)
    )
    again = prepared_monolingual(config, progress=False)
    assert again.path == prepared.path and not any(p.name.startswith("mono") for p in opened)


def test_an_edited_file_is_another_entry(tmp_path):
    config = mono_config(tmp_path, "\n".join(LINES))
    first = prepared_monolingual(config, progress=False)
    (tmp_path / "mono0.de").write_text("\n".join(LINES[:-1]), encoding="utf-8")
    second = prepared_monolingual(config, progress=False)
    assert second.path != first.path and len(second) == len(LINES) - 1


def test_the_chosen_lines_leave_out_leaks_and_long_lines_and_repeat_for_a_seed(tmp_path):
    text = prepared_monolingual(mono_config(tmp_path, "\n".join(LINES)), progress=False)
    leaks = {LINES[5], LINES[50], "not in the text"}
    too_long = {LINES[7], LINES[70]}

    def fits(rows):
        return [row not in too_long for row in rows]

    chosen = choose_lines(text, count=60, seed=1, leaks=leaks, fits=fits)
    picked = [LINES[i] for i in chosen.index]
    assert len(picked) == 60 and np.all(np.diff(chosen.index) > 0)  # file order
    assert not set(picked) & (leaks | too_long)
    assert (chosen.examined, chosen.leaks, chosen.long) == (100, 2, 2)  # one chunk examined
    again = choose_lines(text, count=60, seed=1, leaks=leaks, fits=fits)
    other = choose_lines(text, count=60, seed=2, leaks=leaks, fits=fits)
    assert np.array_equal(again.index, chosen.index) and not np.array_equal(
        other.index, chosen.index
    )
    every = choose_lines(text, count=1000, seed=1, leaks=leaks, fits=fits)
    assert len(every.index) == 96
    assert every.summary(len(text)) == (
        "96 of the 100 lines chosen (100 examined; dropped 2 identical to a validation or test "
        "sentence (a leak), 2 over data.max_length)"
    )


def test_data_check_counts_the_lines_back_translation_would_use(tmp_path):
    config = tiny_config(tmp_path / "run")
    _, german, _ = load_texts(config.data, "validation")
    too_long = " ".join(["Wort"] * (config.data.max_length + 1))
    config = mono_config(tmp_path, "\n".join([*LINES[:10], german[0], too_long, ""]))
    report = check_data(config)
    assert report["monolingual"] == {"lang": "de", "lines": 12, "usable": 10, "leaks": 1,
                                     "longer_than_max_length": 1}  # fmt: skip
    table = format_table(report)
    assert "monolingual de: 12 lines, 10 usable (1 a validation or test sentence, 1 over" in table
    assert "note: monolingual: 1 line(s) identical to a validation or test sentence" in table


def test_data_check_names_a_missing_monolingual_file_before_reading_the_corpus(tmp_path):
    config = mono_config(tmp_path, "eine Zeile\n")
    (tmp_path / "mono0.de").unlink()
    with pytest.raises(DataError, match=r"^data\.monolingual\[0\]\.path: .*mono0\.de: no such"):
        check_data(config)
    assert not (tmp_path / ".tfm-cache").exists()
