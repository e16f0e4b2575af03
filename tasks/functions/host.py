"""The host side of a function run: answers the sandbox's tool calls from the record or
performs them as recorded steps, and says why a pass of the sandbox had to stop.

A function runs in passes. Each pass starts the code from the top; call n of the pass is
answered from the record when one is there (this run's, or the job's steps from earlier
runs, replayed by position), else performed: an instant tool at once, inside its step; a
real-time one (llm, websearch) after the pass is stopped, as a step of its own, before
the next pass; a nested function as a child job the run waits for.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tasks.engine.context import ChildOutcome, JobContext
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.engine.status import JobStatus
from tasks.functions import sandbox, store, tools
from tasks.functions.record import Call, Secrets, mismatch
from tasks.functions.tools import ToolError

MAX_DEPTH = 5  # nested tasks.run levels below the function a client started
MAX_CHILDREN = 20  # tasks.run calls per run
# Why a pass stopped (the sandbox's Paused reason): the host keeps the particulars.
PERFORM, STOP, FAIL = "perform", "stop", "fail"


@dataclass(frozen=True)
class Running:
    name: str
    version: int
    callers: tuple[str, ...]  # the functions that called this one, outermost first


@dataclass
class Host:
    ctx: JobContext
    running: Running
    secrets: Secrets = field(default_factory=Secrets)
    record: list[dict[str, Any]] = field(default_factory=list)  # call n's entry, this run
    live: dict[int, Any] = field(default_factory=dict)  # answers not scrubbed, this run
    outcomes: dict[int, dict[str, Any]] = field(default_factory=dict)  # tasks.run results
    pending: tuple[Call, Any] | None = None  # a real-time call (and its arguments) to perform
    stopped: BaseException | None = None  # the engine's exception, to raise outside
    failure: str | None = None  # why the run must fail, uncatchable by the function
    calls: int = 0  # calls made in this pass

    def new_pass(self) -> None:
        self.calls = 0
        self.pending = self.stopped = self.failure = None

    def on_call(self, tool: str, args: Any) -> Any:
        """The sandbox's OnCall: ToolError reaches the function as a JS Error; anything
        else stops the pass (sandbox.Suspended), for the run to handle outside."""
        try:
            return self._call(tool, args)
        except (ToolError, sandbox.Suspended):
            raise
        except BaseException as exc:  # the engine's: retry, suspend, cancel, lost claim
            self.stopped = exc
            raise sandbox.Suspended(STOP) from None

    def _call(self, tool: str, args: Any) -> Any:
        if tool not in sandbox.TOOLS:
            raise ToolError(f"unknown tool {tool!r}")
        call = Call(self.calls, tool, self.secrets.scrub(args))
        self.calls += 1
        if call.index < len(self.record):
            entry = self.record[call.index]
            if (why := mismatch(call, call.step_name, entry)) is not None:
                self._fail(why)
        else:
            entry = self._next_entry(call, args)
        return self._answer(call, args, entry)

    def _next_entry(self, call: Call, args: Any) -> dict[str, Any]:
        """The recorded step for this call (an earlier run's), or the call performed now."""
        recorded = self.ctx.peek()
        if recorded is not None and recorded.status == "completed":
            if (why := mismatch(call, recorded.name, recorded.output)) is not None:
                self._fail(why)
        elif call.tool in tools.REAL_TIME:
            self.pending = (call, args)
            raise sandbox.Suspended(PERFORM)
        elif call.tool == tools.NESTED:
            self._check_caps()
        entry = self.ctx.step(call.step_name, self._perform, call, args)
        self.record.append(entry)
        return entry

    def perform_pending(self) -> None:
        """The real-time call that stopped the last pass, as its own step."""
        assert self.pending is not None
        call, args = self.pending
        assert call.index == len(self.record)
        self.record.append(self.ctx.step(call.step_name, self._perform, call, args))

    def _perform(self, call: Call, args: Any) -> dict[str, Any]:
        try:
            if call.tool == "keystore.get":
                # Only that the call happened is recorded: the value is read again on replay.
                found = tools.read_secret(self.ctx.project_id, args.get("name")) is not None
                return call.entry(found=found)
            if call.tool == tools.NESTED:
                return call.entry(child=self._spawn(call, args))
            answer = tools.perform(call.tool, args, tools.Caller(
                self.ctx, self.secrets, f"{self.ctx.job_id}:{call.index}"))
        except ToolError as exc:
            return call.entry(error=self.secrets.text(str(exc)))
        self.live[call.index] = answer
        return call.entry(result=self.secrets.scrub(answer))

    def _answer(self, call: Call, args: Any, entry: dict[str, Any]) -> Any:
        if "error" in entry:
            raise ToolError(entry["error"])
        if call.tool == "keystore.get":
            value = tools.read_secret(self.ctx.project_id, args.get("name"))
            self.secrets.add(value)
            return value
        if call.tool == tools.NESTED:
            return self._nested_answer(call, entry["child"])
        return self.live.get(call.index, entry.get("result"))

    # --- nested functions --------------------------------------------------------------

    def _check_caps(self) -> None:
        """Fail the run (the function cannot catch it) past the depth or fan-out cap."""
        chain = [*self.running.callers, self.running.name]
        if len(chain) > MAX_DEPTH:
            self._fail(f"nested functions too deep: {' → '.join(chain)} → … goes past the "
                       f"depth cap of {MAX_DEPTH} (a function that calls itself, directly or "
                       "through others, must stop before that)")
        children = sum(1 for e in self.record if e.get("tool") == tools.NESTED)
        if children >= MAX_CHILDREN:
            self._fail(f"too many tasks.run calls: at most {MAX_CHILDREN} a run (each one runs "
                       "another function as a child job)")

    def _spawn(self, call: Call, args: Any) -> str:
        target = args.get("name") if isinstance(args, dict) else None
        if not isinstance(target, str) or not store.NAME.fullmatch(target):
            raise ToolError(f"tasks.run: a function's name is {store.NAME_RULE}")
        if store.get(self.ctx.project_id, target) is None:
            raise ToolError(f"tasks.run: no function named {target!r} in this project")
        if self.secrets.scrub(args.get("input")) != args.get("input"):
            # The child's payload is stored and shown as it is: a secret in it would leak.
            raise ToolError("tasks.run: the input holds a secret this run read; pass the "
                            "secret's name and let the called function read it with "
                            "tools.keystore.get")
        payload = {"name": target, "input": args.get("input"),
                   "callers": [*self.running.callers, self.running.name]}
        job = enqueue(EnqueueRequest(
            project_id=self.ctx.project_id, job_type="function.run", payload=payload,
            idempotency_key=f"function-call:{self.ctx.job_id}:{call.index}",
            parent_job_id=self.ctx.job_id))
        return str(job.job_id)

    def _nested_answer(self, call: Call, child: str) -> Any:
        outcome = self.outcomes.get(call.index)
        if outcome is None:
            outcome = self._child_step(call, child)
            self.outcomes[call.index] = outcome
        if "error" in outcome:
            raise ToolError(outcome["error"])
        return outcome.get("output")

    def _child_step(self, call: Call, child: str) -> dict[str, Any]:
        """The child's outcome, recorded once it has ended. Until then ctx.wait suspends the
        job (an engine exception: it stops the pass, and run_function raises it)."""
        name = f"child:{call.index}"
        recorded = self.ctx.peek()
        if recorded is not None and recorded.status == "completed" and recorded.name == name:
            return self.ctx.step(name, dict)  # replayed: the recorded outcome
        [ended] = self.ctx.wait([child])
        outcome = self._child_outcome(call, ended)
        return self.ctx.step(name, lambda: outcome)

    def _child_outcome(self, call: Call, ended: ChildOutcome) -> dict[str, Any]:
        if ended.status == JobStatus.COMPLETED:
            result = ended.result if isinstance(ended.result, dict) else {}
            return {"output": self.secrets.scrub(result.get("output"))}
        why = ended.error or ended.status
        return {"error": self.secrets.text(f"{call.describe()} {ended.status}: {why}")}

    def _fail(self, why: str) -> None:
        self.failure = self.secrets.text(why)
        raise sandbox.Suspended(FAIL)
