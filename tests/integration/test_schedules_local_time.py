"""Schedules in the project's time zone (issue 27): beat's hourly ticks replayed over fixed
clocks across both 2026 DST changes, through the real enqueue and its keys in PostgreSQL:
each project's night shift and digest run once per local day at its local hour, none skipped
or doubled; the zone is validated; the monitor's next runs follow the same rule."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine import pg
from tasks.settings import get_settings
from tasks.startup import mail
from tasks.startup.contact import CONFIRMED
from tasks.startup.schedules import enqueue_scheduled
from tests.conftest import in_process_worker_paused
from tests.integration.jobdb import tuples

ZONES = {"America/New_York": ["2026-03-08", "2026-11-01"],
         "Europe/Berlin": ["2026-03-29", "2026-10-25"]}


@pytest.fixture
def api(db, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_DAILY_HOUR", "2")  # the shipped default, not the tests' 0
    get_settings.cache_clear()
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "zones")
    client, auth = create_app().test_client(), {"Authorization": f"Bearer {token}"}

    def call(method: str, path: str, body=None):
        return client.open(path, method=method, headers=auth, json=body)

    with in_process_worker_paused():
        yield call
    monkeypatch.undo()
    get_settings.cache_clear()


def project(api, name: str, tz: str) -> str:
    r = api("POST", "/api/projects", {"name": name, "night_shift": True, "settings": {
        "timezone": tz, "contact_email": f"{name}@example.test"}})
    assert r.status_code == 201, r.json
    pid = r.json["id"]
    pg.execute("UPDATE projects SET settings = settings || jsonb_build_object(%s::text, %s::text) "
               "WHERE id = %s", (CONFIRMED, f"{name}@example.test", pid))
    return pid


def hourly(day: str, minute: int) -> list[datetime]:
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) - timedelta(days=1)
    return [start + timedelta(hours=h, minutes=minute) for h in range(24 * 3)]


@pytest.mark.parametrize(("tz", "day"), [(z, d) for z, days in ZONES.items() for d in days])
def test_the_night_shift_runs_once_per_local_day_across_a_dst_change(api, tz, day):
    pid = project(api, "night", tz)
    utc = project(api, "utc", "UTC")

    for tick in hourly(day, 15):  # beat's night-shift ticks, each hour at :15
        enqueue_scheduled(["nightshift.cycle_project"], now=tick)

    keys = [k for (k,) in tuples("SELECT idempotency_key FROM agent_jobs WHERE project_id = %s "
                                 "ORDER BY created_at", (pid,))]
    dates = [k.rsplit(":", 1)[1] for k in keys]
    assert Counter(dates).most_common(1)[0][1] == 1, keys  # none doubled
    assert day in dates  # nor skipped on the change day
    # The UTC project keeps its UTC day
    assert all(k.startswith(f"nightshift:{utc}:") for (k,) in tuples(
        "SELECT idempotency_key FROM agent_jobs WHERE project_id = %s", (utc,)))


def test_digests_go_at_the_projects_local_hour_once_on_both_change_days(api):
    ny = project(api, "ny", "America/New_York")
    berlin = project(api, "berlin", "Europe/Berlin")
    for day in ("2026-03-08", "2026-03-29", "2026-10-25", "2026-11-01"):
        for tick in hourly(day, 0):  # the digests' ticks, each hour at :00
            mail._queue_digests(now=tick)
    sent = tuples("SELECT project_id::text, idempotency_key FROM email_jobs ORDER BY created_at")
    per_project_day = Counter((p, k.rsplit(":", 1)[1]) for p, k in sent)
    assert max(per_project_day.values()) == 1
    for pid in (ny, berlin):
        days = {d for p, d in per_project_day if p == pid}
        assert {"2026-03-08", "2026-03-29", "2026-10-25", "2026-11-01"} <= days


def test_a_zone_is_validated_and_the_monitor_shows_each_schedules_next_runs(api):
    pid = project(api, "tz", "America/New_York")
    for bad in ("Mars/Olympus", "EST5EDT;rm", "america/new_york"):
        r = api("PATCH", f"/api/projects/{pid}", {"settings": {"timezone": bad}})
        assert r.status_code == 422 and "IANA" in r.get_data(as_text=True), r.json
    r = api("GET", "/api/monitor/schedules")
    assert r.status_code == 200, r.json
    mine = [s for s in r.json["items"] if s["project_id"] == pid]
    assert {s["schedule"] for s in mine} == {"nightshift.cycle_project", "drip.process_digests",
                                              "drip.process_nudges"}
    for s in mine:
        assert s["timezone"] == "America/New_York" and len(s["next_runs"]) == 3
        runs = [datetime.fromisoformat(t) for t in s["next_runs"]]
        assert runs == sorted(runs) and all(b - a >= timedelta(hours=23)
                                            for a, b in itertools.pairwise(runs))
