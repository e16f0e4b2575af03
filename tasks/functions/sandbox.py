"""Run a function's JavaScript in QuickJS, in a fenced child process, with host tools.

`run(code, input, on_call, limits)` hands the code to a warm child (sandbox_pool) and
answers its tool calls with `on_call` until the child reports, then returns Returned,
Failed or Paused. The child is never reused. The parent is the real fence: it caps each
line the child writes, counts the calls, watches the child's CPU time (from /proc) and
the wall clock, and kills the child at the first breach; the child's own checks only
give the clearer message. Only JSON crosses, and only through this module.

`check_syntax(code)` compiles the code in a child the same way, without running it, after
refusing an import or require() (tasks.functions.imports) from the text alone.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any, Literal

from tasks.engine.errors import RetryableError
from tasks.functions import imports, shapes
from tasks.functions.sandbox_pool import Child, SandboxUnavailable, fences, get_pool

__all__ = ["Failed", "Limits", "OnCall", "Paused", "Returned", "SandboxUnavailable",
           "Suspended", "SyntaxProblem", "check_syntax", "run"]

# The tools prelude.js installs: the one list of their names (tasks.functions.tools sorts
# them by how they are performed).
TOOLS = frozenset({"llm", "openai.chat", "websearch", "keystore.get", "log", "tasks.run",
                   "memory.get", "memory.set", "db", "now", "random"})
LINE_SLACK = 64 << 10  # a protocol line is its JSON payload plus this much envelope
UNBALANCED = "SyntaxError: unbalanced braces: the code closes more blocks than it opens"
CHECK_LIMIT_SECONDS = 2.0  # compiling never takes this long; a child that does is killed
# Syntax checks at once per process (the web's saves): code written to break out of the
# wrapper runs while it is compiled, within the check's limits, and thirty hostile saves
# must not take the machine's cores from every other request. The rest wait their turn.
CHECKS_AT_ONCE = threading.BoundedSemaphore(2)
CHECK_WAIT_SECONDS = 10.0


class ChecksBusy(RetryableError):
    """Too many syntax checks are waiting in this process: try again in a moment."""

    http_status, code = 503, "checks_busy"

    def headers(self) -> dict[str, str]:
        return {"Retry-After": "2"}


@dataclass(frozen=True)
class Limits:
    memory_bytes: int = 64 << 20
    cpu_seconds: float = 2.0  # CPU time of the JS in one run
    wall_seconds: float = 10.0  # whole run, including time spent in tool calls answered by the host
    output_bytes: int = 1 << 20  # the JSON of the result, and of each tool call's args
    max_calls: int = 200  # tool calls in one run (Date.now and Math.random count)


@dataclass(frozen=True)
class SyntaxProblem:
    message: str
    line: int
    column: int
    # "import": code that imports or requires a module, which the sandbox cannot load; not
    # called a syntax error, so the author removes the import instead of hunting a brace.
    kind: Literal["syntax", "import"] = "syntax"

    @property
    def headline(self) -> str:
        """The sentence an author (a person or the model) reads, naming the line."""
        where = f"line {self.line}, column {self.column}: {self.message}"
        return f"syntax error at {where}" if self.kind == "syntax" else where


class Suspended(Exception):
    """Raised BY THE HOST's on_call to stop the run: the sandbox process is discarded and
    run() returns Paused(reason=args[0])."""


@dataclass(frozen=True)
class Returned:
    output: Any  # JSON value


@dataclass(frozen=True)
class Failed:
    # "error" (a JS exception: 'TypeError: ...' and its line in the user's code),
    # "timeout", "memory", "output_too_large", "too_many_calls", "syntax", "crashed"
    kind: str
    message: str
    line: int | None = None


@dataclass(frozen=True)
class Paused:
    reason: Any


# (tool, args JSON) -> result JSON; may raise Suspended; any other exception becomes a JS
# Error thrown at the call site (message only).
OnCall = Callable[[str, Any], Any]

Outcome = Returned | Failed | Paused


def check_syntax(code: str) -> SyntaxProblem | None:
    """None when the code compiles (either shape) and imports nothing; else the first
    problem, 1-based. Callers hold no database connection while this runs (it may take its
    whole limit)."""
    unavailable = imports.find_unavailable(code)
    if unavailable is not None:  # text alone says so: no child, no slot taken
        return SyntaxProblem(unavailable.message, unavailable.line, unavailable.column,
                             "import")
    if not CHECKS_AT_ONCE.acquire(timeout=CHECK_WAIT_SECONDS):
        raise ChecksBusy("too many functions are being checked at once on this server")
    try:
        return _check_syntax(code)
    finally:
        CHECKS_AT_ONCE.release()


# Parsing only, with V8 (node), before QuickJS sees the code: the Function constructor parses
# the body alone (spec-compliant, unlike QuickJS's, which concatenates), and vm.Script
# compiles a script without running it. A body that does not parse alone while the wrapped
# text does closes the wrapper's braces: refused without anything being evaluated.
PARSE_ONLY = r"""
const vm = require("vm");
const job = JSON.parse(require("fs").readFileSync(0, "utf8"));
const AsyncFunction = Object.getPrototypeOf(async function () {}).constructor;
let verdict = "ok";
try { new AsyncFunction("input", "tools", "supabase", job.body); } catch (e) {
  try { new vm.Script(job.text); verdict = "breakout"; } catch (e2) { verdict = "syntax"; }
}
process.stdout.write(verdict);
"""
PARSE_SECONDS = 10.0


def parse_only(wrapped: shapes.Wrapped) -> str | None:
    """"ok", "breakout" or "syntax" from V8, under the sandbox's fences; None without node
    (the QuickJS check then stands alone, bounded as it is)."""
    node = shutil.which("node")
    if node is None or not node.startswith("/usr/"):
        return None
    try:
        done = subprocess.run(
            [*fences().prefix, node, "--max-old-space-size=64", "-e", PARSE_ONLY],
            input=json.dumps({"body": wrapped.body, "text": wrapped.text}).encode(),
            capture_output=True, timeout=PARSE_SECONDS, check=False, env={}, cwd="/")
    except (OSError, subprocess.TimeoutExpired):
        return None
    verdict = done.stdout.decode(errors="replace")
    return verdict if verdict in ("ok", "breakout", "syntax") else None


def _check_syntax(code: str) -> SyntaxProblem | None:
    wrapped = shapes.wrap(code)
    if parse_only(wrapped) == "breakout":
        return SyntaxProblem(UNBALANCED, 1, 1)
    # Parsed alone (or not at all): evaluating the wrapper runs none of the code, and
    # QuickJS says where a syntax error is.
    child = get_pool().take()
    try:
        child.send(json.dumps({"op": "check", "code": wrapped.text}).encode())
        line = child.read_line(time.monotonic() + CHECK_LIMIT_SECONDS, 1 << 16)
        reply = json.loads(line) if line is not None else None
    except (TimeoutError, OverflowError, ValueError, OSError):
        reply = None
    finally:
        child.kill()
    if not isinstance(reply, dict) or reply.get("t") not in ("syntax", "syntax_ok"):
        return SyntaxProblem("the syntax check failed: the sandbox did not answer", 1, 1)
    if reply["t"] == "syntax_ok":
        return None
    user_line = shapes.user_line(_int(reply.get("line")), code, clamp=True) or 1
    return SyntaxProblem(str(reply.get("message"))[:500], user_line,
                         _int(reply.get("column")) or 1)


def run(code: str, input: Any, on_call: OnCall, limits: Limits = Limits()) -> Outcome:
    try:
        input_json = json.dumps(input, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return Failed("error", f"the input is not JSON: {exc}")
    wrapped = shapes.wrap(code)
    child = get_pool().take()
    try:
        return _drive(child, code, wrapped.text, input_json, on_call, limits)
    finally:
        child.kill()


def _drive(child: Child, code: str, text: str, input_json: str, on_call: OnCall,
           limits: Limits) -> Outcome:
    started = time.monotonic()
    deadline = started + limits.wall_seconds
    cpu_base = child.cpu_seconds()
    max_line = limits.output_bytes + LINE_SLACK
    calls = 0
    try:
        child.send(json.dumps({"op": "run", "code": text, "input": input_json,
                               "limits": asdict(limits)}).encode())
    except OSError:
        return _ended(child, "the sandbox process died before the run")
    while True:
        try:
            line = _next_line(child, deadline, cpu_base, limits, max_line)
        except TimeoutError as exc:
            child.kill()
            return Failed("timeout", str(exc))
        except OverflowError:
            child.kill()
            return Failed("output_too_large", f"the sandbox wrote more than {max_line} bytes "
                          "in one message")
        if line is None:
            return _ended(child, "the sandbox process ended without an answer")
        try:
            msg = json.loads(line)
        except (ValueError, RecursionError):  # RecursionError: JSON nested thousands deep
            child.kill()
            return Failed("crashed", "the sandbox sent something that is not JSON")
        if not isinstance(msg, dict):
            child.kill()
            return Failed("crashed", "the sandbox sent something that is not a message")
        kind = msg.get("t")
        if kind == "returned":
            return Returned(msg.get("output"))
        if kind == "failed":
            failure = str(msg.get("kind"))
            return Failed(failure, str(msg.get("message"))[:2000],
                          shapes.user_line(_int(msg.get("line")), code,
                                           clamp=failure == "syntax"))
        if kind != "call":
            child.kill()
            return Failed("crashed", f"the sandbox sent an unknown message {str(kind)[:50]!r}")
        calls += 1
        if calls > limits.max_calls:
            child.kill()
            return Failed("too_many_calls", f"more than {limits.max_calls} tool calls in one run")
        tool = msg.get("tool")
        answer = _answer(tool, msg.get("args"), on_call)
        if isinstance(answer, Paused):
            child.kill()
            return answer
        try:
            child.send(answer)
        except OSError:
            return _ended(child, "the sandbox process died during a tool call")


def _answer(tool: Any, args: Any, on_call: OnCall) -> bytes | Paused:
    """One tool call answered: b'o<JSON>' or b'e<message>' for the child, or Paused."""
    if not isinstance(tool, str) or tool not in TOOLS:
        return b"e" + f"unknown tool {str(tool)[:100]!r}".encode()
    try:
        result = on_call(tool, args)
    except Suspended as exc:
        return Paused(exc.args[0] if exc.args else None)
    except Exception as exc:
        return b"e" + _one_line(str(exc) or type(exc).__name__).encode("utf-8", "replace")
    try:
        return b"o" + json.dumps(result, allow_nan=False).encode()
    except (TypeError, ValueError) as exc:
        return b"e" + _one_line(f"the {tool} tool answered something that is not JSON: "
                                f"{exc}").encode()


def _next_line(child: Child, deadline: float, cpu_base: float | None, limits: Limits,
               max_line: int) -> bytes | None:
    """The child's next line, waiting no longer than its wall and CPU budgets allow."""
    while True:
        now = time.monotonic()
        if now >= deadline:
            raise TimeoutError(f"the run took longer than {limits.wall_seconds:g} s")
        # The child cannot burn its CPU budget faster than the wall clock runs: wait that
        # long before looking at its CPU time again (no busy polling).
        step = deadline - now
        used = 0.0
        if cpu_base is not None:
            cpu = child.cpu_seconds()
            if cpu is not None:
                used = cpu - cpu_base
                if used >= limits.cpu_seconds:
                    raise TimeoutError(f"the JS used more than {limits.cpu_seconds:g} s of CPU")
                step = min(step, limits.cpu_seconds - used + 0.01)
        try:
            return child.read_line(now + step, max_line)
        except TimeoutError:
            continue


def _ended(child: Child, what: str) -> Failed:
    """The child is gone without a verdict: say how it ended."""
    child.kill()
    code = child.proc.returncode
    # bubblewrap reports its command's death by a signal as 128 + the signal
    if code in (-signal.SIGXCPU, -signal.SIGKILL, 128 + signal.SIGXCPU, 128 + signal.SIGKILL):
        # RLIMIT_CPU: SIGXCPU at the soft limit, SIGKILL at the hard one.
        return Failed("timeout", "the JS used more than its CPU time")
    return Failed("crashed", f"{what} (exit {code})")


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _one_line(text: str) -> str:
    return text.replace("\r", " ").replace("\n", " ")[:4000]
