"""The scripted provider's answers for the startup OS: packets, chat, nightshift actions,
summaries and report outlines, read off the project's own context (offline, deterministic)."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from typing import Any

from tasks.services.llm import scripted
from tasks.services.llm.scripted import last_user_text
from tasks.services.llm.types import LLMRequest

_NEXT_MOVE = {
    "idea": "talk to five people who have the problem before building anything",
    "validation": "put a landing page in front of real visitors and count sign-ups",
    "build": "ship the smallest version that solves the core problem end to end",
    "launch": "announce where the first users already gather and watch activation",
    "growth": "double down on the channel that brought the best-retained users",
}
# What each phase looks at and what it proposes: its packet reads like the phase it is in.
_RESEARCH = {
    "idea": "who has the problem, how they cope today, and what that costs them",
    "validation": "whether strangers want it: sign-ups per visitor, replies per email",
    "build": "the smallest scope that solves the core problem end to end",
    "launch": "where the first users gather and what makes them stay past day one",
    "growth": "which channel brings the best-retained users at a cost that pays back",
}
_INSIGHT = {
    "idea": "Five conversations beat fifty survey answers: listen for the workaround.",
    "validation": "A landing page with a waitlist is a cheap, honest test of demand.",
    "build": "Cut every feature the first ten users did not ask for.",
    "launch": "Activation in the first session predicts retention better than sign-ups.",
    "growth": "Spend where retention is best, not where sign-ups are cheapest.",
}
_OPENERS = ("Here is how I see it", "Good question", "Let me think about that", "Fair point")


class _Facts:
    """The request's context, read leniently: a missing field gets a sensible stand-in."""

    def __init__(self, req: LLMRequest):
        ctx = req.context
        self.seed = int(hashlib.sha256(json.dumps(
            [req.purpose, req.system, req.messages, ctx], sort_keys=True, default=str,
        ).encode()).hexdigest(), 16)
        self.name = str(ctx.get("project_name") or "your project")
        self.goal = str(ctx.get("goal") or "build something people pay for")
        self.phase = str(ctx.get("phase") or "idea")
        self.memory = [_memory_entry(m) for m in ctx.get("memory") or []]
        latest = ctx.get("latest_packet")
        self.latest_title = str(latest.get("title")) if isinstance(latest, dict) else None
        self.user_message = str(ctx.get("user_message") or last_user_text(req.messages))
        self.contact = ctx.get("contact_email")
        self.deploy_hook_url = ctx.get("deploy_hook_url")
        self.github_repo = ctx.get("github_repo")
        self.refused = set(ctx.get("actions_refused") or ())
        self.ad_budget = float(ctx.get("ad_daily_budget_usd") or 10)
        self.message_count = len(req.messages)
        self.topic = str(ctx.get("topic") or self.goal)
        self.sources = [str(u) for u in ctx.get("sources") or []]
        self.function_name = str(ctx.get("function_name") or "task")
        self.description = str(ctx.get("description") or self.user_message)

    def pick(self, options: tuple[str, ...], salt: int = 0) -> str:
        return options[(self.seed >> salt) % len(options)]

    @property
    def next_move(self) -> str:
        return _NEXT_MOVE.get(self.phase, "pick the riskiest assumption and test it this week")

    def keywords(self) -> list[str]:
        found = set(re.findall(r"[a-zA-Z]{4,}", self.goal.lower()))
        words = sorted(found, key=lambda w: (-len(w), w))
        return words[:3] or ["startup"]

    def relevant_memory(self) -> tuple[str, str, str] | None:
        """The memory entry sharing most words with the user's message (first on a tie)."""
        if not self.memory:
            return None
        said = set(re.findall(r"\w+", self.user_message.lower()))
        return max(self.memory, key=lambda m: len(said & set(re.findall(r"\w+", m[2].lower()))))


def _packet(f: _Facts) -> str:
    summary = f"{f.name} is in its {f.phase} phase, working towards: {f.goal}. "
    summary += f"Next: {f.next_move}."
    if f.latest_title:
        summary += f" This builds on the last packet, “{f.latest_title}”."
    insights = [f"{category} — {key}: {content}" for category, key, content in f.memory[:2]]
    insights.append(f"The fastest way to learn in the {f.phase} phase: {f.next_move}.")
    if f.phase in _INSIGHT:
        insights.append(_INSIGHT[f.phase])
    # The startup OS's packet shape (tasks.startup.packet validates what comes back).
    packet = {"title": f"{f.name}: {f.phase} packet", "summary": summary,
              "insights": insights, "actions": _actions(f)}
    return json.dumps(packet, ensure_ascii=False)


