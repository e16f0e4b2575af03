"""The chaos suite's checks catch what they claim to: each violation, made up and found."""

from __future__ import annotations

from typing import Any

from tests.chaos.invariants import check

J = "job-1"


def line(ev: str, seq: int, run: str, pid: int, t: float, ok: bool | None = None) -> dict:
    out: dict[str, Any] = {"ev": ev, "job": J, "seq": seq, "name": f"step-{seq}", "run": run,
                           "pid": pid, "t": t}
    if ok is not None:
        out["ok"] = ok
    return out


def status(i: int, new: str, old: str | None, reason: str | None = None) -> dict:
    data = {"status": new, "from": old, **({"reason": reason} if reason else {})}
    return {"id": i, "job_id": J, "type": "status", "data": data}


def step(i: int, seq: int, state: str) -> dict:
    return {"id": i, "job_id": J, "type": "step", "data": {"seq": seq, "status": state}}


CLEAN_EVENTS = [status(1, "queued", None), status(2, "running", "queued"), step(3, 1, "started"),
                step(4, 1, "completed"), status(5, "completed", "running")]
CLEAN_JOURNAL = [line("start", 1, "r1", 10, 1.0), line("end", 1, "r1", 10, 2.0, ok=True)]


def verdict(**over: Any):
    args: dict[str, Any] = dict(
        submitted=[J], jobs={J: {"status": "completed", "attempts": 1, "payload": {}}},
        events=CLEAN_EVENTS, journal=CLEAN_JOURNAL, killed={}, killed_workers=set(),
        effects={"k": {"posts": 1, "status": "succeeded"}})
    args.update(over)
    return check(**args)


def test_a_clean_run_passes() -> None:
    assert verdict().ok(), verdict().report()


def test_a_job_not_completed_or_missing_is_lost() -> None:
    assert verdict(jobs={J: {"status": "failed", "attempts": 1, "payload": {}}}).lost
    assert verdict(submitted=[J, "job-2"]).lost


def test_two_runs_at_once_overlap_but_a_killed_one_ends_at_its_kill() -> None:
    second = [line("start", 1, "r2", 11, 1.5), line("end", 1, "r2", 11, 2.5, ok=True)]
    assert verdict(journal=[line("start", 1, "r1", 10, 1.0), *second]).overlapping  # r1 hangs
    cut = verdict(journal=[line("start", 1, "r1", 10, 1.0), *second], killed={10: 1.2},
                  killed_workers={"h:10"})
    assert not cut.overlapping and not cut.run_twice


def test_a_step_run_again_after_its_outcome_was_kept_is_run_twice() -> None:
    again = [*CLEAN_JOURNAL, line("start", 1, "r2", 11, 3.0), line("end", 1, "r2", 11, 4.0, True)]
    assert verdict(journal=again).run_twice
    # unless its process died right after the step: its outcome may never have been written
    assert not verdict(journal=again, killed={10: 2.1}).run_twice
    assert verdict(events=[*CLEAN_EVENTS, step(6, 1, "completed")]).run_twice
    # the outcome a job's move carries counts as the step's record too
    folded = [*CLEAN_EVENTS[:3], {**status(4, "completed", "running"),
                                  "data": {"status": "completed", "from": "running",
                                           "step": {"seq": 1, "status": "completed"}}}]
    assert verdict(events=folded).ok(), verdict(events=folded).report()
    assert verdict(events=[*CLEAN_EVENTS[:4], folded[-1]]).run_twice


def test_attempts_must_add_up_to_the_injected_failures_and_crashes() -> None:
    crash = [status(1, "queued", None), status(2, "running", "queued"),
             status(3, "queued", "running", "worker lost: no heartbeat since t from h:10"),
             status(4, "running", "queued"), step(5, 1, "started"), step(6, 1, "completed"),
             status(7, "completed", "running")]
    jobs = {J: {"status": "completed", "attempts": 2, "payload": {}}}
    assert verdict(events=crash, jobs=jobs, killed={10: 0.5}, killed_workers={"h:10"}).ok()
    assert verdict(events=crash, jobs=jobs).other  # reclaimed, yet nobody killed it
    assert verdict(events=crash, killed={10: 0.5}, killed_workers={"h:10"}).other  # attempts 1


def test_a_broken_status_chain_and_a_second_provider_request_are_caught() -> None:
    assert verdict(events=[status(1, "queued", None), status(2, "completed", "running")]).other
    assert verdict(effects={"k": {"posts": 2, "status": "succeeded"}}).run_twice


def test_a_claim_made_ahead_and_given_back_costs_no_attempt() -> None:
    back = [status(1, "queued", None), status(2, "running", "queued"),
            status(3, "queued", "running", "claimed ahead, not started in time"),
            status(4, "running", "queued"), step(5, 1, "completed"),
            status(6, "completed", "running")]
    assert verdict(events=back).ok(), verdict(events=back).report()
