"""Models by role (issue 27): the operator's SWITCHYARD_LLM_MODEL_<ROLE> /
SWITCHYARD_LLM_PROVIDER_<ROLE> and a project's `llm_models` send each kind of call to its own
model, through a real worker, and the job's usage says which model each step called."""

# ruff: noqa: F811 - the fake_openai fixture is imported, then requested by name

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pydantic import BaseModel

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.engine.registry import JobType, register
from tasks.services.llm import get_client
from tasks.services.llm.flow import call_llm
from tasks.services.llm.types import LLMRequest
from tasks.settings import get_settings
from tests.integration.jobdb import new_job, tuples, wait_for
from tests.support.fake_openai import FakeOpenAI, fake_openai, settings_from  # noqa: F401


class Nothing(BaseModel):
    pass


PURPOSES = {"plan": "code.plan", "build": "code.fix", "chat": "chat", "other": "someone.else"}


def four_calls(ctx, _p: Nothing) -> dict:
    """One step per kind of call, each through the configured default client."""
    for step, purpose in PURPOSES.items():
        req = LLMRequest(purpose=purpose, system="", context={"user_message": step},
                         messages=[{"role": "user", "content": step}])
        ctx.step(step, lambda r=req: call_llm(get_client(), r, project_id=ctx.project_id,
                                               job_id=ctx.job_id,
                                               step_seq=ctx.current_step).model)
    return {}


register(JobType("test.four_calls", Nothing, four_calls, max_attempts=1))


@pytest.fixture
def roles(fake_openai: FakeOpenAI, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeOpenAI]:
    # The default: a self-hosted OpenAI-compatible server's model; planning asks a bigger
    # one there, building a faster one, and chat goes to the offline scripted provider
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with settings_from(monkeypatch, {
            "SWITCHYARD_LLM_PROVIDER": "openai", "OPENAI_BASE_URL": fake_openai.url,
            "SWITCHYARD_LLM_MODEL": "qwen-7b", "SWITCHYARD_LLM_MODEL_PLAN": "qwen-72b",
            "SWITCHYARD_LLM_MODEL_BUILD": "qwen-14b", "SWITCHYARD_LLM_PROVIDER_CHAT": "scripted",
            # what a project may pick besides the operator's own models
            "SWITCHYARD_LLM_PROJECT_MODELS": "openai/qwen-coder-32b"}):
        yield fake_openai


def test_each_role_gets_its_model_and_the_project_overrides_the_operator(worker, roles,
                                                                           project):
    # Given a project that builds with a model of its own choosing
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "roles")
    client, auth = create_app().test_client(), {"Authorization": f"Bearer {token}"}
    pid = client.post("/api/projects", headers=auth, json={"name": "Roles", "settings": {
        "llm_models": {"build": {"model": "qwen-coder-32b"}}}}).json["id"]

    # When a job makes one call of each kind
    job_id = new_job(pid, "test.four_calls", {})
    assert wait_for(job_id, timeout=30)["status"] == "completed"

    # Then each went to its role's model, the project's choice over the operator's
    assert [r.body["model"] for r in roles.received] == ["qwen-72b", "qwen-coder-32b",
                                                         "qwen-7b"]
    assert tuples("SELECT step_seq, provider, model FROM llm_usage WHERE job_id = %s "
                  "ORDER BY step_seq", (job_id,)) == [
        (1, "openai", "qwen-72b"), (2, "openai", "qwen-coder-32b"), (3, "scripted", "scripted-1"),
        (4, "openai", "qwen-7b")]
    # And the job's usage, what its page shows, names the model of each step
    usage = client.get(f"/api/jobs/{job_id}/llm-usage", headers=auth).json
    assert [(s["name"], s["models"]) for s in usage["steps"]] == [
        ("plan", ["openai/qwen-72b"]), ("build", ["openai/qwen-coder-32b"]),
        ("chat", ["scripted/scripted-1"]), ("other", ["openai/qwen-7b"])]


def test_a_project_picks_only_roles_that_exist_and_providers_the_operator_set_up(
        db, monkeypatch):
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setenv("SWITCHYARD_LLM_PROJECT_MODELS", "scripted/scripted-strong")
    get_settings.cache_clear()
    with session_scope(session_factory()) as s:
        _, token = create_token(s, "roles")
    client, auth = create_app().test_client(), {"Authorization": f"Bearer {token}"}
    pid = client.post("/api/projects", headers=auth, json={"name": "R"}).json["id"]
    for settings, words in [({"plann": {"model": "x"}}, "plann"),
                            ({"plan": {"provider": "gemini"}}, "llm_models.plan.provider"),
                            ({"plan": {"provider": "anthropic"}}, "ANTHROPIC_API_KEY"),
                            ({"plan": {"model": ""}}, "model"),
                            # a model the operator neither runs nor offers: its bill, its limits
                            ({"plan": {"model": "o1-pro"}}, "SWITCHYARD_LLM_PROJECT_MODELS")]:
        r = client.patch(f"/api/projects/{pid}", headers=auth,
                         json={"settings": {"llm_models": settings}})
        assert r.status_code == 422 and words in r.get_data(as_text=True), r.json
    ok = client.patch(f"/api/projects/{pid}", headers=auth, json={"settings": {
        "llm_models": {"plan": {"provider": "scripted", "model": "scripted-strong"}}}})
    assert ok.status_code == 200 and ok.json["settings"]["llm_models"] == {
        "plan": {"provider": "scripted", "model": "scripted-strong"}}
    cleared = client.patch(f"/api/projects/{pid}", headers=auth,
                           json={"settings": {"llm_models": {"plan": None}}})
    assert cleared.json["settings"]["llm_models"] == {}
    get_settings.cache_clear()
