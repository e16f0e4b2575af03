"""The one door every side effect goes through: permission, cap, intent, call, outcome.

The intent is committed before the provider is called and the outcome after, so
a crash between the two leaves a trace. While one caller performs an effect it
holds a session advisory lock on the key; another caller with the same key
waits for it and then replays the outcome. An intent whose lock nobody holds
was left by a caller that died mid-call: the provider is asked what happened,
and when it cannot tell, the effect is marked `unknown` for a person to decide,
never sent again blindly.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from typing import Any

import psycopg
from psycopg.pq import TransactionStatus

from tasks.engine import pg, telemetry
from tasks.engine.errors import PermanentError, RetryableError
from tasks.engine.storable import to_json
from tasks.services import keystore
from tasks.services.effects import policy, records
from tasks.services.effects.adapters import ADAPTERS
from tasks.services.effects.adapters.base import Adapter, Credentials, ProviderResult, cannot_tell
from tasks.services.effects.records import EffectRecord
from tasks.services.effects.redaction import redact, secrets_in_use
from tasks.settings import get_settings

log = logging.getLogger(__name__)

OUTCOMES = ("succeeded", "failed", "unknown")


@dataclass(frozen=True)
class EffectOutcome:
    """What became of an effect. `replayed`: this call made no request to the provider
    (the outcome was already recorded, or was learned by asking the provider)."""

    status: str  # succeeded | failed | unknown
    response: Any
    provider_ref: str | None
    error: str | None
    replayed: bool
    effect_id: str = ""
    idempotency_key: str = ""

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready, for a step: `ctx.step("deploy", lambda: perform(...).as_dict())`."""
        return asdict(self)


def perform(*, project_id: str, action_type: str, args: dict[str, Any], idempotency_key: str,
            job_id: str | None = None, approval_id: str | None = None) -> EffectOutcome:
    """Perform the effect at most once per key and return its outcome (in an `effect <kind>`
    span when tracing is on: its kind, status and whether it was replayed, never its args).
    """
    with telemetry.span(f"effect {action_type}", {"switchyard.effect.kind": action_type,
                                                   "switchyard.project.id": str(project_id)}
                        ) as current:
        outcome = _perform(project_id=project_id, action_type=action_type, args=args,
                           idempotency_key=idempotency_key, job_id=job_id,
                           approval_id=approval_id)
        telemetry.annotate(current, {"switchyard.effect.status": outcome.status,
                                     "switchyard.effect.replayed": outcome.replayed})
        return outcome


def _perform(*, project_id: str, action_type: str, args: dict[str, Any], idempotency_key: str,
             job_id: str | None, approval_id: str | None) -> EffectOutcome:
    """Perform the effect at most once per key and return its outcome.

    Raises policy.NotPermitted / policy.CapReached (PermanentError; nothing
    recorded), PermanentError for a key reused for a different effect or an
    effect that cannot be made as asked, and RetryableError when the provider
    certainly did not act and may later (the intent is withdrawn). Must not be
    called inside a transaction: the intent has to be committed before the call.
    """
    adapter = ADAPTERS.get(action_type)
    if adapter is None:
        raise PermanentError(f"unknown action type {action_type!r}: one of {sorted(ADAPTERS)}")
    if not idempotency_key:
        raise PermanentError("an effect needs a non-empty idempotency key")
    args = _plain_json(args)
    conn = pg.connection()
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise RuntimeError("ledger.perform() must not run inside a transaction: its intent "
                           "has to be committed before the provider is called")
    with _key_lock(conn, idempotency_key):
        existing = records.find(idempotency_key)
        if existing is not None:
            _check_same_effect(existing, project_id, action_type, args)
            return _settle(adapter, existing)
        settings = records.project_settings(project_id)
        if settings is None:
            raise PermanentError(f"project {project_id} does not exist")
        rules = policy.check_permitted(settings, action_type,
                                       policy.operator())
        # Read before the intent is written: a failure here must leave no intent behind
        # (the next caller would take it for a crash mid-call and call the effect unknown).
        creds = credentials(adapter, str(project_id))
        intent = records.insert_intent(
            project_id=str(project_id), action_type=action_type, args=args,
            key=idempotency_key, job_id=job_id, approval_id=approval_id,
            cap_per_day=rules.cap_per_day)
        if intent is None:  # written by a caller that bypassed the key lock
            raise RetryableError(f"effect {idempotency_key!r} is being recorded concurrently")
        _log("effect_intent", intent)
        return _call(adapter, intent, creds)


def unknown_effects(project_id: str) -> list[EffectRecord]:
    """Effects whose outcome nobody knows: a person must check and resolve them."""
    return records.unknown_for(project_id)


def resolve_unknown(effect_id: str, *, project_id: str, status: str, note: str,
                    by: str | None = None) -> EffectRecord | None:
    """A person's verdict on an unknown effect; None if it is not (or no longer) unknown."""
    if status not in ("succeeded", "failed"):
        raise ValueError("an unknown effect resolves to 'succeeded' or 'failed'")
    resolved = records.resolve(effect_id, project_id=project_id, status=status, note=note, by=by)
    if resolved is not None:
        _log("effect_resolved", resolved)
    return resolved


