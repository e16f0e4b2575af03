"""Recorded tool sessions, replayed by the scripted provider for the coding agent's calls.

A session is a JSON file of turns per phase: `{"name", "match": [words the task must
contain], "turns": {"explore": [turn, ...], "plan": [...], "build": [...], "fix": [...],
"debug": [...], "review": [...]}}`, a turn being `{"text"?, "tool_calls"?: [{"name",
"input"}]}`. The turn a request gets is the number of answers already in its
conversation, so a replayed loop gets the same turns in the same order. Past the last
recorded turn (or with no session for the task) the provider says so and finishes, so
`switchyard up` can run the whole loop with no key and never loops forever.

Sessions ship in tasks/coding/sessions/; an operator adds more in SWITCHYARD_SCRIPTED_SESSIONS
(a directory). `code.generate_mvp` gets a generated session (a waitlist page and its test)
fitted to the description it was given.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from tasks.services.llm import scripted
from tasks.services.llm.types import LLMRequest, ToolCall

BUILT_IN = Path(__file__).with_name("sessions")


@dataclass(frozen=True)
class Turn:
    text: str
    tool_calls: list[dict[str, Any]]


@dataclass(frozen=True)
class Session:
    name: str
    match: tuple[str, ...]
    turns: dict[str, list[Turn]]

    def fits(self, task: str) -> bool:
        lowered = task.lower()
        return bool(self.match) and all(word.lower() in lowered for word in self.match)


def parse(data: dict[str, Any]) -> Session:
    turns = {phase: [Turn(str(t.get("text", "")), list(t.get("tool_calls", [])))
                     for t in listed] for phase, listed in data.get("turns", {}).items()}
    return Session(str(data["name"]), tuple(data.get("match", [])), turns)


@lru_cache(maxsize=4)
def _load(files: tuple[tuple[str, float], ...]) -> tuple[Session, ...]:
    return tuple(parse(json.loads(Path(path).read_text())) for path, _ in files)


def sessions() -> tuple[Session, ...]:
    """The recorded sessions, read again when a file in the directories is added, removed or
    changed (one written beside a running worker was ignored until it restarted)."""
    extra = os.environ.get("SWITCHYARD_SCRIPTED_SESSIONS", "")
    files = tuple((str(path), path.stat().st_mtime)
                  for directory in (str(BUILT_IN), extra) if directory
                  for path in sorted(Path(directory).glob("*.json")))
    return _load(files)


def find(task: str) -> Session | None:
    return next((s for s in sessions() if s.fits(task)), None)


def phase_of(purpose: str) -> str:
    return purpose.removeprefix("code.")


def answers_so_far(req: LLMRequest) -> int:
    return sum(1 for m in req.messages if m.get("role") == "assistant")


def answer(req: LLMRequest) -> tuple[str, list[ToolCall]]:
    """The recorded (or generated) turn for this request, or the honest way out."""
    task = str(req.context.get("task", ""))
    phase = phase_of(req.purpose)
    n = answers_so_far(req)
    if req.context.get("kind") == "mvp":
        recorded = mvp_turns(task).get(phase, [])
    else:
        session = find(task)
        recorded = session.turns.get(phase, []) if session else []
    if n < len(recorded):
        turn = recorded[n]
        calls = [ToolCall(f"toolu_{phase}_{n}_{i}", c["name"], dict(c.get("input", {})))
                 for i, c in enumerate(turn.tool_calls)] if req.tools else []
        return turn.text, calls
    return _way_out(req, phase, task, n)


def _way_out(req: LLMRequest, phase: str, task: str, n: int) -> tuple[str, list[ToolCall]]:
    if phase == "plan":
        title = re.sub(r"\s+", " ", task).strip()[:120] or "the task"
        return json.dumps({"subtasks": [{"title": title, "description": task or title}]}), []
    if phase == "review":
        return "PASS\nThe scripted provider reviews nothing: no recorded session.", []
    note = ("The scripted provider has no recorded session for this task: nothing was changed."
            if n == 0 else "Done: the recorded session ends here.")
    if not req.tools:
        return note, []
    return "", [ToolCall(f"toolu_{phase}_{n}_finish", "finish", {"summary": note})]


def mvp_turns(description: str) -> dict[str, list[Turn]]:
    """A small working site for `description`: a waitlist page, its test, a run, done."""
    title = re.sub(r"\s+", " ", description).strip()[:80] or "Our product"
    page = MVP_PAGE.replace("{{title}}", _html_escape(title))
    return {
        "explore": [Turn("", [{"name": "list_files", "input": {}}]),
                    Turn("", [{"name": "finish", "input": {
                        "summary": "A new repository: the site goes at its root."}}])],
        "plan": [Turn(json.dumps({"subtasks": [
            {"title": "Waitlist landing page",
             "description": f"index.html for: {title}; a form posting an email address"},
            {"title": "A test that the page builds",
             "description": "tests/test_site.py checks the page parses and has the form"},
        ]}), [])],
        "build": [
            Turn("Writing the page.", [{"name": "write_file",
                                        "input": {"path": "index.html", "content": page}}]),
            Turn("And its test.", [{"name": "write_file", "input": {
                "path": "tests/test_site.py", "content": MVP_TEST}}]),
            Turn("", [{"name": "run", "input": {"command": "python3 -m pytest -q"}}]),
            Turn("", [{"name": "finish", "input": {
                "summary": "index.html with a waitlist form, and tests/test_site.py."}}]),
        ],
    }


def _html_escape(text: str) -> str:
    return (text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace('"', "&quot;"))


MVP_PAGE = """<!doctype html>
<html lang="en">
<head>
  <meta charset="utf-8">
  <meta name="viewport" content="width=device-width, initial-scale=1">
  <title>{{title}}</title>
  <style>
    body { font-family: system-ui, sans-serif; max-width: 40rem; margin: 4rem auto;
           padding: 0 1rem; line-height: 1.5; }
    form { display: flex; gap: .5rem; }
    input[type=email] { flex: 1; padding: .5rem; }
  </style>
</head>
<body>
  <h1>{{title}}</h1>
  <p>We are building it now. Leave your email and be the first to try it.</p>
  <form id="waitlist" method="post" action="/waitlist">
    <input type="email" name="email" required placeholder="you@example.com">
    <button type="submit">Join the waitlist</button>
  </form>
</body>
</html>
"""

MVP_TEST = '''"""The page builds: it parses, has a title and a waitlist form asking for an email."""
from html.parser import HTMLParser
from pathlib import Path


class Page(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags, self.inputs = [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag == "input":
            self.inputs.append(dict(attrs))


def test_the_page_has_a_waitlist_form():
    page = Page()
    page.feed((Path(__file__).parent.parent / "index.html").read_text())
    assert "title" in page.tags and "form" in page.tags
    assert any(i.get("type") == "email" and "required" in i for i in page.inputs)
'''


scripted.register("code.*", answer)
