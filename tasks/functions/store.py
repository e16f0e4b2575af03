"""The function registry in PostgreSQL: each save of a name is a new, immutable version.

Saving exactly what the newest version of a name already holds (code, language and
description) answers with that version instead of minting a twin, so a retried save, or an
agent saving the same code twice, does not grow the list.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime

from tasks.engine import pg
from tasks.services import next_version

NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")  # fullmatch; also a URL path segment
NAME_PATTERN = f"^{NAME.pattern}$"
NAME_RULE = "1-64 characters: a letter, then letters, digits, _ or -"
LANGUAGES = ("javascript",)
CODE_MAX = 256 * 1024  # characters
DESCRIPTION_MAX = 4000

SAVE = """
WITH newest AS (
    SELECT id, version, code, language, description FROM functions
    WHERE project_id = %(project)s AND name = %(name)s ORDER BY version DESC LIMIT 1),
same AS (
    SELECT id, version FROM newest
    WHERE code = %(code)s AND language = %(language)s AND description = %(description)s),
ins AS (
    INSERT INTO functions (id, project_id, name, version, code, language, description,
                           created_by_job)
    SELECT %(id)s, %(project)s, %(name)s, coalesce((SELECT version FROM newest), 0) + 1,
           %(code)s, %(language)s, %(description)s, %(job)s
    WHERE NOT EXISTS (SELECT 1 FROM same)
    RETURNING version, true AS created)
SELECT version, created FROM ins UNION ALL SELECT version, false FROM same
"""


@dataclass(frozen=True)
class Saved:
    name: str
    version: int
    created: bool


@dataclass(frozen=True)
class FunctionVersion:
    name: str
    version: int
    code: str
    language: str
    description: str
    created_by_job: uuid.UUID | None
    created_at: datetime


@dataclass(frozen=True)
class VersionInfo:
    """A version without its code: what a listing shows."""
    version: int
    description: str
    created_by_job: uuid.UUID | None
    created_at: datetime


def save(project_id: uuid.UUID | str, name: str, code: str, *, language: str = "javascript",
         description: str = "", created_by_job: uuid.UUID | str | None = None) -> Saved:
    params = {"id": uuid.uuid4(), "project": str(project_id), "name": name, "code": code,
              "language": language, "description": description,
              "job": str(created_by_job) if created_by_job else None}
    row = next_version.insert_next(SAVE, params)
    return Saved(name, row["version"], row["created"])


COLUMNS = "name, version, code, language, description, created_by_job, created_at"


def get(project_id: uuid.UUID | str, name: str, version: int | None = None
        ) -> FunctionVersion | None:
    """One version of a function (the newest without `version`), or None."""
    sql = (f"SELECT {COLUMNS} FROM functions WHERE project_id = %(p)s AND name = %(n)s "
           + ("AND version = %(v)s " if version is not None else "")
           + "ORDER BY version DESC LIMIT 1")
    row = pg.fetch_one_dict(sql, {"p": str(project_id), "n": name, "v": version})
    return FunctionVersion(**row) if row else None


def versions(project_id: uuid.UUID | str, name: str) -> list[VersionInfo]:
    """A function's versions, newest first; [] for a name the project never saved."""
    return [VersionInfo(**r) for r in pg.fetch_dicts(
        "SELECT version, description, created_by_job, created_at FROM functions "
        "WHERE project_id = %s AND name = %s ORDER BY version DESC", (str(project_id), name))]


@dataclass(frozen=True)
class Listed:
    name: str
    versions: list[int]  # newest first
    description: str  # the newest version's
    updated_at: datetime


def listing(project_id: uuid.UUID | str) -> list[Listed]:
    return [Listed(**r) for r in pg.fetch_dicts(
        "SELECT name, array_agg(version ORDER BY version DESC) AS versions, "
        "(array_agg(description ORDER BY version DESC))[1] AS description, "
        "max(created_at) AS updated_at FROM functions WHERE project_id = %s "
        "GROUP BY name ORDER BY name", (str(project_id),))]
