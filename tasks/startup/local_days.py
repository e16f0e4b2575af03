"""Daily schedules in each project's own time zone, pure logic (no I/O).

Beat ticks every hour (at a minute of its own per schedule, celeryconfig); at each tick a
project is due once its local clock has reached the daily hour, and its run is keyed by its
local date. So a day's run happens at the first tick at or after that hour, once:
- when clocks go forward past the hour (it does not exist that day), the next tick runs it;
- when clocks go back and an hour repeats, the second pass finds the day's key taken.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError, available_timezones

# The minute of each UTC hour beat fires the daily schedules at (celeryconfig's crontabs).
TICK_MINUTE = {"drip.process_digests": 0, "nightshift.cycle_project": 15,
               "drip.process_nudges": 30}


def valid_zone(name: str) -> bool:
    """An IANA time zone name this machine knows ("Europe/Berlin", "UTC")."""
    return name in _known_zones()


@lru_cache(maxsize=1)
def _known_zones() -> frozenset[str]:
    return frozenset(available_timezones())  # a walk of the tz database: ~10 ms, once


def zone(name: str | None) -> ZoneInfo:
    """The project's zone; UTC when it has none (or one this machine no longer knows)."""
    if name:
        try:
            return ZoneInfo(name)
        except (ZoneInfoNotFoundError, ValueError):
            pass
    return ZoneInfo("UTC")


def local_day(now: datetime, tz: ZoneInfo, hour: int) -> str | None:
    """The project's local date (YYYY-MM-DD) if its daily run is due at `now`, else None."""
    local = now.astimezone(tz)
    return local.strftime("%Y-%m-%d") if local.hour >= hour else None


def next_runs(now: datetime, tz: ZoneInfo, hour: int, minute: int,
              count: int = 3) -> list[datetime]:
    """The next `count` ticks (UTC) at which the schedule will run, today's run taken as done
    once its hour has passed: the same rule as the scheduler, tick by tick."""
    seen = {day} if (day := local_day(now, tz, hour)) else set()
    tick = now.astimezone(UTC).replace(minute=minute, second=0, microsecond=0)
    if tick <= now:
        tick += timedelta(hours=1)
    runs: list[datetime] = []
    for _ in range(24 * (count + 2)):
        day = local_day(tick, tz, hour)
        if day is not None and day not in seen:
            seen.add(day)
            runs.append(tick)
            if len(runs) == count:
                break
        tick += timedelta(hours=1)
    return runs
