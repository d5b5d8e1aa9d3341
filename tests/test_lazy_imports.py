"""Start-up cost: `tfm translate` and training on files or the toy corpus never import what they
do not use. `datasets` (with pandas and pyarrow, about a second) is for hub and disk sources,
matplotlib for pictures, sacreBLEU for scoring; `tfm data check` needs no torch (more than a
second). Checked in a fresh process, whose sys.modules holds exactly what it imported."""

import json
import os
import subprocess
import sys
from pathlib import Path

SRC = str(Path(__file__).resolve().parents[1] / "src")
HEAVY = ("datasets", "pandas", "pyarrow", "matplotlib", "sacrebleu")

CHILD = """
import sys
from tfm.cli import main
from tfm.config import load_config
from tfm.data.pipeline import load_texts

config = load_config(None, ["data.toy.n_train=20", "data.toy.n_validation=2", "data.toy.n_test=2"])
src, tgt, _ = load_texts(config.data, "train")  # the toy corpus
assert len(src) == 20
sys.argv = ["tfm", "translate", "--run", sys.argv[1], "the dog sees the cat"]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print("heavy:", *[name for name in {heavy!r} if name in sys.modules], file=sys.stderr)
"""


def fresh_process(code: str, *args: str) -> subprocess.CompletedProcess:
    """`python -c code args` with this checkout's tfm importable: its output, as text."""
    env = {**os.environ, "PYTHONPATH": SRC + os.pathsep + os.environ.get("PYTHONPATH", "")}
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, timeout=120
    )


def test_translate_and_the_toy_corpus_import_no_heavy_module(trained_run):
    child = fresh_process(CHILD.format(heavy=HEAVY), str(trained_run))
    assert child.returncode == 0, child.stderr
    assert child.stdout.count("\n") == 1  # the translation
    assert child.stderr.splitlines()[-1] == "heavy:"


CHECK = """
import sys
from tfm.cli import main

sys.argv = ["tfm", "data", "check", "--config", sys.argv[1], "--json"]
try:
    main()
except SystemExit as exit:
    assert not exit.code, exit.code
print("torch:", "torch" in sys.modules, file=sys.stderr)
"""


def test_data_check_imports_no_torch(tmp_path):
    config = tmp_path / "check.yaml"
    toy = {"n_train": 50, "n_validation": 5, "n_test": 5}
    settings = {"data": {"toy": toy, "cache_dir": str(tmp_path / "cache")},
                "tokenizer": {"vocab_size": 200}}  # fmt: skip
    config.write_text(json.dumps(settings), encoding="utf-8")  # JSON is YAML
    child = fresh_process(CHECK, str(config))
    assert child.returncode == 0, child.stderr
    report = json.loads(child.stdout)
    assert report["splits"]["train"]["pairs"] == 50  # it did check the corpus
    assert child.stderr.splitlines()[-1] == "torch: False"
