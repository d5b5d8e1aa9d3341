"""The JSON bodies `tfm serve` accepts, read with every limit checked before any model work:
size, UTF-8, JSON syntax, the fields and their types (unknown fields are errors), sentence count
and length. Each failure is an `ApiError`: a status and a one-line message."""

from __future__ import annotations

import json
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from starlette.requests import Request

from tfm.serve.request_limits import MAX_LENGTH_PENALTY, MAX_SERVE_BEAM, ServeLimits

B = TypeVar("B", bound=BaseModel)


class ApiError(Exception):
    """An answer other than 200: its HTTP status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
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
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise ApiError(415, f"Content-Type {media or 'missing'}: expected application/json")
    raw = await _read_limited(request, limits.max_body_bytes)
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


async def _read_limited(request: Request, limit: int) -> bytes:
    too_big = ApiError(413, f"the body is over {limit} bytes")
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise too_big
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise too_big
        chunks.append(chunk)
    return b"".join(chunks)


def _check_sentences(body: TranslateBody | AttentionBody, limits: ServeLimits) -> None:
    sentences = body.sentences if isinstance(body, TranslateBody) else [body.sentence]
    if not sentences:
        raise ApiError(422, "sentences: give at least one sentence")
    if len(sentences) > limits.max_sentences:
        raise ApiError(
            413, f"sentences: {len(sentences)} given, at most {limits.max_sentences} a request"
        )
    for i, sentence in enumerate(sentences):
        if len(sentence) > limits.max_chars:
            where = f"sentences.{i}" if isinstance(body, TranslateBody) else "sentence"
            raise ApiError(413, f"{where}: {len(sentence)} characters, at most {limits.max_chars}")
