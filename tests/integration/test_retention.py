"""Retention against real PostgreSQL: whole days of events dropped, old rows deleted in
batches, nothing a live job still needs touched, and the hot path unaffected."""

from __future__ import annotations

import json
import threading
import uuid
from datetime import UTC, datetime, timedelta

import pytest

from tasks.engine import pg, retention
from tests.integration.jobdb import tuple_row, tuples

DAYS = 30


def day_ago(n: float) -> datetime:
    return pg.db_now() - timedelta(days=n)


def job(project: str, *, status: str, age_days: float, job_type: str = "system.canary",
        result: object = None) -> str:
    jid = str(uuid.uuid4())
    at = day_ago(age_days)
    pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, idempotency_key, "
               "created_at, completed_at, result) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
               (jid, project, job_type, status, jid, at,
                at if status in ("completed", "failed", "canceled") else None,
                None if result is None else json.dumps(result)))
    pg.execute("INSERT INTO job_steps (job_id, seq, name, status) VALUES (%s, 1, 'one', %s)",
               (jid, "completed" if status == "completed" else "running"))
    return jid


def event(project: str, job_id: str | None, age_days: float, type_: str = "log") -> int:
    at = day_ago(age_days)
    pg.execute("SELECT switchyard_event_partitions(%s::date, %s::date)",
               (at.astimezone(UTC).date(), at.astimezone(UTC).date()))
    return int(pg.fetch_value(
        "INSERT INTO agent_job_events (job_id, project_id, type, created_at) "
        "VALUES (%s, %s, %s, %s) RETURNING id", (job_id, project, type_, at)))


def partition_name(at: datetime) -> str:
    return f"agent_job_events_{at.astimezone(UTC).date():%Y%m%d}"


def partitions() -> list[str]:
    return [r[0] for r in tuples("SELECT c.relname FROM pg_inherits i JOIN pg_class c "
                                 "ON c.oid = i.inhrelid WHERE i.inhparent = "
                                 "'agent_job_events'::regclass ORDER BY 1")]


def partition_of(event_id: int) -> str | None:
    row = tuple_row("SELECT tableoid::regclass::text FROM agent_job_events WHERE id = %s",
                    (event_id,))
    return None if row is None else row[0]


def exists(table: str, jid: str) -> bool:
    column = "job_id" if table == "job_steps" else "id"
    return bool(tuples(f"SELECT 1 FROM {table} WHERE {column} = %s", (jid,)))


def test_a_pass_drops_old_days_and_rows_and_keeps_what_is_still_needed(project) -> None:
    # Given a month and more of history
    old_done = job(project, status="completed", age_days=40)
    old_event = event(project, old_done, 40)
    live = job(project, status="running", age_days=45)  # a long job still at work
    live_event = event(project, live, 45)
    recent = job(project, status="completed", age_days=2)
    recent_event = event(project, recent, 2)
    idle_sweep = job(project, status="completed", age_days=2, job_type="email.process_due",
                     result={"sent": 0, "failed": 0})
    busy_sweep = job(project, status="completed", age_days=2, job_type="email.process_due",
                     result={"sent": 3, "failed": 0})
    fresh_idle = job(project, status="completed", age_days=0.1,
                     job_type="email.process_due", result={})
    pg.execute("INSERT INTO llm_usage (project_id, provider, model, input_tokens, output_tokens, "
               "cost_usd, created_at) VALUES (%s, 's', 'm', 1, 1, 0, %s), "
               "(%s, 's', 'm', 2, 2, 0, now())", (project, day_ago(40), project))
    pg.execute("INSERT INTO worker_heartbeats (worker, hostname, pid, last_seen_at) VALUES "
               "('gone', 'h', 1, %s), ('here', 'h', 2, now())", (day_ago(3),))
    old_day = partition_of(old_event)

    report = retention.maintain(DAYS)

    # Then the finished job's day is gone whole, its job and steps with it
    assert old_day in report.partitions_dropped and old_day not in partitions()
    assert partition_of(old_event) is None
    assert not exists("agent_jobs", old_done) and not exists("job_steps", old_done)
    # and the day a live job wrote to stays, said so, with the job and its event
    held = partition_of(live_event)
    assert held is not None and report.partitions_held == {held: 1}
    assert exists("agent_jobs", live)
    # and recent history stays; the minute sweep's idle run older than a day goes
    assert partition_of(recent_event) is not None and exists("agent_jobs", recent)
    assert not exists("agent_jobs", idle_sweep)
    assert exists("agent_jobs", busy_sweep) and exists("agent_jobs", fresh_idle)
    assert report.jobs_deleted == 1 and report.idle_sweep_jobs_deleted == 1
    assert tuples("SELECT input_tokens FROM llm_usage") == [(2,)]
    # (a worker an earlier test started may be beating too: only our two rows are asked about)
    assert tuples("SELECT worker FROM worker_heartbeats WHERE worker IN ('gone', 'here')") \
        == [("here",)]
    # and the coming fortnight's days exist, so an insert never meets a missing day
    today = pg.db_now().astimezone(UTC).date()
    for ahead in range(retention.AHEAD_DAYS + 1):
        name = f"agent_job_events_{today + timedelta(days=ahead):%Y%m%d}"
        assert name in partitions()

    # When the live job ends and a second pass runs, its day goes too; a third does nothing
    pg.execute("UPDATE agent_jobs SET status = 'completed', completed_at = now() WHERE id = %s",
               (live,))
    second = retention.maintain(DAYS)
    assert second.partitions_dropped == [held] and partition_of(live_event) is None
    third = retention.maintain(DAYS)
    assert (third.partitions_dropped, third.jobs_deleted, third.partitions_made) == ([], 0, 0)


