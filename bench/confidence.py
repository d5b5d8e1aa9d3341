"""Confidence against sentence chrF on trained runs: how well the confidence that `tfm translate
--json` gives ranks a run's test sentences, what fitting its map costs, and the model's other
figures measured beside the one it reads.

    python bench/confidence.py --runs RUN [RUN ...]   # trained runs (each copied: read only)
    python bench/confidence.py --quick                # a tiny toy run trained here (tests)

For each run, `tfm calibrate` fits the confidence map on the validation split of a copy of the
run (a run straight from `tfm train` has one already; an averaged one has none), for the
decoding its config plans. The test split is then decoded as `tfm translate` decodes it, and the
confidence of each translation is set against its sentence chrF: Spearman's rho and how far the
least confident tenth of the sentences scores below the mean (the goals: 0.5 and 15 points).

Figures beside the mean token log-probability (`log_prob`, the one the map reads), each added to
it: `agreement`, the mean chrF of the translation against the other translations of its beam;
`dropout`, the variance of log_prob over `--passes` passes with dropout on (Fomicheva et al.,
2020); `coverage`, the mean log of how much cross attention (last layer, heads averaged) each
source token receives, at most 1; `entropy`, the mean entropy of the model's predictions. A set
of figures is combined by least squares into one, which the map's own monotone fit turns into
chrF; each set is scored on validation by 5-fold cross-validation (what chooses), then on test.

Costs: `tfm calibrate` (what `tfm train` pays after its budget) and the decoding of the
validation split within it, and the confidences of the test split against its translation as
planned and by greedy search (what `--json`, eval and the server add to a request).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import torch

from tfm.api import (
    BOS_ID,
    EOS_ID,
    PAD_ID,
    ConfidenceMap,
    DecodeRequest,
    batching,
    calibrate_run,
    inference_batches,
    load_config,
    load_texts,
    low_share_gap,
    open_translator,
    sentence_chrf,
    spearman,
    train,
)

CANDIDATES = ("agreement", "dropout", "coverage", "entropy")
FOLDS = 5
QUICK = [
    "data.toy.n_train=600", "data.toy.n_validation=60", "data.toy.n_test=60",
    "tokenizer.vocab_size=200", "model.d_model=32", "model.n_heads=2",
    "model.n_encoder_layers=1", "model.n_decoder_layers=1", "model.d_ff=64",
    "model.dropout=0.1", "train.max_tokens=600", "train.max_steps=200", "train.validate_every=200",
    "train.warmup_steps=10", "train.lr=0.01", "decoding.strategy=beam", "decoding.beam_size=3",
]  # fmt: skip


def main(argv: Sequence[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=Path, nargs="+", default=[], help="trained run folders")
    parser.add_argument("--passes", type=int, default=10, help="dropout passes (default 10)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (default 1)")
    parser.add_argument("--quick", action="store_true", help="a tiny toy run trained here")
    args = parser.parse_args(argv)
    if not args.runs and not args.quick:
        parser.error("give --runs RUN ... (trained runs) or --quick")
    torch.set_num_threads(args.threads)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfm-bench-") as tmp:
        runs = [quick_run(Path(tmp))] if args.quick else args.runs
        for i, run in enumerate(runs):
            copy = Path(tmp) / f"copy-{i}"
            shutil.copytree(run, copy, ignore=shutil.ignore_patterns("checkpoints", ".lock"))
            rows.append(measure(run, copy, passes=2 if args.quick else args.passes))
            print(report(rows[-1]), flush=True)
    print(summary(rows))
    return rows


def quick_run(folder: Path) -> Path:
    """A tiny toy run with dropout and a beam of 3, trained here in seconds."""
    config = load_config(None, [*QUICK, f"run_dir={folder / 'run'}"])
    return Path(train(config, progress_bar=False).run_dir)


def measure(run: Path, copy: Path, *, passes: int) -> dict:
    """The figures of one run (see the module docstring); `copy` is a copy of it to fit in."""
    fitted = calibrate_run(copy, device="cpu")
    translator = open_translator(DecodeRequest(run=copy, device="cpu"))
    found = {split: decoded(translator, split) for split in ("validation", "test")}
    test = found["test"]
    started = time.perf_counter()
    figures = translator.log_probs(test["framed"], test["ids"])
    judged_s = time.perf_counter() - started
    confidences = [translator.confidence_map(f) for f in figures]
    greedy = translator.settings.asking(translator.config.decoding, {"strategy": "greedy"})
    started = time.perf_counter()
    translator.translate(test["sources"], settings=greedy)
    greedy_s = time.perf_counter() - started
    chrf = test["chrf"]
    figures = {split: figures_of(translator, found[split], passes) for split in found}
    data = translator.config.data
    return {
        "run": str(run), "pair": f"{data.src_lang}-{data.tgt_lang}",
        "sentences": len(chrf), "mean_chrf": float(np.mean(chrf)),
        "rho": spearman(confidences, chrf), "gap": low_share_gap(confidences, chrf),
        "mean_confidence": float(np.mean(confidences)), "fit_s": fitted["seconds"],
        "decode_s": found["validation"]["seconds"], "judge_ratio": judged_s / test["seconds"],
        "judge_greedy_ratio": judged_s / greedy_s,
        "sets": compare(figures, found["validation"]["chrf"], chrf),
    }  # fmt: skip


def decoded(translator, split: str) -> dict:
    """A split's sources (and framed), references, the translations of each source's beam
    (best first) as `tfm translate` decodes them, the ids the search found for the best, its
    sentence chrF and the decoding seconds."""
    sources, references, _ = load_texts(translator.config.data, split)
    framed = [ids + [EOS_ID] for ids in translator.tokenizer.encode_src(sources)]
    numbers = list(range(1, len(framed) + 1))
    started = time.perf_counter()
    beams = translator.ranked_found(sources, framed, translator.settings, numbers)
    seconds = time.perf_counter() - started
    best = [beam[0][0] for beam in beams]
    return {"sources": sources, "framed": framed, "references": references, "best": best,
            "ids": [beam[0][2] for beam in beams], "seconds": seconds,
            "beams": [[text for text, *_ in beam] for beam in beams],
            "chrf": sentence_chrf(best, references)}  # fmt: skip


def figures_of(translator, found: dict, passes: int) -> dict[str, np.ndarray]:
    """Each figure of each translation of a decoded split (of the ids the search found)."""
    model, sources = translator.model, found["framed"]
    targets = [[BOS_ID, *ids, EOS_ID] for ids in found["ids"]]
    log_prob, entropy, _ = forward(model, sources, targets, train=False)
    drawn = np.stack([forward(model, sources, targets, train=True)[0] for _ in range(passes)])
    _, _, coverage = forward(model, sources, targets, train=False, attention=True)
    agreement = [
        np.mean(sentence_chrf([best] * len(others), others)) if (others := beam[1:]) else 100.0
        for best, beam in zip(found["best"], found["beams"], strict=True)
    ]
    return {"log_prob": log_prob, "agreement": np.array(agreement), "dropout": drawn.var(0),
            "coverage": coverage, "entropy": entropy}  # fmt: skip


@torch.inference_mode()
def forward(model, sources, targets, *, train: bool, attention: bool = False):
    """Per pair: mean token log-probability, mean entropy of the predictions, and (with
    `attention`) the coverage of the source by the last layer's cross attention."""
    model.train(train)
    log_prob, entropy, coverage = (np.zeros(len(sources)) for _ in range(3))
    lengths = [max(len(s), len(t)) for s, t in zip(sources, targets, strict=True)]
    for indices in inference_batches(lengths, max_tokens=4096):
        batch = batching.collate([sources[i] for i in indices], [targets[i] for i in indices])
        logits = model(batch.src, batch.tgt_in).float().log_softmax(-1)  # (B, T, V)
        picked = logits.gather(2, batch.tgt_out.unsqueeze(2)).squeeze(2)  # (B, T)
        spread = -(logits.exp() * logits).sum(-1)  # (B, T)
        real, seen = batch.tgt_out != PAD_ID, batch.src != PAD_ID  # (B, T), (B, S)
        counts = real.sum(1)
        log_prob[indices] = ((picked * real).sum(1) / counts).numpy()
        entropy[indices] = ((spread * real).sum(1) / counts).numpy()
        if attention:
            weights = model.attention_maps(batch.src, batch.tgt_in)["cross"][-1].mean(1)
            received = (weights * real.unsqueeze(2)).sum(1).clamp(1e-9, 1.0).log()  # (B, S)
            coverage[indices] = ((received * seen).sum(1) / seen.sum(1)).numpy()
    model.eval()
    return log_prob, entropy, coverage


