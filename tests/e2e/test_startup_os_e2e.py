"""The startup OS with real processes: Celery workers and beat, a gunicorn web process, and
local fake providers (deploy hook, Anthropic Messages API) that count what they receive.

- kill -9 of the worker while the deploy hook is answering: never a second POST; the
  effect ends `unknown` (the hook cannot be asked) or reconciled (it can);
- a streamed chat reply reaches an SSE client before the reply is stored, and is stored
  once even when the job is retried or run twice;
- a 429 seen by one worker process pauses the provider for the other one too, and costs
  neither job an attempt.
"""

from __future__ import annotations

import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import httpx
import pytest

from app.http.db import session_factory
from app.http.tokens import create_token
from models.db import session_scope
from tasks.engine import pg, retention
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services import approvals
from tasks.services.approvals import NewApproval, create_approval
from tasks.services.effects import ledger
from tests.e2e import procs as p
from tests.e2e.procs import Proc, Procs, wait
from tests.integration.jobdb import tuple_row, tuples
from tests.support.fake_anthropic import FakeAnthropic, fake_anthropic  # noqa: F401
from tests.support.fake_providers import FakeProviders, fake_providers  # noqa: F401

pytestmark = pytest.mark.e2e

MODEL = "claude-test-1"
KEEPALIVE = 0.5  # the web process's SSE keep-alive: a connected client hears from it this often


def llm_env(fake: FakeAnthropic) -> dict[str, str]:
    """A worker process whose LLM is the fake Anthropic server, one job at a time per slot."""
    return {"SWITCHYARD_LLM_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": fake.url,
            "ANTHROPIC_API_KEY": "sk-test-e2e", "SWITCHYARD_LLM_MODEL": MODEL,
            "SWITCHYARD_PREFETCH_MULTIPLIER": "1"}


def new_project(owner: str, name: str) -> str:
    pid = str(uuid.uuid4())
    pg.execute("INSERT INTO projects (id, owner_id, name, goal) VALUES (%s, %s, %s, %s)",
               (pid, owner, name, "sell tide-aware scheduling to harbour masters"))
    return pid


def effect_of(approval_id: uuid.UUID) -> dict[str, Any]:
    row = tuple_row("SELECT status, error, response, provider_ref FROM action_executions "
                    "WHERE approval_id = %s", (approval_id,))
    assert row is not None, "no ledger row for the approval"
    return dict(zip(("status", "error", "response", "provider_ref"), row, strict=True))


def execution_status(approval_id: uuid.UUID) -> str:
    return tuple_row("SELECT execution_status FROM approvals WHERE id = %s",
                     (approval_id,))[0]


# --- 2. kill -9 between the effect's intent and its outcome --------------------------------------