def test_inserts_go_on_while_a_day_is_dropped(project) -> None:
    for i in range(50):
        event(project, None, 40 + i % 3)
    stop, written, errors = threading.Event(), [], []

    def writer() -> None:
        try:
            while not stop.is_set():
                written.append(event(project, None, 0))
        except Exception as exc:  # pragma: no cover - the failure is the assertion below
            errors.append(exc)
        finally:
            pg.reset()

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        report = retention.maintain(DAYS)
    finally:
        stop.set()
        thread.join(10)
    # (an earlier test may leave an emptied old day behind: ours are the three asked about)
    ours = {partition_name(day_ago(40 + i)) for i in range(3)}
    assert ours <= set(report.partitions_dropped)
    assert errors == [] and len(written) > 0
    assert pg.fetch_value("SELECT count(*) FROM agent_job_events WHERE id = ANY(%s)",
                          (written,)) == len(written)


def test_one_maintainer_at_a_time(project) -> None:
    holder = pg.connect()
    try:
        holder.execute("SELECT pg_advisory_lock(%s)", (retention.LOCK,))
        assert retention.maintain(DAYS).skipped
        # Unlocked by name: a closed connection's backend may still hold it for a moment.
        holder.execute("SELECT pg_advisory_unlock(%s)", (retention.LOCK,))
    finally:
        holder.close()
    assert not retention.maintain(DAYS).skipped


@pytest.mark.parametrize(("names", "today", "expected"), [
    (["agent_job_events_20261020", "agent_job_events_20261024", "agent_job_events_20261023"],
     "2026-11-23", ["agent_job_events_20261020", "agent_job_events_20261023"]),
    (["agent_job_events_20261124", "something_else", "agent_job_events_x"], "2026-11-23", []),
])
def test_which_days_have_expired(names, today, expected) -> None:
    day = datetime.strptime(today, "%Y-%m-%d").date()
    assert [n for n, _ in retention.expired(names, day, DAYS)] == expected


def test_a_replys_deltas_are_folded_a_while_after_it_finished(project) -> None:
    def reply(minutes_ago: float, status: str = "completed") -> str:
        jid = str(uuid.uuid4())
        pg.execute("INSERT INTO agent_jobs (id, project_id, job_type, status, idempotency_key, "
                   "created_at, completed_at) VALUES (%s, %s, 'chat.reply', %s, %s, "
                   "now() - make_interval(mins => %s + 1), now() - make_interval(mins => %s))",
                   (jid, project, status, jid, minutes_ago, minutes_ago))
        for text in ("Hello ", "there"):
            pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, data, created_at) "
                       "VALUES (%s, %s, 'delta', jsonb_build_object('text', %s::text), "
                       "now() - make_interval(mins => %s))", (jid, project, text, minutes_ago))
        return jid

    old, fresh, failed = reply(5), reply(0), reply(5, "failed")
    assert retention.maintain(DAYS).deltas_folded == 2

    def deltas(jid: str) -> int:
        return int(pg.fetch_value("SELECT count(*) FROM agent_job_events WHERE job_id = %s "
                                  "AND type = 'delta'", (jid,)))

    # the reply stored five minutes ago loses its deltas; one just stored keeps them (a
    # stream a moment behind still shows it being written); a failed one keeps its partial text
    assert (deltas(old), deltas(fresh), deltas(failed)) == (0, 2, 2)
