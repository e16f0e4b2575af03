"""Bearer-token auth for /api/* and /ws/*: the caller's owner id lands in `g.owner_id`."""

from __future__ import annotations

import uuid

from flask import g, request

from app import db
from app.errors import ApiError
from app.tokens import owner_for_token

PUBLIC_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})


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
    g.owner_id = owner


def current_owner() -> uuid.UUID:
    return g.owner_id
