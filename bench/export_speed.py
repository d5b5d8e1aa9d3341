"""Decoding speed of a CTranslate2 export (`tfm.deploy`) against tfm's own decoding, in one run:
tfm, CTranslate2 float32 and CTranslate2 int8, each greedy and beam 5, on 1 and 2 threads.

    python bench/export_speed.py --run RUN               # Multi30k test2016 (1,000 sentences)
    python bench/export_speed.py --run RUN --threads 1   # quieter where other jobs share the cores
    python bench/export_speed.py --quick                 # a toy run trained in seconds, 20
    python bench/export_speed.py --quick --run RUN       # RUN's own test split, 20

Sentences per second are text in, text out (tokenising and detokenising included), of all the
sentences at once (each engine opened by `tfm.commands.engines.open_translator`),
reported as ratios to tfm's greedy search on one thread in the same round ("ratio") and to tfm
with the same search and threads ("vs tfm"): rounds run the three engines in turn, in
alternating order. `--beams` and `--threads` choose other lists (`--threads 1` for a quieter
measurement where other jobs share the cores). Each engine runs in a child process of its own,
so its peak memory (the child's peak resident set: Python, the libraries, the model, decoding)
is what a process serving it alone would need; the CTranslate2 children never import torch.
BLEU (sacreBLEU against the reference side) comes with each row, so the export's quality is
checked in the same run. The run is exported to a temporary folder (float32 and int8) first.

Data: test2016.{src,tgt} of the run's languages from `--data DIR`, else $TFM_MULTI30K, else
../shared/data/multi30k beside the repository.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "bench"))

ENGINES = ("tfm", "ct2-float32", "ct2-int8")
QUANTIZATION = {"ct2-float32": "none", "ct2-int8": "int8"}
QUICK_SENTENCES = 20
QUICK_RUN = [
    "data.toy.n_train=2000", "data.toy.n_validation=10", f"data.toy.n_test={QUICK_SENTENCES}",
    "tokenizer.vocab_size=200", "model.d_model=64", "model.n_heads=4", "model.n_encoder_layers=1",
    "model.n_decoder_layers=1", "model.d_ff=128", "model.dropout=0.0", "train.max_steps=150",
    "train.validate_every=150", "train.max_tokens=1500", "train.lr=5e-3", "train.warmup_steps=30",
]  # fmt: skip


def default_data() -> Path:
    """$TFM_MULTI30K, else ../shared/data/multi30k beside the repository root."""
    return Path(os.environ.get("TFM_MULTI30K") or ROOT.parent / "shared" / "data" / "multi30k")


def test_sentences(run: Path, data: Path, n: int) -> tuple[list[str], list[str]]:
    """The first `n` test2016 sources of the run's source language, and their references."""
    from tfm.api import load_config

    languages = load_config(run / "config.yaml", stored=True).data
    sides = []
    for lang in (languages.src_lang, languages.tgt_lang):
        path = data / f"test2016.{lang}"
        if not path.is_file():
            raise SystemExit(f"{path} not found; pass --data DIR or set TFM_MULTI30K")
        sides.append(path.read_text(encoding="utf-8").splitlines()[:n])
    return sides[0], sides[1]


def quick_run(folder: Path, run: Path | None = None) -> tuple[Path, list[str], list[str]]:
    """`run` (else a toy run trained here for a few seconds) and the first 20 sentences of its
    own test split, with references."""
    from _multi30k import run_and_test_split  # here: the engines' children never import torch

    run, src, tgt = run_and_test_split(run, folder, QUICK_RUN)
    return run, src[:QUICK_SENTENCES], tgt[:QUICK_SENTENCES]


def measure(engine: str, model: str, lines: list[str], beams: list[int], threads: list[int]):
    """In the child: decode `lines` with every beam size and thread count, after a warm-up on
    a few of them; their seconds and outputs, and the process's peak resident memory in MiB."""
    rows = []
    for n_threads in threads:
        decode = _decoder(engine, model, n_threads)
        for beam in beams:
            decode(lines[:8], beam)
            start = time.perf_counter()
            outputs = decode(lines, beam)
            rows.append({"beam": beam, "threads": n_threads, "seconds": time.perf_counter() - start,
                         "outputs": outputs})  # fmt: skip
    return {"rows": rows, "peak_mib": peak_rss_mib()}


def peak_rss_mib() -> float:
    """This process's peak resident set (VmHWM), in MiB. Not `getrusage`: Linux carries its
    maximum over from the parent that started this process."""
    with open("/proc/self/status", encoding="ascii") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _decoder(engine: str, model: str, n_threads: int):
    """A function (lines, beam size) -> translations for one engine on `n_threads` threads:
    `model` is the run (engine "tfm") or the exported folder, opened as a Translator."""
    from tfm.api import DecodeRequest, open_translator

    translator = open_translator(DecodeRequest(run=model, device="cpu", threads=n_threads))
    decoding = translator.config.decoding
    return lambda lines, beam: translator.translate(
        lines, settings=translator.settings.asking(decoding, {"beam_size": beam})
    )


