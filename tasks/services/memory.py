"""Agent memory: what a project's agents know, loaded before every LLM call, written after."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from tasks.engine import pg
from tasks.services import quotas

CATEGORIES = ("fact", "preference", "decision", "learning", "context")


@dataclass(frozen=True)
class MemoryEntry:
    category: str
    key: str
    content: str


def load_memory(project_id: uuid.UUID | str, categories: tuple[str, ...] = CATEGORIES,
                limit: int = 50) -> list[MemoryEntry]:
    rows = pg.fetch_dicts(
        "SELECT category, key, content FROM agent_memory WHERE project_id = %s "
        "AND category = ANY(%s) ORDER BY updated_at DESC LIMIT %s",
        (project_id, list(categories), limit))
    return [MemoryEntry(**r) for r in rows]


def write_memory(project_id: uuid.UUID | str, category: str, key: str, content: str, *,
                 job_id: uuid.UUID | str | None = None, step: str | None = None) -> None:
    """Upsert by (project, category, key), remembering which job and step wrote it; a new key
    counts against the owner's quota (SWITCHYARD_MAX_MEMORY_KEYS_PER_OWNER)."""
    if category not in CATEGORIES:
        raise ValueError(f"unknown memory category {category!r}")
    if not pg.fetch_value("SELECT count(*) FROM agent_memory WHERE project_id = %s AND "
                          "category = %s AND key = %s", (project_id, category, key)):
        quotas.check(quotas.MEMORY_KEYS, project=project_id, adding=1)
    pg.execute(
        "INSERT INTO agent_memory (id, project_id, category, key, content, source_job_id, "
        "source_step) VALUES (%s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (project_id, category, key) DO UPDATE SET content = EXCLUDED.content, "
        "source_job_id = EXCLUDED.source_job_id, source_step = EXCLUDED.source_step, "
        "updated_at = now()",
        (uuid.uuid4(), project_id, category, key, content, job_id, step))


def format_memory_for_prompt(entries: list[MemoryEntry]) -> str:
    if not entries:
        return "Nothing is remembered about this project yet."
    lines = ["What you know about this project:"]
    for category in CATEGORIES:
        items = [e for e in entries if e.category == category]
        if items:
            lines.append(f"{category.capitalize()}s:")
            lines += [f"- {e.key}: {e.content}" for e in items]
    return "\n".join(lines)
