"""Fixtures for the end-to-end tests: real worker and beat processes (see procs.py)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import in_process_worker_paused
from tests.e2e.procs import Procs

# The browser tests' fixtures, from their home in test_ui.py: the other browser test modules
# request them by name, without an import of their own (which a parameter would shadow: F811).
from tests.e2e.test_ui import page, site  # noqa: F401


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    """A failing e2e test shows the tail of every process's log."""
    outcome = yield
    report = outcome.get_result()
    procs: Procs | None = getattr(item, "_e2e_procs", None)
    if procs is not None and report.failed:
        report.sections.append(("e2e process logs", procs.report(lines=80)))


@pytest.fixture
def procs(db: None, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[Procs]:
    """Start workers and beats; every one of them is killed at teardown, pass or fail."""
    manager = Procs(tmp_path)
    request.node._e2e_procs = manager
    # Jobs published by this test are for its own processes, unless it asked for the
    # in-process worker: an earlier test's one must not take them.
    paused = (contextlib.nullcontext() if "worker" in request.fixturenames
              else in_process_worker_paused())
    try:
        with paused:
            yield manager
    finally:
        manager.close()
