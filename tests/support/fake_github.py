"""A local GitHub REST API (the pull request subset the coding agent uses), in a thread.

Real response shapes (`html_url`, `number`, `head.ref`, `head.repo.clone_url`, `base.ref`),
GitHub's 422 for a second pull request of the same head, a bearer token required on every
call, every request recorded, and scripted answers (a 502, a 429) for the next call of a
route, like tests/support/fake_providers.py.
"""

from __future__ import annotations

import json
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from flask import Flask, Response, request
from werkzeug.serving import make_server

TOKEN = "ghp_fakeGithubToken_0123456789abcdef"


@dataclass(frozen=True)
class Seen:
    method: str
    path: str
    query: dict[str, str]
    authorization: str | None
    body: Any


@dataclass
class FakeGithub:
    url: str = ""
    token: str = TOKEN
    seen: list[Seen] = field(default_factory=list)
    pulls: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # repo -> pulls
    default_branches: dict[str, str] = field(default_factory=dict)
    _scripts: dict[tuple[str, str], list[tuple[int, Any, dict[str, str]]]] = field(
        default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def script(self, method: str, path: str, status: int, body: Any = None,
               headers: dict[str, str] | None = None) -> None:
        """Answer the next `method path` like this, once."""
        self._scripts.setdefault((method, path), []).append((status, body, headers or {}))

    def add_pull(self, repo: str, *, head: str, base: str = "main", title: str = "A change",
                 head_repo: str | None = None, state: str = "open") -> dict[str, Any]:
        """A pull request that exists already (someone opened it)."""
        with self._lock:
            return self._new_pull(repo, head, base, title, "", head_repo or repo, state)

    def requests(self, method: str | None = None, path: str | None = None) -> list[Seen]:
        with self._lock:
            return [s for s in self.seen if (method is None or s.method == method)
                    and (path is None or s.path == path)]

    def _new_pull(self, repo: str, head: str, base: str, title: str, body: str,
                  head_repo: str, state: str = "open") -> dict[str, Any]:
        pulls = self.pulls.setdefault(repo, [])
        number = sum(len(p) for p in self.pulls.values()) + 1
        pull = {
            "url": f"{self.url}/repos/{repo}/pulls/{number}",
            "html_url": f"https://github.com/{repo}/pull/{number}",
            "id": 1000 + number, "number": number, "state": state, "title": title,
            "body": body, "draft": False, "merged": False,
            "user": {"login": "switchyard-agent", "type": "Bot"},
            "head": {"label": f"{head_repo.split('/')[0]}:{head}", "ref": head,
                     "sha": "0" * 40, "repo": _repo_doc(head_repo)},
            "base": {"label": f"{repo.split('/')[0]}:{base}", "ref": base, "sha": "1" * 40,
                     "repo": _repo_doc(repo)},
        }
        pulls.append(pull)
        return pull


def _repo_doc(full_name: str) -> dict[str, Any]:
    owner, name = full_name.split("/")
    return {"id": zlib.crc32(full_name.encode()), "name": name, "full_name": full_name,
            "owner": {"login": owner}, "private": False,
            "html_url": f"https://github.com/{full_name}",
            "clone_url": f"https://github.com/{full_name}.git", "default_branch": "main"}


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(json.dumps(body) if body is not None else "", status=status,
                    headers=headers or {}, mimetype="application/json")


def build_app(fake: FakeGithub) -> Flask:
    app = Flask("fake_github")

    @app.before_request
    def record_and_check() -> Response | None:
        seen = Seen(request.method, request.path, dict(request.args),
                    request.headers.get("Authorization"), request.get_json(silent=True))
        with fake._lock:
            fake.seen.append(seen)
            queue = fake._scripts.get((request.method, request.path))
            scripted = queue.pop(0) if queue else None
        if scripted is not None:
            return _json(*scripted)
        if seen.authorization != f"Bearer {fake.token}":
            return _json(401, {"message": "Bad credentials",
                               "documentation_url": "https://docs.github.com/rest"})
        return None

    @app.get("/repos/<owner>/<name>")
    def get_repo(owner: str, name: str) -> Response:
        doc = _repo_doc(f"{owner}/{name}")
        doc["default_branch"] = fake.default_branches.get(f"{owner}/{name}", "main")
        return _json(200, doc)

    @app.get("/repos/<owner>/<name>/pulls")
    def list_pulls(owner: str, name: str) -> Response:
        head, state = request.args.get("head"), request.args.get("state", "open")
        with fake._lock:
            found = [p for p in fake.pulls.get(f"{owner}/{name}", [])
                     if (state == "all" or p["state"] == state)
                     and (head is None or p["head"]["label"] == head)]
        return _json(200, found)

    @app.get("/repos/<owner>/<name>/pulls/<int:number>")
    def get_pull(owner: str, name: str, number: int) -> Response:
        with fake._lock:
            for pull in fake.pulls.get(f"{owner}/{name}", []):
                if pull["number"] == number:
                    return _json(200, pull)
        return _json(404, {"message": "Not Found"})

    @app.post("/repos/<owner>/<name>/pulls")
    def create_pull(owner: str, name: str) -> Response:
        repo, doc = f"{owner}/{name}", request.get_json(silent=True) or {}
        missing = [k for k in ("title", "head", "base") if not doc.get(k)]
        if missing:
            return _json(422, {"message": "Validation Failed", "errors": [
                {"resource": "PullRequest", "field": k, "code": "missing_field"}
                for k in missing]})
        with fake._lock:
            label = f"{owner}:{doc['head']}"
            if any(p["head"]["label"] == label and p["base"]["ref"] == doc["base"]
                   and p["state"] == "open" for p in fake.pulls.get(repo, [])):
                return _json(422, {"message": "Validation Failed", "errors": [
                    {"resource": "PullRequest", "code": "custom",
                     "message": f"A pull request already exists for {label}."}],
                    "documentation_url": "https://docs.github.com/rest/pulls/pulls"})
            pull = fake._new_pull(repo, doc["head"], doc["base"], doc["title"],
                                  doc.get("body") or "", repo)
            pull["draft"] = bool(doc.get("draft", False))
        return _json(201, pull)

    return app


@pytest.fixture
def fake_github() -> Iterator[FakeGithub]:
    fake = FakeGithub()
    server = make_server("127.0.0.1", 0, build_app(fake), threaded=True)
    fake.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="fake-github", daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        server.shutdown()
        thread.join(5)
