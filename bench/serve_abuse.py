"""Abuse against `tfm serve`: a normal client's latency while, in turn, idle connections are held
open, clients send the heaviest request the limits allow, malformed requests pour in, and a
crowd of heaviest requests comes at once beside a client holding more connections than the
cap; then the length of the server's log and its exit on SIGTERM.

    python bench/serve_abuse.py              # a toy run trained here (about a minute), 30 s a phase
    python bench/serve_abuse.py --run RUN    # a trained run and its test sentences
    python bench/serve_abuse.py --quick      # a tiny toy run, 1 s a phase, a crowd of 15

Without --run the script trains a toy en→de run (d_model 64, 200 steps) and the normal client
sends its 200 test sentences. One `tfm serve --port 0` process (the command as a user starts it:
default limits, `--max-connections` named at its default so that the crowd's holder knows it,
one thread) serves every phase. In each, the normal client sends the run's test sentences, one
a request, each once the previous one is answered, for `--seconds`, while the abuse runs:
- none: the baseline;
- idle: `--idle` connections (1,000) opened and held without sending a byte; those the server
  closes (its read timeout, 10 s) are opened again at once;
- heavy: `--heavy` clients (10), each sending, one after another, the heaviest request the
  server's limits allow (read from /info: max_sentences sentences of max_tokens / max_sentences
  tokens, at the beam that makes max_beam_tokens), waiting the Retry-After of a refusal;
- malformed: `--malformed` requests a second (100), each on a new connection, in turn broken
  JSON, a lone surrogate, JSON nested 2,000 deep, a form, a latin-1 charset, another Host, an
  empty Host, a body over the limit, a body cut short, bytes that are not HTTP, headers cut
  short, headers of 20 KiB in one write;
- crowd: a client at 127.0.0.2 holds the cap and `--over-cap` (50) connections more without
  sending a byte (those closed are opened again), and from it a request every 0.5 s on a new
  connection; then `--crowd` clients (60: the toy model decodes 15 well within the timeout)
  send the heaviest request, all at once, once.
A row gives the normal client's answers, failures (any answer but 200, or none), p50 and p99,
and what the abuse met. Goals: no failed normal request, p99 under 1 s (under 3 s beside heavy
ones); beside the crowd, every heavy request answered, or refused within 1 s, none timed out,
and the requests over the cap answered (503), not reset; no answer 500 in any phase; under 100
lines of server log for the whole run, and exit 0 on SIGTERM. Client and server share the
machine's cores, so the figures move with other jobs on the machine.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import resource
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.client import HTTPConnection
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _multi30k import QUICK_TRAINING, machine, run_and_test_split  # noqa: E402

HOST = "127.0.0.1"
HOLDER = "127.0.0.2"  # the crowd's connection holder: another client address, on loopback too
CAP = 2048  # `tfm serve --max-connections`, its default
GOALS = {"none": None, "idle": 1.0, "heavy": 3.0, "malformed": 1.0, "crowd": 1.0}  # p99 s
REFUSED_WITHIN_MS = 1000  # a heavy request of the crowd is answered, or refused this soon
TOY = [  # the full run's model when no --run is given: the toy grammar learnt in 200 steps
    "data.src_lang=en", "data.tgt_lang=de", "data.toy.n_train=3000", "data.toy.n_validation=60",
    "data.toy.n_test=200", "tokenizer.vocab_size=400", "model.d_model=64", "model.n_heads=4",
    "model.d_ff=128", "model.dropout=0.0", "train.max_steps=200", "train.validate_every=200",
    "train.lr=0.005", "train.warmup_steps=50", "train.max_tokens=2500",
]  # fmt: skip


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--run", type=Path, help="A trained run (default: a toy run trained here).")
    parser.add_argument(
        "--quick", action="store_true", help="A tiny toy run, 1 s a phase, a crowd of 15."
    )
    parser.add_argument("--seconds", type=float, default=30, help="Seconds a phase.")
    parser.add_argument("--idle", type=int, default=1000, help="Idle connections held.")
    parser.add_argument("--heavy", type=int, default=10, help="Clients sending heavy requests.")
    parser.add_argument("--malformed", type=float, default=100, help="Malformed requests a second.")
    parser.add_argument("--crowd", type=int, default=60, help="Heavy requests sent at once.")
    parser.add_argument("--over-cap", type=int, default=50, help="Connections held over the cap.")
    args = parser.parse_args(argv)
    _enough_files(args.idle + CAP + args.over_cap + 256)
    if args.quick:  # a second a phase, and a crowd to match
        args.seconds, args.crowd = 1.0, min(args.crowd, 15)
    with tempfile.TemporaryDirectory() as scratch:
        run, sentences = _run_and_sentences(args, Path(scratch))
        log_file = Path(scratch) / "serve.log"
        print(f"# {machine()}")
        rows, code = _serve_and_abuse(run, sentences, log_file, args)
        log_lines = log_file.read_text(encoding="utf-8").splitlines()
    result = {"rows": rows, "log_lines": len(log_lines), "exit_code": code, "log": log_lines}
    result["goals_met"] = all(row["met"] for row in rows) and len(log_lines) < 100 and code == 0
    _print(result)
    return result


def _run_and_sentences(args: argparse.Namespace, scratch: Path) -> tuple[Path, list[str]]:
    overrides = QUICK_TRAINING if args.quick else TOY
    args.run, src, _ = run_and_test_split(args.run, scratch, overrides)
    return args.run, [s for s in src if s.strip()]


def _serve_and_abuse(run: Path, sentences: list[str], log_file: Path, args) -> tuple[list, int]:
    command = [sys.executable, "-m", "tfm", "serve", "--run", str(run), "--port", "0",
               "--threads", "1", "--max-connections", str(CAP)]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(log_file, "w", encoding="utf-8") as log:
        server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, env=env, text=True)
    try:
        address = server.stdout.readline().strip()
        if not address.startswith("http://"):
            sys.exit(f"tfm serve did not start: {log_file.read_text(encoding='utf-8')}")
        port = int(address.rsplit(":", 1)[1])
        heavy, tokens = _heaviest(run, sentences, _get(port, "/info")["limits"])
        print(f"# the heaviest request: {len(heavy['sentences'])} sentences, {tokens:,} source "
              f"tokens, beam {heavy['beam_size']}; {len(sentences)} normal sentences")  # fmt: skip
        _normal(port, sentences, 1.0)  # warm-up: the first calls are slow
        abuses = {"none": None, "idle": _idle, "heavy": _heavy, "malformed": _malformed,
                  "crowd": _crowd}  # fmt: skip
        rows = [_phase(name, abuse, port, sentences, heavy, args) for name, abuse in abuses.items()]
        server.send_signal(signal.SIGTERM)
        code = server.wait(120)
    finally:
        server.kill()
    return rows, code


def _phase(name: str, abuse, port: int, sentences: list[str], heavy: dict, args) -> dict:
    stop, met = threading.Event(), collections.Counter()
    threads = abuse(port, stop, met, heavy, args) if abuse else []
    time.sleep(0.5 if threads else 0)  # the abuse under way
    latencies, failed = _normal(port, sentences, args.seconds)
    stop.set()
    for thread in threads:
        thread.join(120)
    quantiles = statistics.quantiles(latencies, n=100) if len(latencies) > 1 else [0.0] * 99
    p99 = quantiles[98]
    goal = GOALS[name]
    fast = failed == 0 and (goal is None or p99 < goal)
    return {"phase": name, "answered": len(latencies), "failed": failed,
            "p50_ms": round(quantiles[49] * 1000, 1), "p99_ms": round(p99 * 1000, 1),
            "goal_ms": goal and goal * 1000, "met": fast and _abuse_met(met),
            "abuse": dict(sorted(met.items()))}  # fmt: skip


def _abuse_met(met: collections.Counter) -> bool:
    """No answer 500; heavy requests answered or refused in time, none timed out; requests over
    the connection cap answered, not reset."""
    return (
        not any(" 500" in kind for kind in met)
        and met["heavy 503 timed out"] == 0
        and met["slowest refusal ms"] < REFUSED_WITHIN_MS
        and met["over the cap: no answer"] == 0
    )


def _normal(port: int, sentences: list[str], seconds: float) -> tuple[list[float], int]:
    """The normal client: one sentence a request, in turn, for `seconds`."""
    latencies, failed = [], 0
    connection = HTTPConnection(HOST, port, timeout=60)
    end = time.monotonic() + seconds
    for sentence in itertools.cycle(sentences):
        if time.monotonic() > end:
            break
        started = time.perf_counter()
        try:
            status, answer, _ = _post(connection, {"sentences": [sentence]})
            ok = status == 200 and len(answer["translations"]) == 1
        except (OSError, ValueError):
            ok = False
            connection.close()
            connection = HTTPConnection(HOST, port, timeout=60)
        if ok:
            latencies.append(time.perf_counter() - started)
        failed += not ok
    connection.close()
    return latencies, failed


def _idle(port: int, stop: threading.Event, met: collections.Counter, _, args) -> list:
    return [_hold(port, stop, met, args.idle, HOST)]


def _hold(port: int, stop: threading.Event, met: collections.Counter, count: int, source: str):
    """`count` connections from `source` opened now, then held, without a byte sent, by a
    thread until `stop`: those the server closes are opened again at once."""

    def connect() -> socket.socket:
        return socket.create_connection((HOST, port), source_address=(source, 0))

    selector = selectors.DefaultSelector()
    for _ in range(count):
        selector.register(connect(), selectors.EVENT_READ)
    met["held"] = count

    def hold() -> None:
        while not stop.is_set():
            for key, _ in selector.select(timeout=0.2):  # readable: closed by the server
                selector.unregister(key.fileobj)
                key.fileobj.close()
                selector.register(connect(), selectors.EVENT_READ)
                met["closed by the server, opened again"] += 1
        for key in list(selector.get_map().values()):
            key.fileobj.close()

    return _started([hold])[0]


def _heavy(port: int, stop: threading.Event, met: collections.Counter, heavy: dict, args) -> list:
    return _started([_heavy_client(port, stop, met, heavy)] * args.heavy)


def _crowd(port: int, stop: threading.Event, met: collections.Counter, heavy: dict, args) -> list:
    """The holder at its own address, over the cap, then the crowd at once; and a request from
    the holder's address on a new connection, once the cap is held, then every 0.5 s (when
    the holder's connections have left room, it is served)."""
    holder = _hold(port, stop, met, CAP + args.over_cap, HOLDER)

    def probe() -> None:
        with socket.create_connection((HOST, port), 10, (HOLDER, 0)) as connection:
            try:
                connection.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                status = connection.recv(64).split(b" ")[1].decode()
            except (OSError, IndexError):
                status = "no answer"
        met[f"over the cap: {status}"] += 1

    def probes() -> None:
        while not stop.wait(0.5):
            probe()

    probe()
    together = threading.Barrier(args.crowd)
    crowd = _started([_heavy_client(port, stop, met, heavy, together)] * args.crowd)
    return [holder, *_started([probes]), *crowd]


