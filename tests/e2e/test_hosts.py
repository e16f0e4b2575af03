"""Two worker hosts, one of them cut off: a silent partition mid-run (issue 26).

Host A is a network namespace of its own, joined to this one by a veth pair; it reaches
PostgreSQL and the broker only through forwarders listening on the pair's address here, as
a second machine reaches the database host. Host B is this namespace. Setting the link down
drops A's packets without a word (no reset, no refusal): what a cut cable or a dead switch
does, and what a worker notices last. Needs root (network namespaces); CI runs as root.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from urllib.parse import urlsplit, urlunsplit

import pytest

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tests.e2e import procs as p
from tests.integration.jobdb import tuple_row
from tests.support.tcpproxy import TcpProxy

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.skipif(os.geteuid() != 0 or shutil.which("ip") is None,
                       reason="network namespaces need root and iproute2 (CI has both)"),
]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, text=True)


class Host:
    """A network namespace with a veth link to this one: `address` is ours on the link."""

    def __init__(self, tag: str, subnet: int) -> None:
        self.ns, self.outer, self.inner = f"sy{tag}", f"sy{tag}o", f"sy{tag}i"
        self.address, self.peer = f"10.213.{subnet}.1", f"10.213.{subnet}.2"
        _ip("netns", "add", self.ns)
        _ip("link", "add", self.outer, "type", "veth", "peer", "name", self.inner)
        _ip("link", "set", self.inner, "netns", self.ns)
        _ip("addr", "add", f"{self.address}/30", "dev", self.outer)
        _ip("link", "set", self.outer, "up")
        _ip("-n", self.ns, "addr", "add", f"{self.peer}/30", "dev", self.inner)
        _ip("-n", self.ns, "link", "set", self.inner, "up")
        _ip("-n", self.ns, "link", "set", "lo", "up")

    def partition(self) -> None:
        """Silently: the link goes down, packets vanish, nobody is told."""
        _ip("link", "set", self.outer, "down")

    def heal(self) -> None:
        _ip("link", "set", self.outer, "up")

    def command(self, argv: list[str]) -> list[str]:
        return ["ip", "netns", "exec", self.ns, *argv]

    def remove(self) -> None:
        subprocess.run(["ip", "netns", "del", self.ns], capture_output=True)  # the pair too


@pytest.fixture
def host_a() -> Iterator[Host]:
    tag = f"{os.getpid() % 100000}"
    host = Host(tag, os.getpid() % 250 + 1)
    try:
        yield host
    finally:
        host.remove()


def _through(url: str, proxy: TcpProxy) -> str:
    """`url` with its host and port replaced by the forwarder's."""
    parts = urlsplit(url)
    userinfo = parts.netloc.rpartition("@")[0]
    netloc = f"{userinfo}@{proxy.host}:{proxy.port}" if userinfo else f"{proxy.host}:{proxy.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _upstream(url: str, default_port: int) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or default_port


def test_a_silent_partition_mid_run_moves_the_job_to_the_other_host_and_fences_the_late_writes(
        procs: p.Procs, project: str, host_a: Host) -> None:
    # Given host A, which reaches the database and the broker over its link only, runs the
    # only worker on the default queue (no sweeps: host B's beat and worker keep those)
    database, broker = os.environ["DATABASE_URL"], os.environ["BROKER_URL"]
    default_broker_port = 6379 if broker.startswith("redis") else 5672
    proxies = [TcpProxy(_upstream(database, 5432), host=host_a.address),
               TcpProxy(_upstream(broker, default_broker_port), host=host_a.address)]
    try:
        a = procs._spawn("a", host_a.command([
            *p.CELERY, "worker", "-P", "solo", "-c", "1", "-n", "a@%h", "-Q", "default",
            "-l", "INFO", "--without-mingle", "--without-gossip", "--without-heartbeat"]),
            env={"DATABASE_URL": _through(database, proxies[0]),
                 "BROKER_URL": _through(broker, proxies[1])})
        procs.wait(lambda: "ready" in a.text(), 30, "worker a ready")
        procs.beat("beat")
        job_id = str(enqueue(EnqueueRequest(
            project_id=project, job_type="system.canary",
            payload={"steps": 3, "step_seconds": 2})).job_id)
        procs.wait(lambda: p.steps(job_id).get(2) == "running", 20, "step 2 running on host a")
        owner = tuple_row("SELECT locked_by FROM agent_jobs WHERE id = %s", (job_id,))[0]

        # When the link goes silent mid-step, and host B's worker starts
        host_a.partition()
        cut = time.monotonic()
        procs.worker("b", pool="threads", concurrency=2)

        # Then the stale sweep reclaims the job from A (no heartbeat by the database's
        # clock) and B runs it to completion, from step 2: step 1 is not run again
        procs.wait(lambda: p.status(job_id) == "completed", 40, "the job completed on host b")
        moved = time.monotonic() - cut
        row = p.job(job_id)
        assert row["locked_by"] != owner and row["attempts"] == 2, row
        assert p.started_counts(job_id) == {1: 1, 2: 2, 3: 1}
        events_before_heal = tuple_row("SELECT count(*), max(id) FROM agent_job_events "
                                       "WHERE job_id = %s", (job_id,))

        # And when the link comes back, A's statement that was in flight lands late and is
        # refused by the claim token: A reports the lost ownership and writes nothing
        host_a.heal()
        procs.wait(lambda: f"ownership_lost {job_id}" in a.text(), 60,
                   "host a's late write refused")
        assert p.status(job_id) == "completed"
        assert p.job(job_id)["locked_by"] == row["locked_by"]
        assert tuple_row("SELECT count(*), max(id) FROM agent_job_events WHERE job_id = %s",
                         (job_id,)) == events_before_heal
        assert p.started_counts(job_id) == {1: 1, 2: 2, 3: 1}
        print(f"silent partition: the job completed on host b {moved:.1f}s after the cut")
    finally:
        for proxy in proxies:
            proxy.close()
