"""bench/pairs.py --quick: a sweep value scaled from the recipe's on a tiny pair, a load
starting mid-run, monolingual text and a related pair, the run a table row."""

import re
from pathlib import Path

from bench_reports import print_in_turn, tfm_in_process


def test_pairs(script, capsys, monkeypatch):
    """Training runs as a process of its own (the competing load needs one); the other
    commands (config show, average, eval) run in this process, as `tfm` would run them."""
    bench = script("pairs")
    monkeypatch.setattr(bench, "tfm", tfm_in_process)
    monkeypatch.setattr(bench, "print", print_in_turn, raising=False)  # runs in threads
    bench.main(["--quick", "--variants", "mono", "related", "--sweep", "train.lr=2x",
                "--load", "start", "--parallel", "3", "--runs", "runs"])  # fmt: skip
    out = capsys.readouterr().out
    # Monolingual text in a budget too short for back-translation: the row says it is left out.
    assert re.search(r"^\| en→de \| mono \| 0 \| .+ \| left out \|$", out, re.M) is not None
    rows = re.findall(
        r"^\| en→de \| (\S+) \| 0 \| (.+?) \| (\d+) \| (\d+) \| (\d+)% \| ([\d.]+) \| "
        r"([\d.]+) \| ([\d.]+) \| ([\d.]+) \|",
        out,
        re.M,
    )
    # A related pair: the row's last column is the mix its plan chose.
    mix = r"en→de \d+( ×\d+)?, en→nl \d+: main \d+%"
    assert re.search(rf"^\| en→de \| related \| 0 \| .+ \| {mix} \|$", out, re.M) is not None
    # Twice the recipe's peak for the pair's d_model of 128 (1.4e-3), read from `tfm config show`:
    # the row as it comes, then the table.
    rows = [row for row in rows if row[0] not in ("mono", "related")]
    assert [row[0] for row in rows] == ["train.lr=0.0028"] * 2
    for _variant, plan, planned, steps, used, lr_end, bleu, chrf, unk in rows:
        assert "vocab 1000" in plan and "beam 5" in plan and int(planned) >= int(steps) >= 1
        assert int(used) > 0 and 0 < float(lr_end) <= 1
        assert 0 <= float(bleu) <= 100 and 0 <= float(chrf) <= 100 and float(unk) == 0
    assert "lr 0.0028" in rows[0][1]
    assert "budget: 0.03 minutes on 1 thread(s) a run" in out


def test_seeds_added_to_runs_already_measured_keep_their_own_names(script):
    bench = script("pairs")
    args = bench.argparse.Namespace(
        pairs=["en-it"], variants=["derived", "related"], sweep=None, seeds=1, first_seed=1
    )
    jobs = bench.jobs_for(args, None)
    assert [(job["name"], job["seed"]) for job in jobs] == [
        ("en-it-derived-s1", 1),
        ("en-it-related-s1", 1),
    ]
    args.seeds, args.first_seed = 1, 0  # one seed, the first: the names of a plain run
    assert [job["name"] for job in bench.jobs_for(args, None)] == ["en-it-derived", "en-it-related"]


def test_a_related_pair_given_a_repeat_has_it_in_the_config(script, tmp_path):
    bench = script("pairs")
    args = bench.argparse.Namespace(
        data=str(tmp_path), related=["en-uk=en-pl*1,en-ru"], into_english=False, minutes=30.0,
        threads=1, mono=None,
    )  # fmt: skip
    job = {"pair": "en-uk", "variant": "related", "seed": 0, "keys": {}, "name": "en-uk-related",
           "on": "related"}  # fmt: skip
    config = bench.yaml.safe_load(bench.config_for(job, args, tmp_path).read_text())
    assert config["data"]["related"] == [
        {"format": "text", "path": str(tmp_path / "en-pl" / "train"), "src_lang": "en",
         "tgt_lang": "pl", "repeat": 1},
        {"format": "text", "path": str(tmp_path / "en-ru" / "train"), "src_lang": "en",
         "tgt_lang": "ru"},
    ]  # fmt: skip


