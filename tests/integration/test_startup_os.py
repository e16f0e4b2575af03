"""The startup OS end to end in one process: the Flask app (test client), the real Celery
worker (threads pool), PostgreSQL, Redis, and local providers that count what they receive.

"Once" is always checked where it matters: requests that reached the fake deploy hook,
messages the SMTP server accepted, job rows with their stable keys.
"""

from __future__ import annotations

import itertools
import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import pytest
from celery.signals import task_postrun
from flask import Flask

import celeryconfig
from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from models.schema import SYSTEM_PROJECT_ID
from tasks.celery_app import SCHEDULE
from tasks.celery_app import app as celery_app
from tasks.engine import pg
from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.services.approvals import NewApproval, create_approval
from tasks.services.effects import outbox
from tasks.services.effects.adapters.email import message_id
from tasks.services.llm import reset_client
from tasks.settings import get_settings
from tasks.startup import schedules
from tasks.startup.contact import CONFIRMED
from tasks.startup.phases import PHASES
from tests.conftest import wait_until
from tests.integration.jobdb import in_threads, tuple_row, tuples, wait_for
from tests.support.fake_providers import (  # noqa: F401 - the fixtures are used by name
    FakeProviders,
    FakeSmtp,
    fake_providers,
    fake_smtp,
)

CRON_SECRET = "cron-secret-0123456789"
SENDER = "Switchyard <ops@example.test>"
CONTACT = "founder@example.test"


# --- fixtures ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Fakes:
    http: FakeProviders
    smtp: FakeSmtp

    @property
    def hook(self) -> str:
        return f"{self.http.url}/deploy/site"


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch, request: pytest.FixtureRequest) -> Iterator[Fakes]:
    """Email to the SMTP fake, the scripted LLM, a cron secret; settings re-read before/after
    (the in-process worker reads them at call time)."""
    http: FakeProviders = request.getfixturevalue("fake_providers")
    smtp: FakeSmtp = request.getfixturevalue("fake_smtp")
    for name, value in {"SWITCHYARD_SMTP_HOST": smtp.host, "SWITCHYARD_SMTP_PORT": str(smtp.port),
                        "SWITCHYARD_RESEND_API_KEY": "", "SWITCHYARD_EMAIL_FROM": SENDER,
                        "SWITCHYARD_LLM_PROVIDER": "scripted",
                        "SWITCHYARD_CRON_SECRET": CRON_SECRET}.items():
        monkeypatch.setenv(name, value)
    get_settings.cache_clear()
    reset_client()
    yield Fakes(http, smtp)
    monkeypatch.undo()
    get_settings.cache_clear()
    reset_client()


