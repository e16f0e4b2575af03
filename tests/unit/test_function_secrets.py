"""A secret a function read leaves no trace in what the run writes: as itself, inside keys
and nested values, or URL-encoded (a search query that carried it comes back that way)."""

from __future__ import annotations

from tasks.functions.record import SCRUBBED, Secrets


def test_a_secret_is_scrubbed_raw_nested_and_url_encoded() -> None:
    secrets = Secrets()
    secrets.add("s3cr et/+&=")
    secrets.add(None)  # a secret that was not set adds nothing
    assert secrets.text("key s3cr et/+&= end") == f"key {SCRUBBED} end"
    assert secrets.text("q=s3cr%20et%2F%2B%26%3D") == f"q={SCRUBBED}"
    assert secrets.text("q=s3cr+et%2F%2B%26%3D") == f"q={SCRUBBED}"
    assert secrets.scrub({"s3cr et/+&=": ["x s3cr et/+&=", 1, None]}) == {
        SCRUBBED: [f"x {SCRUBBED}", 1, None]}
    assert Secrets().scrub({"a": "b"}) == {"a": "b"}  # nothing read: nothing touched
