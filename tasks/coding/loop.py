"""The model ↔ tools loop, on the engine: every model call and every tool call is a step.

A replayed job re-walks the recorded steps and rebuilds the same conversation from
their outputs, so a worker killed in the middle of a build comes back at the call it
was in: completed tool calls are not run again and the model is not asked again for
an answer it already gave. A tool that changes the workspace records the patch of what it
changed (from the tree before it to the tree after), so the checkout can be rebuilt exactly
as it was after the last completed step — the base and each step's patch in turn
(`Checkout.ensure`), on this machine or another — and twenty edits of a large change store
the change once, not twenty times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tasks.coding import context_budget, git, sandbox, tools
from tasks.coding.workspace import Workspace
from tasks.engine.context import JobContext
from tasks.engine.deltas import DeltaBuffer
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest, LLMResult

CONTEXT_TOKENS = 60_000  # what one call may carry, far below the model's window: cost
EVENT_CHARS = 4000  # a tool's result as the job's feed shows it
INPUT_CHARS = 2000  # each string of a tool's input, likewise
# Never part of the change: what running the checks leaves behind.
JUNK = ("__pycache__/", "*.pyc", ".pytest_cache/", ".ruff_cache/", ".mypy_cache/",
        "node_modules/", ".venv/", "target/", "*.egg-info/", ".switchyard-reports/")


@dataclass
class Checkout:
    """The job's working tree: the clone at `base` plus `patches` in order, made true on
    disk lazily."""

    ws: Workspace
    source: git.Source | None  # None until the clone step checked the tenant's URL
    branch: str | None  # the branch cloned (None: the remote's default)
    token: str | None = field(default=None, repr=False)
    base: str = ""
    patches: list[str] = field(default_factory=list)
    # The tree on disk once synced, what the next step's patch starts from ("": the base's).
    tree: str = ""
    synced: bool = False  # has this process made the disk match base + patches?

    def ensure(self) -> None:
        """Make the directory hold exactly base + patches (after a crash, a move, a stray
        write)."""
        if self.synced:
            return
        if not git.git_dir(self.ws.root).is_dir():  # another machine, or a cleaned data dir
            self.clone()
        self.restore()
        self.synced = True

    def restore(self) -> None:
        git.restore(self.ws.root, self.base, self.patches)
        self.tree = git.snapshot(self.ws.root, self.base)
        sandbox.prepare_for_sandbox(self.ws.root)

    def replace_patches(self, whole: str) -> None:
        """One patch from the base for all of them (what delivery pushes)."""
        self.patches = [whole]

    def clone(self) -> str:
        """A fresh clone of the source, ready for the sandbox; the commit checked out."""
        assert self.source is not None, "the clone step checks the source first"
        base = git.clone(self.source, self.ws.root, token=self.token, branch=self.branch)
        git.exclude(self.ws.root, JUNK)
        sandbox.prepare_for_sandbox(self.ws.root)
        return base


@dataclass
class Spend:
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0

    def add(self, result: LLMResult) -> None:
        self.tokens_in += result.usage.input_tokens
        self.tokens_out += result.usage.output_tokens
        self.cost_usd += result.cost_usd

    def as_dict(self) -> dict[str, Any]:
        return {"tokens_in": self.tokens_in, "tokens_out": self.tokens_out,
                "cost_usd": round(self.cost_usd, 6)}


@dataclass(frozen=True)
class LoopResult:
    finished: bool  # the model called `finish`
    summary: str  # its summary, or its last words
    turns: int


class Agent:
    """One job's model, tools, checkout and spend, shared by its phases."""

    def __init__(self, ctx: JobContext, checkout: Checkout, policy: sandbox.RunPolicy,
                 context: dict[str, Any]):
        self.ctx = ctx
        self.checkout = checkout
        self.policy = policy
        self.context = context  # the scripted provider's hints; never sent to a real model
        self.spend = Spend()

    # --- the model -------------------------------------------------------------

    def ask(self, name: str, *, purpose: str, system: str, messages: list[dict[str, Any]],
            tool_names: tuple[str, ...] = (), max_tokens: int = 4096) -> LLMResult:
        """One model call as the step `name`; its answer replays from the journal."""
        fitted = context_budget.fit(messages, CONTEXT_TOKENS, system=system)
        schemas = tools.schemas_for(tool_names) if tool_names else None
        out = self.ctx.step(name, self._call, purpose, system, fitted, schemas, max_tokens)
        result = LLMResult.from_dict(out)
        self.spend.add(result)
        return result

    def _call(self, purpose: str, system: str, messages: list[dict[str, Any]],
              schemas: list[dict[str, Any]] | None, max_tokens: int) -> dict[str, Any]:
        req = LLMRequest(purpose=purpose, system=system, messages=messages, tools=schemas,
                         max_tokens=max_tokens, context=self.context)
        # Text between tool calls reaches the feed as it is written.
        buffer = DeltaBuffer(lambda text: self.ctx.emit("delta", text, {"text": text}))
        result = call_llm(get_client(), req, project_id=self.ctx.project_id,
                          job_id=self.ctx.job_id, on_text=buffer.add,
                          step_seq=self.ctx.current_step)
        buffer.flush()
        return result.as_dict()

    # --- the tools ------------------------------------------------------------

    def tool(self, name: str, call_id: str, tool: str, tool_input: dict[str, Any], *,
             subtask: int | None, turn: int) -> dict[str, Any]:
        """One tool call as the step `name`: {"content", "is_error", "changed"[, "delta"]}.
        Its events are written by the step itself, so a replay adds none."""
        call = {"call_id": call_id, "name": tool, "subtask": subtask, "turn": turn}
        out: dict[str, Any] = self.ctx.step(name, self._run_tool, call, tool_input)
        if out.get("delta"):
            self.checkout.patches.append(out["delta"])
        elif out.get("patch") is not None:  # recorded before patches were per step: whole
            self.checkout.replace_patches(out["patch"])
        return out

    def _run_tool(self, call: dict[str, Any], tool_input: dict[str, Any]) -> dict[str, Any]:
        tool = call["name"]
        self.ctx.emit("tool_call", f"{tool} {_headline(tool_input)}"[:200],
                      call | {"input": _cut_strings(tool_input)})
        self.checkout.ensure()
        outcome = tools.run_tool(self.checkout.ws, tool, tool_input, self.policy)
        out: dict[str, Any] = {"content": outcome.content, "is_error": outcome.is_error,
                               "changed": outcome.changed}
        if outcome.changed:
            checkout = self.checkout
            try:
                after = git.snapshot(checkout.ws.root, checkout.base)
                out["delta"] = git.delta(checkout.ws.root, checkout.tree or checkout.base,
                                         after)
                checkout.tree = after
            except git.PatchTooLarge as exc:  # undone, and said to the model
                checkout.restore()
                out = {"content": f"{exc} The change was undone.", "is_error": True,
                       "changed": False}
        self.ctx.emit("tool_result", f"{tool}: {'error' if outcome.is_error else 'ok'}",
                      {"call_id": call["call_id"], "name": tool, "is_error": outcome.is_error,
                       "content": outcome.content[:EVENT_CHARS]})
        return out

    def loop(self, label: str, *, purpose: str, system: str, prompt: str,
             tool_names: tuple[str, ...], max_turns: int,
             subtask: int | None = None) -> LoopResult:
        """Ask, run the tools asked for, answer with their results, until `finish` or the
        model stops calling tools or `max_turns` answers."""
        messages: list[dict[str, Any]] = [{"role": "user", "content": prompt}]
        last_text = ""
        for turn in range(1, max_turns + 1):
            result = self.ask(f"llm:{label}:{turn}", purpose=purpose, system=system,
                              messages=messages, tool_names=tool_names)
            last_text = result.text or last_text
            messages.append({"role": "assistant", "content": assistant_blocks(result)})
            if not result.tool_calls:
                return LoopResult(False, result.text, turn)
            answers: list[dict[str, Any]] = []
            summary: str | None = None
            for i, call in enumerate(result.tool_calls):
                out = self.tool(f"tool:{label}:{turn}:{i + 1}", call.id, call.name, call.input,
                                subtask=subtask, turn=turn)
                if call.name == "finish" and not out["is_error"]:
                    summary = str(call.input.get("summary", ""))
                answers.append({"type": "tool_result", "tool_use_id": call.id,
                                "content": out["content"], "is_error": out["is_error"]})
            messages.append({"role": "user", "content": answers})
            if summary is not None:
                return LoopResult(True, summary, turn)
        return LoopResult(False, last_text or f"stopped after {max_turns} turns", max_turns)

    def step_in_checkout(self, name: str, fn: Callable[..., Any], *args: Any,
                         leaves_traces: bool = False, record: bool = True,
                         **kwargs: Any) -> Any:
        """A step that needs the checkout on disk (verify, deliver). After one that
        `leaves_traces` (the repository's own checks write what they like) the next step
        on disk restores base + patch first, replayed or not: only tool calls change the
        work, so a crash, a resume and a straight run commit the same tree."""
        def run() -> Any:
            self.checkout.ensure()
            return fn(*args, **kwargs)
        try:
            return self.ctx.step(name, run) if record else run()
        finally:
            if leaves_traces:
                self.checkout.synced = False


def assistant_blocks(result: LLMResult) -> list[dict[str, Any]]:
    """The answer as the Messages API wants it back in the next request."""
    blocks: list[dict[str, Any]] = []
    if result.text:
        blocks.append({"type": "text", "text": result.text})
    blocks += [{"type": "tool_use", "id": c.id, "name": c.name, "input": c.input}
               for c in result.tool_calls]
    return blocks or [{"type": "text", "text": "(no answer)"}]


def _headline(tool_input: dict[str, Any]) -> str:
    for key in ("path", "command", "pattern", "summary"):
        if isinstance(tool_input.get(key), str):
            return str(tool_input[key]).splitlines()[0] if tool_input[key] else ""
    return ""


def _cut_strings(value: Any) -> Any:
    if isinstance(value, str):
        return value if len(value) <= INPUT_CHARS else value[:INPUT_CHARS] + "…"
    if isinstance(value, dict):
        return {k: _cut_strings(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_cut_strings(v) for v in value]
    return value
