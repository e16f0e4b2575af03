"""What one owner may keep, over all its projects: the operator's quotas (issue 23.6).

Tenants share one database and one artifact store; without a ceiling one owner's functions,
memories or files fill them for everyone. Each quota is a setting (0: none) and a usage
query over the owner's projects; a write that would go over is refused with QuotaExceeded,
which names the quota and its limit (a 422 `quota_exceeded` over HTTP, the failed step's
error in a job, a JavaScript Error in a function).

Usage is summed at the write, not kept in a counter: two concurrent writes may each see room
for themselves, so an owner can pass a quota by at most what its concurrent writes add
(a function's insert is 100 documents of 256 KiB at most, an artifact its own size cap).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

from tasks.engine import pg
from tasks.engine.errors import PermanentError
from tasks.settings import Settings, get_settings

OWNER_OF = "(SELECT owner_id FROM projects WHERE id = %(project)s)"


@dataclass(frozen=True)
class Quota:
    name: str  # as a client reads it in `details.quota`
    setting: str  # the environment variable that sets it
    unit: str
    usage: str  # SQL: the owner's use, with %(project)s one of its projects

    def limit(self, settings: Settings) -> int:
        return int(getattr(settings, self.setting.removeprefix("SWITCHYARD_").lower()))


PROJECTS = Quota("projects", "SWITCHYARD_MAX_PROJECTS_PER_OWNER", "projects",
                 "SELECT count(*) FROM projects WHERE owner_id = %(owner)s")
FUNCTION_DATA = Quota(
    "function_data_bytes", "SWITCHYARD_MAX_FUNCTION_DATA_BYTES_PER_OWNER", "bytes",
    "SELECT coalesce(sum(d.size), 0) FROM function_data d "
    f"JOIN projects p ON p.id = d.project_id WHERE p.owner_id = {OWNER_OF}")
MEMORY_KEYS = Quota(
    "memory_keys", "SWITCHYARD_MAX_MEMORY_KEYS_PER_OWNER", "keys",
    "SELECT count(*) FROM agent_memory m JOIN projects p ON p.id = m.project_id "
    f"WHERE p.owner_id = {OWNER_OF}")
ARTIFACT_BYTES = Quota(
    "artifact_bytes", "SWITCHYARD_MAX_ARTIFACT_BYTES_PER_OWNER", "bytes",
    "SELECT coalesce(sum(a.size), 0) FROM artifacts a JOIN projects p ON p.id = a.project_id "
    f"WHERE p.owner_id = {OWNER_OF}")


class QuotaExceeded(PermanentError):
    http_status, code = 422, "quota_exceeded"

    def __init__(self, quota: Quota, limit: int, used: int, adding: int):
        held = f"holds {used} {quota.unit}" + (f" and this adds {adding}" if adding else "")
        super().__init__(f"quota exceeded: an owner keeps at most {limit} {quota.unit} of "
                         f"{quota.name} ({quota.setting}); this owner {held}")
        self.quota, self.limit = quota, limit

    def details(self) -> dict[str, Any]:
        return {"quota": self.quota.name, "limit": self.limit}


def check(quota: Quota, *, project: uuid.UUID | str | None = None,
          owner: uuid.UUID | str | None = None, adding: int = 0) -> None:
    """Raise QuotaExceeded if the owner's use plus `adding` is over the quota. Called inside
    pg.transaction(), it sees that transaction's own writes (a write measured after it ran,
    rolled back by the raise)."""
    limit = quota.limit(get_settings())
    if not limit:
        return
    params = {"project": str(project) if project else None, "owner": owner}
    used = int(pg.fetch_value(quota.usage, params) or 0)
    if used + adding > limit:
        raise QuotaExceeded(quota, limit, used, adding)
