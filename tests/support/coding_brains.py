"""Models for the fake Messages API that do what a coding model does, turn by turn.

Each brain reads the request as the real API would get it (system, tools, the
conversation with its tool_result blocks) and answers with content blocks, so the
coding agent is driven through the real `anthropic` SDK over HTTP.
"""

from __future__ import annotations

import json
from typing import Any

FIX = {"path": "calculator.py", "old": "return a - b", "new": "return a + b"}


def text(t: str) -> dict[str, Any]:
    return {"type": "text", "text": t}


def use(name: str, tool_input: dict[str, Any]) -> dict[str, Any]:
    return {"type": "tool_use", "name": name, "input": tool_input}


def phase(body: dict[str, Any]) -> str:
    """Which of the agent's phases a request belongs to, as a model would tell."""
    tools = {t["name"] for t in body.get("tools") or []}
    system = body.get("system") or ""
    if not tools:
        return "plan" if "JSON" in system else "review"
    if "write_file" not in tools:
        return "explore"
    if "root cause" in system.lower():
        return "debug"
    if "checks failed" in system:
        return "fix"
    return "build"


def turn(body: dict[str, Any]) -> int:
    return sum(1 for m in body["messages"] if m["role"] == "assistant")


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    return [b for m in body["messages"] if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"] if b.get("type") == "tool_result"]


def plan_json(*titles: str) -> str:
    return json.dumps({"subtasks": [{"title": t, "description": f"{t}, then run the tests"}
                                    for t in titles]})


def straight(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Reads, fixes `add` at once, finishes: the checks pass in round 1."""
    step, n = phase(body), turn(body)
    if step == "plan":
        return [text(plan_json("Fix add"))]
    if step == "review":
        return [text("PASS\nThe change does what the task asks.")]
    if step == "explore":
        script = [[text("Looking."), use("list_files", {})],
                  [use("read_file", {"path": "calculator.py"})],
                  [use("finish", {"summary": "add in calculator.py subtracts."})]]
        return script[min(n, 2)]
    script = [[use("read_file", {"path": "calculator.py"})],
              [text("The operator is wrong."), use("edit_file", FIX)],
              [use("finish", {"summary": "add adds."})]]
    return script[min(n, 2)]


def stubborn(body: dict[str, Any]) -> list[dict[str, Any]]:
    """Patches the symptom twice (the same failure repeats), fixes the cause in debug mode;
    on the way it tries to read outside the workspace and is told no."""
    step, n = phase(body), turn(body)
    if step == "plan":
        return [text(plan_json("Fix add"))]
    if step == "explore":
        return [[use("read_file", {"path": "../../../../etc/passwd"})],
                [use("finish", {"summary": "add is suspicious."})]][min(n, 1)]
    if step == "build":
        return [[use("edit_file", {"path": "calculator.py", "old": "return a - b",
                                   "new": "return a - b  # checked"})],
                [use("finish", {"summary": "looked fine"})]][min(n, 1)]
    if step == "fix":
        return [[use("edit_file", {"path": "calculator.py", "old": "# checked",
                                   "new": "# checked twice"})],
                [use("finish", {"summary": "tried"})]][min(n, 1)]
    if step == "debug":
        return [[use("read_file", {"path": "calculator.py"})],
                [use("edit_file", {"path": "calculator.py", "old": "return a - b",
                                   "new": "return a + b"})],
                [use("finish", {"summary": "root cause: add subtracted"})]][min(n, 2)]
    return [text("PASS")]
