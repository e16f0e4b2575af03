"""`system.canary` is public: it may not hold a worker thread for hours."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from tasks.engine import canary


def test_a_canary_sleeps_at_most_five_minutes_in_all_and_has_a_timeout() -> None:
    with pytest.raises(ValidationError, match="at most 300 seconds"):
        canary.CanaryPayload(steps=1000, step_seconds=60)  # was 16.7 hours of one thread
    assert canary.CanaryPayload(steps=10, step_seconds=30).steps == 10
    assert canary.JOB_TYPE.timeout_seconds == 600