def _heavy_client(port: int, stop: threading.Event, met: collections.Counter, heavy: dict,
                  together: threading.Barrier | None = None):  # fmt: skip
    """A client sending `heavy` again and again, waiting the Retry-After of a refusal; or, one
    of a crowd, once, as `together` lets the whole crowd go. `met` counts the answers and
    their slowest times."""
    lock = threading.Lock()

    def send() -> None:
        connection = HTTPConnection(HOST, port, timeout=120)
        if together is not None:
            together.wait()
        while not stop.is_set():
            started = time.perf_counter()
            try:
                status, answer, headers = _post(connection, heavy)
            except (OSError, ValueError):
                status, answer, headers = "no answer", {}, {}
                connection.close()
                connection = HTTPConnection(HOST, port, timeout=120)
            kind, ms = _kind(status, answer), round((time.perf_counter() - started) * 1000)
            slowest = {"503 busy": "slowest refusal ms", "200": "slowest answer ms"}.get(kind)
            with lock:
                met[f"heavy {kind}"] += 1
                if slowest:
                    met[slowest] = max(met[slowest], ms)
            if together is not None:
                break
            if kind == "503 busy":
                stop.wait(float(headers.get("Retry-After", 1)))
        connection.close()

    return send


def _kind(status: int | str, answer: dict) -> str:
    """An answer's status, and for a 503 whether the request was refused or timed out."""
    error = answer.get("error", "")
    if status == 503 and error.startswith("the server is busy"):
        return "503 busy"
    if status == 503 and error.startswith("not answered within"):
        return "503 timed out"
    return str(status)


