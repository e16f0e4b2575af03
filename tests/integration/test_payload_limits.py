"""Bounded payloads: event data is kept whole up to SWITCHYARD_EVENT_DATA_MAX_BYTES (64 KiB),
a step's output up to SWITCHYARD_STEP_OUTPUT_MAX_BYTES (1 MiB); a job's view cuts large
outputs to a preview with a link; the event hub reads a bounded number of bytes at once."""

from __future__ import annotations

import json

from flask.testing import FlaskClient

from app.streams import hub
from app.web import create_app
from tasks.engine import pg
from tests.integration.jobdb import new_job, steps, tuples, wait_for
from tests.integration.test_code_routes import _auth

MiB = 1024 * 1024


def test_a_huge_log_line_is_stored_as_a_preview_that_says_what_was_cut(worker, project):
    job_id = new_job(project, "test.big", {"log_bytes": 5 * MiB})
    assert wait_for(job_id)["status"] == "completed"
    [(data, size)] = tuples("SELECT data, octet_length(data::text) FROM agent_job_events "
                            "WHERE job_id = %s AND type = 'log'", (job_id,))
    assert size < 8 * 1024
    assert data["truncated"] is True and data["limit"] == 64 * 1024
    assert data["bytes"] > 5 * MiB and data["preview"].startswith('{"blob": "xxx')


def test_a_step_output_over_the_limit_fails_the_job_saying_so(worker, project):
    job_id = new_job(project, "test.big", {"output_bytes": 2 * MiB})
    row = wait_for(job_id)
    assert row["status"] == "failed"
    assert "SWITCHYARD_STEP_OUTPUT_MAX_BYTES" in row["last_error"]
    [step] = steps(job_id)
    assert (step["status"], step["output"]) == ("failed", None)


def test_a_jobs_view_cuts_large_outputs_and_links_the_whole(worker, db):
    client: FlaskClient = create_app().test_client()
    auth = _auth("alice")
    pid = client.post("/api/projects", headers=auth, json={"name": "P"}).json["id"]
    job_id = new_job(pid, "test.big", {"output_bytes": 100_000})
    assert wait_for(job_id)["status"] == "completed"
    view = client.get(f"/api/jobs/{job_id}", headers=auth)
    assert view.status_code == 200
    [step] = view.json["steps"]
    assert step["output"] is None and step["output_truncated"] is True
    assert len(step["output_preview"]) == 4096 and step["output_bytes"] > 100_000
    whole = client.get(step["output_url"], headers=auth)
    assert whole.status_code == 200 and whole.json["output"] == {"blob": "y" * 100_000}
    assert whole.json["output_truncated"] is False
    assert len(view.get_data()) < 16 * 1024
    # A stranger reads nothing of it, and a step that does not exist is a 404
    assert client.get(step["output_url"], headers=_auth("mallory")).status_code == 404
    assert client.get(f"/api/jobs/{job_id}/steps/7", headers=auth).status_code == 404
    assert client.get(f"/api/jobs/{job_id}/steps/x", headers=auth).status_code == 404


def test_the_hub_reads_a_bounded_number_of_bytes_at_once(project):
    # Given a burst of a hundred 60 KiB events after the cursor
    cursor = int(pg.fetch_value("SELECT COALESCE(max(id), 0) AS c FROM agent_job_events"))
    job_id = new_job(project, publish=False)
    pg.execute("INSERT INTO agent_job_events (job_id, project_id, type, message, data) "
               "SELECT %s, %s, 'log', 'big', jsonb_build_object('blob', repeat('z', 61440)) "
               "FROM generate_series(1, 100)", (job_id, project))
    # When the hub reads what follows its cursor
    rows = pg.fetch_dicts(hub.POLL, (cursor, hub.BATCH_BYTES))
    # Then it took about BATCH_BYTES' worth, not all six megabytes
    size = sum(len(json.dumps(r["data"])) for r in rows)
    assert 0 < len(rows) < 100
    assert hub.BATCH_BYTES - 64 * 1024 <= size <= hub.BATCH_BYTES + 64 * 1024


def test_a_function_logging_megabytes_leaves_its_data_in_an_artifact(worker, project):
    # Issue 23: "one function run wrote 18 MB of events". The claim check: the event carries
    # a reference and a preview, the artifact the whole, readable by the project's owner.
    from tasks.functions import store
    from tasks.services import artifact_store

    # (a call's arguments are recorded with its step, so at most 1 MiB each)
    store.save(project, "chatty", "const big = 'z'.repeat(900 * 1024);"
               "tools.log('one big line', {big}); tools.log('and a small one', {n: 1});"
               "return 1;")
    job_id = new_job(project, "function.run", {"name": "chatty"})
    row = wait_for(job_id, timeout=60)
    assert row["status"] == "completed", row["last_error"]
    logs = tuples("SELECT message, data, octet_length(data::text) FROM agent_job_events "
                  "WHERE job_id = %s AND type = 'log' ORDER BY id", (job_id,))
    [(big_message, big, big_size), (small_message, small, _)] = logs
    assert big_message == "one big line" and big_size < 8 * 1024
    assert big["bytes"] > 900 * 1024 and big["preview"].startswith('{"big": "zzz')
    assert (small_message, small) == ("and a small one", {"source": "function", "data": {"n": 1}})
    [(kind, name, size, key)] = tuples("SELECT kind, name, size, storage_key FROM artifacts "
                                       "WHERE id = %s AND job_id = %s",
                                       (big["artifact_id"], job_id))
    assert (kind, size) == ("log", big["bytes"]) and name.endswith(".json")
    whole = json.loads(b"".join(artifact_store.store().open(key)))
    assert whole == {"big": "z" * 900 * 1024}
