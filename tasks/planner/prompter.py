"""The prompter: what a plan task's job is told. Pure: the goal, the task, what its
prerequisites produced, and a summary of the repository's files when the plan has one."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

OUTPUT_CHARS = 3000  # of one prerequisite's output
TREE_LINES = 150


@dataclass(frozen=True)
class Prior:
    """A finished prerequisite: its id, what it was asked and what it produced."""

    id: str
    description: str
    output: Any


def build_prompt(goal: str, task_id: str, description: str, priors: Sequence[Prior],
                 file_tree: str | None = None) -> str:
    parts = [f"Overall goal: {goal.strip()}",
             f"Your task ({task_id}): {description.strip()}"]
    if priors:
        done = "\n\n".join(f"### {p.id}: {_line(p.description)}\n{render_output(p.output)}"
                           for p in priors)
        parts.append(f"What the tasks this one depends on produced:\n\n{done}")
    if file_tree:
        parts.append(f"The repository's files:\n{file_tree}")
    parts.append("Do this task only; the other tasks of the plan are done by others. "
                 "Answer with the result of the task.")
    return "\n\n".join(parts)


def render_output(output: Any, limit: int = OUTPUT_CHARS) -> str:
    """A job's result as text for a prompt: its `text` if it has one, else compact JSON."""
    if output is None:
        text = "(no output)"
    elif isinstance(output, str):
        text = output
    elif isinstance(output, dict) and isinstance(output.get("text"), str):
        text = output["text"]
    else:
        text = json.dumps(output, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= limit else text[:limit - 1] + "…"


def file_tree_summary(paths: Sequence[str], limit: int = TREE_LINES) -> str:
    """The files of a repository, one a line; past `limit`, the top-level directories with
    how many files each holds, then as many files as fit."""
    files = sorted(paths)
    if not files:
        return "(the repository is empty)"
    if len(files) <= limit:
        return "\n".join(files)
    counts: dict[str, int] = {}
    for path in files:
        top = path.split("/", 1)[0] + ("/" if "/" in path else "")
        counts[top] = counts.get(top, 0) + 1
    lines = [f"{len(files)} files; by top-level entry:"]
    lines += [f"{top} ({n} file{'s' if n > 1 else ''})" if top.endswith("/") else top
              for top, n in counts.items()][:limit // 2]
    room = limit - len(lines) - 1
    if room > 0:
        lines.append("Some of the files:")
        lines += files[:room]
    return "\n".join(lines)


def _line(text: str, limit: int = 120) -> str:
    first = text.strip().splitlines()[0] if text.strip() else ""
    return first if len(first) <= limit else first[:limit - 1] + "…"