def test_a_row_into_english_is_labelled_by_its_direction(script):
    """The data folder is named en-X either way; the table's label is the run's direction."""
    bench = script("pairs")
    row = {"direction": "tr→en", "variant": "mono", "seed": 1, "plan": "d256", "planned": 10,
           "steps": 9, "used": 0.99, "lr_end": 0.1, "bleu": 26.9, "chrf": 43.8, "unk_rate": 0.0,
           "minutes": 30.2, "load": 2.0, "phases": "left out"}  # fmt: skip
    assert bench.table([row]).splitlines()[2].startswith("| tr→en | mono | 1 |")
    args = bench.argparse.Namespace(into_english=True)
    assert bench.direction("en-tr", args) == ("tr", "en")


def test_a_sweep_on_the_related_variant_changes_its_config_and_says_so(script, tmp_path):
    bench = script("pairs")
    args = bench.argparse.Namespace(
        data=str(tmp_path), related=["en-fr=en-it"], into_english=False, minutes=30.0, threads=1,
        mono=None, pairs=["en-fr"], variants=[], sweep="data.main_share=0.35,0.65",
        sweep_on="related", seeds=1, first_seed=0,
    )  # fmt: skip
    jobs = bench.jobs_for(args, tmp_path)
    assert [job["variant"] for job in jobs] == [
        "related data.main_share=0.35",
        "related data.main_share=0.65",
    ]
    assert jobs[0]["name"] == "en-fr-related_data.main_share=0.35"
    config = bench.yaml.safe_load(bench.config_for(jobs[0], args, tmp_path).read_text())
    assert config["data"]["main_share"] == 0.35
    assert config["data"]["related"][0]["path"] == str(tmp_path / "en-it" / "train")
    args.sweep_on = "derived"  # the data-only config's sweep: no related corpora
    config = bench.yaml.safe_load(bench.config_for(bench.jobs_for(args, tmp_path)[1], args,
                                                   tmp_path).read_text())  # fmt: skip
    assert config["data"]["main_share"] == 0.65 and "related" not in config["data"]


def small_batch_sweep(bench, tmp_path, sweep):
    """pairs.py's arguments for `--variants --sweep-on small-batch --sweep SWEEP` on en-fr."""
    return bench.argparse.Namespace(
        data=str(tmp_path), related=None, into_english=False, minutes=15.0, threads=1, mono=None,
        pairs=["en-fr"], variants=[], sweep=sweep, sweep_on="small-batch", seeds=1, first_seed=0,
    )  # fmt: skip


def test_a_sweep_on_a_variant_of_keys_keeps_them_beside_its_value(script, tmp_path):
    bench = script("pairs")
    args = small_batch_sweep(bench, tmp_path, "train.lr=0.001")
    [job] = bench.jobs_for(args, tmp_path)
    config = bench.yaml.safe_load(bench.config_for(job, args, tmp_path).read_text())
    assert job["variant"] == "small-batch train.lr=0.001"
    assert config["train"]["max_tokens"] == 512 and config["train"]["lr"] == 0.001
    assert bench.VARIANTS["small-batch"] == {"train": {"max_tokens": 512}}  # left as it was


def test_a_scaled_sweep_value_scales_the_plan_of_its_variant(script, tmp_path, monkeypatch):
    bench = script("pairs")
    shown = []

    def config_show(*args, log):  # what `tfm config show` would print of the plan's train.lr
        shown.append(bench.yaml.safe_load(Path(args[-1]).read_text()))
        return "train:\n  lr: 0.0014\n"

    monkeypatch.setattr(bench, "tfm", config_show)
    args = small_batch_sweep(bench, tmp_path, "train.lr=2x")
    [job] = bench.jobs_for(args, tmp_path)
    [config] = shown  # the plan shown is the one of the variant's own config
    assert config["train"]["max_tokens"] == 512 and "lr" not in config["train"]
    assert job["variant"] == "small-batch train.lr=0.0028"
    assert job["keys"] == {"train": {"max_tokens": 512, "lr": 0.0028}}
