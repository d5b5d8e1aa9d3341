"""The HTTP API and page of `tfm serve`, as one FastAPI application over a `Translator`.

GET / (the page) · GET /health · GET /info · POST /translate · POST /attention (torch runs).
Every answer is JSON, errors as {"error": "one line"} with their status. With an API key, the
endpoints that use the model want `Authorization: Bearer KEY`, compared in constant time; the
page and /health are open. Nothing a request names is read or written as a file: the page's
assets are loaded once, from the package, when the application is built.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import math
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from tfm.errors import TfmError, UsageError
from tfm.prediction.strategies import SEARCH_KEYS
from tfm.prediction.translator import Translator
from tfm.serve.batch_worker import BatchWorker, Options, QueueFull
from tfm.serve.bodies import ApiError, AttentionBody, TranslateBody, read_body
from tfm.serve.page_assets import load_page
from tfm.serve.request_limits import MAX_SERVE_BEAM, ServeLimits

log = logging.getLogger(__name__)


def create_app(
    translator: Translator, limits: ServeLimits | None = None, *, api_key: str | None = None
) -> FastAPI:
    """The application; its model worker starts and stops with it (its lifespan)."""
    limits = limits or ServeLimits()
    worker = BatchWorker(
        translator,
        max_queue=limits.max_queue,
        batch_wait_ms=limits.batch_wait_ms,
        batch_tokens=limits.batch_tokens,
    )
    page = load_page()

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        worker.start()
        yield
        await asyncio.to_thread(worker.stop)

    app = FastAPI(title="tfm", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.worker = worker
    app.add_exception_handler(ApiError, _api_error)  # type: ignore[arg-type]
    app.add_exception_handler(HTTPException, _http_error)  # type: ignore[arg-type]
    check_key = _key_check(api_key)

    @app.get("/", response_class=HTMLResponse)
    async def index() -> Response:
        return page["index.html"]

    @app.get("/page/{name}")
    async def asset(name: str) -> Response:
        if name not in page or name == "index.html":
            raise ApiError(404, f"no page asset {name!r}")
        return page[name]

    @app.get("/health")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/info")
    async def info(request: Request) -> dict:
        check_key(request)
        return _info(translator, limits, auth=api_key is not None)

    @app.post("/translate")
    async def translate(request: Request) -> dict:
        check_key(request)
        body = await read_body(request, TranslateBody, limits)
        options = _options(body, translator)
        found = await _answer(worker, limits, worker.submit, body.sentences, options)
        if options.n_best is None:
            return {"translations": found}
        n_best = [
            [{"translation": text, "score": _finite(score)} for text, score in hypotheses]
            for hypotheses in found
        ]
        return {"translations": [hypotheses[0][0] for hypotheses in found], "n_best": n_best}

    @app.post("/attention")
    async def attention(request: Request) -> dict:
        check_key(request)
        body = await read_body(request, AttentionBody, limits)
        if not translator.shows_attention:
            raise ApiError(
                501,
                "attention weights need a torch run; this server decodes "
                f"a {translator.engine} export",
            )
        if not body.sentence.strip():
            raise ApiError(422, "sentence: empty; give the text to translate")
        task = _attention_task(translator, body.sentence)
        return await _answer(worker, limits, worker.submit, [], None, task)

    return app


async def _answer(worker: BatchWorker, limits: ServeLimits, submit: Any, *args: Any) -> Any:
    """The worker's result for a request, or the error that says why there is none."""
    try:
        job = submit(*args)
    except QueueFull:
        raise ApiError(
            503,
            f"the server is busy ({limits.max_queue} requests waiting); try again shortly",
            {"Retry-After": "1"},
        ) from None
    try:
        return await asyncio.wait_for(asyncio.shield(job.future), limits.timeout_s)
    except TimeoutError:
        job.abandoned = True
        raise ApiError(
            503,
            f"not answered within {limits.timeout_s:g} s; the server is "
            "overloaded, try again later",
            {"Retry-After": "5"},
        ) from None
    except TfmError as exc:
        raise ApiError(422, str(exc)) from None
    except Exception:
        raise ApiError(500, "decoding failed; the server's log says why") from None


def _options(body: TranslateBody, translator: Translator) -> Options:
    """The request's decoding options: its strategy and settings over the server's, able to
    give `n_best` hypotheses (the rule of `tfm.prediction.strategies.strategy_for`)."""
    asked = body.model_dump(include=set(SEARCH_KEYS))
    try:
        settings = translator.settings.asking(
            translator.config.decoding, asked, n_best=body.n_best or 1, spell=str
        )
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None
    return Options(settings, body.n_best)


def _attention_task(translator: Translator, sentence: str) -> Any:
    def task() -> dict:
        views = translator.attention_views(sentence)
        cross, encoder, decoder = views["cross"], views["encoder"], views["decoder"]
        weights = {
            kind: view.weights.double().round(decimals=4).tolist() for kind, view in views.items()
        }
        return {
            "source": cross.source,
            "translation": cross.translation,
            "source_tokens": encoder.key_tokens,
            "output_tokens": cross.query_tokens,
            "decoder_tokens": decoder.query_tokens,
            "layers": cross.n_layers,
            "heads": cross.n_heads,
            **weights,
        }

    return task


def _info(translator: Translator, limits: ServeLimits, *, auth: bool) -> dict:
    config, settings = translator.config, translator.settings
    model = config.model
    return {
        "engine": translator.engine,
        "src_lang": config.data.src_lang,
        "tgt_lang": config.data.tgt_lang,
        "step": translator.step,
        "model": {
            "d_model": model.d_model,
            "n_heads": model.n_heads,
            "d_ff": model.d_ff,
            "n_encoder_layers": model.n_encoder_layers,
            "n_decoder_layers": model.n_decoder_layers,
        },
        "decoding": {
            **settings.strategy.describe(),
            "max_len_a": settings.limit.a,
            "max_len_b": settings.limit.b,
        },
        "limits": {
            "max_sentences": limits.max_sentences,
            "max_chars": limits.max_chars,
            "max_body_bytes": limits.max_body_bytes,
            "max_beam_size": MAX_SERVE_BEAM,
            "timeout_s": limits.timeout_s,
        },
        "attention": translator.shows_attention,
        "auth": auth,
    }


def _key_check(api_key: str | None) -> Any:
    expected = None if api_key is None else api_key.encode("utf-8")

    def check(request: Request) -> None:
        if expected is None:
            return
        given = request.headers.get("authorization", "")
        scheme, _, key = given.partition(" ")
        if not (scheme.lower() == "bearer" and hmac.compare_digest(key.encode(), expected)):
            raise ApiError(
                401,
                "missing or wrong API key: send Authorization: Bearer KEY",
                {"WWW-Authenticate": "Bearer"},
            )

    return check


def _finite(score: float) -> float | None:
    return score if math.isfinite(score) else None


async def _api_error(_: Request, exc: ApiError) -> JSONResponse:
    return JSONResponse({"error": exc.message}, exc.status, headers=exc.headers)


async def _http_error(_: Request, exc: HTTPException) -> JSONResponse:
    return JSONResponse({"error": str(exc.detail)}, exc.status_code, headers=exc.headers)
