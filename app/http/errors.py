"""One place that maps errors to HTTP: every 4xx/5xx body is {"error": {code, message, details}}."""

from __future__ import annotations

import logging
from typing import Any

import psycopg
from flask import Flask, jsonify
from pydantic import ValidationError
from werkzeug.exceptions import HTTPException

from app.api import responses
from tasks.engine import pg
from tasks.engine.errors import SwitchyardError

log = logging.getLogger(__name__)

DATABASE_RETRY_AFTER = "5"  # seconds: about a PostgreSQL restart


def database_away(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps: SQLAlchemy's `.orig`, a cause) is a lost database."""
    seen: set[int] = set()
    e: BaseException | None = exc
    while e is not None and id(e) not in seen:
        seen.add(id(e))
        if isinstance(e, pg.DatabaseUnavailable) or pg.is_connection_error(e):
            return True
        e = getattr(e, "orig", None) or e.__cause__ or e.__context__
    return False


class ApiError(Exception):
    def __init__(self, status: int, code: str, message: str,
                 details: dict[str, Any] | None = None, headers: dict[str, str] | None = None):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message
        self.details = details or {}
        self.headers = headers or {}


def not_found(what: str) -> ApiError:
    return ApiError(404, "not_found", f"{what} not found")


def validation_error(exc: ValidationError, *, where: str = "request body") -> ApiError:
    """`where`: what was read ("query string" for a route's parameters)."""
    fields: dict[str, str] = {}
    for err in exc.errors():
        name = ".".join(str(p) for p in err["loc"]) or "body"
        fields[name] = "field required" if err["type"] == "missing" else err["msg"]
    return invalid_fields(fields, where=where)


def invalid_fields(fields: dict[str, str], *, where: str = "request body") -> ApiError:
    """A 422 naming each bad field (dotted path) and what is wrong with it."""
    if not fields:
        return ApiError(422, "validation_error", f"the {where} is invalid")
    summary = "; ".join(f"{k}: {v}" for k, v in fields.items())
    return ApiError(422, "validation_error", f"invalid {where}: {summary}",
                    {"fields": fields})


def _body(code: str, message: str, details: dict[str, Any] | None = None) -> dict[str, Any]:
    # Constructed, not validated: the handler of an error must not raise one of its own.
    return responses.Error.model_construct(error=responses.ErrorDetail.model_construct(
        code=code, message=message, details=details or {})).dump()


def register_error_handlers(app: Flask) -> None:
    @app.errorhandler(ApiError)
    def _api(exc: ApiError):
        return jsonify(_body(exc.code, exc.message, exc.details)), exc.status, exc.headers

    @app.errorhandler(ValidationError)
    def _validation(exc: ValidationError):
        return _api(validation_error(exc))

    @app.errorhandler(SwitchyardError)
    def _domain(exc: SwitchyardError):
        if exc.http_status is None:  # an engine error no request should meet: a 500
            return _unexpected(exc)
        return _api(ApiError(exc.http_status, exc.code, str(exc), exc.details(),
                             headers=exc.headers()))

    @app.errorhandler(HTTPException)
    def _http(exc: HTTPException):
        code = {413: "payload_too_large", 404: "not_found", 405: "method_not_allowed"}.get(
            exc.code or 500, (exc.name or "error").lower().replace(" ", "_"))
        message = ("the request body is larger than 1 MiB" if exc.code == 413
                   else exc.description or exc.name)
        # Keep the exception's own headers (a 405's `Allow`), not its HTML content type.
        headers = [(k, v) for k, v in exc.get_headers() if k.lower() != "content-type"]
        return jsonify(_body(code, message)), exc.code or 500, headers

    @app.errorhandler(Exception)
    def _unexpected(exc: Exception):
        if isinstance(exc, psycopg.errors.QueryCanceled):
            # A statement ran past SWITCHYARD_WEB_STATEMENT_TIMEOUT_SECONDS: the server cut it
            # so it holds no connection every other request needs.
            log.warning("statement cut at the web's time limit", extra={"action": "http_503"})
            return _api(ApiError(503, "statement_timeout", "the database took too long to "
                                 "answer; retry shortly", headers={"Retry-After": "1"}))
        if database_away(exc):
            # Expected while PostgreSQL restarts: one line, no traceback, no address.
            log.warning("database unavailable: answering 503", extra={"action": "http_503"})
            return _api(ApiError(503, "database_unavailable",
                                 "the database is unavailable; retry shortly",
                                 headers={"Retry-After": DATABASE_RETRY_AFTER}))
        log.exception("unhandled error", extra={"action": "http_500"})
        return jsonify(_body("internal_error", "an unexpected error occurred")), 500
