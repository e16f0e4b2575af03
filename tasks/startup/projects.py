"""What an agent knows about its project when it starts: the context handed to the LLM layer."""

from __future__ import annotations

import uuid
from typing import Any

from tasks.engine import pg
from tasks.engine.errors import PermanentError
from tasks.services.effects import policy
from tasks.services.memory import format_memory_for_prompt, load_memory


def project_context(project_id: uuid.UUID | str) -> dict[str, Any]:
    row = pg.fetch_one_dict("SELECT name, goal, phase, night_shift, settings FROM projects "
                            "WHERE id = %s", (project_id,))
    if row is None:
        raise PermanentError(f"project {project_id} does not exist")
    name, goal, phase, night_shift, settings = (
        row["name"], row["goal"], row["phase"], row["night_shift"], row["settings"])
    memory = load_memory(project_id)
    packet = pg.fetch_one_dict("SELECT content FROM packets WHERE project_id = %s "
                          "ORDER BY created_at DESC LIMIT 1", (project_id,))
    return {
        "project_id": str(project_id), "project_name": name, "goal": goal or "", "phase": phase,
        "night_shift": night_shift,
        # Only the settings an agent may use; credentials never enter a prompt.
        "contact_email": settings.get("contact_email"),
        "deploy_hook_url": settings.get("deploy_hook_url"),
        "github_repo": settings.get("github_repo"),
        # Kinds of effect the project may not perform, and why: not proposed (proposals.py).
        "actions_refused": policy.refusals(settings, policy.operator()),
        "memory": [{"category": m.category, "key": m.key, "content": m.content} for m in memory],
        "memory_prompt": format_memory_for_prompt(memory),
        "latest_packet": packet["content"] if packet else None,
    }