def _malformed(port: int, stop: threading.Event, met: collections.Counter, _, args) -> list:
    senders = 4

    def send(first: int) -> None:
        kinds = itertools.islice(itertools.cycle(_broken().values()), first, None, senders)
        started = time.monotonic()
        for n, (raw, answered) in enumerate(kinds):
            if stop.is_set():
                return
            time.sleep(max(started + n * senders / args.malformed - time.monotonic(), 0))
            with socket.create_connection((HOST, port), timeout=10) as connection:
                try:
                    connection.sendall(raw)
                    status = connection.recv(64).split(b" ")[1].decode() if answered else "-"
                except (OSError, IndexError):
                    status = "no answer"
            met[f"{status}" if answered else "left"] += 1

    return _started([lambda i=i: send(i) for i in range(senders)])


def _broken() -> dict[str, tuple[bytes, bool]]:
    """Each malformed request by name: its bytes, and whether to wait for an answer."""

    def post(body: bytes, media: bytes = b"application/json", host: bytes = b"127.0.0.1",
             length: int | None = None) -> bytes:  # fmt: skip
        size = len(body) if length is None else length
        return (b"POST /translate HTTP/1.1\r\nHost: " + host + b"\r\nContent-Type: " + media
                + b"\r\nContent-Length: " + str(size).encode() + b"\r\n\r\n" + body)  # fmt: skip

    nested = b'{"sentences": ' + b"[" * 2000 + b"]" * 2000 + b"}"
    latin = '{"sentences": ["é"]}'.encode("latin-1")
    padded = b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Padding: " + b"a" * 20480 + b"\r\n\r\n"
    tls_hello = b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + bytes(range(64)) + b"\r\n\r\n"
    return {
        "broken JSON": (post(b'{"sentences": ['), True),
        "lone surrogate": (post(b'{"sentences": ["a\\ud800b"]}'), True),
        "nested 2,000 deep": (post(nested), True),
        "a form": (post(b"sentences=a", b"application/x-www-form-urlencoded"), True),
        "latin-1": (post(latin, b"application/json; charset=latin-1"), True),
        "another Host": (post(b'{"sentences": ["a"]}', host=b"rebound.example"), True),
        "an empty Host": (post(b'{"sentences": ["a"]}', host=b""), True),
        "body over the limit": (post(b"", length=10**9), True),
        "body cut short": (post(b'{"sentences": ["a', length=1000), False),
        "not HTTP": (tls_hello, True),
        "headers cut short": (b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nConte", False),
        "headers of 20 KiB": (padded, True),
    }


def _heaviest(run: Path, sentences: list[str], limits: dict) -> tuple[dict, int]:
    """The heaviest request `limits` allow, and its source tokens: max_sentences sentences of
    the test sentences' words, each as many as fit in max_tokens / max_sentences tokens (with
    its </s>), at the widest beam max_beam_tokens allows for them."""
    from tfm.api import Tokenizer

    tokenizer = Tokenizer.load(run)

    def tokens(text: str) -> int:
        return len(tokenizer.encode_src([text])[0]) + 1

    per = limits["max_tokens"] // limits["max_sentences"]
    words = itertools.cycle(" ".join(sentences).split())
    heavy, total = [], 0
    for _ in range(limits["max_sentences"]):
        text = next(words)
        while True:
            longer = f"{text} {next(words)}"
            if tokens(longer) > per or len(longer) > limits["max_chars"]:
                break
            text = longer
        heavy.append(text)
        total += tokens(text)
    beam = min(limits["max_beam_size"], max(limits["max_beam_tokens"] // total, 1))
    return {"sentences": heavy, "beam_size": beam}, total


def _post(connection: HTTPConnection, body: dict) -> tuple[int, dict, dict]:
    """The status, JSON and headers of the answer to `body` sent to /translate."""
    connection.request("POST", "/translate", json.dumps(body).encode("utf-8"),
                       {"Content-Type": "application/json"})  # fmt: skip
    response = connection.getresponse()
    return response.status, json.loads(response.read()), dict(response.getheaders())


def _get(port: int, path: str) -> dict:
    connection = HTTPConnection(HOST, port, timeout=60)
    connection.request("GET", path)
    return json.loads(connection.getresponse().read())


def _enough_files(need: int) -> None:
    """The open-file limit raised to `need` (every held connection is a file)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != resource.RLIM_INFINITY and soft < need:
        if hard != resource.RLIM_INFINITY and hard < need:
            sys.exit(f"the abuse holds {need:,} connections; the open-file limit is {hard:,}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _started(targets: list) -> list[threading.Thread]:
    threads = [threading.Thread(target=target, daemon=True) for target in targets]
    for thread in threads:
        thread.start()
    return threads


def _print(result: dict) -> None:
    print("| phase | normal answered | failed | p50 ms | p99 ms | goal p99 | met | the abuse met |")
    print("|---|---|---|---|---|---|---|---|")
    for r in result["rows"]:
        goal = "" if r["goal_ms"] is None else f"< {r['goal_ms']:.0f} ms"
        abuse = ", ".join(f"{k}: {v:,}" for k, v in r["abuse"].items())
        print(f"| {r['phase']} | {r['answered']} | {r['failed']} | {r['p50_ms']} | "
              f"{r['p99_ms']} | {goal} | {'yes' if r['met'] else 'NO'} | {abuse} |")  # fmt: skip
    met = "yes" if result["goals_met"] else "NO"
    print(f"server log: {result['log_lines']} lines (goal < 100); exit on SIGTERM: "
          f"{result['exit_code']}; every goal met: {met}")  # fmt: skip
    print("# the server's log:", *[f"#   {line}" for line in result["log"]], sep="\n")


if __name__ == "__main__":
    main()
