"""Browser sessions that sign-out really ends.

The session cookie is signed, not stored: a copy taken before sign-out would stay valid for
as long as its signature does (the session lifetime). So each sign-in names its session with a
random id kept in the cookie, and sign-out records that id in `ended_web_sessions` until every
cookie that carried it has expired. A list of ended sessions rather than of live ones: the
sliding lifetime then costs no write per request, and the table holds only the sign-outs of
the last lifetime.
"""

from __future__ import annotations

import secrets
import time
from datetime import timedelta

from app.http import pgpool
from app.http.tokens import Caller

SESSION_ID = "sid"  # the cookie session's key for its id
CLOCK_MARGIN = timedelta(hours=1)  # the cookie's age is judged by the web host's clock
# However often a cookie is renewed (every request re-signs it, a copy too), its session ends
# this long after sign-in: so a sign-out's row, kept as long, outlives every copy.
MAX_AGE = timedelta(days=7)


def new_id(now: float | None = None) -> str:
    """A random id that carries its sign-in time (seconds), which bounds the session."""
    return f"{int(time.time() if now is None else now)}.{secrets.token_urlsafe(24)}"


def too_old(session_id: str, now: float | None = None) -> bool:
    issued, _, rest = session_id.partition(".")
    if not issued.isdigit() or not rest:
        return True  # from before ids carried their time: sign in again
    return (time.time() if now is None else now) - int(issued) > MAX_AGE.total_seconds()


def caller_for_session(token_digest: str, session_id: str | None) -> Caller | None:
    """The caller of a cookie session: its token live, the session not signed out. A cookie
    without an id (made before sessions had one) counts as signed out."""
    if not session_id or too_old(session_id):
        return None
    row = pgpool.fetch_one_dict(
        "SELECT owner_id, is_admin FROM api_tokens WHERE token_hash = %s "
        "AND revoked_at IS NULL "
        "AND NOT EXISTS (SELECT 1 FROM ended_web_sessions WHERE session_id = %s)",
        (token_digest, session_id))
    return Caller(row["owner_id"], row["is_admin"]) if row else None


def end(session_id: str | None) -> None:
    """Sign-out: the id is refused until the session is too old to be accepted anyway."""
    if not session_id:
        return
    keep = MAX_AGE + CLOCK_MARGIN
    pgpool.execute("INSERT INTO ended_web_sessions (session_id, forget_after) "
                   "VALUES (%s, now() + %s) ON CONFLICT (session_id) DO NOTHING",
                   (session_id, keep))
    pgpool.execute("DELETE FROM ended_web_sessions WHERE forget_after < now()")
