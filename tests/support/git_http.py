"""A smart-HTTP git server in a thread: `git http-backend` as CGI behind a small WSGI app that
requires one Authorization header (GitHub's `x-access-token` Basic form) and records every
header it is sent, so tests can prove what git sent and what it did not."""

from __future__ import annotations

import base64
import os
import subprocess
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from werkzeug.serving import make_server
from werkzeug.wrappers import Request


def basic(token: str) -> str:
    return "Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


@dataclass
class GitHttp:
    root: Path  # holds the bare repositories served, by name
    token: str
    url: str = ""
    authorizations: list[str | None] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        request = Request(environ)
        self.authorizations.append(request.headers.get("Authorization"))
        self.paths.append(request.path)
        if request.headers.get("Authorization") != basic(self.token):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="git"'),
                                                ("Content-Type", "text/plain")])
            return [b"credentials required\n"]
        body = request.get_data()
        env = {"PATH": os.environ["PATH"], "HOME": "/nonexistent",
               "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
               "GIT_PROJECT_ROOT": str(self.root), "GIT_HTTP_EXPORT_ALL": "1",
               "PATH_INFO": request.path, "REQUEST_METHOD": request.method,
               "QUERY_STRING": environ.get("QUERY_STRING", ""),
               "CONTENT_TYPE": request.headers.get("Content-Type", ""),
               "CONTENT_LENGTH": str(len(body)), "REMOTE_USER": "agent",
               "REMOTE_ADDR": request.remote_addr or "127.0.0.1"}
        if request.headers.get("Content-Encoding"):
            env["HTTP_CONTENT_ENCODING"] = request.headers["Content-Encoding"]
        if request.headers.get("Git-Protocol"):
            env["GIT_PROTOCOL"] = request.headers["Git-Protocol"]
        out = subprocess.run(["git", "http-backend"], input=body, env=env,
                             capture_output=True, check=False).stdout
        head, _, payload = out.partition(b"\r\n\r\n")
        if not _:
            head, _, payload = out.partition(b"\n\n")
        status, headers = "200 OK", []
        for line in head.decode("latin-1").splitlines():
            name, _, value = line.partition(":")
            if name.lower() == "status":
                status = value.strip()
            elif name:
                headers.append((name, value.strip()))
        start_response(status, headers)
        return [payload]


@contextmanager
def git_http_server(root: Path, token: str) -> Iterator[GitHttp]:
    app = GitHttp(root, token)
    server = make_server("127.0.0.1", 0, app, threaded=True)
    app.url = f"http://127.0.0.1:{server.server_port}"
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05},
                              name="git-http", daemon=True)
    thread.start()
    try:
        yield app
    finally:
        server.shutdown()
        thread.join(5)