def compare(figures: dict, validation_chrf: list[float], test_chrf: list[float]) -> list[dict]:
    """log_prob alone and with each other figure: the validation's cross-validated rho, and the
    test's rho and low tenth's gap of the set fitted on the whole validation split."""
    rows = []
    for extra in ("", *CANDIDATES):
        names = ["log_prob", *([extra] if extra else [])]
        x = {split: np.stack([figures[split][n] for n in names], 1) for split in figures}
        held_out = cross_validated(x["validation"], np.asarray(validation_chrf))
        predict = fitted(x["validation"], np.asarray(validation_chrf))
        on_test = predict(x["test"])
        rows.append({"figures": " + ".join(names), "validation_rho": spearman(held_out,
                     validation_chrf), "rho": spearman(on_test, test_chrf),
                     "gap": low_share_gap(on_test, test_chrf)})  # fmt: skip
    return rows


def fitted(x: np.ndarray, chrf: np.ndarray):
    """The figures' least-squares sum, mapped to chrF as the confidence map maps log_prob."""
    weights, *_ = np.linalg.lstsq(with_bias(x), chrf, rcond=None)
    mapped = ConfidenceMap.fit(list(with_bias(x) @ weights), list(chrf), "beam")
    return lambda new: np.array([mapped(v) for v in with_bias(new) @ weights])


