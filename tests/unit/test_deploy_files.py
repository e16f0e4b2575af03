"""The deploy files (Procfile, docker-compose.yml) serve every queue the engine routes to, and
the recovery sweeps from a worker of their own (issue 26): a sweep never waits behind a long
job, and no queue is left without a consumer."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path

import pytest

from tasks.engine.queues import QUEUES

ROOT = Path(__file__).resolve().parents[2]


def compose_workers() -> list[list[str]]:
    text = (ROOT / "docker-compose.yml").read_text()
    commands = [json.loads(c) for c in re.findall(r"^\s+command:\s*(\[.*\])\s*$", text, re.M)]
    return [c for c in commands if c[:2] == ["switchyard", "worker"]]


def procfile_workers() -> list[list[str]]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    commands = [shlex.split(line.split(":", 1)[1]) for line in lines if ":" in line]
    return [c for c in commands if c[:2] == ["switchyard", "worker"]]


def queues_of(command: list[str]) -> list[str]:
    return command[command.index("-Q") + 1].split(",") if "-Q" in command else list(QUEUES)


@pytest.mark.parametrize("workers", [compose_workers, procfile_workers],
                         ids=["compose", "procfile"])
def test_every_queue_is_served_and_the_sweeps_by_a_solo_worker_of_their_own(workers) -> None:
    found = workers()
    served = [q for command in found for q in queues_of(command)]
    assert sorted(served) == sorted(QUEUES), found  # each queue once
    (sweeper,) = [c for c in found if "sweeps" in queues_of(c)]
    assert queues_of(sweeper) == ["sweeps"] and sweeper[sweeper.index("-P") + 1] == "solo"