def _actions(f: _Facts) -> list[dict[str, Any]]:
    """Only actions the project can carry out: each needs its own contact, URL or repo, and a
    kind its settings allow (a model is told which it may not propose); what they say, and
    whether money is spent, follows the phase."""
    actions = []
    if f.contact:
        actions.append(_action("email", f"Send the {f.phase} update", args={
            "to": f.contact, "subject": f"{f.name}: {f.phase} update",
            "body": f"Where we are: {f.goal}. Next: {f.next_move}."}))
    if f.deploy_hook_url:
        actions.append(_action("deploy_hook", "Deploy the latest build", args={
            "url": f.deploy_hook_url, "reason": f"{f.phase} packet"}))
    if f.github_repo:
        actions.append(_action("github_dispatch", "Open the phase checklist", args={
            "repo": f.github_repo, "event_type": "switchyard.packet",
            "client_payload": {"phase": f.phase}}))
    if f.phase != "idea":
        actions.append(_action("ad_campaign", "Test demand with a small campaign", args={
            "channel": "search", "headline": f"{f.name}: {f.goal}"[:90],
            "keywords": f.keywords(), "daily_budget_usd": f.ad_budget}))
    return [a for a in actions if a["type"] not in f.refused]


def _action(type_: str, title: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"type": type_, "title": title, "args": args}


def _chat(f: _Facts) -> str:
    reply = f"{f.pick(_OPENERS)}. You said: “{f.user_message.strip()[:200]}”. "
    reply += f"Keeping the goal in view ({f.goal}), I would {f.next_move}. "
    remembered = f.relevant_memory()
    if remembered:
        category, key, content = remembered
        reply += f"I have not forgotten the {category} “{key}”: {content}. "
    return reply + "Want me to turn this into a task?"


def _plan(f: _Facts) -> str:
    steps = [
        ("Research", f"Collect what is known about: {f.goal}", []),
        ("Decide scope", "Choose the smallest version worth shipping", ["t1"]),
        ("Build", f"Make it, then {f.next_move}", ["t2"]),
        ("Review", "Check the result against the goal and memory", ["t1", "t3"]),
        ("Report", f"Write the {f.phase} packet for {f.name}", ["t4"]),
    ]
    count = 3 + f.seed % 3
    tasks = [{"id": f"t{i}", "title": title, "description": text,
              "depends_on": [d for d in deps if int(d[1:]) <= count]}
             for i, (title, text, deps) in enumerate(steps[:count], start=1)]
    return json.dumps({"goal": f.goal, "tasks": tasks}, ensure_ascii=False)


def _nightshift(f: _Facts) -> str:
    return json.dumps(_actions(f), ensure_ascii=False)


def _summary(f: _Facts) -> str:
    focus = _RESEARCH.get(f.phase)
    return (f"{f.name} ({f.phase}): {f.message_count} messages so far, aiming at {f.goal}. "
            + (f"This phase looks at {focus}. " if focus else "")
            + f"Latest: {f.user_message.strip()[:160] or 'nothing new'}.")


def _outline(f: _Facts) -> str:
    """A report outline on the request's topic, from what the project knows (no web)."""
    findings = [
        {"title": "Where things stand", "bullets": [
            f"{f.name} is in its {f.phase} phase", f"Goal: {f.goal}"[:200]],
         "notes": f"The report's question: {f.topic}."},
        {"title": "What the project has learned", "bullets": [
            f"{key}: {content}"[:200] for _, key, content in f.memory[:4]]
            or ["Nothing recorded yet: start with conversations"],
         "notes": "From the project's memory."},
        {"title": "Evidence so far", "bullets": [
            "Conversations held, interested, willing to pay"],
         "figures": [{"label": "Conversations", "value": 5 + f.seed % 6},
                     {"label": "Interested", "value": 3 + f.seed % 3},
                     {"label": "Would pay", "value": 1 + f.seed % 3}]},
        {"title": "Recommended next step", "bullets": [f.next_move]},
    ]
    return json.dumps({"title": f"{f.topic}"[:200], "subtitle": f"{f.name}, {f.phase} phase",
                       "summary": f"What {f.name} knows about {f.topic}, and what to do next.",
                       "findings": findings, "sources": f.sources}, ensure_ascii=False)


def _memory_entry(entry: Any) -> tuple[str, str, str]:
    if isinstance(entry, dict):
        return (str(entry.get("category", "fact")), str(entry.get("key", "note")),
                str(entry.get("content", "")))
    return ("fact", "note", str(entry))



_COMPOSERS = {
    "packet": _packet, "chat": _chat, "plan": _plan, "nightshift": _nightshift,
    "summary": _summary, "outline": _outline,
}


def _reading_facts(compose: Callable[[_Facts], str]) -> Callable[[LLMRequest], str]:
    return lambda req: compose(_Facts(req))


for _purpose, _compose in _COMPOSERS.items():
    scripted.register(_purpose, _reading_facts(_compose))
