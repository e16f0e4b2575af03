"""Running `git` for the coding agent: argv lists, a scrubbed environment, time and output caps.

Nothing from the machine's or the user's git configuration applies (no system or global
file, no credential helper, no hooks, no fsmonitor), and a token reaches git only through
its process environment (GIT_CONFIG_*), which other users cannot read, never through argv,
a URL or a file; any output that is raised is scrubbed of it first.
"""

from __future__ import annotations

import base64
import contextlib
import os
import signal
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from tasks.engine.errors import PermanentError, RetryableError

AUTHOR_NAME = "Switchyard Agent"
AUTHOR_EMAIL = "agent@switchyard.local"
LOCAL_TIMEOUT = 300.0  # seconds: a local command (add, diff, apply) on a large tree
NETWORK_TIMEOUT = 900.0  # seconds: a clone, fetch or push of a large repository
STDERR_CAP = 64 * 1024  # bytes of stderr kept
MESSAGE_CAP = 1500  # characters of git's own words in an error
# Passed through when the operator set them: where TLS roots are.
PASSED_ENV = ("PATH", "SSL_CERT_FILE", "SSL_CERT_DIR", "GIT_SSL_CAINFO", "GIT_SSL_CAPATH")

# Every call: nothing runs that the repository (or a sandboxed command that wrote to it)
# could name, nothing asks a person, nothing goes anywhere we did not check.
HARDENED = (
    "safe.directory=*",  # the sandbox user may own the work tree
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    # A nested repository a command planted (or a submodule's checkout) is never entered.
    "diff.ignoreSubmodules=all",
    "submodule.recurse=false",
    "status.submoduleSummary=false",
    "core.pager=cat",
    "core.askPass=",
    "credential.helper=",
    "protocol.allow=never",
    "protocol.https.allow=always",
    "protocol.http.allow=always",
    "protocol.file.allow=always",
    "http.followRedirects=false",
    "http.lowSpeedLimit=1000",  # bytes/s; below it for lowSpeedTime seconds: give up
    "http.lowSpeedTime=60",
    "gc.auto=0",
    "maintenance.auto=false",
    "commit.gpgSign=false",
    "core.quotePath=false",
    "advice.detachedHead=false",
    "init.defaultBranch=main",
)


class GitFailed(PermanentError):
    """A git command failed; `stderr` is git's own words, scrubbed of any secret."""

    def __init__(self, message: str, stderr: str = "") -> None:
        super().__init__(message)
        self.stderr = stderr


class GitFailedRetryable(RetryableError):
    """A network git command failed for a passing reason (unreachable, 5xx, a timeout)."""


@dataclass(frozen=True)
class Auth:
    """What one network command sends: a token as an Authorization header, and the address
    a checked host name must connect to (libcurl's resolve list, so no second DNS lookup)."""
    token: str | None = None
    pin: str | None = None  # "host:port:address"

    def config(self) -> list[tuple[str, str]]:
        out = []
        if self.token:
            basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
            out.append(("http.extraHeader", f"Authorization: Basic {basic}"))
        if self.pin:
            out.append(("http.curloptResolve", self.pin))
        return out

    def secrets(self) -> list[str]:
        if not self.token:
            return []
        basic = base64.b64encode(f"x-access-token:{self.token}".encode()).decode()
        return [self.token, basic]


@dataclass
class Result:
    code: int
    out: bytes
    err: str
    truncated: bool = False


