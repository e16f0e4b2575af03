"""The engine's promise, checked from the records a chaos run leaves (pure: no I/O here).

Inputs are what the database, the workers' step journals (tasks.engine.trace) and the
fault injector recorded; the output lists every violation, by kind. Times are wall-clock
seconds (tasks.engine.trace), already corrected for the worker whose clock the suite
set off on purpose.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from tasks.engine.events import step_of
from tasks.engine.store import HANDED_BACK

INJECTED_FAILURE = "failing on purpose"   # the canary's own error (fail_first_attempts)
WORKER_LOST = "worker lost:"               # the stale sweep's reclaim
FREE_REASONS = ("database connection lost", "worker shutdown", HANDED_BACK)  # cost no attempt
FOREVER = float("inf")


@dataclass
class Verdict:
    lost: list[str] = field(default_factory=list)         # not completed, or missing
    run_twice: list[str] = field(default_factory=list)    # a completed step ran again
    overlapping: list[str] = field(default_factory=list)  # two runs of one job at once
    other: list[str] = field(default_factory=list)        # attempts, ordering, effects

    def ok(self) -> bool:
        return not (self.lost or self.run_twice or self.overlapping or self.other)

    def report(self, limit: int = 20) -> str:
        out = []
        for kind in ("lost", "run_twice", "overlapping", "other"):
            items = getattr(self, kind)
            out += [f"{kind}: {item}" for item in items[:limit]]
            if len(items) > limit:
                out.append(f"{kind}: ... {len(items) - limit} more")
        return "\n".join(out)


@dataclass(frozen=True)
class Execution:
    """One step of one job run once by one run (claim token), from its journal lines."""
    job: str
    seq: int
    run: str
    pid: int
    start: float
    end: float          # the end line's time, the kill of its process, or FOREVER
    ok: bool | None     # None: it never ended (its process was killed, or it hangs)
    index: int          # its start line's position in its process's journal


def executions(journal: list[dict[str, Any]], killed: dict[int, float]) -> list[Execution]:
    open_: dict[tuple[str, str, int], dict[str, Any]] = {}
    out: list[Execution] = []
    for i, line in enumerate(journal):
        key = (line["job"], line["run"], line["seq"])
        if line["ev"] == "start":
            open_[key] = {**line, "index": i}
        elif key in open_:
            s = open_.pop(key)
            out.append(Execution(s["job"], s["seq"], s["run"], s["pid"], s["t"], line["t"],
                                 bool(line.get("ok")), s["index"]))
    for s in open_.values():
        end = killed.get(s["pid"], FOREVER)
        out.append(Execution(s["job"], s["seq"], s["run"], s["pid"], s["t"],
                             end if end >= s["t"] else FOREVER, None, s["index"]))
    return out


def check(*, submitted: list[str], jobs: dict[str, dict[str, Any]],
          events: list[dict[str, Any]], journal: list[dict[str, Any]],
          killed: dict[int, float], killed_workers: set[str],
          effects: dict[str, dict[str, Any]]) -> Verdict:
    """`jobs`: every job of the run by id (ours and their children: id, status, attempts,
    payload); `events`: their events in id order; `journal`: every step line in the order
    each process wrote it; `killed`: pid -> when it was killed; `effects`: idempotency key ->
    {"posts": requests the provider received, "status": the ledger's}."""
    v = Verdict()
    for job_id in submitted:
        if job_id not in jobs:
            v.lost.append(f"{job_id}: accepted but not in the database")
    for job_id, job in jobs.items():
        if job["status"] != "completed":
            v.lost.append(f"{job_id}: {job['status']} ({job.get('last_error')})")

    by_job: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for e in events:
        by_job[e["job_id"]].append(e)
    for job_id, job in jobs.items():
        _check_history(job_id, job, by_job[job_id], killed_workers, v)

    runs = executions(journal, killed)
    _check_overlaps(runs, v)
    _check_run_twice(runs, killed, v)
    _check_crashes_reclaimed(runs, by_job, v)

    for key, effect in effects.items():
        if effect["posts"] != 1:
            v.run_twice.append(f"effect {key}: the provider received {effect['posts']} requests")
        if effect["status"] != "succeeded":
            v.other.append(f"effect {key}: ledger says {effect['status']}")
    return v


def _check_history(job_id: str, job: dict[str, Any], events: list[dict[str, Any]],
                   killed_workers: set[str], v: Verdict) -> None:
    """Status events form one chain in id order; steps complete once; attempts add up."""
    ids = [e["id"] for e in events]
    if ids != sorted(set(ids)):
        v.other.append(f"{job_id}: event ids not strictly increasing")
    previous = None
    failures = crashes = 0
    for e in (e for e in events if e["type"] == "status"):
        data = e["data"]
        if data.get("from") != previous:
            v.other.append(f"{job_id}: event {e['id']} moves {data.get('from')}->"
                           f"{data['status']} but the job was {previous}")
        previous = data["status"]
        reason = data.get("reason") or ""
        if data.get("from") != "running" or data["status"] not in ("queued", "failed"):
            continue
        if INJECTED_FAILURE in reason:
            failures += 1
        elif reason.startswith(WORKER_LOST):
            crashes += 1
            if not any(reason.endswith(f" from {w}") for w in killed_workers):
                v.other.append(f"{job_id}: a live run was reclaimed ({reason})")
        elif not any(free in reason for free in FREE_REASONS):
            v.other.append(f"{job_id}: left running for no injected reason: {reason!r}")
    if previous != "completed" and job["status"] == "completed":
        v.other.append(f"{job_id}: the events end at {previous}")
    expected = 1 + failures + crashes
    if job["status"] == "completed" and job["attempts"] != expected:
        v.other.append(f"{job_id}: attempts {job['attempts']}, expected {expected} "
                       f"(1 + {failures} injected failures + {crashes} crashes)")
    planned = int((job.get("payload") or {}).get("fail_first_attempts", 0))
    if failures > planned:
        v.other.append(f"{job_id}: failed {failures} times, {planned} were injected")
    steps: dict[int, list[str]] = defaultdict(list)
    for step in (step_of(e["type"], e["data"]) for e in events):
        if step is not None:
            steps[int(step["seq"])].append(step["status"])
    for seq, history in steps.items():
        if history.count("completed") != 1 or history[-1] != "completed":
            v.run_twice.append(f"{job_id} step {seq}: recorded as {history}")


def _check_overlaps(runs: list[Execution], v: Verdict) -> None:
    by_job: dict[str, list[Execution]] = defaultdict(list)
    for r in runs:
        by_job[r.job].append(r)
    for job_id, execs in by_job.items():
        execs.sort(key=lambda r: r.start)
        for i, a in enumerate(execs):
            for b in execs[i + 1:]:
                if b.start >= a.end:
                    break
                if a.run != b.run:
                    v.overlapping.append(f"{job_id}: step {a.seq} of run {a.run[:8]} (pid "
                                         f"{a.pid}) overlaps step {b.seq} of run {b.run[:8]} "
                                         f"(pid {b.pid})")


def _check_run_twice(runs: list[Execution], killed: dict[int, float], v: Verdict) -> None:
    """A step that completed where its outcome surely reached the database never runs again.

    Surely: its run went on to a later step (the outcome is written before the next
    step starts), or its process was never killed (a live worker holds an outcome
    until it is written). A step whose process died right after it may run again.
    """
    later_in_run: dict[str, float] = defaultdict(float)
    for r in runs:
        later_in_run[r.run] = max(later_in_run[r.run], r.start)
    by_step: dict[tuple[str, int], list[Execution]] = defaultdict(list)
    for r in runs:
        by_step[(r.job, r.seq)].append(r)
    for (job_id, seq), execs in by_step.items():
        execs.sort(key=lambda r: r.start)
        persisted = [r for r in execs if r.ok and (r.pid not in killed
                                                   or later_in_run[r.run] > r.start)]
        if persisted:
            first = persisted[0]
            again = [r for r in execs if r.start > first.end]
            if again:
                v.run_twice.append(f"{job_id} step {seq}: completed in run {first.run[:8]}, "
                                   f"ran again {len(again)}x")


def _check_crashes_reclaimed(runs: list[Execution], events: dict[str, list[dict[str, Any]]],
                             v: Verdict) -> None:
    """A run cut off inside a step by a kill came back through the stale sweep, once."""
    cut: Counter[str] = Counter(r.job for r in runs if r.ok is None and r.end != FOREVER)
    for job_id, n in cut.items():
        reclaimed = sum(1 for e in events[job_id] if e["type"] == "status"
                        and (e["data"].get("reason") or "").startswith(WORKER_LOST))
        if reclaimed < n:
            v.other.append(f"{job_id}: {n} runs cut off by a kill, {reclaimed} reclaimed")
    for r in runs:
        if r.ok is None and r.end == FOREVER:
            v.lost.append(f"{r.job} step {r.seq}: started in run {r.run[:8]} (pid {r.pid}, "
                          "not killed) and never ended")
