"""Which approval each action of a packet became (pure: rows are given)."""

from __future__ import annotations

import uuid

from app.api.packets import match_approvals
from tasks.services.approvals import args_hash

JOB = uuid.uuid4()
DEPLOY = {"type": "deploy_hook", "title": "Deploy", "args": {"url": "https://h.example/d"}}
EMAIL = {"type": "email", "title": "Mail", "args": {"to": "a@b.c", "subject": "s", "body": "b"}}


def approval(action: dict, source: uuid.UUID | None = JOB) -> dict:
    return {"id": uuid.uuid4(), "source_job_id": source,
            "args_hash": args_hash(action["type"], action["args"])}


def test_the_jobs_result_names_the_approvals_in_order_even_one_reused_from_elsewhere():
    reused, own = approval(DEPLOY, source=uuid.uuid4()), approval(EMAIL)
    named = [str(reused["id"]), str(own["id"])]
    assert match_approvals(JOB, [DEPLOY, EMAIL], named, [own, reused]) == [reused, own]


def test_before_the_job_has_a_result_its_own_approvals_match_by_exact_arguments():
    own = approval(EMAIL)
    other_job = approval(DEPLOY, source=uuid.uuid4())
    assert match_approvals(JOB, [DEPLOY, EMAIL], None, [other_job, own]) == [None, own]


def test_a_result_that_does_not_fit_the_actions_is_not_trusted():
    own = approval(DEPLOY)
    assert match_approvals(JOB, [DEPLOY], ["a", "b"], [own]) == [own]
