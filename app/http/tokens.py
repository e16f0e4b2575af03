"""API tokens: created and revoked from the CLI, stored as sha256, shown once.

Admin is a property of the token, not of its owner: an operator mints a separate admin
token for fleet-wide monitoring, and the owner's everyday tokens stay tenant-scoped.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from models import ApiToken, Owner
from tasks.settings import get_settings

TOKEN_PREFIX = "sy_"


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    id: uuid.UUID
    owner: str
    prefix: str
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None
    admin: bool = False


@dataclass(frozen=True)
class Caller:
    """Who a live token speaks for, and whether it may see the whole fleet."""

    owner_id: uuid.UUID
    admin: bool


def create_token(session: Session, owner_name: str, *,
                 admin: bool = False) -> tuple[uuid.UUID, str]:
    """Create the owner if new and a token for it; returns (owner id, token in clear)."""
    session.execute(insert(Owner).values(id=uuid.uuid4(), name=owner_name)
                    .on_conflict_do_nothing(index_elements=["name"]))
    owner_id = session.scalar(select(Owner.id).where(Owner.name == owner_name))
    assert owner_id is not None
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    session.add(ApiToken(owner_id=owner_id, token_hash=hash_token(token),
                         prefix=token[: len(TOKEN_PREFIX) + 6], is_admin=admin))
    return owner_id, token


def list_tokens(session: Session) -> list[TokenInfo]:
    rows = session.execute(
        select(ApiToken, Owner.name).join(Owner, Owner.id == ApiToken.owner_id)
        .order_by(ApiToken.created_at)
    ).all()
    return [TokenInfo(t.id, name, t.prefix, t.created_at, t.last_used_at, t.revoked_at,
                      t.is_admin) for t, name in rows]


def revoke_token(session: Session, token_id_or_prefix: str) -> int:
    try:
        cond = ApiToken.id == uuid.UUID(token_id_or_prefix)
    except ValueError:
        cond = ApiToken.prefix == token_id_or_prefix
    result = session.execute(update(ApiToken).where(cond, ApiToken.revoked_at.is_(None))
                             .values(revoked_at=datetime.now().astimezone()))
    _live.clear()  # this process stops honouring it at once (others within their cache time)
    return result.rowcount or 0  # type: ignore[attr-defined]


def owner_for_token(token: str) -> uuid.UUID | None:
    """The owner a live token belongs to: looked up by hash, compared in constant time."""
    return owner_for_digest(hash_token(token))


def owner_for_digest(digest: str) -> uuid.UUID | None:
    """The same from the token's hash (what the web UI's cookie keeps)."""
    caller = caller_for_digest(digest)
    return caller.owner_id if caller is not None else None


# Live tokens' callers, each kept for SWITCHYARD_TOKEN_CACHE_SECONDS: the lookup was a sixth
# of the web's CPU per enqueue (issue 26, py-spy). Only a live token is kept, so a wrong one
# is looked up (and charged to its address) every time. A token revoked from another process
# (the CLI) stops working within that many seconds; revoke_token in this process forgets all.
_LIVE_MAX = 10_000
_live: dict[str, tuple[float, Caller]] = {}


def caller_for_digest(digest: str) -> Caller | None:
    """The owner and admin flag of a live token, by hash. On every API request (and so
    for the cookie session too, which keeps the hash): one prepared statement on the web
    process's small pool (app.http.pgpool), no ORM, unless the token was found live within
    the last SWITCHYARD_TOKEN_CACHE_SECONDS."""
    from app.http import pgpool

    ttl = get_settings().token_cache_seconds
    kept = _live.get(digest) if ttl > 0 else None
    if kept is not None and kept[0] > time.monotonic():
        return kept[1]
    row = pgpool.fetch_one_dict("SELECT token_hash, owner_id, is_admin FROM api_tokens "
                                "WHERE token_hash = %s AND revoked_at IS NULL", (digest,))
    if row is None or not hmac.compare_digest(row["token_hash"], digest):
        _live.pop(digest, None)
        return None
    caller = Caller(row["owner_id"], row["is_admin"])
    if ttl > 0:
        if len(_live) >= _LIVE_MAX:  # a flood of distinct tokens: start over, never grow
            _live.clear()
        _live[digest] = (time.monotonic() + ttl, caller)
    return caller
