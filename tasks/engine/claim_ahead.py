"""Claim ahead: a threads-pool worker claims the wake-ups it holds in one statement.

A worker with a thread pool holds prefetched wake-ups it has not started (Celery's
reserved requests, waiting for a free thread). When a delivery claims its job, the same
statement also claims up to SWITCHYARD_CLAIM_AHEAD of the jobs those wake-ups name (issue
26): their deliveries then start without a claim statement of their own.

Off by default (0): against a PostgreSQL on the same host, where a commit is cheap, it
saved at most half a statement a job and no CPU or throughput that the runs' spread could
show (bench/RESULTS.md); it is for a database whose round trips are dear.

How many: no more than this process's runs that ended in the last HOLD_SECONDS, so a claim
made ahead is about to be used. A worker busy with long jobs (an LLM call, a build) ends few
and claims none ahead, and its buffered jobs stay `queued` until a thread is free.

What is claimed and not started within HOLD_SECONDS goes back to `queued` (a thread of
this module checks twice a second), fenced by the claim's token and by no write of the
run yet, and gets a fresh wake-up (control.after_transition; the one held here is then a
duplicate, which the claim drops). So does every claim a claiming statement may have
made when its answer was lost. Once the worker is shutting down, nothing goes back here:
lifecycle.release_all gives back every job the process holds. A solo worker holds no
wake-up it has not started, and a prefork child sees none of its parent's: neither claims
ahead.

A claim made ahead is the job's claim: the job is `running` from then (its heartbeat
covers it), and a cancel that comes before its delivery starts is seen at its first step's
end, as for any running job.
"""

from __future__ import annotations

import collections
import logging
import os
import threading
import time
import uuid
from typing import Any

from tasks.engine import control, lifecycle, store
from tasks.settings import get_settings

log = logging.getLogger(__name__)

RUN_JOB = "tasks.run_job"
HOLD_SECONDS = 2.0  # a claim made ahead and not started by then is given back
CHECK_SECONDS = 0.5  # how often held claims are looked at
# Claim ahead only this many or more at once: wake-ups arrive one by one as threads take
# them, and a statement claiming one other job saves little (bench/costs.py --threads 4:
# batches of ~2 saved 0.4-0.5 statements a job and no CPU).
MIN_AHEAD = 2

_lock = threading.Lock()
_held: dict[str, tuple[store.ClaimedJob, float]] = {}  # job id -> (claim, when)
# Jobs a statement of this module is claiming ahead or handing back right now, or whose
# hand-back waits for a retry: their own delivery waits (else it could find the job running
# under that claim and skip it), then takes the claim or claims anew.
_in_flight: set[str] = set()
_settled = threading.Condition(_lock)
# Claims (job id -> token) whose statement's answer was lost, or whose hand-back failed:
# given back at the next check (fenced by the token: one never made changes nothing).
_retry: dict[str, uuid.UUID] = {}
_ends: collections.deque[float] = collections.deque()  # when this process's recent runs ended
# Jobs once given back: their wake-up waits behind long runs, so they are not claimed ahead
# again (each give-back costs two statements and two events).
_given_back: set[str] = set()
_checker: dict[str, int] = {}  # the pid whose hand-back thread runs
counts = {"ahead": 0, "used": 0, "handed_back": 0}  # this process's, for tests and benches
_enabled = {"on": False}  # a threads-pool worker's process (tasks.worker, at worker_init)


def enable(on: bool) -> None:
    _enabled["on"] = on


def claim(job_id: str, worker: str) -> store.ClaimedJob | store.NotClaimed:
    """This delivery's claim: one made ahead, or made now with others held here."""
    key = str(job_id)
    with _lock:
        _settled.wait_for(lambda: key not in _in_flight, timeout=60)
        now = time.monotonic()
        held = _held.pop(key, None)
        if held is not None:
            counts["used"] += 1
            return held[0]
        while _ends and _ends[0] < now - HOLD_SECONDS:
            _ends.popleft()
        room = min(get_settings().claim_ahead, len(_ends)) if _enabled["on"] else 0
        others = _waiting_job_ids(key, room) if room >= MIN_AHEAD else []
        if len(others) < MIN_AHEAD:
            others = []
        _in_flight.update(others)
    if not others:
        return store.claim_or_why(job_id, worker)
    ids = [key, *others]
    tokens = [uuid.uuid4() for _ in ids]
    try:
        claims = store.claim_many(ids, tokens, worker)
    except BaseException:
        # Committed or not, nobody knows: whatever it claimed goes back at the next check.
        _settle(others, retry=list(zip(ids, tokens, strict=True)))
        raise
    mine = claims.pop(key, None)
    _settle(others, held=claims.values(), at=now, ahead=len(claims))
    if claims:
        log.info("claimed %d ahead", len(claims), extra={"action": "claimed_ahead"})
    return mine if mine is not None else store.claim_or_why(job_id, worker)


