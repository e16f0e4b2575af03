"""Auth for /api/* and /ws/*: the caller's owner id lands in `g.owner_id`.

A Bearer token, or on /api/* the web UI's cookie session (app.routes.ui), which
keeps the token's hash: the same owner lookup, the same rate-limit bucket. Failed
lookups are limited per client address (the sign-in form's too).
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import uuid
from functools import lru_cache

from flask import g, request, session

from app.http.errors import ApiError
from app.http.ratelimit import RateLimiter
from app.http.tokens import Caller, caller_for_digest, hash_token
from app.http.web_sessions import SESSION_ID, caller_for_session
from tasks.settings import get_settings

# The cron hook checks X-Cron-Secret itself, /metrics the operator's metrics token, a
# webhook its sender's signature (app.routes.code), a contact confirmation its link's MAC
# (tasks.startup.contact).
PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics", "/api/openapi.json",
                          "/api/nightshift/run", "/api/contact/confirm"})
PUBLIC_PREFIXES = ("/api/webhooks/",)
SESSION_TOKEN_HASH = "token_sha256"  # set by the UI's sign-in
SESSION_CSRF = "csrf"
CSRF_HEADER = "X-CSRF-Token"
SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})


def is_public(path: str) -> bool:
    return path in PUBLIC_PATHS or path.startswith(PUBLIC_PREFIXES)


def require_token() -> None:
    path = request.path
    if is_public(path) or not path.startswith(("/api/", "/ws/")):
        return
    digest, session_id = _credential(path)
    caller = authenticate(digest, session_id)
    if caller is None:
        raise ApiError(401, "unauthorized", "invalid or revoked token",
                       headers={"WWW-Authenticate": "Bearer"})
    wait = limiter().acquire(digest)
    if wait:
        raise ApiError(429, "rate_limited", "too many requests for this token; slow down",
                       {"retry_after_seconds": round(wait, 3)},
                       headers={"Retry-After": str(math.ceil(wait))})
    g.owner_id = caller.owner_id
    g.is_admin = caller.admin  # the token's own flag; the cookie session keeps its hash
    g.token_digest = digest  # the credential's key for per-token limits (app.streams.stream_slots)


def authenticate(digest: str, session_id: str | None = None) -> Caller | None:
    """The caller a presented token's hash names (and, for a cookie, its session); None, a
    failure charged to the client's address, for a wrong or revoked token or a signed-out
    session. An address over its failure limit gets a 429 for a failure, never for a token
    that works: a person sharing the address (NAT, an office, a proxy) with someone
    guessing, or flooding wrong tokens to lock them out, is not locked out. The lookup is
    one indexed read of a hash, no dearer than the refusal; and a token is 256 random bits,
    so the limit slows guessing down rather than being what stops it."""
    address = client_bucket(request.remote_addr or "")
    caller = (caller_for_digest(digest) if session_id is None
              else caller_for_session(digest, session_id))
    if caller is not None:
        return caller
    if session_id is not None:  # never re-issue a cookie that no longer signs anyone in
        session.clear()
    wait = failure_limiter().acquire(address)
    if wait:
        raise ApiError(429, "auth_rate_limited", "too many failed authentications from "
                       "this address; wait before trying again",
                       {"retry_after_seconds": round(wait, 3)},
                       headers={"Retry-After": str(math.ceil(wait))})
    return None


def client_bucket(address: str) -> str:
    """Whose failures count together: an IPv4 address, or an IPv6 /64 (one host usually
    holds a whole /64, so single addresses would be a fresh bucket per guess)."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address) and not ip.ipv4_mapped:
        return str(ipaddress.IPv6Network((ip, 64), strict=False))
    return str(ip.ipv4_mapped or ip) if isinstance(ip, ipaddress.IPv6Address) else str(ip)


def _credential(path: str) -> tuple[str, str | None]:
    """The presented token's hash, and the session id when it came from the cookie."""
    header = request.headers.get("Authorization", "")
    if not header and path.startswith("/api/") and SESSION_TOKEN_HASH in session:
        # The browser sends the cookie with any request, even one another site makes:
        # an unsafe method must also carry the CSRF token that only our pages can read.
        if request.method not in SAFE_METHODS and not csrf_ok():
            raise ApiError(403, "csrf_failed", f"a cookie-session request that changes "
                           f"something must send the {CSRF_HEADER} header of the page")
        return str(session[SESSION_TOKEN_HASH]), str(session.get(SESSION_ID, ""))
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise ApiError(401, "unauthorized", "missing bearer token",
                       headers={"WWW-Authenticate": "Bearer"})
    return hash_token(token.strip()), None


def require_metrics_token() -> None:
    """/metrics is the operator's: SWITCHYARD_METRICS_TOKEN as a Bearer token, compared in
    constant time (as digests, so not even its length shows). Unset, the route is off (404,
    saying so): no credential could be right, and a 401 would ask the scraper for one."""
    expected = get_settings().metrics_token
    if not expected:
        raise ApiError(404, "metrics_disabled", "/metrics is off: the operator sets "
                       "SWITCHYARD_METRICS_TOKEN to enable it")
    scheme, _, given = request.headers.get("Authorization", "").partition(" ")
    ok = hmac.compare_digest(hashlib.sha256(given.strip().encode()).digest(),
                             hashlib.sha256(expected.encode()).digest())
    if scheme.lower() != "bearer" or not ok:
        raise ApiError(401, "unauthorized", "/metrics needs the metrics token as a bearer token",
                       headers={"WWW-Authenticate": "Bearer"})


def csrf_ok() -> bool:
    return csrf_matches(request.headers.get(CSRF_HEADER, ""))


def csrf_matches(given: str) -> bool:
    """Whether `given` (a header or a form field) is this session's CSRF token. Compared as
    bytes: compare_digest refuses str with non-ASCII characters (a TypeError, so a 500)."""
    expected = session.get(SESSION_CSRF)
    return bool(expected) and hmac.compare_digest(given.encode(), str(expected).encode())


@lru_cache(maxsize=1)
def limiter() -> RateLimiter:
    settings = get_settings()
    return RateLimiter(settings.rate_limit_per_second, settings.rate_limit_burst)


@lru_cache(maxsize=1)
def failure_limiter() -> RateLimiter:
    settings = get_settings()
    return RateLimiter(settings.auth_failures_per_minute / 60, settings.auth_failures_burst)


def current_owner() -> uuid.UUID:
    return g.owner_id


def current_viewer() -> uuid.UUID | None:
    """Whose jobs the monitor and diagnosis may show: the caller's owner, or None (the
    whole fleet) for an admin token."""
    return None if g.is_admin else g.owner_id
