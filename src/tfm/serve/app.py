"""The HTTP API and page of `tfm serve`, as one FastAPI application over a `Translator` (a torch
run or an export).

GET / (the page) · GET /health · GET /info · POST /translate · POST /attention (torch runs).
Every answer is JSON, errors as {"error": "one line"} with their status. With an API key, the
endpoints that use the model want `Authorization: Bearer KEY`, compared in constant time; the
page and /health are open. A request is read within the limits (`tfm.serve.bodies`),
tokenized once and its work checked (`tfm.serve.request_work`), then decoded by the model
worker (`tfm.serve.batch_worker`). Nothing a request names is read or written as a file: the
page's assets are loaded once, from the package, when the application is built. What a request
says is logged only with `log_text` (at INFO).
"""

from __future__ import annotations

import asyncio
import hmac
import json
import logging
import math
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, Request
from fastapi.responses import HTMLResponse, JSONResponse, Response
from starlette.exceptions import HTTPException

from tfm.errors import TfmError, UsageError
from tfm.prediction.settings import DecodeSettings
from tfm.prediction.strategies import SEARCH_KEYS
from tfm.prediction.translator import Translator, empty_output
from tfm.serve.attention_answer import attention_task
from tfm.serve.batch_worker import BatchWorker, Busy, QueueFull, WorkerStopped
from tfm.serve.bodies import ApiError, AttentionBody, TranslateBody, read_body
from tfm.serve.http_guard import LOOPBACK_NAMES, Guard
from tfm.serve.page_assets import load_page
from tfm.serve.request_limits import ServeLimits
from tfm.serve.request_work import Work, check_work, tokenized
from tfm.serve.server_info import server_info
from tfm.serve.server_log import EVERY_LINE
from tfm.serve.work_share import Job, Options

log = logging.getLogger(__name__)


def create_app(
    translator: Translator,
    limits: ServeLimits | None = None,
    *,
    api_key: str | None = None,
    hosts: Iterable[str] | None = LOOPBACK_NAMES,
    log_text: bool = False,
) -> FastAPI:
    """The application; its model worker starts and stops with it (its lifespan). `hosts`: the
    Host names it answers to (None: any; `tfm.serve.http_guard`)."""
    limits = limits or ServeLimits()
    if translator.confidence_map is None:
        log.info("translations are answered without confidences: %s", translator.unmapped)
    worker = BatchWorker(translator, limits)
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
    app.add_middleware(Guard, hosts=hosts)
    check_key = _key_check(api_key)

    async def prepared(sentences: list[str], beam: int, tag: str | None) -> Work:
        max_len = translator.config.model.max_len
        work = await asyncio.to_thread(tokenized, translator.tokenizer, sentences, max_len, tag=tag)
        check_work(work, beam, limits, worker.speed)
        return work

    def logged(endpoint: str, said: object, answered: object) -> None:
        if log_text:
            log.info("%s: %s -> %s", endpoint, json.dumps(said, ensure_ascii=False),
                     json.dumps(answered, ensure_ascii=False), extra=EVERY_LINE)  # fmt: skip

    @app.get("/", response_class=HTMLResponse)
    async def index() -> Response:
        return page["index.html"]

    @app.get("/page/{name}")
    async def asset(name: str) -> Response:
        if name not in page or name == "index.html":
            raise ApiError(404, f"no page asset {name!r}")
        return page[name]

    @app.get("/health")
    async def health() -> Response:
        if worker.alive:
            return JSONResponse({"status": "ok"})
        stopped = worker.failure or "the model worker is not running"
        return JSONResponse({"status": "stopped", "error": stopped}, 503)

    @app.get("/info")
    async def info(request: Request) -> dict:
        check_key(request)
        return server_info(translator, limits, auth=api_key is not None)

    @app.post("/translate")
    async def translate(request: Request) -> dict:
        check_key(request)
        body = await read_body(request, TranslateBody, limits)
        options = _options(body, translator)
        work = await prepared(body.sentences, options.beam, options.settings.tag)
        found = await _answer(worker, limits, work, options) if work.sources else []
        rated = work.placed(found, empty_output)  # per sentence its Ratings, best first
        answer: dict[str, Any] = {
            "translations": [ratings[0].translation for ratings in rated],
            "scores": [_finite(ratings[0].score) for ratings in rated],
            "confidences": [ratings[0].confidence for ratings in rated],
        }
        if options.n_best is not None:
            answer["n_best"] = [
                [{"translation": r.translation, "score": _finite(r.score),
                  "confidence": r.confidence} for r in ratings]
                for ratings in rated
            ]  # fmt: skip
        if work.truncated:
            answer["truncated"] = work.truncated
        logged("translate", body.sentences, answer["translations"])
        return answer

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
            raise ApiError(422, "the sentence is empty; give the text to translate")
        tag = _into(translator, translator.settings, body.tgt_lang).tag
        work = await prepared([body.sentence], 1, tag)
        task = attention_task(translator, body.sentence, work.sources[0])
        [answer] = await _answer(worker, limits, work, None, task)
        if work.truncated:
            answer["truncated"] = True
        logged("attention", body.sentence, answer["translation"])
        return answer

    return app


async def _answer(
    worker: BatchWorker,
    limits: ServeLimits,
    work: Work,
    options: Options | None,
    task: Callable[[], Any] | None = None,
) -> list[Any]:
    """The worker's results for `work`, or the error that says why there are none."""
    loop = asyncio.get_running_loop()
    beam = 1 if options is None else options.beam
    deadline = time.monotonic() + limits.timeout_s
    job = Job(work.texts, work.sources, options, beam, deadline, loop.create_future(), loop, task)
    try:
        worker.submit(job)
        return await asyncio.wait_for(asyncio.shield(job.future), limits.timeout_s)
    except QueueFull:
        raise ApiError(
            503,
            f"the server is busy ({limits.max_queue} requests waiting); try again shortly",
            {"Retry-After": "1"},
        ) from None
    except Busy as exc:  # refused before any work: it could not be answered in time
        raise ApiError(
            503,
            f"the server is busy: the work queued ahead of this request would take about "
            f"{exc.wait_s:.1f} s, more than the {exc.allowed_s:.1f} s its {limits.timeout_s:g} s "
            f"timeout leaves for waiting; try again in {exc.retry_after_s} s",
            {"Retry-After": str(exc.retry_after_s)},
        ) from None
    except TimeoutError:
        job.abandoned = True
        job.future.cancel()  # whatever the worker sends now, nobody takes
        raise ApiError(
            503,
            f"not answered within {limits.timeout_s:g} s; the server is "
            "overloaded, try again later",
            {"Retry-After": "5"},
        ) from None
    except WorkerStopped as exc:
        raise ApiError(503, f"nothing can be translated: {exc}") from None
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
    return Options(_into(translator, settings, body.tgt_lang), body.n_best)


def _into(translator: Translator, settings: DecodeSettings, tgt_lang: str | None) -> DecodeSettings:
    """`settings` translating into the request's `tgt_lang` (None: the server's); a 422 naming
    the languages the model was trained into where it was not trained into that one."""
    if tgt_lang is None:
        return settings
    try:
        return settings.into(translator.config.data, tgt_lang, option="tgt_lang",
                             trained=translator.tgt_langs)  # fmt: skip
    except UsageError as exc:
        raise ApiError(422, str(exc)) from None


def _key_check(api_key: str | None) -> Callable[[Request], None]:
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