@pytest.mark.parametrize("reconcilable", [
    pytest.param(False, id="no status_url: unknown, the job fails"),
    pytest.param(True, id="status_url: reconciled, the job completes"),
])
def test_kill9_while_the_deploy_hook_answers_never_posts_twice(
        procs: Procs, owner_and_project, fake_providers, reconcilable):  # noqa: F811
    # Given an approved deploy and a hook that takes 5 s to answer
    owner, project = owner_and_project
    fake_providers.delay = 5.0
    hook = f"{fake_providers.url}/deploy/site"
    args = {"url": hook, **({"status_url": hook} if reconcilable else {})}
    approval_id = create_approval(project, None, NewApproval("deploy_hook", "Deploy", args))
    a = procs.worker("a", pool="solo")
    job_id = approvals.decide(approval_id, owner, "approved", 1)
    assert job_id is not None

    # When worker A is killed -9 while the POST is in flight (intent recorded, no outcome)
    procs.wait(lambda: fake_providers.posts("/deploy/site"), 20, "the hook POST in flight")
    assert effect_of(approval_id)["status"] == "intent"
    a.kill9()
    key = f"approval:{approval_id}"
    if reconcilable:  # the hook finishes its deploy after our worker is gone
        procs.wait(lambda: httpx.get(hook, params={"idempotency_key": key},
                                     timeout=5).status_code == 200, 15, "the hook to finish")
    # and worker B and a beat come up (the stale sweep hands the job to B)
    procs.worker("b", pool="solo")
    procs.beat("beat")

    # Then the job ends, the hook got exactly one POST, and the ledger says what is known
    procs.wait(lambda: p.status(job_id) in ("completed", "failed"), 40, "the job to end")
    time.sleep(0.5)  # room for a (wrong) second POST to arrive
    posts = fake_providers.posts("/deploy/site")
    assert [r.idempotency_key for r in posts] == [key]
    effect = effect_of(approval_id)
    final = p.job(job_id)
    reasons = [e.get("reason") or "" for e in p.status_events(job_id)]
    assert any(r.startswith("worker lost") for r in reasons), reasons
    if reconcilable:
        assert effect["status"] == "succeeded", effect
        assert effect["response"]["reconciled"] is True and effect["provider_ref"] == "dep_1"
        assert final["status"] == "completed", final
        assert execution_status(approval_id) == "completed"
    else:
        assert effect["status"] == "unknown", effect
        assert "status_url" in effect["error"]
        assert final["status"] == "failed" and "unknown" in final["last_error"], final
        assert execution_status(approval_id) == "failed"
        # shown to a person, and asking again replays the unknown: still no second POST
        assert [e.idempotency_key for e in ledger.unknown_effects(project)] == [key]
        again = ledger.perform(project_id=project, action_type="deploy_hook", args=args,
                               idempotency_key=key)
        assert (again.status, again.replayed) == ("unknown", True)
        assert len(fake_providers.posts("/deploy/site")) == 1


# --- 3. chat: deltas reach an SSE client before the reply is stored ------------------------------

@dataclass
class Web:
    base: str
    token: str
    owner: str
    project: str

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        return httpx.post(self.base + path, json=body, headers=self.headers(), timeout=10)

    def get(self, path: str) -> httpx.Response:
        return httpx.get(self.base + path, headers=self.headers(), timeout=10)


@pytest.fixture
def web(procs: Procs) -> Iterator[Web]:
    """A gunicorn web process as in production (killed at teardown by `procs`)."""
    _, base = procs.web(threads=20, env={"SWITCHYARD_SSE_KEEPALIVE_SECONDS": str(KEEPALIVE)})
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, f"founder-{uuid.uuid4().hex[:8]}")
    yield Web(base, token, str(owner_id), new_project(str(owner_id), "Tidewater"))


def stored_replies(chat_job_id: str) -> int:
    """Assistant messages answering the user message whose reply job this is."""
    return tuple_row(
        "SELECT count(*) FROM chat_messages a JOIN chat_messages u ON a.reply_to = u.id "
        "WHERE u.job_id = %s AND a.role = 'assistant'", (chat_job_id,))[0]


@dataclass(eq=False)
class SseClient(threading.Thread):
    """Reads the project's event stream; at each `delta` it notes whether the reply is stored."""

    web: Web
    done: Callable[[dict], bool]
    events: list[dict] = field(default_factory=list)
    comments: int = 0
    error: BaseException | None = None

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, daemon=True, name="sse-client")

    def run(self) -> None:
        try:
            self._read()
        except BaseException as exc:  # re-raised by finish()
            self.error = exc
        finally:
            pg.reset()

    def _read(self) -> None:
        url = f"{self.web.base}/api/projects/{self.web.project}/events"
        timeout = httpx.Timeout(10.0, read=KEEPALIVE * 10)
        with httpx.Client(timeout=timeout) as client, \
                client.stream("GET", url, headers=self.web.headers()) as r:
            assert r.status_code == 200, r.read()
            fields: dict[str, str] = {}
            for line in r.iter_lines():
                if line.startswith(":"):
                    self.comments += 1
                elif line:
                    name, _, value = line.partition(":")
                    fields[name] = value[1:] if value.startswith(" ") else value
                elif fields:
                    if fields.get("event") == "replayed":  # where the replay ends: no event
                        fields = {}
                        continue
                    event = json.loads(fields.pop("data"))
                    fields = {}
                    event["received_at"] = time.time()
                    if event["type"] == "delta":
                        event["replies_stored"] = stored_replies(event["job_id"])
                    self.events.append(event)
                    if self.done(event):
                        return

    def finish(self, timeout: float) -> SseClient:
        self.join(timeout)
        assert not self.is_alive(), f"stream still open after {timeout}s: {self.events[-3:]}"
        if self.error is not None:
            raise self.error
        return self