def with_bias(x: np.ndarray) -> np.ndarray:
    return np.hstack([x, np.ones((len(x), 1))])


def cross_validated(x: np.ndarray, chrf: np.ndarray) -> np.ndarray:
    """Each sentence's confidence from the set fitted on the other folds."""
    folds = np.array_split(np.random.default_rng(0).permutation(len(chrf)), FOLDS)
    out = np.zeros(len(chrf))
    for fold in folds:
        rest = np.setdiff1d(np.arange(len(chrf)), fold)
        out[fold] = fitted(x[rest], chrf[rest])(x[fold])
    return out


def report(row: dict) -> str:
    lines = [
        f"{row['run']} ({row['pair']}): test {row['sentences']} sentences, mean sentence chrF "
        f"{row['mean_chrf']:.1f}, mean confidence {row['mean_confidence']:.1f}",
        f"  confidence against sentence chrF: Spearman {row['rho']:.3f}, least confident tenth "
        f"{row['gap']:.1f} chrF below the mean",
        f"  cost: tfm calibrate {row['fit_s']:.1f} s, of which decoding the validation split "
        f"{row['decode_s']:.1f} s; confidences / translation time {row['judge_ratio']:.2f}x "
        f"(/ greedy search's {row['judge_greedy_ratio']:.2f}x)",
        "  | figures | validation rho (5-fold) | test rho | test low tenth gap |",
        "  |---|---|---|---|",
    ]
    lines += [f"  | {s['figures']} | {s['validation_rho']:.3f} | {s['rho']:.3f} | {s['gap']:.1f} |"
              for s in row["sets"]]  # fmt: skip
    return "\n".join(lines)


def summary(rows: list[dict]) -> str:
    met = sum(row["rho"] >= 0.5 and row["gap"] >= 15 for row in rows)
    gains = [max(s["validation_rho"] for s in row["sets"][1:]) - row["sets"][0]["validation_rho"]
             for row in rows]  # fmt: skip
    return (f"goals (Spearman >= 0.5, least confident tenth >= 15 chrF below the mean) met on "
            f"{met} of {len(rows)} run(s); the best other figure adds {max(gains):+.3f} to "
            f"log_prob's validation rho")  # fmt: skip


if __name__ == "__main__":
    main()
