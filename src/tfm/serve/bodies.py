"""The JSON bodies `tfm serve` accepts, read with every limit checked before any model work:
media type and charset, size, the time the client takes to send it, UTF-8, JSON syntax and
depth, the fields, their types and ranges (unknown fields are errors), sentence count, length and
Unicode. Each failure is an `ApiError`: a status and a one-line message, in words a person
reading the page understands.

A request's decoding fields are the config's `decoding` keys of the strategies, derived from their
declarations (`tfm.decoding_options`) with the same ranges, but for the beam's, which is the
server's (`MAX_SERVE_BEAM`). Every number a request can give is bounded: an integer too long
for Python's int() is read as the (infinite) float it is near, and NaN and infinities are out of
every range, so that each is refused naming its field and range, never failing later."""

from __future__ import annotations

import asyncio
import json
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model
from starlette.requests import ClientDisconnect, Request

from tfm.config import decoding_fields, ranges
from tfm.serve.request_limits import MAX_SERVE_BEAM, ServeLimits, option_name

B = TypeVar("B", bound=BaseModel)


class ApiError(Exception):
    """An answer other than 200: its HTTP status, message and extra headers."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        message = message.encode("utf-8", "backslashreplace").decode("utf-8")  # what JSON holds
        super().__init__(message)
        self.status = status
        self.message = message
        self.headers = headers or {}


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)


# The strategy and its settings, as the config's `decoding` keys, each None unless asked for
# (`strategy_for` then resolves them over the server's). Built at run time: to a type checker,
# any attribute.
if TYPE_CHECKING:

    class _RequestDecoding(_Body):
        def __getattr__(self, key: str) -> Any: ...

else:
    _RequestDecoding = create_model(
        "RequestDecoding",
        __base__=_Body,
        **decoding_fields(unset=True, ceilings={"beam_size": MAX_SERVE_BEAM}),
    )


class TranslateBody(_RequestDecoding):
    """POST /translate: the sentences, and decoding options (None: the server's defaults)."""

    sentences: list[str] = Field(description="The sentences to translate, in order.")
    n_best: int | None = Field(None, ge=1, le=MAX_SERVE_BEAM, description="Hypotheses each.")
    tgt_lang: str | None = Field(
        None,
        max_length=3,
        description="The language to translate into (a model trained into several).",
    )


class AttentionBody(_Body):
    """POST /attention: one sentence, and the language to translate it into (None: the
    model's main target)."""

    sentence: str
    tgt_lang: str | None = Field(None, max_length=3)


async def read_body(request: Request, kind: type[B], limits: ServeLimits) -> B:
    """The request's JSON body as `kind`, every limit checked."""
    _check_media_type(request.headers.get("content-type", ""))
    raw = await _read_limited(request, limits)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ApiError(400, f"the body is not valid UTF-8 (byte {exc.start + 1})") from None
    try:
        data = json.loads(text, parse_int=_integer)
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
        field = kind.model_fields.get(str(first["loc"][0])) if len(first["loc"]) == 1 else None
        known = first["type"] != "extra_forbidden"
        message = ranges.message(field, first) if known else "unknown field"
        raise ApiError(422, f"{where}: {message}") from None
    assert isinstance(body, TranslateBody | AttentionBody)
    _check_sentences(body, limits)
    return body


def _integer(digits: str) -> int | float:
    """A JSON integer; one of more digits than Python's int() reads (4,300) as the float it is
    near, infinite from 309 digits, which every field's range refuses."""
    try:
        return int(digits)
    except ValueError:
        return float(digits)


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
