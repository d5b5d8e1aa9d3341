"""Decoding options declared once: a new strategy with one setting, added to a copy of tfm in two
files (its declaration and its class), is a config key with its range, an option of every
decoding command, a field of a server request, a row of the configuration reference, and chosen
by its setting; an export refuses it by name until `tfm.deploy.ct2_decoding` maps it."""

import filecmp
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

NEW_STRATEGY = """    "typical": "locally typical sampling (Meister et al., 2023).",
}
"""
NEW_SETTING = """    DecodingSetting(
        key="typical_mass", strategy="typical", kind=float, default=0.9, low=0.01, high=1.0,
        help="the probability mass of the most typical tokens drawn from.",
    ),
)  # fmt: skip
"""
NEW_CLASS = '''@dataclass(frozen=True, kw_only=True)
class TypicalSampling(Strategy):
    """A strategy for the test: its setting, and greedy search underneath."""

    name = "typical"
    typical_mass: float

    def hypotheses(self, n_best: int, spell: Spelling = option_name) -> int:
        return n_best

    def searcher(self, device: torch.device) -> Search:
        return GreedySearch().searcher(device)


STRATEGIES: dict[str, type[Strategy]] = {
    cls.name: cls for cls in (GreedySearch, BeamSearch, Sampling, TypicalSampling)
}
'''

CHILD = """
import json, sys
from typer.testing import CliRunner
from tfm.cli import app
from tfm.config import DecodingConfig, load_config
from tfm.config.reference import render
from tfm.deploy.ct2_decoding import ct2_search
from tfm.errors import ConfigError, UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.prediction.strategies import strategy_for
from tfm.serve.bodies import TranslateBody

found = {"tfm": __import__("tfm").__file__}
found["help"] = {
    command: "--typical-mass" in CliRunner().invoke(app, [command, "--help"],
                                                    env={"COLUMNS": "300"}).stdout
    for command in ("translate", "eval", "serve")
}
config = load_config(None, ["decoding.strategy=typical", "decoding.typical_mass=0.5"])
found["config"] = config.decoding.model_dump(include={"strategy", "typical_mass"})
try:
    load_config(None, ["decoding.typical_mass=2"])
except ConfigError as exc:
    found["config_error"] = str(exc)
found["reference"] = "| `decoding.typical_mass` | float | `0.9` |" in render()
found["body"] = TranslateBody.model_validate({"sentences": ["a"], "typical_mass": 0.3}).typical_mass
request = DecodeRequest.from_options({"typical_mass": 0.7, "run": "r"})
chosen = strategy_for(DecodingConfig(strategy="greedy"), request.search)
found["chosen"] = [type(chosen).__name__, chosen.describe()]
try:
    ct2_search(chosen, 1)
except UsageError as exc:
    found["export"] = str(exc)
print(json.dumps(found))
"""


def _patched(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, (path, old)
    path.write_text(text.replace(old, new))


def test_a_new_strategy_with_one_setting_is_added_in_two_files(tmp_path):
    copy = tmp_path / "src" / "tfm"
    shutil.copytree(SRC / "tfm", copy, ignore=shutil.ignore_patterns("__pycache__"))
    _patched(
        copy / "decoding_options.py", "}\n\nDECODING_SETTINGS", NEW_STRATEGY + "\nDECODING_SETTINGS"
    )
    _patched(copy / "decoding_options.py", ")  # fmt: skip\n", NEW_SETTING)
    _patched(
        copy / "prediction" / "strategies.py",
        "STRATEGIES: dict[str, type[Strategy]] = {\n"
        "    cls.name: cls for cls in (GreedySearch, BeamSearch, Sampling)\n}\n",
        NEW_CLASS,
    )
    compared = filecmp.dircmp(SRC / "tfm", copy, ignore=["__pycache__"])
    assert _changed(compared) == ["decoding_options.py", "prediction/strategies.py"]

    env = {**os.environ, "PYTHONPATH": str(copy.parent)}
    child = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                           env=env, timeout=120)  # fmt: skip
    assert child.returncode == 0, child.stderr
    found = json.loads(child.stdout)
    assert found["tfm"] == str(copy / "__init__.py")
    assert found["help"] == {"translate": True, "eval": True, "serve": True}
    assert found["config"] == {"strategy": "typical", "typical_mass": 0.5}
    assert found["config_error"] == (
        "--set decoding.typical_mass=2: decoding.typical_mass: expected a number from 0.01 to 1 "
        "(found 2)"
    )
    assert found["reference"] is True
    assert found["body"] == 0.3
    assert found["chosen"] == ["TypicalSampling", {"strategy": "typical", "typical_mass": 0.7}]
    assert found["export"].startswith("strategy typical: a CTranslate2 export cannot decode")


def _changed(compared: filecmp.dircmp, prefix: str = "") -> list[str]:
    """The files that differ between the two trees, as paths under them; none only in one."""
    assert not compared.left_only and not compared.right_only
    changed = [prefix + name for name in compared.diff_files]
    for name, sub in sorted(compared.subdirs.items()):
        changed += _changed(sub, f"{prefix}{name}/")
    return sorted(changed)
