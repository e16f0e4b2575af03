"""What the planner asks the model: a plan for a goal, a correction, a revision after a
failure. The answers are checked by tasks.planner.schema."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from tasks.planner.prompter import render_output
from tasks.planner.schema import DESCRIPTION_CHARS, MAX_TASKS, SHAPE

SYSTEM = f"""\
You are the planner of a team of agents. Split the goal into tasks that together reach it.
Reply with one JSON object and nothing else:
{SHAPE}
Rules: 1 to {MAX_TASKS} tasks; each id is a lowercase letter then lowercase letters, digits,
_ or - (e.g. "research", "t2"), unique; each description says what to do and what to
produce, at most {DESCRIPTION_CHARS} characters; depends_on lists the ids of the tasks whose
results this task needs (no cycles); assigned_to is a role, one of: {{roles}} (anything else
is answered by a general assistant)."""

REVISE_SYSTEM = SYSTEM + """
A task of the plan failed for good. Revise the tasks that remain: replace, split or drop
them so the goal can still be reached without repeating what failed. The completed tasks are
kept as they are: do not list them again, but a new task may depend on their ids."""


def system(roles: Sequence[str], *, revise: bool = False) -> str:
    return (REVISE_SYSTEM if revise else SYSTEM).replace("{roles}", ", ".join(sorted(roles)))


def plan_prompt(goal: str, file_tree: str | None) -> str:
    text = f"Goal: {goal.strip()}"
    if file_tree:
        text += f"\n\nThe repository the work is about holds these files:\n{file_tree}"
    return text


def retry_prompt(errors: Sequence[str]) -> str:
    listed = "\n".join(f"- {e}" for e in errors[:20])
    more = f"\n(and {len(errors) - 20} more)" if len(errors) > 20 else ""
    return (f"That plan is not valid:\n{listed}{more}\n"
            "Reply again with the whole corrected JSON object, nothing else.")


def revise_prompt(goal: str, completed: Sequence[dict[str, Any]],
                  failed: dict[str, Any], remaining: Sequence[dict[str, Any]]) -> str:
    done = "\n".join(f"- {t['id']} ({t['assigned_to']}): {t['description']}\n  result: "
                     f"{render_output(t.get('output'), 1500)}" for t in completed) or "(none)"
    left = json.dumps([{k: t[k] for k in ("id", "description", "assigned_to", "depends_on")}
                       for t in remaining], ensure_ascii=False)
    return (f"Goal: {goal.strip()}\n\nCompleted tasks (kept):\n{done}\n\n"
            f"The task that failed: {failed['id']} ({failed['assigned_to']}): "
            f"{failed['description']}\nWhy it failed: {failed.get('error') or 'unknown'}\n\n"
            f"The tasks that had not run yet: {left}\n\n"
            "Reply with the revised remaining tasks as {\"tasks\": [...]}.")
