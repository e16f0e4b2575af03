"""The scripted provider's planner and plan agents: a goal split into a small DAG of tasks
for roles that `agent.task` answers, a revision that retries a failed task as a general
assistant's, and an agent's answer that names its task. Deterministic and offline."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any

from tasks.services.llm import scripted
from tasks.services.llm.types import LLMRequest


def _plan(req: LLMRequest) -> str:
    goal = str(req.context.get("goal") or "the goal")
    tasks = [
        {"id": "research", "description": f"List what is known and what is unknown about: "
                                          f"{goal}", "assigned_to": "analyst", "depends_on": []},
        {"id": "draft", "description": f"Draft a first version that reaches: {goal}",
         "assigned_to": "writer", "depends_on": ["research"]},
        {"id": "review", "description": "Check the draft against the research and the goal; "
                                        "list what is missing", "assigned_to": "reviewer",
         "depends_on": ["research", "draft"]},
    ]
    return json.dumps({"tasks": tasks}, ensure_ascii=False)


def _revise(req: LLMRequest) -> str:
    """The failed task again, as a general assistant's (a role no failing job type has), and
    the tasks that had not run, now waiting on it instead."""
    failed = req.context.get("failed") or {}
    old = str(failed.get("id") or "task")
    new = (old[:56] + "-retry")
    tasks: list[dict[str, Any]] = [{
        "id": new, "description": str(failed.get("description") or "Do the failed task"),
        "assigned_to": "assistant", "depends_on": list(failed.get("depends_on") or [])}]
    for t in req.context.get("remaining") or []:
        tasks.append({"id": t["id"], "description": t["description"],
                      "assigned_to": t["assigned_to"],
                      "depends_on": [new if d == old else d for d in t["depends_on"]]})
    return json.dumps({"tasks": tasks}, ensure_ascii=False)


def _agent(req: LLMRequest) -> str:
    prompt = str(req.context.get("user_message") or "")
    found = re.search(r"^Your task \(([^)]*)\): (.*)$", prompt, re.MULTILINE)
    task, what = (found.group(1), found.group(2)) if found else ("task", prompt[:200])
    role = str(req.context.get("role") or "assistant")
    return f"{role} finished {task}: {what[:300]}"


COMPOSERS: dict[str, Callable[[LLMRequest], str]] = {
    "planner.plan": _plan, "planner.revise": _revise, "agent.task": _agent,
}
for _purpose, _compose in COMPOSERS.items():
    scripted.register(_purpose, _compose)
