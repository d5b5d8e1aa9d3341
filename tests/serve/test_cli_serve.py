"""`tfm serve` as a command: it refuses to serve another address without a key, prints its
address first when it listens on a free port, finishes the requests in flight on SIGTERM and
exits 0; and it serves a CTranslate2 export as it serves a run."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from http_client import TIMEOUT_S, call, served
from typer.testing import CliRunner

from tfm.cli import app
from tfm.commands.engines import open_translator
from tfm.deploy import export_run
from tfm.errors import UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.serve.app import create_app
from tfm.serve.server import ServeOptions, check_access


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (["--host", "0.0.0.0"], "--host 0.0.0.0 serves other machines: give --api-key-file FILE, "
         "or --no-auth to serve them without a key"),
        (["--api-key-file", "short.key"], "--api-key-file short.key: expected one key of 16 or "
         "more characters without spaces"),
        (["--api-key-file", "missing.key"], "--api-key-file missing.key: cannot read it"),
        (["--api-key-file", "short.key", "--no-auth"],
         "give --api-key-file or --no-auth, not both"),
    ],
)  # fmt: skip
def test_serve_refuses_to_start_unsafely_in_one_line(options, error, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "short.key").write_text("abc\n")
    result = CliRunner().invoke(app, ["serve", "--run", "nowhere", *options])
    assert result.exit_code == 2
    assert result.stderr.startswith(f"tfm: error: {error}") and result.stderr.count("\n") == 1
    assert result.stdout == ""


def test_sigterm_finishes_the_requests_in_flight_and_exits_0(trained_run):
    command = [sys.executable, "-m", "tfm", "serve", "--run", str(trained_run), "--port", "0",
               "--threads", "1", "--batch-wait-ms", "1500"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True)  # fmt: skip
    try:
        base = server.stdout.readline().strip()  # the first line, once it listens
        assert base.startswith("http://127.0.0.1:"), server.stderr.read()
        answers: list = []
        sentences = [f"the dog sees {n} cats" for n in ("two", "three", "four", "five")]
        clients = [
            threading.Thread(target=lambda s=s: answers.append(
                call(base, "POST", "/translate", {"sentences": [s], "beam_size": 3})))
            for s in sentences
        ]  # fmt: skip
        for client in clients:
            client.start()
        time.sleep(0.5)  # all four are in, gathered for the batch
        server.send_signal(signal.SIGTERM)
        for client in clients:
            client.join(TIMEOUT_S)
        assert server.wait(TIMEOUT_S) == 0, server.stderr.read()
    finally:
        server.kill()
    assert [a.status for a in answers] == [200] * 4
    assert all(a.json()["translations"][0] for a in answers)
    assert "stopped after 1 batch(es) of 4 sentence(s)" in server.stderr.read()


def test_an_int8_export_is_served_like_the_run(trained_run, tmp_path):
    exported = tmp_path / "int8"
    export_run(trained_run, exported, quantization="int8")
    translator = open_translator(DecodeRequest(run=exported, threads=1))
    sentences = ["the small dog sees the big cat", "", "a bird sleeps"]
    with served(create_app(translator)) as base:
        info = call(base, "GET", "/info").json()
        assert (info["engine"], info["step"], info["attention"]) == ("ctranslate2", 200, False)
        found = call(base, "POST", "/translate", {"sentences": sentences}).json()
        assert found["translations"] == translator.translate(sentences)
        nbest = call(base, "POST", "/translate", {"sentences": sentences[:1], "n_best": 2}).json()
        assert len(nbest["n_best"][0]) == 2
        answer = call(base, "POST", "/attention", {"sentence": "a dog"})
        assert answer.status == 501
        assert answer.json()["error"] == (
            "attention weights need a torch run; this server decodes a ctranslate2 export"
        )


def test_access_is_checked_before_anything_is_opened(tmp_path):
    key_file = tmp_path / "api.key"
    key_file.write_text("s3cret-key-of-24-chars!!\n")
    assert check_access(ServeOptions(api_key_file=key_file)) == "s3cret-key-of-24-chars!!"
    assert check_access(ServeOptions(host="0.0.0.0", api_key_file=key_file)) is not None
    assert check_access(ServeOptions(host="0.0.0.0", no_auth=True)) is None
    for loopback in ("127.0.0.1", "127.0.0.2", "::1", "localhost"):
        assert check_access(ServeOptions(host=loopback)) is None
    with pytest.raises(UsageError, match="--host 192.168.1.2 serves other machines"):
        check_access(ServeOptions(host="192.168.1.2"))