@contextmanager
def _key_lock(conn: psycopg.Connection, key: str) -> Iterator[None]:
    """Held for the whole perform; released by PostgreSQL itself if this process dies."""
    conn.execute("SELECT pg_advisory_lock(hashtextextended(%s, 0))", (f"effect:{key}",))
    try:
        yield
    finally:
        if not conn.closed:
            try:
                conn.execute("SELECT pg_advisory_unlock(hashtextextended(%s, 0))",
                             (f"effect:{key}",))
            except psycopg.Error:
                pg.reset()  # closing the session is the other way to free its locks


def credentials(adapter: Adapter, project_id: str) -> Credentials:
    """The project's own secrets this adapter uses, and whether the operator's may stand in."""
    return Credentials(own=keystore.read(project_id, adapter.secrets),
                       shared=adapter.action_type in get_settings().shared_credential_kinds)


def _settle(adapter: Adapter, row: EffectRecord) -> EffectOutcome:
    if row.status in OUTCOMES:
        return _outcome(row, replayed=True)
    # An intent nobody holds the lock for: its caller died between intent and outcome.
    creds = credentials(adapter, row.project_id)
    try:
        result = adapter.reconcile(row.idempotency_key, row.args, row.provider_ref, creds)
    except Exception as exc:
        result = cannot_tell(f"asking the provider failed: {type(exc).__name__}: {exc}")
    if result.status == "absent":
        _log("effect_reconciled_absent", row)
        return _call(adapter, row, creds)
    if result.status not in OUTCOMES:
        result = cannot_tell(result.error or "the provider gave no usable answer")
    return _record(row, result, creds, replayed=True, action="effect_reconciled")


def _call(adapter: Adapter, row: EffectRecord, creds: Credentials) -> EffectOutcome:
    try:
        result = adapter.call(row.idempotency_key, row.args, creds)
    except Exception as exc:  # a bug mid-call may still have reached the provider
        result = ProviderResult("unknown", error=f"the {row.action_type} adapter raised "
                                f"{type(exc).__name__}: {exc}")
    # A BaseException (worker killed, interrupt) leaves the intent for the next caller.
    if result.status == "not_sent":
        records.withdraw(row.id)
        _log("effect_withdrawn", row)
        message = redact(f"{row.action_type} effect {row.idempotency_key!r} was not performed: "
                         f"{result.error}", secrets_in_use(creds.own.values()))
        if not result.retryable:
            raise PermanentError(message)
        raise RetryableError(message, delay=result.retry_after,
                             count_attempt=not result.rate_limited)
    if result.status not in OUTCOMES:
        result = ProviderResult("unknown", error=result.error or "no outcome from the adapter")
    return _record(row, result, creds, replayed=False, action="effect_" + result.status)


def _record(row: EffectRecord, result: ProviderResult, creds: Credentials, *, replayed: bool,
            action: str) -> EffectOutcome:
    secrets = secrets_in_use(creds.own.values())
    stored = records.record_outcome(
        row.id, status=result.status, response=redact(result.response, secrets),
        provider_ref=redact(result.provider_ref, secrets), error=redact(result.error, secrets))
    if stored is None:  # resolved meanwhile by someone else: theirs is the truth
        current = records.find(row.idempotency_key)
        if current is None or current.status not in OUTCOMES:
            raise RetryableError(f"effect {row.idempotency_key!r} changed while being recorded")
        return _outcome(current, replayed=True)
    _log(action, stored)
    return _outcome(stored, replayed=replayed)


def _outcome(row: EffectRecord, *, replayed: bool) -> EffectOutcome:
    return EffectOutcome(status=row.status, response=row.response, provider_ref=row.provider_ref,
                         error=row.error, replayed=replayed, effect_id=row.id,
                         idempotency_key=row.idempotency_key)


def _check_same_effect(row: EffectRecord, project_id: str, action_type: str,
                       args: dict[str, Any]) -> None:
    if row.project_id != str(project_id) or row.action_type != action_type or row.args != args:
        raise PermanentError(
            f"idempotency key {row.idempotency_key!r} already names a different effect "
            f"({row.action_type} in project {row.project_id}): a key is bound to one effect "
            "and its exact arguments")


def _plain_json(args: dict[str, Any]) -> dict[str, Any]:
    """The args as they will read back from jsonb, so a replay compares like with like."""
    if not isinstance(args, dict):
        raise PermanentError("effect args must be a JSON object")
    return json.loads(to_json(args, "effect args"))


def _log(action: str, row: EffectRecord) -> None:
    log.info("%s %s", action, row.idempotency_key, extra={
        "action": action, "effect_id": row.id, "idempotency_key": row.idempotency_key,
        "action_type": row.action_type, "project_id": row.project_id, "job_id": row.job_id,
        "status": row.status})
