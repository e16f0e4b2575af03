"""Deferred step starts: a step's start is announced only if it is still running later.

The first step after a claim writes its start (its row) with its outcome: that saves
one round trip (and commit) per job attempt, since the claim was the last write and
nothing about a step's start needs to be durable before it runs. Every later step's
row is written by the statement that records the previous step's outcome, whose event
names it (`next`); no step writes a `started` event of its own up front. So that a slow
step is not invisible, a watcher thread writes the `started` event (and, for a first
step, its row) of any step still running after WRITE_AFTER seconds.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime

from tasks.engine import store
from tasks.engine.events import STEP_STARTED, step_data, step_message

log = logging.getLogger(__name__)

WRITE_AFTER = 0.2


@dataclass(eq=False)
class DeferredStart:
    owner: store.Owner
    seq: int
    name: str
    started_at: datetime  # by the database's clock (JobContext.clock)
    row_written: bool = False  # the step's row is written (by the previous outcome's statement)
    since: float = field(default_factory=time.monotonic)
    lock: threading.Lock = field(default_factory=threading.Lock)
    written: bool = False
    settled: bool = False

    def started_event(self, ord_: store.Order) -> dict:
        return store.event(ord_, "step", step_message(self.name, STEP_STARTED),
                           step_data(self.name, self.seq, STEP_STARTED))


_deferred: set[DeferredStart] = set()
_cond = threading.Condition()
_thread: threading.Thread | None = None


def defer(owner: store.Owner, seq: int, name: str, started_at: datetime, *,
          row_written: bool = False) -> DeferredStart:
    global _thread
    d = DeferredStart(owner, seq, name, started_at, row_written=row_written)
    with _cond:
        _deferred.add(d)
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_watch, name="step-start-watch", daemon=True)
            _thread.start()
        _cond.notify()
    return d


def settle(d: DeferredStart) -> bool:
    """The step is over: stop watching it. True if the watcher already wrote its start."""
    with d.lock:
        d.settled = True
    with _cond:
        _deferred.discard(d)
    return d.written


def _watch() -> None:
    while True:
        with _cond:
            while not _deferred:
                _cond.wait()
            due = [d for d in _deferred if time.monotonic() - d.since >= WRITE_AFTER]
        for d in due:
            _write(d)
        time.sleep(0.05)


def _write(d: DeferredStart) -> None:
    with d.lock:
        if d.settled:
            return
        try:
            # Unnumbered (None): the run's own numbered writes go on in its thread. A step
            # whose row is written gets its event alone (no seq: no row touched).
            row = not d.row_written
            cancel = store.checkpoint(d.owner, None, None, seq=d.seq if row else None,
                                      name=d.name if row else None,
                                      events=[d.started_event(store.Order.EARLIER_START)],
                                      started_at=d.started_at if row else None)
            # A cancel (True) or a lost job (None) wrote no step row: the outcome must
            # then insert it (the deferred upsert), not update a row that is not there.
            d.written = cancel is False
        except Exception:
            log.warning("could not write a deferred step start", exc_info=True)
    with _cond:
        _deferred.discard(d)
