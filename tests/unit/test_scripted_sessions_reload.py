"""A recorded coding session written beside a running worker is found at once."""

import json

from tasks.coding import scripted_sessions


def test_a_session_added_while_the_worker_runs_is_found(tmp_path, monkeypatch):
    monkeypatch.setenv("SWITCHYARD_SCRIPTED_SESSIONS", str(tmp_path))
    assert scripted_sessions.find("start the hello package") is None
    (tmp_path / "hello.json").write_text(json.dumps(
        {"name": "hello", "match": ["hello package"], "turns": {}}))
    found = scripted_sessions.find("Start the hello package with a greet function")
    assert found is not None and found.name == "hello"
    (tmp_path / "hello.json").unlink()
    assert scripted_sessions.find("start the hello package") is None
