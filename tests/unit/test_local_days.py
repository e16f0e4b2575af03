"""Daily schedules at the project's local hour, across both 2026 DST changes (issue 27): the
scheduler's rule ticked hour by hour over fixed clocks, no run skipped or doubled."""

from __future__ import annotations

from collections import Counter
from datetime import UTC, datetime, timedelta

import pytest

from tasks.startup.local_days import local_day, next_runs, valid_zone, zone

# (zone, the change day): spring forward and fall back, on both sides of the Atlantic
CHANGES = [("America/New_York", "2026-03-08"), ("America/New_York", "2026-11-01"),
           ("Europe/Berlin", "2026-03-29"), ("Europe/Berlin", "2026-10-25")]


def ticks(day: str, minute: int = 15) -> list[datetime]:
    """Beat's hourly ticks from two days before `day` to two days after, UTC."""
    start = datetime.fromisoformat(day).replace(tzinfo=UTC) - timedelta(days=2)
    return [start + timedelta(hours=h, minutes=minute) for h in range(24 * 5)]


def runs(tz_name: str, day: str, hour: int) -> list[datetime]:
    """Where the scheduler runs, the day's key standing in for the database's."""
    tz, done, out = zone(tz_name), set(), []
    for tick in ticks(day):
        d = local_day(tick, tz, hour)
        if d is not None and d not in done:
            done.add(d)
            out.append(tick.astimezone(tz))
    return out


@pytest.mark.parametrize(("tz_name", "day"), CHANGES)
@pytest.mark.parametrize("hour", [0, 1, 2, 3, 23])
def test_each_local_day_runs_once_at_its_hour_or_the_first_tick_after(tz_name, day, hour):
    ran = runs(tz_name, day, hour)
    per_day = Counter(r.strftime("%Y-%m-%d") for r in ran)
    # Every whole local day in the window ran exactly once (the first may have begun before)
    whole = sorted(per_day)[1:-1]
    assert day in whole and all(per_day[d] == 1 for d in per_day), per_day
    for r in ran[1:]:  # the window's first day is caught up at its first tick
        assert r.hour >= hour and (r.hour == hour or r.hour == hour + 1), r  # at, or the gap's
        assert r.minute in (15, 45)  # a tick


def test_the_gap_hour_runs_at_the_next_tick_and_the_repeated_hour_once():
    spring = [r for r in runs("America/New_York", "2026-03-08", 2)
              if r.strftime("%Y-%m-%d") == "2026-03-08"]
    assert [r.strftime("%H:%M %Z") for r in spring] == ["03:15 EDT"]  # 02:15 did not exist
    autumn = [r for r in runs("America/New_York", "2026-11-01", 1)
              if r.strftime("%Y-%m-%d") == "2026-11-01"]
    assert [r.strftime("%H:%M %Z") for r in autumn] == ["01:15 EDT"]  # not again at 01:15 EST
    berlin = [r for r in runs("Europe/Berlin", "2026-10-25", 2)
              if r.strftime("%Y-%m-%d") == "2026-10-25"]
    assert [r.strftime("%H:%M %Z") for r in berlin] == ["02:15 CEST"]


def test_next_runs_follow_the_same_rule():
    tz = zone("America/New_York")
    before = datetime(2026, 3, 7, 12, 0, tzinfo=UTC)  # 07:00 EST on the Saturday
    got = [r.astimezone(tz).strftime("%m-%d %H:%M %Z") for r in next_runs(before, tz, 2, 15)]
    assert got == ["03-08 03:15 EDT", "03-09 02:15 EDT", "03-10 02:15 EDT"]
    india = zone("Asia/Kolkata")  # half-hour offset: the UTC :15 tick is local :45
    got = next_runs(datetime(2026, 6, 1, 0, 0, tzinfo=UTC), india, 2, 15, count=1)
    assert got[0].astimezone(india).strftime("%H:%M") == "02:45"


def test_zones_are_validated_and_a_missing_one_is_utc():
    assert valid_zone("Europe/Berlin") and valid_zone("UTC")
    assert not valid_zone("Mars/Olympus") and not valid_zone("europe/berlin")
    assert zone(None).key == "UTC" and zone("Mars/Olympus").key == "UTC"
