"""`tfm serve`: check the address and the key, open the model, listen, and serve until SIGTERM or
Ctrl-C, which stop new connections, let the requests in flight finish, and end with exit 0.

Safe by default: the server listens on 127.0.0.1. Another address needs an API key
(`api_key_file`) or, explicitly, `no_auth`; without either it refuses to start.
"""

from __future__ import annotations

import ipaddress
import logging
import math
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tfm.errors import TfmError, UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.serve.request_limits import ServeLimits

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """Where to listen and who may ask: host, port (0: a free one), the API key's file, or
    `no_auth` to serve another address without one; and the limits."""

    host: str = LOOPBACK
    port: int = 8000
    api_key_file: Path | None = None
    no_auth: bool = False
    limits: ServeLimits = field(default_factory=ServeLimits)


def serve(
    request: DecodeRequest, options: ServeOptions, *, on_ready: Callable[[str], None]
) -> None:
    """Serve the run of `request` until stopped; `on_ready(address)` is called once it listens."""
    api_key = check_access(options)
    _require_web_stack()
    listening = _listen(options.host, options.port)
    from tfm.commands.engines import open_translator
    from tfm.serve.app import create_app

    translator = open_translator(request)
    app = create_app(translator, options.limits, api_key=api_key)
    import uvicorn

    config = uvicorn.Config(
        app,
        log_config=None,
        log_level="warning",
        access_log=False,
        timeout_graceful_shutdown=math.ceil(options.limits.timeout_s) + 5,
        lifespan="on",
    )
    server = uvicorn.Server(config)
    host, port = listening.getsockname()[:2]
    address = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    log.info(
        "serving %s→%s (%s) at %s; stop with Ctrl-C",
        translator.config.data.src_lang,
        translator.config.data.tgt_lang,
        translator.engine,
        address,
    )
    with _signals_stop(server):
        on_ready(address)
        server.run(sockets=[listening])
    log.info(
        "stopped after %d batch(es) of %d sentence(s)",
        app.state.worker.batches,
        app.state.worker.sentences,
    )


def check_access(options: ServeOptions) -> str | None:
    """The API key (None: no key), or a UsageError when the options do not make the server
    safe: another address than loopback without a key or `--no-auth`."""
    if options.api_key_file is not None and options.no_auth:
        raise UsageError("give --api-key-file or --no-auth, not both")
    if options.api_key_file is not None:
        try:
            key = options.api_key_file.read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            raise UsageError(
                f"--api-key-file {options.api_key_file}: cannot read it ({exc})"
            ) from None
        if len(key) < 16 or any(c.isspace() for c in key):
            raise UsageError(
                f"--api-key-file {options.api_key_file}: expected one key of 16 or "
                "more characters without spaces"
            )
        return key
    if not _is_loopback(options.host) and not options.no_auth:
        raise UsageError(
            f"--host {options.host} serves other machines: give --api-key-file FILE, "
            "or --no-auth to serve them without a key"
        )
    return None


def _require_web_stack() -> None:
    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        raise UsageError("tfm serve needs FastAPI and uvicorn: pip install 'tfm[serve]'") from None


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _listen(host: str, port: int) -> socket.socket:
    """A listening socket on `host`:`port`, or a TfmError that says why there is none."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise UsageError(
            f"--host {host}: not an address of this machine ({exc.strerror})"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        sock.close()
        raise TfmError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


@contextmanager
def _signals_stop(server: Any) -> Iterator[None]:
    """SIGINT and SIGTERM stop `server` also when they come before uvicorn handles them (it
    does while it runs, and then raises them again with the handlers from before it ran: these,
    so that a stop the server finished cleanly ends with exit 0)."""
    handled = (signal.SIGINT, signal.SIGTERM)

    def stop(*_: object) -> None:
        server.should_exit = True

    before = {sig: signal.signal(sig, stop) for sig in handled}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)