def run_child(engine: str, model: Path, lines_file: Path, beams, threads) -> dict:
    """`measure` in a fresh Python process (see the module docstring: peak memory)."""
    command = [sys.executable, __file__, "--child", engine, "--model", str(model),
               "--lines", str(lines_file), "--beams", ",".join(map(str, beams)),
               "--threads", ",".join(map(str, threads))]  # fmt: skip
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{engine} child failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def benchmark(run: Path, lines: list[str], refs: list[str] | None, *, rounds: int, folder: Path,
              beams=(1, 5), threads=(1, 2)) -> list[dict]:  # fmt: skip
    """One row per engine, beam size and thread count (see `table`), measured in `rounds`
    rounds of the three engines."""
    from tfm.api import export_run

    models = {"tfm": run}
    for engine, quantization in QUANTIZATION.items():
        models[engine] = folder / engine
        export_run(run, models[engine], quantization=quantization, overwrite=True)
    lines_file = folder / "lines.json"
    lines_file.write_text(json.dumps(lines), encoding="utf-8")
    results: dict[tuple, list] = {}
    peaks: dict[str, float] = {}
    for r in range(rounds):
        for engine in ENGINES if r % 2 == 0 else ENGINES[::-1]:
            found = run_child(engine, models[engine], lines_file, beams, threads)
            peaks[engine] = max(peaks.get(engine, 0.0), found["peak_mib"])
            for row in found["rows"]:
                results.setdefault((engine, row["beam"], row["threads"]), []).append(row)
    return table(results, peaks, len(lines), refs)


def table(results: dict[tuple, list], peaks: dict[str, float], n: int, refs) -> list[dict]:
    """Per (engine, beam, threads): median sentences/s; median of the per-round ratios to tfm
    greedy on one thread ("ratio") and to tfm with the same search and threads ("vs_tfm"); the
    engine's peak MiB; BLEU of its outputs when there are references."""
    from tfm.api import score_translations

    rows = []
    for (engine, beam, n_threads), measured in results.items():
        paired = {
            name: [b["seconds"] / m["seconds"] for m, b in zip(measured, base, strict=True)]
            for name, base in (
                ("ratio", results[("tfm", 1, 1)]), ("vs_tfm", results[("tfm", beam, n_threads)])
            )
        }  # fmt: skip
        bleu = score_translations(measured[-1]["outputs"], refs)["bleu"] if refs else None
        rows.append({"engine": engine, "search": "greedy" if beam == 1 else f"beam {beam}",
                     "threads": n_threads,
                     "sentences_per_s": statistics.median(n / m["seconds"] for m in measured),
                     "ratio": statistics.median(paired["ratio"]),
                     "vs_tfm": statistics.median(paired["vs_tfm"]), "peak_mib": peaks[engine],
                     "bleu": bleu})  # fmt: skip
    return rows


def report(rows: list[dict], n: int, rounds: int) -> str:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    lines = [f"{n} sentences, {rounds} round(s), {os.cpu_count()} CPUs, load {load}; ratio: "
             "sentences/s over tfm greedy on 1 thread; vs tfm: over tfm, same search and threads",
             f"{'engine':<12} {'search':<7} {'thr':>3} {'sent/s':>8} {'ratio':>7} {'vs tfm':>7} "
             f"{'peak MiB':>9} {'BLEU':>6}"]  # fmt: skip
    for row in rows:
        bleu = "" if row["bleu"] is None else f"{row['bleu']:.2f}"
        lines.append(f"{row['engine']:<12} {row['search']:<7} {row['threads']:>3} "
                     f"{row['sentences_per_s']:>8.1f} {row['ratio']:>6.2f}x {row['vs_tfm']:>6.2f}x "
                     f"{row['peak_mib']:>9.0f} {bleu:>6}")  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="the trained run to export and compare")
    parser.add_argument("--data", type=Path, help="folder of test2016.{de,en} (Multi30k)")
    parser.add_argument("--sentences", type=int, default=1000, help="how many to translate")
    parser.add_argument("--rounds", type=int, default=3, help="rounds of all engines")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="toy run (or --run's test split), 20 sentences, 1 round",
    )
    parser.add_argument("--json", type=Path, help="also write the table here as JSON")
    parser.add_argument("--child", choices=ENGINES, help=argparse.SUPPRESS)
    parser.add_argument("--model", help=argparse.SUPPRESS)
    parser.add_argument("--lines", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--beams", default="1,5", help="beam sizes, with 1 (greedy) among them")
    parser.add_argument("--threads", default="1,2", help="thread counts, with 1 among them")
    args = parser.parse_args(argv)
    beams, threads = ([int(x) for x in v.split(",")] for v in (args.beams, args.threads))
    if 1 not in beams or 1 not in threads:
        raise SystemExit(
            "--beams and --threads must include 1 (the baseline is tfm greedy, 1 thread)"
        )
    if args.child:
        lines = json.loads(args.lines.read_text(encoding="utf-8"))
        print(json.dumps(measure(args.child, args.model, lines, beams, threads)))
        return []
    with tempfile.TemporaryDirectory(prefix="tfm-export-bench-") as tmp:
        if args.quick:
            run, lines, refs = quick_run(Path(tmp), args.run)
            rounds = 1
        elif args.run is None:
            raise SystemExit("give --run DIR (a trained run) or --quick")
        else:
            run, rounds = args.run, args.rounds
            lines, refs = test_sentences(run, args.data or default_data(), args.sentences)
        rows = benchmark(run, lines, refs, rounds=rounds, folder=Path(tmp), beams=beams,
                         threads=threads)  # fmt: skip
    print(report(rows, len(lines), rounds))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return rows


if __name__ == "__main__":
    main()