@dataclass
class Founder:
    """A token holder with one project; each call uses a client of its own (thread-safe)."""

    app: Flask
    owner_id: uuid.UUID
    token: str
    project: str

    def headers(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def get(self, path: str) -> Any:
        with self.app.test_client() as c:
            return c.get(path, headers=self.headers())

    def post(self, path: str, body: Any = None, headers: dict[str, str] | None = None) -> Any:
        with self.app.test_client() as c:
            return c.post(path, data=json.dumps(body if body is not None else {}),
                          content_type="application/json", headers=self.headers(headers))

    def new_project(self, name: str, *, night_shift: bool = False,
                    settings: dict[str, Any] | None = None) -> str:
        pid = str(uuid.uuid4())
        pg.execute("INSERT INTO projects (id, owner_id, name, night_shift, settings) "
                   "VALUES (%s, %s, %s, %s, %s::jsonb)",
                   (pid, self.owner_id, name, night_shift, json.dumps(settings or {})))
        return pid


@pytest.fixture
def founder(db: None, fakes: Fakes) -> Founder:
    app = create_app()
    app.config["TESTING"] = True
    with session_scope(session_factory()) as s:
        owner_id, token = create_token(s, f"founder-{uuid.uuid4().hex[:8]}")
    f = Founder(app, owner_id, token, "")
    f.project = f.new_project("Tidewater", settings={"contact_email": CONTACT,
                                                     CONFIRMED: CONTACT,
                                                     "deploy_hook_url": fakes.hook})
    return f


class Beat:
    """Sends beat's scheduled messages through the broker, exactly as beat's entries say, and
    collects what the worker's `tasks.schedule` returned for each."""

    def __init__(self) -> None:
        self.results: list[dict[str, int]] = []

    def _ran(self, sender: Any = None, retval: Any = None, **_: Any) -> None:
        if getattr(sender, "name", None) == SCHEDULE:
            self.results.append(retval)

    def fire(self, entry: str) -> None:
        e = celeryconfig.beat_schedule[entry]
        celery_app.send_task(e["task"], args=e["args"], **e["options"])

    def wait(self, n: int) -> list[dict[str, int]]:
        wait_until(lambda: len(self.results) >= n, timeout=15, what=f"{n} beat message(s) run")
        return self.results


@pytest.fixture
def beat(worker: Any) -> Iterator[Beat]:
    b = Beat()
    task_postrun.connect(b._ran, weak=False)
    yield b
    task_postrun.disconnect(b._ran)


# --- reading the truth back -------------------------------------------------------------------

def approval(approval_id: str) -> dict[str, Any]:
    row = tuple_row("SELECT status, version, execution_status, execution_job_id "
                    "FROM approvals WHERE id = %s", (approval_id,))
    assert row is not None
    return dict(zip(("status", "version", "execution_status", "execution_job_id"), row,
                    strict=True))


def jobs_of(job_type: str) -> list[tuple[str, str, str, str]]:
    """(project, idempotency key, status, id) of every job of this type."""
    return [(str(p), k, s, str(i)) for p, k, s, i in tuples(
        "SELECT project_id, idempotency_key, status, id FROM agent_jobs WHERE job_type = %s "
        "ORDER BY created_at", (job_type,))]


def wait_all_done(job_type: str, n: int, timeout: float = 20) -> list[tuple[str, str, str, str]]:
    def done() -> list | None:
        rows = jobs_of(job_type)
        return rows if len(rows) >= n and all(r[2] in ("completed", "failed") for r in rows) \
            else None
    return wait_until(done, timeout=timeout, what=f"{n} {job_type} job(s) to finish")


def recipients(smtp: FakeSmtp) -> list[str]:
    with smtp.lock:
        return sorted(r for m in smtp.messages for r in m.rcpt_tos)


def today() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%d")


# --- 0. a project walks its phases, one approved advance at a time ---------------------------

def test_a_project_walks_from_idea_to_growth_one_approved_advance_at_a_time(worker, founder):
    r = founder.post(f"/api/projects/{founder.project}/launch", {})
    assert wait_for(r.get_json()["job_id"], timeout=30)["status"] == "completed"
    titles = []
    for phase, (here, there) in enumerate(itertools.pairwise(PHASES)):
        # Given the packet of this phase, which ends with the way on
        assert project_phase(founder.project) == here
        [advance] = [a for a in pending_inbox(founder) if a["action_type"] == "phase_advance"]
        assert advance["action_args"] == {"from": phase, "to": phase + 1}
        # When it is approved twice at once
        url = f"/api/inbox/{advance['id']}/decision"
        decision = {"decision": "approved", "version": advance["version"]}
        with ThreadPoolExecutor(2) as pool:
            answers = list(pool.map(
                lambda call: founder.post(*call).status_code, [(url, decision)] * 2))
        # Then one next-phase job runs, under its stable key, and the project moves on
        assert sorted(answers) == [200, 409]
        key = f"phasegen:{founder.project}:{phase + 1}"
        [job] = [j for j in jobs_of("phase.generate_packet") if j[1] == key]
        assert wait_for(job[3], timeout=30)["status"] == "completed"
        assert project_phase(founder.project) == there
        assert approval(advance["id"])["execution_status"] == "completed"
        titles.append(latest_packet(founder.project)["title"])
    # The last phase's packet has no way on, and every packet was its phase's own
    assert not [a for a in pending_inbox(founder) if a["action_type"] == "phase_advance"]
    assert titles == [f"Tidewater: {p} packet" for p in PHASES[1:]]
    assert len(jobs_of("phase.generate_packet")) == len(PHASES) - 1


def test_a_launch_asked_at_once_is_one_job_and_a_launched_project_is_not_launched_again(
        worker, founder):
    url = f"/api/projects/{founder.project}/launch"
    # A double click (three at once): one job, the others answered with it
    with ThreadPoolExecutor(3) as pool:
        answers = list(pool.map(lambda _: founder.post(url, {}), range(3)))
    assert sorted(a.status_code for a in answers) == [200, 200, 202]
    (job_id,) = {a.get_json()["job_id"] for a in answers}
    assert wait_for(job_id, timeout=30)["status"] == "completed"
    # Once it moved on, launching again would put it back to idea beside the advance it waits
    # for (and the stale advance, approved, answered with the old job): refused
    [advance] = [a for a in pending_inbox(founder) if a["action_type"] == "phase_advance"]
    r = founder.post(f"/api/inbox/{advance['id']}/decision",
                     {"decision": "approved", "version": advance["version"]})
    assert r.status_code == 200, r.get_json()
    wait_until(lambda: project_phase(founder.project) == "validation", timeout=30,
               what="the validation packet")
    launches = len(jobs_of("phase0.generate_packet"))
    r = founder.post(url, {})
    assert r.status_code == 409, r.get_json()
    assert r.get_json()["error"]["code"] == "already_launched"
    assert r.get_json()["error"]["details"] == {"phase": "validation"}
    assert project_phase(founder.project) == "validation"
    assert len(jobs_of("phase0.generate_packet")) == launches


def test_a_packet_proposes_only_what_the_project_may_do_and_names_what_it_set_aside(
        worker, founder):
    # Given a project past its idea, with a repo and money off (the defaults)
    pg.execute("UPDATE projects SET phase = 'validation', settings = settings || %s::jsonb "
               "WHERE id = %s", (json.dumps({"github_repo": "tidewater/app"}), founder.project))
    job = enqueue_packet(founder, phase=1, key="validation-1")
    # Then no approval asks for what could only fail once approved
    kinds = {a["action_type"] for a in pending_inbox(founder)}
    assert kinds == {"email", "deploy_hook", "phase_advance"}, kinds
    assert {a["type"] for a in latest_packet(founder.project)["actions"]} == kinds
    # When the founder turns money and code pushes on
    pg.execute("UPDATE projects SET settings = settings || %s::jsonb WHERE id = %s",
               (json.dumps({"permissions": {"ad_campaign": True, "github_dispatch": True}}),
                founder.project))
    enqueue_packet(founder, phase=1, key="validation-2")
    # Then the next packet proposes them
    kinds = {a["action_type"] for a in pending_inbox(founder)}
    assert {"ad_campaign", "github_dispatch"} <= kinds, kinds
    assert job["status"] == "completed"


def test_a_model_that_proposes_a_refused_action_anyway_has_it_set_aside_and_named(
        worker, founder, monkeypatch):
    from tasks.startup import scripted_answers
    # Given a model that does not heed what it was told not to propose
    heard = scripted_answers._Facts.__init__

    def deaf(self: Any, req: Any) -> None:
        heard(self, req)
        self.refused = set()
    monkeypatch.setattr(scripted_answers._Facts, "__init__", deaf)
    pg.execute("UPDATE projects SET phase = 'validation' WHERE id = %s", (founder.project,))
    job = enqueue_packet(founder, phase=1, key="validation-disobeys")
    # Then the ad campaign is no approval, the packet keeps it aside, and the job says why
    assert "ad_campaign" not in {a["action_type"] for a in pending_inbox(founder)}
    packet = latest_packet(founder.project)
    assert "ad_campaign" not in {a["type"] for a in packet["actions"]}
    assert [a["type"] for a in packet["set_aside"]] == ["ad_campaign"]
    said = [m for (m,) in tuples("SELECT message FROM agent_job_events WHERE job_id = %s",
                                  (job["id"],))]
    assert any("set aside, not allowed for this project: ad_campaign: "
               "this project may not perform ad_campaign effects: set "
               "projects.settings.permissions.ad_campaign to true" in m for m in said), said


def enqueue_packet(founder: Founder, *, phase: int, key: str) -> dict[str, Any]:
    r = founder.post(f"/api/projects/{founder.project}/jobs",
                     {"job_type": "phase.generate_packet", "payload": {"phase": phase}},
                     headers={"Idempotency-Key": key})
    assert r.status_code in (200, 202), r.get_json()
    return wait_for(r.get_json()["job_id"], timeout=30)


def project_phase(project: str) -> str:
    return str(pg.fetch_value("SELECT phase FROM projects WHERE id = %s", (project,)))


def latest_packet(project: str) -> dict[str, Any]:
    return dict(pg.fetch_value("SELECT content FROM packets WHERE project_id = %s "
                               "ORDER BY created_at DESC LIMIT 1", (project,)))


def pending_inbox(founder: Founder) -> list[dict[str, Any]]:
    return founder.get(f"/api/inbox?project_id={founder.project}").get_json()["items"]


# --- 1. launch → packet → approvals → approving twice at once → one effect each -----------------

def test_launch_to_approvals_approved_twice_at_once_sends_one_deploy_and_one_email(
        worker, founder, fakes):
    # Given a launched project whose packet proposes an email and a deploy
    r = founder.post(f"/api/projects/{founder.project}/launch", {})
    assert r.status_code == 202, r.get_json()
    packet_job = wait_for(r.get_json()["job_id"], timeout=30)
    assert packet_job["status"] == "completed", packet_job["last_error"]
    inbox = founder.get(f"/api/inbox?project_id={founder.project}").get_json()["items"]
    by_type = {a["action_type"]: a for a in inbox}
    assert set(by_type) == {"email", "deploy_hook", "phase_advance"}, inbox
    assert sorted(packet_job["result"]["approval_ids"]) == sorted(a["id"] for a in inbox)
    inbox = [a for a in inbox if a["action_type"] != "phase_advance"]  # its own test above
    assert by_type["deploy_hook"]["action_args"]["url"] == fakes.hook
    assert by_type["email"]["action_args"]["to"] == CONTACT
    assert all(a["status"] == "pending" and a["execution_status"] == "idle" for a in inbox)

    # When each approval is approved twice at the same instant, with the version both saw
    calls = [a for a in inbox for _ in range(2)]
    responses = in_threads(len(calls), lambda i: founder.post(
        f"/api/inbox/{calls[i]['id']}/decision",
        {"decision": "approved", "version": calls[i]["version"]}))

    # Then per approval one decision won (200) and the other saw a stale version (409)
    for a in inbox:
        mine = [resp for call, resp in zip(calls, responses, strict=True) if call is a]
        assert sorted(resp.status_code for resp in mine) == [200, 409], \
            [resp.get_json() for resp in mine]
        won = next(resp.get_json() for resp in mine if resp.status_code == 200)
        lost = next(resp.get_json() for resp in mine if resp.status_code == 409)
        assert (won["status"], won["version"]) == ("approved", a["version"] + 1)
        assert won["execution_job_id"] is not None
        assert lost["error"]["code"] == "conflict"
    # And each has exactly one execution job, keyed approval:{id}, which completes
    executions = wait_all_done("approval.execute", 2)
    assert sorted((p, k, s) for p, k, s, _ in executions) == sorted(
        (founder.project, f"approval:{a['id']}", "completed") for a in inbox)
    for a in inbox:
        row = approval(a["id"])
        assert (row["status"], row["execution_status"]) == ("approved", "completed")
        assert str(row["execution_job_id"]) == next(
            j for _, k, _, j in executions if k == f"approval:{a['id']}")
    # And the providers received one deploy and one email, carrying the approval's key
    posts = fakes.http.posts("/deploy/site")
    assert [p.idempotency_key for p in posts] == [f"approval:{by_type['deploy_hook']['id']}"]
    assert recipients(fakes.smtp) == [CONTACT]
    assert fakes.smtp.messages[0].message["Message-ID"] == message_id(
        f"approval:{by_type['email']['id']}", SENDER)
    effects = tuples("SELECT action_type, status, approval_id FROM action_executions "
                     "WHERE project_id = %s ORDER BY action_type", (founder.project,))
    assert [(t, s, str(a)) for t, s, a in effects] == [
        ("deploy_hook", "succeeded", by_type["deploy_hook"]["id"]),
        ("email", "succeeded", by_type["email"]["id"])]

    # And a late decision with the old version changes nothing
    late = founder.post(f"/api/inbox/{by_type['email']['id']}/decision",
                        {"decision": "approved", "version": by_type["email"]["version"]})
    assert late.status_code == 409
    assert len(jobs_of("approval.execute")) == 2
    assert len(fakes.http.posts()) == 1 and len(fakes.smtp.messages) == 1


# --- 4. night shift: beat and the cron route on the same day ------------------------------------

@pytest.mark.parametrize("headers", [
    pytest.param({}, id="no X-Cron-Secret"),
    pytest.param({"X-Cron-Secret": ""}, id="empty secret"),
    pytest.param({"X-Cron-Secret": "not-the-secret"}, id="wrong secret"),
    pytest.param({"X-Cron-Secret": CRON_SECRET[:-1]}, id="a prefix of the secret"),
])
def test_the_cron_route_without_the_right_secret_is_401_and_enqueues_nothing(
        founder, headers):
    founder.new_project("nightly", night_shift=True)
    before = tuple_row("SELECT count(*) FROM agent_jobs")[0]

    r = founder.post("/api/nightshift/run", headers=headers)

    assert r.status_code == 401, r.get_json()
    assert r.get_json()["error"]["code"] == "unauthorized"
    assert tuple_row("SELECT count(*) FROM agent_jobs")[0] == before == 0


def test_the_cron_route_is_closed_while_no_secret_is_configured(founder, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_CRON_SECRET", "")
    get_settings.cache_clear()
    founder.new_project("nightly", night_shift=True)

    r = founder.post("/api/nightshift/run", headers={"X-Cron-Secret": ""})

    assert r.status_code == 401, r.get_json()
    assert "SWITCHYARD_CRON_SECRET" in r.get_json()["error"]["message"]  # off, and how to
    assert tuple_row("SELECT count(*) FROM agent_jobs")[0] == 0


def test_night_shift_from_beat_and_from_the_route_on_the_same_day_runs_once_per_project(
        worker, beat, founder):
    # Given two projects with night shift on and one with it off
    nightly = sorted([founder.new_project("night owl", night_shift=True),
                      founder.new_project("insomniac", night_shift=True)])
    founder.new_project("day only", night_shift=False)
    date = today()

    # When beat's night-shift message and the cron route fire at the same instant, then both
    # again
    def fire(i: int) -> dict[str, int] | None:
        if i % 2 == 0:
            return beat.fire("nightshift")
        r = founder.post("/api/nightshift/run", headers={"X-Cron-Secret": CRON_SECRET})
        assert r.status_code == 202, r.get_json()
        return r.get_json()["enqueued"]

    routed = [c for c in in_threads(2, fire) + in_threads(2, fire) if c is not None]
    created = routed + beat.wait(2)

    # Then exactly one job per night-shift project, keyed by project and date, and none for
    # the project without night shift
    assert date == today(), "the test straddled midnight UTC; run it again"
    assert sum(c["nightshift.cycle_project"] for c in created) == 2, created
    rows = wait_all_done("nightshift.cycle_project", 2)
    assert sorted((p, k) for p, k, _, _ in rows) == [
        (p, f"nightshift:{p}:{date}") for p in nightly]
    assert all(s == "completed" for _, _, s, _ in rows), rows
    # And the route's daily drips once each
    # (the drips tick hourly, each project due at its local hour: their keys are the hour's)
    [(_, digests, _, _)] = jobs_of("drip.process_digests")
    [(_, nudges, _, _)] = jobs_of("drip.process_nudges")
    assert digests.startswith(f"digests:{date}T") and nudges.startswith(f"nudges:{date}T")


# --- 6. the email outbox and the daily drips ------------------------------------------------------

def test_the_outbox_drained_by_beat_and_a_manual_run_at_once_sends_each_row_once(
        worker, beat, founder, fakes):
    # Given six due emails and a slow SMTP server, so two passes overlap
    fakes.smtp.delay = 0.2
    rows = [outbox.enqueue_email(founder.project, f"user{i}@example.test", f"Hello {i}",
                                 "Welcome aboard.", "test", f"welcome:{i}") for i in range(6)]

    # When beat's email.process_due and a manually enqueued one are enqueued at once
    def fire(i: int) -> Any:
        if i == 0:
            return beat.fire("email-process-due")
        return enqueue(EnqueueRequest(SYSTEM_PROJECT_ID, "email.process_due",
                                      {"slot": "manual"}, idempotency_key="drain:manual"))

    _, manual = in_threads(2, fire)
    assert beat.wait(1) == [{"email.process_due": 1}] and manual.created
    # and beat (or cron) fires again within the same minute
    [(_, key, _, _)] = [j for j in jobs_of("email.process_due") if j[1] != "drain:manual"]
    minute = datetime.strptime(key, "email:%Y-%m-%dT%H:%M").replace(tzinfo=UTC)
    assert schedules.enqueue_scheduled(["email.process_due"], minute.replace(second=59)) == {
        "email.process_due": 0}

    # Then both passes complete, and each row was claimed by one of them and sent once
    done = wait_all_done("email.process_due", 2, timeout=30)
    assert [s for _, _, s, _ in done] == ["completed", "completed"]
    results = [r[0] for r in tuples("SELECT result FROM agent_jobs "
                                    "WHERE job_type = 'email.process_due'")]
    assert sum(r["claimed"] for r in results) == 6, results
    assert recipients(fakes.smtp) == sorted(f"user{i}@example.test" for i in range(6))
    assert {m.message["Message-ID"] for m in fakes.smtp.messages} == {
        message_id(f"email:{row}", SENDER) for row in rows}
    assert [s for (s,) in tuples("SELECT status FROM email_jobs")] == ["sent"] * 6


def test_digests_and_nudges_queue_one_email_per_project_per_day(worker, beat, founder, fakes):
    # Given a project with a contact and an approval waiting two days (digest and nudge),
    # one with a contact and nothing waiting (digest only), one without a contact and one
    # whose contact never confirmed the address (none)
    quiet = founder.new_project("quiet", settings={"contact_email": "quiet@example.test",
                                                   CONFIRMED: "quiet@example.test"})
    founder.new_project("no contact")
    founder.new_project("unconfirmed", settings={"contact_email": "new@example.test",
                                                 CONFIRMED: "old@example.test"})
    waiting = create_approval(founder.project, None, NewApproval(
        "email", "Say hello", {"to": CONTACT, "subject": "hi", "body": "hello"}))
    pg.execute("UPDATE approvals SET created_at = now() - interval '2 days' WHERE id = %s",
               (waiting,))
    date = today()

    # When beat's messages, the cron route and a manual run for the same date all fire
    def fire(i: int) -> Any:
        if i == 0:
            return beat.fire("drip-digests"), beat.fire("drip-nudges")
        if i == 1:
            r = founder.post("/api/nightshift/run", headers={"X-Cron-Secret": CRON_SECRET})
            assert r.status_code == 202, r.get_json()
            return r.get_json()["enqueued"]
        kind = "digests" if i == 2 else "nudges"
        return enqueue(EnqueueRequest(SYSTEM_PROJECT_ID, f"drip.process_{kind}",
                                      {"slot": date}, idempotency_key=f"manual:{kind}"))

    in_threads(4, fire)
    beat.wait(2)
    wait_all_done("drip.process_digests", 2)
    wait_all_done("drip.process_nudges", 2)
    assert date == today(), "the test straddled midnight UTC; run it again"

    # Then the outbox holds one digest per project with a confirmed contact and one nudge
    queued = sorted((str(p), k, key) for p, k, key in tuples(
        "SELECT project_id, kind, idempotency_key FROM email_jobs"))
    assert queued == sorted([
        (founder.project, "digest", f"digest:{founder.project}:{date}"),
        (quiet, "digest", f"digest:{quiet}:{date}"),
        (founder.project, "nudge", f"nudge:{founder.project}:{date}")])
    # And draining it delivers exactly those three messages
    beat.fire("email-process-due")
    wait_until(lambda: tuple_row("SELECT count(*) FILTER (WHERE status = 'sent') = 3 "
                                 "FROM email_jobs")[0], timeout=20, what="3 emails sent")
    assert recipients(fakes.smtp) == sorted([CONTACT, CONTACT, "quiet@example.test"])
    subjects = sorted(m.message["Subject"] for m in fakes.smtp.messages)
    assert subjects == ["Tidewater: 1 action(s) need your approval",
                        "Tidewater: your daily digest", "quiet: your daily digest"]

    # And drips run again the same day under any other slot queue nothing more: the day,
    # not the slot, is the key (owners cannot enqueue drips at all: they are internal)
    for job_type in ("drip.process_digests", "drip.process_nudges"):
        r = founder.post(f"/api/projects/{founder.project}/jobs",
                         {"job_type": job_type, "payload": {"slot": "once-more"}})
        assert r.status_code == 422, r.get_json()
        again = enqueue(EnqueueRequest(SYSTEM_PROJECT_ID, job_type, {"slot": "once-more"}))
        assert wait_for(again.job_id)["status"] == "completed"
    assert tuple_row("SELECT count(*) FROM email_jobs")[0] == 3
