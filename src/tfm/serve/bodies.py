"""The JSON bodies `tfm serve` accepts, read with every limit checked before any model work:
media type and charset, size, the time the client takes to send it, UTF-8, JSON syntax and
depth, the fields and their types (unknown fields are errors), sentence count, length and
Unicode. Each failure is an `ApiError`: a status and a one-line message, in words a person
reading the page understands."""

from __future__ import annotations

import asyncio
import json
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import ClientDisconnect, Request

from tfm.serve.request_limits import MAX_LENGTH_PENALTY, MAX_SERVE_BEAM, ServeLimits, option_name

B = TypeVar("B", bound=BaseModel)


class ApiError(Exception):
    """An answer other than 200: its HTTP status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # what JSON holds
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class TranslateBody(BaseModel):
    """POST /translate: the sentences, and decoding options (None: the server's defaults)."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sentences: list[str] = Field(description="The sentences to translate, in order.")
    n_best: int | None = Field(None, ge=1, le=MAX_SERVE_BEAM, description="Hypotheses each.")
    # The strategy and its settings, as the config's `decoding` keys (`strategy_for` checks them).
    strategy: str | None = None
    beam_size: int | None = Field(None, ge=1, le=MAX_SERVE_BEAM, description="Beam width.")
    length_penalty: float | None = Field(None, ge=0.0, le=MAX_LENGTH_PENALTY)
    temperature: float | None = None
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None


class AttentionBody(BaseModel):
    """POST /attention: one sentence."""

    model_config = ConfigDict(extra="forbid", strict=True)

    sentence: str


async def read_body(request: Request, kind: type[B], limits: ServeLimits) -> B:
    """The request's JSON body as `kind`, every limit checked."""
    _check_media_type(request.headers.get("content-type", ""))
    raw = await _read_limited(request, limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not valid UTF-8 (byte {exc.start + 1})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ApiError(
            400, f"invalid JSON: {exc.msg} (line {exc.lineno} column {exc.colno})"
        ) from None
    except RecursionError:
        raise ApiError(400, "invalid JSON: nested too deeply") from None
    try:
        body = kind.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        message = "unknown field" if first["type"] == "extra_forbidden" else first["msg"]
        raise ApiError(422, f"{where}: {message}") from None
    assert isinstance(body, TranslateBody | AttentionBody)
    _check_sentences(body, limits)
    return body


def _check_media_type(header: str) -> None:
    """JSON, and in UTF-8: the only charset JSON has (RFC 8259); another is refused by name
    rather than read as UTF-8."""
    media, *parameters = (part.strip() for part in header.split(";"))
    if media.lower() != "application/json":
        raise ApiError(415, f"Content-Type {media or 'missing'}: expected application/json")
    for parameter in parameters:
        name, _, value = parameter.partition("=")
        charset = value.strip().strip('"')
        if name.strip().lower() == "charset" and charset.lower() not in ("utf-8", "utf8"):
            raise ApiError(415, f"charset {charset}: send the body in UTF-8, the charset of JSON")


async def _read_limited(request: Request, limits: ServeLimits) -> bytes:
    limit = limits.max_body_bytes
    too_big = ApiError(413, f"the body is over {limit:,} bytes ({option_name('max_body_bytes')})")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    try:
        async with asyncio.timeout(limits.read_timeout_s):
            async for chunk in request.stream():
                size += len(chunk)
                if size > limit:
                    raise too_big
                chunks.append(chunk)
    except TimeoutError:
        raise ApiError(
            408,
            f"the body did not arrive within {limits.read_timeout_s:g} s "
            f"({option_name('read_timeout_s')})",
            {"Connection": "close"},
        ) from None
    except ClientDisconnect:  # nobody reads this answer; it ends the request quietly
        raise ApiError(400, "the client closed the connection before the body ended") from None
    return b"".join(chunks)


def _check_sentences(body: TranslateBody | AttentionBody, limits: ServeLimits) -> None:
    sentences = body.sentences if isinstance(body, TranslateBody) else [body.sentence]
    if not sentences:
        raise ApiError(422, "sentences: give at least one sentence")
    if len(sentences) > limits.max_sentences:
        raise ApiError(
            413,
            f"{len(sentences)} sentences; at most {limits.max_sentences} a request "
            f"({option_name('max_sentences')})",
        )
    for i, sentence in enumerate(sentences):
        which = f"sentence {i + 1}" if len(sentences) > 1 else "the sentence"
        if len(sentence) > limits.max_chars:
            raise ApiError(
                413,
                f"{which} has {len(sentence):,} characters; at most {limits.max_chars:,} a "
                f"sentence ({option_name('max_chars')})",
            )
        try:
            sentence.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise ApiError(
                400,
                f"{which} is not valid Unicode: a lone surrogate "
                f"(\\u{ord(sentence[exc.start]):04x}) at character {exc.start + 1}",
            ) from None
