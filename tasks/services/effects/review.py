"""The ledger as people see it: effects listed with their arguments redacted, and the unknown
ones that hold up doing the same action again until a person has resolved them.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from tasks.engine import pg
from tasks.engine.errors import SwitchyardError
from tasks.engine.sql import unknown_effect_of_action
from tasks.services.effects.records import COLUMNS, EffectRecord, _record
from tasks.services.effects.redaction import redact, secrets_in_use

STATUSES = ("intent", "succeeded", "failed", "unknown")


class UnknownEffectPending(SwitchyardError):
    """Doing this again could do it twice: an earlier effect of it has an unknown outcome."""

    http_status, code = 409, "effect_unknown"

    def __init__(self, effect_id: str, kind: str):
        super().__init__(
            f"an earlier {kind} of this exact action has an unknown outcome (effect "
            f"{effect_id}): it may have happened. Check with the provider, then resolve it as "
            f"succeeded or failed (POST /api/effects/{effect_id}/resolve) before doing it again")
        self.effect_id = effect_id
        self.kind = kind

    def details(self) -> dict[str, Any]:
        return {"effect_id": self.effect_id, "kind": self.kind}


@dataclass(frozen=True)
class Resolution:
    outcome: str
    note: str
    by: str | None


def effects_for(project_id: str, status: str | None = None,
                limit: int = 200) -> list[EffectRecord]:
    """The project's effects, newest first, their arguments and answers redacted."""
    rows = pg.fetch_dicts(
        f"SELECT {COLUMNS} FROM action_executions WHERE project_id = %s "
        "AND (%s::text IS NULL OR status = %s::text) ORDER BY created_at DESC, id DESC LIMIT %s",
        (str(project_id), status, status, limit))
    secrets = secrets_in_use()
    return [_redacted(_record(r), secrets) for r in rows]


def effect_of_owner(effect_id: str, owner_id: str) -> EffectRecord | None:
    """The effect if it belongs to a project of this owner (anyone else's: None)."""
    row = pg.fetch_one_dict(
        f"SELECT {COLUMNS} FROM action_executions WHERE id = %s "
        "AND project_id IN (SELECT id FROM projects WHERE owner_id = %s)",
        (effect_id, owner_id))
    return None if row is None else _redacted(_record(row), secrets_in_use())


def resolution_of(effect: EffectRecord) -> Resolution | None:
    """A person's verdict, if the effect was resolved by one."""
    found = effect.response.get("resolution") if isinstance(effect.response, dict) else None
    if not isinstance(found, dict):
        return None
    by = found.get("by")
    return Resolution(str(found.get("status")), str(found.get("note") or ""),
                      None if by is None else str(by))


def unknown_blocking_approval(approval_id: str) -> UnknownEffectPending | None:
    """Why approving this approval could repeat an effect that may have happened, if it could."""
    row = pg.fetch_one_dict(
        f"SELECT u.id, u.action_type FROM approvals a CROSS JOIN LATERAL "
        f"({unknown_effect_of_action('a')}) u WHERE a.id = %s", (approval_id,))
    return None if row is None else UnknownEffectPending(str(row["id"]), row["action_type"])


def unknown_blocking_job(job_id: str) -> UnknownEffectPending | None:
    """Why running this job again is not to be done yet: an effect it made is unknown."""
    row = pg.fetch_one_dict("SELECT id, action_type FROM action_executions WHERE job_id = %s "
                            "AND status = 'unknown' ORDER BY created_at LIMIT 1", (job_id,))
    return None if row is None else UnknownEffectPending(str(row["id"]), row["action_type"])


def _redacted(effect: EffectRecord, secrets: list[str]) -> EffectRecord:
    return replace(effect, args=redact(effect.args, secrets),
                   response=redact(effect.response, secrets),
                   error=redact(effect.error, secrets))
