"""Load on `tfm serve`: N concurrent clients on loopback send test-set sentences, one a request,
to a server of a torch run and of its int8 CTranslate2 export, in one run.

    python bench/serve_load.py --run RUN --clients 1,4,16,64 --requests 40 --seconds 60
    python bench/serve_load.py --run RUN --device cpu    # a GPU-trained run, served on the CPU
    python bench/serve_load.py --quick                   # a toy run trained in seconds
    python bench/serve_load.py --quick --run RUN         # RUN and its own test split

For each engine a `tfm serve --port 0` process is started (the command, as a user starts it),
and for each client count every client sends its requests one after another, each waiting for
its answer, until it has sent `--requests` or `--seconds` have passed (both bound the run). A
row gives sentences/s (answered sentences over the wall time of the round), that rate as a
ratio to one client's sequential rate in the same engine's run ("x 1 client": what dynamic
batching gains), p50/p95/p99 latency, errors (answers other than 200) and lost requests (no
answer at all: a reset, a timeout). Then the server is stopped with SIGTERM, which must end it
with exit 0. Clients and server share the machine's cores, so figures are ratios within one
run. A model whose outputs run on to the length limit (one trained too briefly) decodes far
more tokens a sentence and gives much higher latencies: measure a run trained to its end.

Data: test2016.{src} of the run's source language from `--data DIR`, else $TFM_MULTI30K, else
../shared/data/multi30k beside the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.client import HTTPConnection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _multi30k import QUICK_TRAINING, data_dir, machine, run_and_test_split  # noqa: E402

HOST = "127.0.0.1"
REQUEST_TIMEOUT_S = 60


def main(argv: list[str] | None = None) -> list[dict]:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="A trained run (default with --quick: a toy run).")
    parser.add_argument("--data", type=Path, help="Multi30k folder (default: $TFM_MULTI30K).")
    parser.add_argument(
        "--quick", action="store_true", help="A toy run (or --run's test split), few clients."
    )
    parser.add_argument("--clients", default="1,4,16,64", help="Client counts, comma-separated.")
    parser.add_argument("--requests", type=int, default=40, help="Requests a client, at most.")
    parser.add_argument("--seconds", type=float, default=60, help="Seconds a round, at most.")
    parser.add_argument("--threads", type=int, default=1, help="The server's threads.")
    parser.add_argument("--engines", default="torch,int8", help="torch and/or int8.")
    parser.add_argument(
        "--device", help="The torch server's device (default: the run's; cpu for a GPU run)."
    )
    parser.add_argument("--json", type=Path, help="Also write the rows here.")
    args = parser.parse_args(argv)
    if args.quick:
        args.clients, args.requests, args.seconds = "1,4", 6, 30
    with tempfile.TemporaryDirectory() as scratch:
        run, sentences = _run_and_sentences(args, Path(scratch))
        counts = [int(n) for n in args.clients.split(",")]
        print(f"# {machine()}")
        print(
            f"# {len(sentences)} sentences, clients {counts}, at most {args.requests} "
            f"requests a client, {args.seconds:g} s a round; server threads {args.threads}"
        )
        rows = []
        for engine in args.engines.split(","):
            model = run if engine == "torch" else _exported(run, Path(scratch) / engine)
            rows += _engine_rows(engine, model, sentences, counts, args)
    _print(rows)
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    return rows


def _run_and_sentences(args: argparse.Namespace, scratch: Path) -> tuple[Path, list[str]]:
    if args.quick:
        args.run, src, _ = run_and_test_split(args.run, scratch, QUICK_TRAINING)
        return args.run, src
    if args.run is None:
        sys.exit("give --run RUN (a trained run) or --quick")
    from tfm.api import load_config

    language = load_config(args.run / "config.yaml", stored=True).data.src_lang
    path = data_dir(args.data) / f"test2016.{language}"
    if not path.is_file():
        sys.exit(f"{path} not found; give --data DIR or set TFM_MULTI30K")
    return args.run, path.read_text(encoding="utf-8").splitlines()


def _exported(run: Path, out: Path) -> Path:
    from tfm.api import export_run

    export_run(run, out, quantization="int8")
    return out


def _engine_rows(engine: str, model: Path, sentences: list[str], counts: list[int], args) -> list:
    command = [
        sys.executable,
        "-m",
        "tfm",
        "serve",
        "--run",
        str(model),
        "--port",
        "0",
        "--threads",
        str(args.threads),
        "--max-queue",
        "1024",
    ]
    if args.device and engine == "torch":
        command += ["--device", args.device]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    server = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True
    )
    try:
        address = server.stdout.readline().strip()
        if not address.startswith("http://"):
            sys.exit(f"tfm serve did not start: {server.stderr.read()}")
        port = int(address.rsplit(":", 1)[1])
        _round(port, sentences[:8], 1, 8, args.seconds)  # warm-up: first calls are slow
        rows = []
        for clients in counts:
            row = _round(port, sentences, clients, args.requests, args.seconds)
            rows.append({"engine": engine, **row})
        server.send_signal(signal.SIGTERM)
        code = server.wait(REQUEST_TIMEOUT_S)
    finally:
        server.kill()
    if code != 0:
        sys.exit(f"tfm serve exited {code} on SIGTERM: {server.stderr.read()}")
    single = rows[0]["sentences_per_s"] if counts[0] == 1 else float("nan")
    for row in rows:
        row["vs_one_client"] = round(row["sentences_per_s"] / single, 2)
    return rows


def _round(port: int, sentences: list[str], clients: int, requests: int, seconds: float) -> dict:
    """`clients` clients, each sending up to `requests` one-sentence requests in turn."""
    latencies: list[float] = []
    errors, lost = [0], [0]
    lock = threading.Lock()
    deadline = time.monotonic() + seconds

    def client(index: int) -> None:
        connection = HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
        for k in range(requests):
            if time.monotonic() > deadline:
                break
            sentence = sentences[(index * requests + k) % len(sentences)]
            body = json.dumps({"sentences": [sentence]}).encode("utf-8")
            started = time.perf_counter()
            try:
                connection.request("POST", "/translate", body, {"Content-Type": "application/json"})
                response = connection.getresponse()
                answer = json.loads(response.read())
                ok = response.status == 200 and len(answer["translations"]) == 1
            except (OSError, ValueError):
                with lock:
                    lost[0] += 1
                connection.close()
                connection = HTTPConnection(HOST, port, timeout=REQUEST_TIMEOUT_S)
                continue
            with lock:
                latencies.append(time.perf_counter() - started) if ok else None
                errors[0] += 0 if ok else 1
        connection.close()

    threads = [threading.Thread(target=client, args=(i,)) for i in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    wall = time.perf_counter() - started
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    return {
        "clients": clients,
        "answered": len(latencies),
        "sentences_per_s": round(len(latencies) / wall, 2),
        "p50_ms": round(quantiles[49] * 1000, 1),
        "p95_ms": round(quantiles[94] * 1000, 1),
        "p99_ms": round(quantiles[98] * 1000, 1),
        "errors": errors[0],
        "lost": lost[0],
    }


def _print(rows: list[dict]) -> None:
    print(
        "| engine | clients | answered | sentences/s | x 1 client | p50 ms | p95 ms | p99 ms "
        "| errors | lost |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(
            f"| {r['engine']} | {r['clients']} | {r['answered']} | {r['sentences_per_s']} | "
            f"{r['vs_one_client']} | {r['p50_ms']} | {r['p95_ms']} | {r['p99_ms']} | "
            f"{r['errors']} | {r['lost']} |"
        )


if __name__ == "__main__":
    main()
