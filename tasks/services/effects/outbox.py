"""The email outbox: rows written now, sent by the `email.process_due` sweep through the ledger.

Claiming moves a row to `sending` and uses `send_after` as the claim's lease: a
row left in `sending` by a dead worker comes due again when the lease expires.
Sending twice is harmless by construction, because each row is one ledger key
(`email:<row id>`): a second pass replays the first one's outcome.
"""

from __future__ import annotations

import logging
import uuid
from datetime import datetime, timedelta
from typing import Any

from tasks.engine import pg
from tasks.engine.retry import Fail, RetryPolicy, decide
from tasks.services.effects import ledger
from tasks.services.effects.policy import CapReached

log = logging.getLogger(__name__)

MAX_ATTEMPTS = 5
LEASE = timedelta(minutes=10)  # longer than any one send can take
BACKOFF = RetryPolicy(base_seconds=60.0, factor=2.0, max_seconds=3600.0, jitter=0.5)
FINAL = {"succeeded": "sent", "failed": "failed", "unknown": "unknown"}


def enqueue_email(project_id: str, to: str, subject: str, body: str, kind: str, key: str,
                  *, send_after: datetime | None = None) -> str:
    """The outbox row's id; the same key again returns the first row and changes nothing."""
    row = pg.fetch_one_dict(
        "INSERT INTO email_jobs (id, project_id, idempotency_key, kind, to_addr, subject, body, "
        "send_after) VALUES (%s, %s, %s, %s, %s, %s, %s, coalesce(%s::timestamptz, now())) "
        "ON CONFLICT (idempotency_key) DO NOTHING RETURNING id",
        (uuid.uuid4(), str(project_id), key, kind, to, subject, body, send_after),
    )
    if row is None:
        row = pg.fetch_one_dict("SELECT id FROM email_jobs WHERE idempotency_key = %s", (key,))
    if row is None:  # deleted between the two statements
        raise RuntimeError(f"email {key!r} vanished while being enqueued")
    return str(row["id"])


def process_due_emails(limit: int = 100) -> dict[str, int]:
    """Send what is due; returns how many rows ended in each state this pass."""
    counts = {"claimed": 0, "sent": 0, "failed": 0, "unknown": 0, "retrying": 0, "deferred": 0}
    for row in _claim(limit):
        counts["claimed"] += 1
        counts[_send(**row)] += 1
    if counts["claimed"]:
        log.info("email outbox pass", extra={"action": "email_outbox_pass", **counts})
    return counts


def _claim(limit: int) -> list[dict[str, Any]]:
    return pg.fetch_dicts(
        "WITH due AS (SELECT id FROM email_jobs WHERE status IN ('pending', 'sending') "
        "AND send_after <= now() ORDER BY send_after, id LIMIT %s FOR UPDATE SKIP LOCKED) "
        "UPDATE email_jobs e SET status = 'sending', attempts = e.attempts + 1, "
        "send_after = now() + %s FROM due WHERE e.id = due.id "
        "RETURNING e.id AS email_id, e.project_id, e.kind, e.to_addr, e.subject, e.body, "
        "e.attempts",
        (limit, LEASE),
    )


def _send(email_id: Any, project_id: Any, kind: str, to_addr: str, subject: str, body: str,
          attempts: int) -> str:
    try:
        outcome = ledger.perform(
            project_id=str(project_id), action_type="email", idempotency_key=f"email:{email_id}",
            args={"to": to_addr, "subject": subject, "body": body, "kind": kind})
    except CapReached as exc:
        # The cap is per UTC day: come back tomorrow, and this was not the email's fault.
        _release(email_id, None, str(exc), give_back_attempt=True)
        return "deferred"
    except Exception as exc:
        decision = decide(attempts, MAX_ATTEMPTS, exc, BACKOFF)
        error = f"{type(exc).__name__}: {exc}"
        if isinstance(decision, Fail):
            _finish(email_id, "failed", error)
            return "failed"
        _release(email_id, decision.delay, error, give_back_attempt=not decision.count_attempt)
        return "retrying"
    status = FINAL[outcome.status]
    _finish(email_id, status, outcome.error)
    return status


def _finish(email_id: Any, status: str, error: str | None) -> None:
    pg.execute(
        "UPDATE email_jobs SET status = %s, last_error = %s, "
        "sent_at = CASE WHEN %s = 'sent' THEN now() ELSE sent_at END "
        "WHERE id = %s AND status = 'sending'",
        (status, error, status, email_id),
    )


# When a released email is due again, by the database's clock: after `delay` seconds,
# or (no delay) at the next midnight UTC, when daily caps reset.
RELEASE = """
UPDATE email_jobs SET status = 'pending', last_error = %(error)s,
    send_after = CASE WHEN %(delay)s::float8 IS NULL
        THEN (date_trunc('day', now() AT TIME ZONE 'UTC') + interval '1 day') AT TIME ZONE 'UTC'
        ELSE now() + make_interval(secs => %(delay)s::float8) END,
    attempts = attempts - %(refund)s::int
WHERE id = %(id)s AND status = 'sending'
"""


def _release(email_id: Any, delay: float | None, error: str, *,
             give_back_attempt: bool) -> None:
    pg.execute(RELEASE, {"id": email_id, "error": error, "delay": delay,
                         "refund": 1 if give_back_attempt else 0})
