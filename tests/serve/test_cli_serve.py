"""`tfm serve` as a command: it refuses to serve another address without a key, prints its
address first when it listens on a free port (a usable one when it listens on every
interface), finishes the requests in flight on SIGTERM even with a full queue and exits 0, logs
nothing of what was asked, keeps its connections below the open-file limit; and it serves a
CTranslate2 export as it serves a run."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest
from http_client import TIMEOUT_S, call, served
from typer.testing import CliRunner

from tfm.cli import app
from tfm.errors import UsageError
from tfm.serve.app import create_app
from tfm.serve.request_limits import ServeLimits
from tfm.serve.server import ServeOptions, check_access, usable_address, within_file_limit


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


def test_sigterm_with_a_full_queue_answers_what_is_in_flight_exits_0_and_logs_no_text(
    trained_run,
):
    command = [sys.executable, "-m", "tfm", "serve", "--run", str(trained_run), "--port", "0",
               "--threads", "1", "--batch-wait-ms", "1500", "--max-queue", "4"]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    server = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,
                              text=True)  # fmt: skip
    try:
        base = server.stdout.readline().strip()  # the first line, once it listens
        assert base.startswith("http://127.0.0.1:"), server.stderr.read()
        answers: list = []
        sentences = [f"the dog sees {n} cats" for n in ("two", "three", "four")]
        asked = [("/translate", {"sentences": [s], "beam_size": 3}) for s in sentences]
        asked.append(("/attention", {"sentence": "the bird sleeps"}))
        clients = [
            threading.Thread(target=lambda path=path, body=body: answers.append(
                call(base, "POST", path, body)))
            for path, body in asked
        ]  # fmt: skip
        for client in clients:
            client.start()
        time.sleep(0.5)  # all four are in, gathered for the batch: the queue is full
        refused = call(base, "POST", "/translate", {"sentences": ["the cat sleeps"]})
        assert refused.status == 503 and refused.json()["error"].startswith("the server is busy")
        server.send_signal(signal.SIGTERM)
        signalled = time.monotonic()
        for client in clients:
            client.join(TIMEOUT_S)
        assert server.wait(TIMEOUT_S) == 0, server.stderr.read()
        assert time.monotonic() - signalled < 5  # the batch wait, the decoding, and no more
    finally:
        server.kill()
    assert [a.status for a in answers] == [200] * 4
    said = [*sentences, "the bird sleeps", "the cat sleeps"]
    found = [a.json().get("translations", [a.json().get("translation")])[0] for a in answers]
    assert all(found)
    log = server.stderr.read()
    assert "stopped after 1 batch(es) of 3 sentence(s)" in log
    assert not [text for text in said + found if text in log], log


def test_usable_addresses_of_a_server_on_every_interface():
    here, elsewhere = usable_address(("0.0.0.0", 8123))
    assert (here, elsewhere) == ("http://127.0.0.1:8123", f"http://{socket.gethostname()}:8123")
    assert usable_address(("::", 80, 0, 0))[0] == "http://[::1]:80"
    assert usable_address(("127.0.0.1", 8000)) == ("http://127.0.0.1:8000", None)
    assert usable_address(("::1", 8000, 0, 0)) == ("http://[::1]:8000", None)


def test_connections_are_capped_below_the_open_file_limit(caplog):
    import resource

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY:
        pytest.skip("no hard limit on open files here")
    limits = within_file_limit(ServeLimits(max_connections=hard + 1000))
    assert limits.max_connections == hard - 512  # the model's files and 256 waiting for a 503
    assert resource.getrlimit(resource.RLIMIT_NOFILE)[0] == hard  # raised as far as it goes
    assert caplog.messages == [f"at most {hard - 512} connections, not {hard + 1000}: the "
                               f"open-file limit is {hard} (ulimit -n)"]  # fmt: skip


def test_an_int8_export_is_served_like_the_run(exported):
    translator = exported
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


def test_every_limit_and_decoding_setting_is_an_option_of_serve_with_its_whole_help():
    from dataclasses import fields

    from tfm.prediction.strategies import SEARCH_KEYS, option_name
    from tfm.serve.request_limits import option_name as limit_option

    shown = CliRunner().invoke(app, ["serve", "--help"], env={"COLUMNS": "400"}).stdout
    words = " ".join(shown.replace("│", " ").split())
    for limit in fields(ServeLimits):
        help_text = " ".join(limit.metadata["help"].replace("`", "").split())
        assert f"{limit_option(limit.name)} " in words and help_text in words, limit.name
    assert all(f"{option_name(key)} " in words for key in SEARCH_KEYS)
