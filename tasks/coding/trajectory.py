"""A coding job's trajectory, read off its recorded steps (pure: step rows in, items out).

What OpenHands' trajectory viewer and SWE-agent's trajectories give people: every model turn
(its text, the tools it called, its tokens), each tool call with its input and result and the
patch it made, the setup, the baseline and each verification round with its output, in the
order they ran. The steps are the job's journal already, so this is a view of it, not a
second record that could disagree.
"""

from __future__ import annotations

from typing import Any

TEXT_CHARS = 20_000  # of any one text in an item; the step link has the whole


def build(steps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items in step order. A step whose output was too large to inline keeps its preview."""
    calls: dict[str, dict[str, Any]] = {}  # "label:turn:i" -> the call the model made
    items = []
    for s in steps:
        name, out = s["name"], s.get("output")
        base = {"seq": s["seq"], "step": name, "status": s["status"],
                "started_at": s["started_at"], "finished_at": s["finished_at"]}
        if s.get("error"):
            base["error"] = _cut(s["error"])
        if out is None and s.get("output_preview") is not None:
            items.append({**base, "kind": _kind(name), "output_preview": s["output_preview"],
                          "output_bytes": s.get("output_bytes")})
            continue
        kind = _kind(name)
        if kind == "model" and isinstance(out, dict):
            label_turn = name.removeprefix("llm:")
            tool_calls = out.get("tool_calls") or []
            for i, call in enumerate(tool_calls, start=1):
                calls[f"{label_turn}:{i}"] = call
            usage = out.get("usage") or {}
            items.append({**base, "kind": kind, "text": _cut(out.get("text") or ""),
                          "tool_calls": [{"name": c.get("name"), "input": c.get("input")}
                                         for c in tool_calls],
                          "tokens_in": usage.get("input_tokens"),
                          "tokens_out": usage.get("output_tokens"),
                          "cost_usd": out.get("cost_usd")})
        elif kind == "tool" and isinstance(out, dict):
            call = calls.get(name.removeprefix("tool:"), {})
            items.append({**base, "kind": kind, "tool": call.get("name"),
                          "input": call.get("input"), "result": _cut(str(out.get("content"))),
                          "is_error": out.get("is_error"), "changed": out.get("changed"),
                          "patch": _cut(out["delta"]) if out.get("delta") else
                          _cut(out["patch"]) if out.get("patch") else None})
        elif kind == "setup" and isinstance(out, dict):
            items.append({**base, "kind": kind, **{k: out.get(k) for k in (
                "status", "kinds", "seconds", "notes", "error")},
                "output": _cut(out.get("output") or "")})
        elif kind == "verify" and isinstance(out, dict):
            items.append({**base, "kind": kind, "baseline": name == "verify:baseline",
                          "passed": out.get("passed"), "ran": out.get("ran"),
                          "fixed": out.get("fixed"), "broken": out.get("broken"),
                          "failing": out.get("failing"),
                          "checks": [{k: r.get(k) for k in ("name", "command", "exit_code",
                                                            "timed_out", "passed")}
                                     | {"output": _cut(r.get("output") or "")}
                                     for r in out.get("results") or []]})
        else:
            items.append({**base, "kind": kind})
    return items


def _kind(name: str) -> str:
    if name.startswith("llm:"):
        return "model"
    if name.startswith("tool:"):
        return "tool"
    if name in ("setup", "setup-again"):
        return "setup"
    if name.startswith("verify:"):
        return "verify"
    return "step"


def _cut(text: str) -> str:
    return text if len(text) <= TEXT_CHARS else text[:TEXT_CHARS] + "\n… (cut)"
