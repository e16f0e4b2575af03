"""research.generate_report and browser.check_page as jobs, through the API, on a real
worker: the files and screenshots land as artifacts, the results and memory follow."""

from __future__ import annotations

import io
from collections.abc import Iterator

import pytest
from flask.testing import FlaskClient
from pptx import Presentation
from pypdf import PdfReader

from app.web import create_app
from tasks.engine import pg, system_parts
from tests.integration.jobdb import tuples, wait_for
from tests.integration.test_api_contract import Caller, _caller
from tests.support.landing_pages import Landing, serving


@pytest.fixture
def alice(db: None, worker: object) -> Caller:
    client: FlaskClient = create_app().test_client()
    return _caller(client, "alice")


def artifacts_of(caller: Caller, job_id: str) -> list[dict]:
    response = caller.get(f"/api/jobs/{job_id}/artifacts")
    assert response.status_code == 200, response.get_json()
    return response.get_json()["items"]


def memory(project: str) -> dict[str, str]:
    return dict(tuples("SELECT key, content FROM agent_memory WHERE project_id = %s",
                       (project,)))


@pytest.mark.parametrize("fmt", ["pptx", "pdf"])
def test_a_report_job_leaves_its_file_as_an_artifact_and_its_findings_in_memory(
        alice: Caller, fmt: str) -> None:
    job_id = alice.job(job_type="research.generate_report",
                       payload={"topic": "Tide-aware scheduling", "format": fmt,
                                "max_slides": 6})
    job = wait_for(job_id, timeout=60)
    assert job["status"] == "completed", job["last_error"]
    files = {a["kind"]: a for a in artifacts_of(alice, job_id)}
    assert set(files) == ({"report", "preview"} if fmt == "pdf" else {"report"})
    artifact = files["report"]
    assert artifact["id"] == job["result"]["artifact_id"]
    data = alice.get(artifact["url"]).get_data()
    assert len(data) == artifact["size"]
    if fmt == "pptx":
        deck = Presentation(io.BytesIO(data))
        assert len(deck.slides) == job["result"]["slides"] <= 6
        assert deck.slides[0].shapes.title.text == "Tide-aware scheduling"
        assert any(sh.has_chart for s in deck.slides for sh in s.shapes)
    else:
        reader = PdfReader(io.BytesIO(data))
        assert len(reader.pages) == job["result"]["pages"]
        assert "Tide-aware scheduling" in reader.pages[0].extract_text()
    assert job["result"]["findings"] and "Evidence so far" in job["result"]["findings"]
    assert "Evidence so far" in memory(alice.project)["report: Tide-aware scheduling"]


@pytest.fixture
def landing() -> Iterator[str]:
    if not system_parts.CHROMIUM.exists():
        pytest.skip("apt-get install chromium")
    with serving(Landing) as base:
        yield base + "/"


def test_a_page_check_job_stores_its_screenshots_and_remembers_the_verdict(
        alice: Caller, landing: str) -> None:
    job_id = alice.job(job_type="browser.check_page", payload={"url": landing})
    job = wait_for(job_id, timeout=90)
    assert job["status"] == "completed", job["last_error"]
    result = job["result"]
    assert result["final_url"] == landing and result["status"] == 200
    assert all(c["ok"] for c in result["checks"].values()), result["checks"]
    shots = {a["name"]: a for a in artifacts_of(alice, job_id)}
    assert set(shots) == {"screenshot.png", "mobile_responsive.png"}
    assert result["checks"]["screenshot"]["artifact_id"] == shots["screenshot.png"]["id"]
    assert alice.get(shots["screenshot.png"]["url"]).get_data().startswith(b"\x89PNG")
    assert memory(alice.project)[f"page check: {landing}"].endswith("passes all checks")


def test_a_page_check_of_an_internal_address_fails_saying_why(alice: Caller) -> None:
    job_id = alice.job(job_type="browser.check_page",
                       payload={"url": "http://169.254.169.254/latest/meta-data/",
                                "checks": ["meta_tags"]})
    job = wait_for(job_id, timeout=60)
    assert job["status"] == "failed" and "egress refused" in job["last_error"]
    assert "link-local" in job["last_error"]


def test_a_report_job_retried_after_its_file_was_written_stores_it_once(
        alice: Caller, monkeypatch: pytest.MonkeyPatch) -> None:
    from tasks.engine.errors import RetryableError
    from tasks.startup import report as reports

    real, calls = reports.write_memory, []

    def flaky(*args: object, **kwargs: object) -> None:  # the step after the artifact
        calls.append(1)
        if len(calls) == 1:
            raise RetryableError("the database blinked", delay=0.2)
        real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(reports, "write_memory", flaky)
    job_id = alice.job(job_type="research.generate_report",
                       payload={"topic": "Retries", "format": "pdf"})
    job = wait_for(job_id, timeout=60)
    assert (job["status"], job["attempts"]) == ("completed", 2), job["last_error"]
    assert len(artifacts_of(alice, job_id)) == 2  # the report and its preview, once each
    assert pg.fetch_value("SELECT count(*) FROM artifacts WHERE job_id = %s", (job_id,)) == 2
    assert pg.fetch_value("SELECT count(*) FROM agent_job_events WHERE job_id = %s "
                          "AND type = 'artifact'", (job_id,)) == 2