def scrub(text: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            text = text.replace(secret, "***")
    return text


def environment(auth: Auth | None = None, index: Path | None = None,
                extra: dict[str, str] | None = None) -> dict[str, str]:
    env = {k: os.environ[k] for k in PASSED_ENV if k in os.environ}
    env.update({
        "HOME": "/nonexistent", "XDG_CONFIG_HOME": "/nonexistent", "LC_ALL": "C",
        "GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_AUTHOR_NAME": AUTHOR_NAME, "GIT_AUTHOR_EMAIL": AUTHOR_EMAIL,
        "GIT_COMMITTER_NAME": AUTHOR_NAME, "GIT_COMMITTER_EMAIL": AUTHOR_EMAIL,
    })
    pairs = auth.config() if auth else []
    env["GIT_CONFIG_COUNT"] = str(len(pairs))
    for i, (key, value) in enumerate(pairs):
        env[f"GIT_CONFIG_KEY_{i}"], env[f"GIT_CONFIG_VALUE_{i}"] = key, value
    if index is not None:
        env["GIT_INDEX_FILE"] = str(index)
    return {**env, **(extra or {})}


def argv(args: Sequence[str], git_dir: Path | None, work_tree: Path | None) -> list[str]:
    out = ["git"]
    for item in HARDENED:
        out += ["-c", item]
    if git_dir is not None:
        out.append(f"--git-dir={git_dir}")
    if work_tree is not None:
        out.append(f"--work-tree={work_tree}")
    return out + list(args)


def run(args: Sequence[str], *, git_dir: Path | None = None, work_tree: Path | None = None,
        cwd: Path | None = None, auth: Auth | None = None, index: Path | None = None,
        stdin: bytes | None = None, timeout: float = LOCAL_TIMEOUT,
        cap: int | None = None, env: dict[str, str] | None = None) -> Result:
    """Run git; its exit code, stdout (at most `cap` bytes: past it the process is killed
    and `truncated` set) and scrubbed stderr. A timeout kills its whole process group."""
    out, err = bytearray(), bytearray()
    over = threading.Event()
    with subprocess.Popen(
            argv(args, git_dir, work_tree), cwd=cwd or work_tree or git_dir or "/",
            env=environment(auth, index, env),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True) as proc:

        def pump(stream: IO[bytes], sink: bytearray, limit: int | None, stop: bool) -> None:
            for chunk in iter(lambda: stream.read(65536), b""):
                if limit is None or len(sink) < limit:
                    sink += chunk
                if stop and limit is not None and len(sink) > limit:
                    over.set()
                    _kill(proc)
                    return

        def feed(stream: IO[bytes], data: bytes) -> None:
            with contextlib.suppress(BrokenPipeError, ValueError), stream:
                stream.write(data)

        assert proc.stdout is not None and proc.stderr is not None
        threads = [threading.Thread(target=pump, args=(proc.stdout, out, cap, True)),
                   threading.Thread(target=pump, args=(proc.stderr, err, STDERR_CAP, False))]
        if stdin is not None:
            assert proc.stdin is not None
            threads.append(threading.Thread(target=feed, args=(proc.stdin, stdin)))
        for thread in threads:
            thread.daemon = True
            thread.start()
        try:
            code = proc.wait(timeout)
        except subprocess.TimeoutExpired:
            _kill(proc)
            proc.wait()
            raise GitFailedRetryable(f"git {args[0]} took longer than {timeout:.0f} s") \
                from None
        finally:
            for thread in threads:
                thread.join(5)
    text = scrub(err.decode("utf-8", "replace"), auth.secrets() if auth else [])
    return Result(code, bytes(out[:cap] if cap is not None else out), text, over.is_set())


def _kill(proc: subprocess.Popen) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)


def check(result: Result, what: str) -> bytes:
    """stdout of a local command that must succeed."""
    if result.code != 0:
        raise GitFailed(f"{what} failed: {said(result)}", result.err)
    return result.out


def said(result: Result) -> str:
    lines = [line.strip() for line in result.err.splitlines()
             if line.strip() and not line.startswith(("hint:", "warning: redirecting"))]
    text = " / ".join(lines) or f"exit status {result.code}"
    return text if len(text) <= MESSAGE_CAP else text[:MESSAGE_CAP - 1] + "…"


# git's words for a failure that will not pass by retrying: the repository, the branch or the
# credentials are wrong. Anything else from a network command (refused, reset, 5xx, 429,
# a timeout) is worth another attempt.
PERMANENT_SIGNS = (
    "not found", "does not appear to be a git repository", "authentication failed",
    "could not read username", "could not read password", "returned error: 401",
    "returned error: 403", "returned error: 404", "permission denied",
    "remote branch", "[rejected]", "[remote rejected]", "non-fast-forward",
    "fetch first", "invalid", "not allowed", "does not exist", "protected branch",
    "redirect",
)


def check_network(result: Result, what: str) -> bytes:
    if result.code == 0:
        return result.out
    message = f"{what} failed: {said(result)}"
    if "could not read username" in result.err.lower():
        message += " (the server asked for credentials: the token is missing or refused)"
    if any(sign in result.err.lower() for sign in PERMANENT_SIGNS):
        raise GitFailed(message, result.err)
    raise GitFailedRetryable(message)
