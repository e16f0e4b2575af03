"""The chaos suite's summary line, printed last: `chaos: <jobs> jobs, <faults> faults, ...`."""

from __future__ import annotations

import sys

import pytest

LINES: list[str] = []  # appended by the chaos test when it has checked its run


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    if LINES:
        terminalreporter.section("chaos")
        for line in LINES:
            terminalreporter.write_line(line)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    # After pytest's own "N passed" line: the suite's last line is the chaos verdict.
    for line in LINES:
        sys.__stdout__.write(line + "\n")
        sys.__stdout__.flush()
