"""The S3 artifact store against a real S3-speaking HTTP server (moto's), not an in-process mock:
bytes in and out, written once, a missing key told apart from an unreachable store, and a job's
artifact downloaded through the web from the bucket."""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterator

import boto3
import pytest
from moto.server import ThreadedMotoServer

from app.http.db import session_factory
from app.http.tokens import create_token
from app.web import create_app
from models.db import session_scope
from tasks.services import artifact_store
from tasks.services.artifact_store import ArtifactMissing, S3Store, StoreUnavailable, storage_key
from tasks.settings import get_settings
from tests.integration.jobdb import new_job, wait_for

BUCKET = "switchyard-artifacts"


@pytest.fixture(scope="module")
def s3_endpoint() -> Iterator[str]:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def s3(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[S3Store]:
    """Settings pointing at a fresh bucket; credentials through boto3's usual AWS_* chain."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("SWITCHYARD_ARTIFACTS_S3_BUCKET", BUCKET)
    monkeypatch.setenv("SWITCHYARD_ARTIFACTS_S3_ENDPOINT_URL", s3_endpoint)
    monkeypatch.setenv("SWITCHYARD_ARTIFACTS_S3_REGION", "us-east-1")
    monkeypatch.setenv("SWITCHYARD_ARTIFACTS_S3_PREFIX", "tenant-files/")
    get_settings.cache_clear()
    client = _client(s3_endpoint)
    client.create_bucket(Bucket=BUCKET)
    store = artifact_store.store()
    assert isinstance(store, S3Store)
    yield store
    for obj in client.list_objects_v2(Bucket=BUCKET).get("Contents", []):
        client.delete_object(Bucket=BUCKET, Key=obj["Key"])
    client.delete_bucket(Bucket=BUCKET)
    monkeypatch.undo()
    get_settings.cache_clear()


def _client(endpoint: str):
    return boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1",
                        aws_access_key_id="testing", aws_secret_access_key="testing")


def _keys(endpoint: str) -> list[str]:
    return [o["Key"] for o in _client(endpoint).list_objects_v2(Bucket=BUCKET)
            .get("Contents", [])]


def test_bytes_go_in_once_and_come_back_whole(s3: S3Store, s3_endpoint: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    data = bytes(range(256)) * 1000  # several chunks
    key = storage_key(uuid.uuid4(), hashlib.sha256(data).hexdigest())
    writes: list[str] = []
    real_put = s3.client.put_object
    monkeypatch.setattr(s3.client, "put_object", lambda **kw: writes.append(kw["Key"])
                        or real_put(**kw))

    s3.put(key, data, "application/octet-stream")
    s3.put(key, data, "application/octet-stream")

    assert writes == [f"tenant-files/{key}"], "the second put found the object and wrote none"
    assert _keys(s3_endpoint) == [f"tenant-files/{key}"]
    head = _client(s3_endpoint).head_object(Bucket=BUCKET, Key=f"tenant-files/{key}")
    assert head["ContentType"] == "application/octet-stream"
    assert b"".join(s3.open(key)) == data


def test_a_missing_key_and_an_unreachable_store_are_told_apart(s3: S3Store) -> None:
    key = storage_key(uuid.uuid4(), "0" * 64)
    with pytest.raises(ArtifactMissing):
        s3.open(key)
    elsewhere = S3Store(get_settings())
    elsewhere.bucket = "no-such-bucket"
    with pytest.raises(StoreUnavailable):
        elsewhere.put(key, b"x", "text/plain")
    with pytest.raises(StoreUnavailable):  # a bucket gone is the operator's problem, not a 404
        elsewhere.open(key)


def test_a_key_that_is_not_a_storage_key_is_refused_before_any_request(s3: S3Store) -> None:
    for key in ("../other-tenant/x", f"{uuid.uuid4()}/00/{'0' * 63}/.."):
        with pytest.raises(ValueError):
            s3.open(key)


def test_a_jobs_artifact_is_stored_in_the_bucket_and_streamed_through_the_web(
        worker, owner_and_project, s3: S3Store, s3_endpoint: str) -> None:
    owner, project = owner_and_project
    text = "a report that lives in S3 " * 500
    job_id = new_job(project, "test.artifact_writer", {
        "files": [{"name": "s3.txt", "text": text}], "fail_first_attempts": 1})
    row = wait_for(job_id)
    assert (row["status"], row["attempts"]) == ("completed", 2)
    digest = hashlib.sha256(text.encode()).hexdigest()
    assert _keys(s3_endpoint) == [f"tenant-files/{project}/{digest[:2]}/{digest}"]

    with session_scope(session_factory()) as session:
        _, token = create_token(session, f"owner-{owner[:8]}")
    client = create_app().test_client()
    [artifact_id] = row["result"]["artifact_ids"]
    response = client.get(f"/api/artifacts/{artifact_id}",
                          headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 200
    assert response.headers["Content-Disposition"] == "attachment; filename=s3.txt"
    assert hashlib.sha256(response.data).hexdigest() == digest
