"""bench/multi30k.py: the choice of the beam's length penalty on the validation split, and the
training command of a fresh run and of a resume."""

import importlib.util
import json
from dataclasses import asdict
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "multi30k.py"


@pytest.fixture
def bench(monkeypatch):
    """The script as a module, its `tfm` calls answered from a table of validation BLEU."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))  # its shared set-up, bench/_multi30k.py
    spec = importlib.util.spec_from_file_location("bench_multi30k", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.calls = []

    def fake_tfm(*args: str) -> str:
        module.calls.append(args)
        alpha = float(args[args.index("--length-penalty") + 1])
        return json.dumps({"bleu": module.bleu[alpha]})

    monkeypatch.setattr(module, "tfm", fake_tfm)
    return module


def test_best_alpha_is_the_best_validation_bleu_first_on_a_tie(bench):
    options = ["--run", "runs/x", "--json", "--beam-size", "5"]
    bench.bleu = {0.6: 39.4, 1.0: 39.7, 2.0: 39.7, 3.0: 39.1}
    assert bench.best_alpha(options, [0.6, 1.0, 2.0, 3.0]) == 1.0
    assert [call[-3:] for call in bench.calls] == [
        ("validation", "--length-penalty", str(alpha)) for alpha in (0.6, 1.0, 2.0, 3.0)
    ]
    assert all(call[:6] == ("eval", *options) for call in bench.calls)
    bench.bleu = {0.0: 12.0, 5.0: 30.0}
    assert bench.best_alpha(options, [0.0, 5.0]) == 5.0


def _args(bench, *argv: str):
    return bench.argparse.Namespace(
        config="configs/multi30k_tiny.yaml", minutes=90.0, set=list(argv), resume=False,
        quick=False, data=None,
    )  # fmt: skip


def _sets(command: list[str]) -> list[str]:
    return [command[i + 1] for i, word in enumerate(command) if word == "--set"]


def test_a_resume_trains_from_the_runs_own_config_without_repeating_its_keys(bench, tmp_path):
    run = tmp_path / "multi30k-en-de"
    run.mkdir()
    (run / "config.yaml").write_text("model: {d_model: 128}\n")
    args = _args(bench, "train.max_epochs=300")
    fresh = bench.train_command(run, "en", "de", args)
    assert fresh[:4] == ["train", "--config", "configs/multi30k_tiny.yaml", "--overwrite"]
    args.resume = True
    resumed = bench.train_command(run, "en", "de", args)
    assert resumed[:4] == ["train", "--config", str(run / "config.yaml"), "--resume"]
    assert _sets(resumed) == _sets(fresh)
    assert _sets(resumed)[-2:] == ["train.max_minutes=90.0", "train.max_epochs=300"]
    assert f"run_dir={run}" in _sets(resumed)


def test_a_resume_without_a_run_says_which_config_is_missing(bench, tmp_path):
    args = _args(bench)
    args.resume = True
    with pytest.raises(SystemExit, match=r"--resume: .*multi30k-de-en/config.yaml not found"):
        bench.train_command(tmp_path / "multi30k-de-en", "de", "en", args)


@pytest.mark.parametrize("stored_apart", [False, True])
def test_the_parameter_count_counts_tied_weights_once(bench, tmp_path, stored_apart):
    # A model file written from a GPU before tied weights were kept tied held a tied tensor once
    # per name; the count is the model's either way.
    from tfm.rundir.model_file import save_weights
    from tfm.transformer import ModelArgs, build_model

    args = ModelArgs(src_vocab_size=20000, tgt_vocab_size=20000, d_model=64, n_heads=2,
                     n_encoder_layers=1, n_decoder_layers=1, d_ff=64)  # fmt: skip
    weights = build_model(args).state_dict()
    unique = {t.data_ptr(): t.numel() for t in weights.values()}  # tied: one memory
    assert sum(unique.values()) < sum(t.numel() for t in weights.values())  # there are ties
    if stored_apart:
        weights = {name: t.clone() for name, t in weights.items()}
    save_weights(tmp_path / "best.pt", weights, asdict(args), step=1, tokenizer_fingerprint="x")
    assert bench.parameters(tmp_path) == f"{sum(unique.values()) / 1e6:.1f}M"


def test_seeds_train_one_run_each_and_score_their_ensembles(bench, monkeypatch, tmp_path):
    def fake_tfm(*args: str) -> str:
        bench.calls.append(args)
        return json.dumps({"bleu": 40.0, "bleu_signature": "a|b", "bleu_lowercase": 41.0,
                           "chrf": 60.0}) if args[0] == "eval" else ""  # fmt: skip

    monkeypatch.setattr(bench, "tfm", fake_tfm)
    monkeypatch.setattr(bench, "training_minutes", lambda run: 100.0 + int(run.name[-1]))
    monkeypatch.setattr(bench, "parameters", lambda run: "2.3M")
    args = _args(bench)
    for key, value in dict(runs=str(tmp_path), seeds=[0, 1], beam=5, average=10, alphas=None,
                           parallel=False, device_name="cpu", score="all").items():  # fmt: skip
        setattr(args, key, value)
    rows = bench.run_direction("en-de", args)
    trains = [call for call in bench.calls if call[0] == "train"]
    runs = [tmp_path / f"multi30k-en-de-seed{seed}" for seed in (0, 1)]
    for call, run, seed in zip(trains, runs, (0, 1), strict=True):
        assert f"run_dir={run}" in call and call[-2:] == ("--set", f"train.seed={seed}")
    evals = [call for call in bench.calls if call[0] == "eval"]
    assert len(rows) == len(evals) == 12  # 4 per run, then the 4 again as ensembles
    ensembles = [" ".join(call[1:5]) for call in evals[8:]]
    assert (
        ensembles
        == [f"--run {runs[0]} --ensemble {runs[1]}"] * 2
        + [f"--run {runs[0]}-avg10 --ensemble {runs[1]}-avg10"] * 2
    )
    assert [call[call.index("--beam-size") + 1] for call in evals[8:]] == ["1", "5", "1", "5"]
    assert rows[4].startswith("| en→de | multi30k-en-de-seed1, greedy | 40.0 (a\\|b) | 41.0 |")
    assert rows[-1] == (
        "| en→de | ensemble of 2, beam 5, avg last 10 | 40.0 (a\\|b) | 41.0 | 60.0 | "
        "201 (100 + 101) | cpu | 2 × 2.3M |"
    )
    args.score = "ensemble"  # the same four ensemble rows, without the single runs'
    assert bench.run_direction("en-de", args) == rows[8:]
    bench.calls.clear()
    args.score = "none"  # train only
    assert bench.run_direction("en-de", args) == []
    assert [call[0] for call in bench.calls] == ["train", "train"]


def test_parallel_seeds_share_the_cpu_threads(bench, monkeypatch, tmp_path, capfd):
    """Real child processes (a fake interpreter that logs its thread count and seed to stderr,
    and fails for seed 1): each gets an equal share of the threads, each line it logs comes
    through whole with its run's name first, and a failed run is named."""
    fake = tmp_path / "python"
    fake.write_text(
        "#!/bin/sh\n"
        'for arg; do seed="$arg"; done\n'
        'echo "threads $OMP_NUM_THREADS" >&2\n'
        'echo "last $seed" >&2\n'
        'echo "to stdout"\n'
        'case "$seed" in *seed=1) exit 3;; esac\n'
    )
    fake.chmod(0o755)
    monkeypatch.setattr(bench.sys, "executable", str(fake))
    monkeypatch.setattr(bench.os, "cpu_count", lambda: 4)
    args = _args(bench)
    args.parallel = True
    runs = [tmp_path / "a", tmp_path / "b"]
    with pytest.raises(SystemExit, match=f"training failed: {runs[1]}$"):
        bench.train_runs(runs, "en", "de", [0, 1], args)
    out, err = capfd.readouterr()
    assert out == ""  # the runs' stdout is not ours
    assert sorted(err.splitlines()) == [
        "[a] last train.seed=0",
        "[a] threads 2",
        "[b] last train.seed=1",
        "[b] threads 2",
    ]


def test_a_relative_data_folder_is_still_found_after_the_bench_moves_into_its_run_folder(
    monkeypatch, tmp_path
):
    """The benches train inside a temporary working directory: `--data data/multi30k` given
    from the checkout must keep naming the checkout's folder."""
    monkeypatch.syspath_prepend(str(SCRIPT.parent))
    import _multi30k

    (tmp_path / "data" / "multi30k").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    folder = _multi30k.require_data(Path("data/multi30k"))
    monkeypatch.chdir(tmp_path / "data")  # where a bench would have moved
    assert folder == tmp_path / "data" / "multi30k"
    assert folder.is_dir()
