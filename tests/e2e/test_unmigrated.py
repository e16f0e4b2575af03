"""An operator who skipped `release` (the Procfile's `switchyard migrate`): the web answered
/readyz "ready" and doctor "engine: ready" on an empty database, then every request failed
with a 500. Both now say the database is not migrated, and how to fix it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from app.ops.embedded import scratch_database
from tests.e2e.procs import Procs

pytestmark = pytest.mark.e2e


def test_an_unmigrated_database_is_not_ready_and_doctor_says_to_migrate(
        procs: Procs) -> None:
    admin = os.environ["SWITCHYARD_TEST_ADMIN_URL"]
    with scratch_database(admin, "switchyard_empty", migrate=False) as empty:
        _, base = procs.web(env={"DATABASE_URL": empty})
        ready = httpx.get(base + "/readyz", timeout=10)
        assert ready.status_code == 503, ready.text
        checks = ready.json()["error"]["details"]["checks"]
        assert checks["database"] == "ok"
        assert checks["migrations"] == "not migrated: run `switchyard migrate`"
        doctor = subprocess.run(
            [str(Path(sys.executable).parent / "switchyard"), "doctor"],
            env={**os.environ, "DATABASE_URL": empty}, capture_output=True, text=True,
            timeout=120, check=False)
        assert doctor.returncode == 1, doctor.stdout
        assert "not migrated: run `switchyard migrate`" in doctor.stdout
