"""One function.run: the sandbox's passes over the code until it returns, fails or must wait.

Each stop of a pass (tasks.functions.host) is handled here, outside the sandbox: a real-time
call is performed as its step, the engine's own exception is raised (among them ctx.wait's
suspension while a nested function runs), a broken rule fails the job. Then the code runs
again from the top.
"""

from __future__ import annotations

from typing import Any

from tasks.engine.context import JobContext
from tasks.engine.errors import PermanentError
from tasks.functions import sandbox
from tasks.functions.host import FAIL, PERFORM, STOP, Host, Running

# Every pass but the last answers at least one more call; the sandbox caps calls a pass.
MAX_PASSES = sandbox.Limits().max_calls + 2


def run_function(ctx: JobContext, running: Running, code: str, input: Any) -> Any:
    """The function's output (scrubbed of secrets), or PermanentError with its error."""
    host = Host(ctx, running)
    for _ in range(MAX_PASSES):
        host.new_pass()
        outcome = sandbox.run(code, input, host.on_call)
        if isinstance(outcome, sandbox.Returned):
            return host.secrets.scrub(outcome.output)
        if isinstance(outcome, sandbox.Failed):
            raise PermanentError(host.secrets.text(failure_message(running, outcome)))
        _resume(host, outcome.reason)
    raise PermanentError(f"function {running.name!r} needed more than {MAX_PASSES} passes")


def _resume(host: Host, reason: Any) -> None:
    """Do what stopped the pass asked for, so the next pass can go further."""
    if reason == PERFORM:
        host.perform_pending()
    elif reason == STOP:
        assert host.stopped is not None
        raise host.stopped
    elif reason == FAIL:
        raise PermanentError(host.failure or "the function broke a rule of its run")
    else:
        raise PermanentError(f"the sandbox paused for an unknown reason: {reason!r}")


def failure_message(running: Running, failed: sandbox.Failed) -> str:
    where = f" at line {failed.line}" if failed.line is not None else ""
    what = {"error": "JavaScript error", "syntax": "syntax error"}.get(
        failed.kind, failed.kind.replace("_", " "))
    return f"function {running.name!r} v{running.version}: {what}{where}: {failed.message}"
