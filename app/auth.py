"""Auth for /api/* and /ws/*: the caller's owner id lands in `g.owner_id`.

A Bearer token, or on /api/* the web UI's cookie session (app.routes.ui), which
keeps the token's hash: the same owner lookup, the same rate-limit bucket.
"""

from __future__ import annotations

import hmac
import math
import uuid
from functools import lru_cache

from flask import g, request, session

from app.errors import ApiError
from app.ratelimit import RateLimiter
from app.tokens import hash_token, owner_for_digest
from tasks.settings import get_settings

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/api/openapi.json",
                          "/api/nightshift/run"})  # the cron hook checks X-Cron-Secret itself
SESSION_TOKEN_HASH = "token_sha256"  # set by the UI's sign-in
SESSION_CSRF = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def require_token() -> None:
    path = request.path
    if path in PUBLIC_PATHS or not path.startswith(("/api/", "/ws/")):
        return
    digest = _token_hash(path)
    owner = owner_for_digest(digest)
    if owner is None:
        raise ApiError(401, "unauthorized", "invalid or revoked token",
                       headers={"WWW-Authenticate": "Bearer"})
    wait = limiter().acquire(digest)
    if wait:
        raise ApiError(429, "rate_limited", "too many requests for this token; slow down",
                       {"retry_after_seconds": round(wait, 3)},
                       headers={"Retry-After": str(math.ceil(wait))})
    g.owner_id = owner
    g.token_digest = digest  # the credential's key for per-token limits (app.stream_slots)


def _token_hash(path: str) -> str:
    header = request.headers.get("Authorization", "")
    if not header and path.startswith("/api/") and SESSION_TOKEN_HASH in session:
        # The browser sends the cookie with any request, even one another site makes:
        # an unsafe method must also carry the CSRF token that only our pages can read.
        if request.method not in SAFE_METHODS and not csrf_ok():
            raise ApiError(403, "csrf_failed", f"a cookie-session request that changes "
                           f"something must send the {CSRF_HEADER} header of the page")
        return str(session[SESSION_TOKEN_HASH])
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "missing bearer token",
                       headers={"WWW-Authenticate": "Bearer"})
    return hash_token(token.strip())


def csrf_ok() -> bool:
    expected = session.get(SESSION_CSRF)
    given = request.headers.get(CSRF_HEADER, "")
    return bool(expected) and hmac.compare_digest(given.encode(), str(expected).encode())


@lru_cache(maxsize=1)
def limiter() -> RateLimiter:
    settings = get_settings()
    return RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)


def current_owner() -> uuid.UUID:
    return g.owner_id
