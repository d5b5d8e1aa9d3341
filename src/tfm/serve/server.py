"""`tfm serve`: check the address and the key, open the model, listen, and serve until SIGTERM or
Ctrl-C, which stop new connections, let the requests in flight finish, and end with exit 0.

Safe by default: the server listens on 127.0.0.1. Another address needs an API key
(`api_key_file`) or, explicitly, `no_auth`; without either it refuses to start.
"""

from __future__ import annotations

import ipaddress
import logging
import signal
import socket
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from tfm.errors import TfmError, UsageError
from tfm.prediction.settings import DecodeRequest
from tfm.serve.connection_shares import OVER_CAP
from tfm.serve.request_limits import ServeLimits

log = logging.getLogger(__name__)

LOOPBACK = "127.0.0.1"
# file descriptors besides the connections served: the model, threads, the log (256), and the
# connections over the cap waiting for their 503
RESERVED_FILES = 256 + OVER_CAP


@dataclass(frozen=True, kw_only=True)
class ServeOptions:
    """Where to listen and who may ask: host, port (0: a free one), the API key's file, or
    `no_auth` to serve another address without one; whether to log the requests' text; and
    the limits."""

    host: str = LOOPBACK
    port: int = 8000
    api_key_file: Path | None = None
    no_auth: bool = False
    log_text: bool = False  # log what each request says and what it is answered (INFO)
    limits: ServeLimits = field(default_factory=ServeLimits)


def serve(
    request: DecodeRequest, options: ServeOptions, *, on_ready: Callable[[str], None]
) -> None:
    """Serve the run of `request` until stopped; `on_ready(address)` is called once it listens,
    with an address a client on this machine can use."""
    api_key = check_access(options)
    _require_web_stack()
    limits = within_file_limit(options.limits)
    listening = _listen(options.host, options.port)
    from tfm.commands.engines import open_translator
    from tfm.serve.app import create_app
    from tfm.serve.connections import uvicorn_config
    from tfm.serve.http_guard import LOOPBACK_NAMES
    from tfm.serve.server_log import limited_log

    translator = open_translator(request)
    checked = api_key is None and _is_loopback(options.host)  # see tfm.serve.http_guard
    hosts = (*LOOPBACK_NAMES, options.host) if checked else None
    app = create_app(translator, limits, api_key=api_key, hosts=hosts, log_text=options.log_text)
    import uvicorn

    server = uvicorn.Server(uvicorn_config(app, limits))
    address, elsewhere = usable_address(listening.getsockname())
    log.info(
        "serving %s→%s (%s) at %s%s; stop with Ctrl-C",
        translator.config.data.src_lang,
        translator.config.data.tgt_lang,
        translator.engine,
        address,
        f" (from other machines: {elsewhere})" if elsewhere else "",
    )
    with limited_log(), _signals_stop(server):
        on_ready(address)
        server.run(sockets=[listening])
        log.info(
            "stopped after %d batch(es) of %d sentence(s)",
            app.state.worker.batches,
            app.state.worker.sentences,
        )


def usable_address(bound: tuple) -> tuple[str, str | None]:
    """The URL a client on this machine uses for a socket bound to `bound` (host, port, ...),
    and, bound to all interfaces, the one for other machines (by this machine's name)."""
    host, port = bound[0], bound[1]
    if host in ("0.0.0.0", "::"):
        here = "127.0.0.1" if host == "0.0.0.0" else "::1"
        return _url(here, port), _url(socket.gethostname(), port)
    return _url(host, port), None


def _url(host: str, port: int) -> str:
    return f"http://{host if ':' not in host else f'[{host}]'}:{port}"


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


def within_file_limit(limits: ServeLimits) -> ServeLimits:
    """`limits` as the open-file limit allows: each connection holds a file descriptor, and
    running out of them stops the server answering. The limit is raised (up to its hard
    limit) where it is below what `max_connections` needs; where it cannot be, fewer
    connections are allowed, with a warning that says why."""
    import resource

    need = limits.max_connections + RESERVED_FILES
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    unlimited = resource.RLIM_INFINITY
    if soft != unlimited and soft < need:
        raised = need if hard == unlimited else min(hard, need)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass
    if soft == unlimited or soft >= need:
        return limits
    allowed = soft - RESERVED_FILES
    if allowed < 64:
        raise TfmError(f"the open-file limit is {soft} (ulimit -n): too few for a server")
    log.warning("at most %d connections, not %d: the open-file limit is %d (ulimit -n)",
                allowed, limits.max_connections, soft)  # fmt: skip
    return replace(limits, max_connections=allowed)


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
