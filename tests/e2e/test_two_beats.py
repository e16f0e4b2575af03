"""Two beat processes at once: both publish every tick, each sweep still runs once per tick."""

from __future__ import annotations

import ast
import re
import time
from collections import Counter

import pytest

from tasks.engine.sweeps import SWEEPS, current_tick
from tests.e2e import procs as p
from tests.integration.jobdb import tuples

pytestmark = pytest.mark.e2e

SENT = "Sending due task switchyard-sweeps (tasks.sweep)"
# Celery logs each task's return value: rows touched per sweep, None where it was skipped.
RESULT = re.compile(r"Task tasks\.sweep\[[0-9a-f-]+\] succeeded in \S+s: (\{.*\})")
# A sweep that waited past its expiry (a loaded machine) is discarded unrun: also handled.
DISCARDED = "Discarding revoked task: tasks.sweep["
RECEIVED = re.compile(r"Task tasks\.sweep\[([0-9a-f-]+)\] received")


class BetweenTicks:
    """True just after the beats' last sweep reached the worker: both beats sleep then."""

    def __init__(self, beats: list[p.Proc], worker: p.Proc) -> None:
        self.beats, self.worker = beats, worker
        self.sent, self.changed_at = -1, 0.0

    def __call__(self) -> bool:
        sent = sum(b.text().count(SENT) for b in self.beats)
        if sent != self.sent:
            self.sent, self.changed_at = sent, time.monotonic()
        text = self.worker.text()
        arrived = len(set(RECEIVED.findall(text))) + text.count(DISCARDED)
        return arrived >= sent and time.monotonic() - self.changed_at < 0.4


def test_two_beats_run_each_sweep_at_most_once_per_tick(procs: p.Procs) -> None:
    # Given one worker consuming the sweeps queue with several threads
    worker = procs.worker("w", pool="threads", concurrency=4)

    # When two beats run side by side for ~5 s (a tick is SWITCHYARD_SWEEP_SECONDS = 1 s)
    first_tick = current_tick()
    beats = [procs.beat("beat-1"), procs.beat("beat-2")]
    procs.wait(lambda: all(b.text().count(SENT) >= 1 for b in beats), 20,
               "both beats to start publishing")
    # From here on both beats publish (their start-up, slow on a loaded machine, is behind)
    both_from = current_tick()
    before = sum(b.text().count(SENT) for b in beats)
    procs.wait(lambda: all(b.text().count(SENT) >= 6 for b in beats), 20,
               "both beats to publish five more sweeps each")
    # Beat logs "Sending due task" before it publishes, and a SIGTERM raises SystemExit
    # wherever it lands: stopped right after that line, a beat never sends what it logged.
    # So stop them while they sleep: every logged sweep has reached the worker, and the last
    # one came moments ago (a tick is 1 s, so the next is far off).
    procs.wait(BetweenTicks(beats, worker), 20, "a moment between two ticks")
    for b in beats:
        b.signal(15)
        b.wait_exit(10)
    sent = [b.text().count(SENT) for b in beats]
    beating = current_tick() - both_from + 1  # the ticks while both beats published
    def handled() -> int:
        text = worker.text()
        return len(RESULT.findall(text)) + text.count(DISCARDED)

    procs.wait(lambda: handled() >= sum(sent), 30, "the worker to handle every published sweep")
    ticks = current_tick() - first_tick + 1

    # Then both beats published (more deliveries than ticks went by) and the worker handled
    # every delivery: ran it, or discarded it past its expiry on a loaded machine ...
    assert sum(sent) - before > beating, (sent, before, beating)
    results = [ast.literal_eval(m) for m in RESULT.findall(worker.text())]
    assert len(results) + worker.text().count(DISCARDED) == sum(sent), (sent, ticks)
    # ... yet each sweep did its work at most once per tick ...
    executed = Counter(name for r in results for name, rows in r.items() if rows is not None)
    assert set(executed) == {s.name for s in SWEEPS}, executed
    assert all(n <= ticks for n in executed.values()), (executed, ticks)
    # ... and each execution is the one recorded for its (sweep, tick)
    assert dict(tuples("SELECT sweep, count(*) FROM sweep_runs GROUP BY 1")) == executed
    # The other deliveries found their tick already swept and did nothing
    skipped = sum(1 for r in results if all(v is None for v in r.values()))
    assert skipped >= len(results) - ticks, (skipped, len(results), ticks)