def ended(job_id: str) -> Callable[[dict], bool]:
    return lambda e: (e["job_id"] == job_id and e["type"] == "status"
                      and e["data"].get("status") in ("completed", "failed"))


REPLY = ("Talk to five harbour masters this week before you build anything more: ask how "
         "they plan around the tides today, what it costs them when a plan goes wrong, and "
         "whether they would pay for a schedule that adjusts itself overnight.")


def test_chat_deltas_reach_an_sse_client_before_the_reply_is_stored_once(
        procs: Procs, web: Web, fake_anthropic):  # noqa: F811
    # Given a worker whose model streams its answer slowly, and a client on the project stream
    fake_anthropic.text = REPLY
    fake_anthropic.chunk_delay = 0.05
    procs.worker("w", pool="threads", concurrency=2, env=llm_env(fake_anthropic))
    holder: dict[str, str] = {}
    client = SseClient(web, lambda e: "job" in holder and ended(holder["job"])(e))
    client.start()
    wait(lambda: client.comments or client.error, 10, "the stream to be open")

    # When the founder sends a message
    r = web.post(f"/api/projects/{web.project}/chat", {"message": "What should I do first?"})
    assert r.status_code == 202, r.text
    holder["job"] = job_id = r.json()["job_id"]
    message_id = r.json()["message_id"]
    events = client.finish(30).events

    # Then deltas arrived, spread over the stream, while no reply was stored yet
    deltas = [e for e in events if e["type"] == "delta" and e["job_id"] == job_id]
    assert len(deltas) >= 3, [e["type"] for e in events]
    assert deltas[0]["replies_stored"] == 0
    assert deltas[-1]["received_at"] - deltas[0]["received_at"] > 0.5
    assert "".join(d["data"]["text"] for d in deltas) == REPLY
    stored = tuple_row("SELECT id, content, created_at FROM chat_messages "
                       "WHERE reply_to = %s AND role = 'assistant'", (message_id,))
    assert stored is not None and stored[1] == REPLY
    assert deltas[0]["received_at"] < stored[2].timestamp()
    # and every delta precedes the step that stores the reply, in the event log's order
    store_started = min(e["id"] for e in events if e["type"] == "step"
                        and e["job_id"] == job_id and e["data"]["name"] == "store-reply")
    assert max(d["id"] for d in deltas) < store_started
    items = web.get(f"/api/projects/{web.project}/chat").json()["items"]
    assert [(m["role"], m["content"]) for m in items] == [  # newest first
        ("assistant", REPLY), ("user", "What should I do first?")]
    assert fake_anthropic.received[0].body["stream"] is True
    # and once the reply is stored and the job done, a maintenance pass folds its deltas away
    wait(lambda: p.status(job_id) == "completed", 10, "the reply job")
    assert retention.fold_deltas(grace_seconds=0) >= 1
    assert tuples("SELECT count(*) FROM agent_job_events WHERE job_id = %s "
                  "AND type = 'delta'", (job_id,)) == [(0,)]

    # When the next reply's stream breaks mid-way (the job retries), and a duplicate reply job
    # for the same message runs as well
    fake_anthropic.break_next_stream("api_error")
    r = web.post(f"/api/projects/{web.project}/chat", {"message": "And after that?"})
    retried, second = r.json()["job_id"], r.json()["message_id"]
    wait(lambda: p.status(retried) in ("completed", "failed"), 30, "the retried reply")
    duplicate = enqueue(EnqueueRequest(web.project, "chat.reply", {"message_id": second},
                                       idempotency_key=f"duplicate:{second}")).job_id
    wait(lambda: p.status(duplicate) in ("completed", "failed"), 30, "the duplicate reply")

    # Then the retried job completed on its second attempt, and one reply is stored
    assert (p.job(retried)["status"], p.job(retried)["attempts"]) == ("completed", 2)
    assert p.job(duplicate)["status"] == "completed"
    replies = tuples("SELECT id, content FROM chat_messages WHERE reply_to = %s", (second,))
    assert len(replies) == 1 and replies[0][1] == REPLY
    assert p.job(duplicate)["result"]["message_id"] == str(replies[0][0])
    assert [m["role"] for m in web.get(f"/api/projects/{web.project}/chat").json()["items"]] \
        == ["assistant", "user", "assistant", "user"]  # newest first


