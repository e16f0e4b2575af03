"""Bearer-token auth for /api/* and /ws/*: the caller's owner id lands in `g.owner_id`."""

from __future__ import annotations

import math
import uuid
from functools import lru_cache

from flask import g, request

from app import db
from app.errors import ApiError
from app.ratelimit import RateLimiter
from app.tokens import hash_token, owner_for_token
from tasks.settings import get_settings

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/api/openapi.json"})


def require_token() -> None:
    path = request.path
    if path in PUBLIC_PATHS or not path.startswith(("/api/", "/ws/")):
        return
    header = request.headers.get("Authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "missing bearer token",
                       headers={"WWW-Authenticate": "Bearer"})
    owner = owner_for_token(db.session(), token.strip())
    if owner is None:
        raise ApiError(401, "unauthorized", "invalid or revoked token",
                       headers={"WWW-Authenticate": "Bearer"})
    wait = limiter().acquire(hash_token(token.strip()))
    if wait:
        raise ApiError(429, "rate_limited", "too many requests for this token; slow down",
                       {"retry_after_seconds": round(wait, 3)},
                       headers={"Retry-After": str(math.ceil(wait))})
    g.owner_id = owner


@lru_cache(maxsize=1)
def limiter() -> RateLimiter:
    settings = get_settings()
    return RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)


def current_owner() -> uuid.UUID:
    return g.owner_id
