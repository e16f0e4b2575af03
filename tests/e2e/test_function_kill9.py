"""A worker killed with SIGKILL in the middle of a function: the run is reclaimed and
completes elsewhere without repeating a recorded call (its inserts happen once)."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from tasks.engine.enqueue import EnqueueRequest, enqueue
from tasks.functions import store
from tests.e2e import procs as p
from tests.integration.jobdb import tuples
from tests.support.fake_anthropic import FakeAnthropic, fake_anthropic  # noqa: F401

pytestmark = pytest.mark.e2e

CODE = """
await supabase.from("function_data").insert({collection: "first", doc: {}});
await supabase.from("function_data").insert({collection: "second", doc: {}});
const said = await tools.llm("take your time");
await supabase.from("function_data").insert({collection: "third", doc: {said}});
return said;
"""


def test_kill9_mid_function_resumes_without_repeating_a_recorded_call(
        procs: p.Procs, project: str, fake_anthropic: FakeAnthropic) -> None:  # noqa: F811
    # Given worker A running a function, stopped inside its model call (held by the test)
    gate = threading.Event()

    def answer(body: dict[str, Any]) -> list[dict[str, Any]]:
        gate.wait(60)
        return [{"type": "text", "text": "slow answer"}]

    fake_anthropic.script = answer
    env = {"SWITCHYARD_LLM_PROVIDER": "anthropic", "ANTHROPIC_BASE_URL": fake_anthropic.url,
           "ANTHROPIC_API_KEY": "test-key", "SWITCHYARD_LLM_MODEL": "claude-test-1"}
    store.save(project, "slow", CODE)
    a = procs.worker("a", pool="solo", env=env)
    job_id = enqueue(EnqueueRequest(project_id=project, job_type="function.run",
                                    payload={"name": "slow"})).job_id
    procs.wait(lambda: fake_anthropic.count == 1, 30, "the model call in flight")
    # When A is killed with the two inserts recorded and the model call unanswered
    a.kill9()
    assert p.status(job_id) == "running"
    names = dict(tuples("SELECT name, status FROM job_steps WHERE job_id = %s", (job_id,)))
    assert names["call:0:db"] == names["call:1:db"] == "completed"
    gate.set()
    b = procs.worker("b", pool="solo", env=env)
    procs.beat("beat")
    # Then the run completes on B
    procs.wait(lambda: p.status(job_id) in ("completed", "failed"), 60, "the run finished")
    final = p.job(job_id)
    assert final["status"] == "completed", final["last_error"]
    assert final["result"] == {"output": "slow answer"}
    assert final["locked_by"].endswith(f":{b.pid}")
    # And every insert happened once; only the unrecorded model call was made again
    rows = tuples("SELECT collection, count(*) FROM function_data WHERE project_id = %s "
                  "GROUP BY 1 ORDER BY 1", (project,))
    assert rows == [("first", 1), ("second", 1), ("third", 1)]
    assert fake_anthropic.count == 2
    started = p.started_counts(job_id)
    by_name = dict(tuples("SELECT name, seq FROM job_steps WHERE job_id = %s", (job_id,)))
    assert started[by_name["call:0:db"]] == started[by_name["call:1:db"]] == 1, started
