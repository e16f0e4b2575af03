"""API tokens: created and revoked from the CLI, stored as sha256, shown once.

Admin is a property of the token, not of its owner: an operator mints a separate admin
token for fleet-wide monitoring, and the owner's everyday tokens stay tenant-scoped.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import select, update
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from models import ApiToken, Owner

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
    return result.rowcount or 0  # type: ignore[attr-defined]


def owner_for_token(token: str) -> uuid.UUID | None:
    """The owner a live token belongs to: looked up by hash, compared in constant time."""
    return owner_for_digest(hash_token(token))


def owner_for_digest(digest: str) -> uuid.UUID | None:
    """The same from the token's hash (what the web UI's cookie keeps)."""
    caller = caller_for_digest(digest)
    return caller.owner_id if caller is not None else None


def caller_for_digest(digest: str) -> Caller | None:
    """The owner and admin flag of a live token, by hash. On every API request (and so
    for the cookie session too, which keeps the hash): one prepared statement on the web
    process's small pool (app.http.pgpool), no ORM."""
    from app.http import pgpool

    row = pgpool.fetch_one_dict("SELECT token_hash, owner_id, is_admin FROM api_tokens "
                                "WHERE token_hash = %s AND revoked_at IS NULL", (digest,))
    if row is None or not hmac.compare_digest(row["token_hash"], digest):
        return None
    return Caller(row["owner_id"], row["is_admin"])
