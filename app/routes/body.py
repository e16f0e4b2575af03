"""Reading a JSON request body into a strict model, with the contract's errors."""

from __future__ import annotations

from typing import TypeVar

from flask import request
from pydantic import BaseModel, ValidationError

from app.errors import ApiError, validation_error

M = TypeVar("M", bound=BaseModel)


def parse_body(model: type[M]) -> M:
    raw = request.get_data(cache=False)  # MAX_CONTENT_LENGTH refuses > 1 MiB before reading
    if not raw.strip():
        raw = b"{}"
    try:
        return model.model_validate_json(raw)
    except ValidationError as exc:
        if any(e["type"] == "json_invalid" for e in exc.errors()):
            raise ApiError(400, "invalid_json", "the request body is not valid JSON") from None
        if any(e["type"] == "model_type" for e in exc.errors()):
            raise ApiError(400, "invalid_json", "the request body must be a JSON object") from None
        raise validation_error(exc) from None