def ended() -> None:
    """A run of this process ended: a thread is free for the next held wake-up."""
    with _lock:
        _ends.append(time.monotonic())
        if len(_ends) > 10_000:
            _ends.popleft()


def _waiting_job_ids(exclude: str, limit: int) -> list[str]:
    """The jobs of the first `limit` run_job deliveries this process holds and has not
    started, in the order they came (the pool starts them in that order), none held or
    given back already (under _lock)."""
    from celery.worker import state  # a worker's own: only a worker process claims

    try:  # the consumer thread and the pool's change these meanwhile
        waiting = [r for r in list(state.requests.values())
                   if r in state.reserved_requests and r not in state.active_requests]
    except RuntimeError:
        return []
    ids: list[str] = []
    for request in waiting:
        job_id = _job_of(request)
        if (job_id and job_id != exclude and job_id not in _held and job_id not in _in_flight
                and job_id not in _given_back and job_id not in ids):
            ids.append(job_id)
            if len(ids) >= limit:
                break
    return ids


def _job_of(request: Any) -> str | None:
    if getattr(request, "name", None) != RUN_JOB:
        return None
    args: Any = getattr(request, "args", None)
    try:
        return str(uuid.UUID(str(args[0])))
    except (ValueError, IndexError, TypeError):
        return None


def hold(claims: Any, at: float) -> None:
    """Hold claims made ahead at `at` (monotonic) for their deliveries to take."""
    claims = list(claims)
    _settle((), held=claims, at=at, ahead=len(claims))


def _settle(ids: Any, *, held: Any = (), at: float = 0.0, ahead: int = 0,
            retry: list[tuple[str, uuid.UUID]] | None = None) -> None:
    """The statement about `ids` is done: hold the claims it made, or keep those it may
    have made for a hand-back (heartbeats cover a claim from its making); wake the
    deliveries waiting for the rest."""
    held = list(held)
    with _lock:
        counts["ahead"] += ahead
        for c in held:
            _held[str(c.id)] = (c, at)
            lifecycle.holding(c.token, c.id)
        for job_id, token in retry or ():
            _retry[job_id] = token
            _in_flight.add(job_id)
            lifecycle.holding(token, uuid.UUID(job_id))
        _in_flight.difference_update(set(ids) - set(_retry))
        _settled.notify_all()
    if held or retry:
        _start_checker()


def _start_checker() -> None:
    with _lock:
        if _checker.get("pid") == os.getpid():
            return
        _checker["pid"] = os.getpid()
    threading.Thread(target=_check_forever, name="switchyard-claim-ahead", daemon=True).start()


def _check_forever() -> None:
    while True:
        time.sleep(CHECK_SECONDS)
        try:
            hand_back_stale()
        except Exception:  # the next check tries again; a worker's exit releases the rest
            log.warning("could not hand back claims made ahead", exc_info=True,
                        extra={"action": "claim_ahead_hand_back_failed"})


def hand_back_stale(older_than: float = HOLD_SECONDS) -> list[uuid.UUID]:
    """Give back the claims held longer than `older_than` seconds, and those waiting for a
    retry; follow each move. The ids given back."""
    if lifecycle.shutting_down():
        return []  # lifecycle.release_all gives back (and follows) all this process holds
    cutoff = time.monotonic() - older_than
    with _lock:
        stale = [(job_id, c.token) for job_id, (c, when) in _held.items() if when <= cutoff]
        for job_id, _ in stale:
            del _held[job_id]
        _in_flight.update(job_id for job_id, _ in stale)
        claims = stale + list(_retry.items())
    if not claims:
        return []
    try:
        moves = store.hand_back(claims)
    except Exception:
        with _lock:  # retried at the next check; their deliveries wait meanwhile
            _retry.update(claims)
        raise
    ids = [job_id for job_id, _ in claims]
    for _, token in claims:
        lifecycle.released(token)
    with _lock:
        for job_id in ids:
            _retry.pop(job_id, None)
        if len(_given_back) > 10_000:
            _given_back.clear()
        _given_back.update(ids)
        _in_flight.difference_update(ids)
        counts["handed_back"] += len(moves)
        _settled.notify_all()
    for moved in moves:
        control.after_transition(moved)
    if moves:
        log.info("handed back %d claims made ahead", len(moves),
                 extra={"action": "claim_ahead_handed_back"})
    return [moved.id for moved in moves]


def held_count() -> int:
    with _lock:
        return len(_held)
