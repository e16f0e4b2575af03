"""Reading a JSON request body into a strict model, with the contract's errors."""

from __future__ import annotations

import itertools
import json
import math
import sys
from typing import Any, TypeVar

from flask import request
from pydantic import BaseModel, ValidationError
from werkzeug.exceptions import RequestEntityTooLarge

from app.http.errors import ApiError, invalid_fields, validation_error

M = TypeVar("M", bound=BaseModel)
MAX_NAMED = 20  # fields named in one refusal
UNSTORABLE = ("must be a finite number PostgreSQL can store (not NaN, Infinity, or a number "
              f"too large for a double or of more than {sys.get_int_max_str_digits()} digits)")


def read_body() -> bytes:
    """The request's body, refused (413) past MAX_CONTENT_LENGTH.

    One with a Content-Length is refused on the header, unread. One sent chunked has no
    length: Werkzeug caps its stream at the limit and stops there without a word, so the
    first MiB of a longer body (valid JSON ahead of padding) was taken as the whole. Read
    from the server's stream instead, one byte past the limit at most."""
    limit = request.max_content_length
    if request.content_length is not None or limit is None \
            or not request.environ.get("wsgi.input_terminated"):
        return request.get_data(cache=False)
    stream, parts, size = request.environ["wsgi.input"], [], 0
    while size <= limit:
        part = stream.read(limit + 1 - size)
        if not part:
            break
        parts.append(part)
        size += len(part)
    if size > limit:
        raise RequestEntityTooLarge()
    return b"".join(parts)


def parse_body(model: type[M]) -> M:
    raw = read_body()
    if not raw.strip():
        raw = b"{}"
    if bad := unstorable_numbers(raw):
        raise invalid_fields(dict.fromkeys(bad, UNSTORABLE))
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise ApiError(400, "invalid_json", "the request body is not valid JSON") from None
        if any(e["type"] == "model_type" for e in exc.errors()):
            raise ApiError(400, "invalid_json", "the request body must be a JSON object") from None
        raise validation_error(exc) from None


class _Unstorable:
    """A number in the body that no jsonb, float or integer column can hold."""


def _float(text: str) -> float | _Unstorable:
    value = float(text)
    return value if math.isfinite(value) else _Unstorable()  # 1e999 reads as inf


def _int(text: str) -> int | _Unstorable:
    # Past this many digits int() refuses (a ValueError, and jiter's "out of range").
    return int(text) if len(text.lstrip("-")) <= sys.get_int_max_str_digits() else _Unstorable()


def unstorable_numbers(raw: bytes) -> list[str]:
    """The dotted paths (as pydantic names fields) of NaN, ±Infinity and overflowing numbers
    anywhere in a JSON body: the model would take them (or `Any` would pass them on) and
    PostgreSQL refuse them at the insert. A body that is no JSON is left to the model."""
    try:
        doc = json.loads(raw, parse_constant=lambda _: _Unstorable(), parse_float=_float,
                         parse_int=_int)
        return list(itertools.islice(_paths(doc, ()), MAX_NAMED))
    except (ValueError, RecursionError):  # not JSON, not UTF-8, nested past any model's
        return []                         # depth: the model's own error says so


def _paths(value: Any, at: tuple[str, ...]) -> Any:
    if isinstance(value, _Unstorable):
        yield ".".join(at) or "body"
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            yield from _paths(item, (*at, str(i)))