# --- 5. a 429 seen by one worker process pauses the other -----------------------------------------

PACKET = json.dumps({"title": "Tidewater: idea packet", "summary": "Talk to harbour masters.",
                     "insights": ["Tides drive every schedule."], "actions": []})


def test_a_429_on_one_worker_pauses_the_provider_for_the_other_without_costing_attempts(
        procs: Procs, owner_and_project, fake_anthropic):  # noqa: F811
    # Given two worker processes, a provider that refuses its first request with 429
    # (retry-after 2 s) and answers the others after 1 s
    owner, project = owner_and_project
    other = new_project(owner, "other")
    fake_anthropic.text = PACKET
    fake_anthropic.delay = 1.0
    fake_anthropic.fail_next(1, 429, retry_after=2)
    workers = [procs.worker(name, pool="solo", env=llm_env(fake_anthropic), ready=False)
               for name in ("a", "b")]
    for w in workers:
        procs.wait(lambda w=w: p._heartbeat_seen(w.pid), 30, f"worker {w.name} ready")

    # When each project generates a packet (two model calls each), both at once
    jobs = [str(enqueue(EnqueueRequest(pid, "phase0.generate_packet", {"phase": 0})).job_id)
            for pid in (project, other)]
    procs.wait(lambda: all(p.status(j) in ("completed", "failed") for j in jobs), 40,
               "both packets")

    # Then both completed on their first attempt
    assert [(p.job(j)["status"], p.job(j)["attempts"]) for j in jobs] == [("completed", 1)] * 2
    # And the two jobs started on two different worker processes
    first_claims = {j: claimed_by(workers, j)[0] for j in jobs}
    assert first_claims[jobs[0]] != first_claims[jobs[1]], first_claims
    # And after the 429 nobody called the provider until its retry-after had passed, but for
    # the other job's call already under way when the 429 was answered
    refused, *answered = fake_anthropic.received
    assert refused.status == 429 and all(r.status == 200 for r in answered)
    assert len(answered) == 4  # research + synthesis per job: nothing was asked twice
    early = [r.at - refused.at for r in answered if r.at - refused.at < 1.95]
    assert len(early) <= 1 and all(dt < 0.6 for dt in early), early  # a follow-up comes >= 1 s on
    # And both jobs were sent back to the queue once by the pause (no attempt spent)
    for j in jobs:
        history = [e["status"] for e in p.status_events(j)]
        assert history == ["queued", "running", "queued", "running", "completed"], history
    # And the pause was shared: one job was refused by the provider, the other by the pause
    # the first one's worker had recorded, before it made its next call
    errors = sorted(p.job(j)["last_error"] for j in jobs)
    assert any("429" in e for e in errors) and any("paused for" in e for e in errors), errors


def claimed_by(workers: list[Proc], job_id: str) -> list[str]:
    """The workers whose log shows them claiming the job, earliest claim first."""
    claims = []
    for w in workers:
        for line in w.text().splitlines():
            found = re.match(rf"\[([\d:, -]+): INFO/\w+\] job_claimed {job_id}$", line)
            if found:
                claims.append((datetime.strptime(found[1], "%Y-%m-%d %H:%M:%S,%f"), w.name))
    return [name for _, name in sorted(claims)]
