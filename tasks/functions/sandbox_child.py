"""The sandbox's child program: one QuickJS context, one function run, then exit.

Started by sandbox_pool as `python -I -c <this file's text>` behind the process fences
(network namespace, unprivileged uid, empty environment, empty working directory). It
imports only the standard library and quickjs, and speaks JSON lines on stdin/stdout:

    parent -> child   {"prelude": "<js>"}                      once, at start (warm-up)
    child  -> parent  {"t": "ready"}                           waiting for work
    parent -> child   {"op": "run", "code", "input", "limits"}  or {"op": "check", "code"}
    child  -> parent  {"t": "call", "tool": str, "args": <JSON>}
    parent -> child   "o<result JSON>" | "e<error message>"    one line per call
    child  -> parent  {"t": "returned", "output": <JSON>}
                      {"t": "failed", "kind", "message", "line"}
                      {"t": "syntax", "message", "line", "column"} | {"t": "syntax_ok"}

Lines numbers sent back are those of the wrapped code; the parent maps them to the user's.
Nothing the parent does not trust leaves this process except those lines: the parent caps
their size and re-checks everything, so a child that misbehaves can only fail its own run.
"""

import contextlib
import json
import os
import re
import resource
import sys

# Under bubblewrap the interpreter is the system's and quickjs-ng a read-only copy whose
# directory comes as the one argument (-I ignores PYTHONPATH).
sys.path[:0] = sys.argv[1:2]

import quickjs  # noqa: E402 - after the path it may come from

OUT = sys.stdout.buffer
IN = sys.stdin.buffer
# QuickJS-ng: "at f (<input>:LINE:COLUMN)" or, for a syntax error, "at <input>:LINE:COLUMN".
FRAME_LINE = re.compile(r"\(<input>:(\d+)(?::(\d+))?\)|at <input>:(\d+)(?::(\d+))?")
# The prelude is evaluated far down so its stack frames never look like the user's code.
PRELUDE_LINE_BASE = 100_000
# Compiling takes milliseconds; code written to run while it is compiled gets little more.
CHECK_LIMITS = {"memory_bytes": 64 << 20, "cpu_seconds": 0.5, "output_bytes": 1 << 16}


def send(obj):
    OUT.write(json.dumps(obj).encode() + b"\n")
    OUT.flush()


def send_raw(head, raw_json, tail):
    # raw_json comes from JSON.stringify: no raw newline can be in it.
    OUT.write(head.encode() + raw_json.encode("utf-8", "surrogatepass") + tail.encode() + b"\n")
    OUT.flush()


def finish(obj):
    send(obj)
    os._exit(0)


def fail(kind, message, line=None):
    finish({"t": "failed", "kind": kind, "message": message[:2000], "line": line})


def read_line():
    line = IN.readline()
    if not line:  # the parent is gone: nobody will read what we would say
        os._exit(0)
    return line


def user_line(stack):
    return user_position(stack)[0]


def user_position(stack):
    """(line, column) of the first frame in the user's code; (None, None) when none is."""
    for m in FRAME_LINE.finditer(stack or ""):
        n = int(m.group(1) or m.group(3))
        if n < PRELUDE_LINE_BASE:
            column = m.group(2) or m.group(4)
            return n, int(column) if column else None
    return None, None


def classify(message):
    if message.startswith("InternalError: out of memory"):
        return "memory"
    return "error"


class Run:
    """The state of the one run this process does."""

    def __init__(self):
        self.limits = {"output_bytes": 1 << 20, "max_calls": 200}
        self.calls = 0
        self.checking = False
        self.outcome = None

    def bridge(self, tool, args):
        """JS -> host, synchronous: returns 'o<JSON>' or 'e<message>'; never raises."""
        try:
            if self.checking:
                return "ethe syntax check runs no tools"
            if not isinstance(tool, str) or not isinstance(args, str):
                return "ebad tool call: the tool name and arguments must be strings"
            size = len(args.encode("utf-8", "surrogatepass"))
            if size > self.limits["output_bytes"]:
                fail("output_too_large", f"the arguments of a {tool[:100]} call are {size} "
                     f"bytes, over the limit of {self.limits['output_bytes']}")
            self.calls += 1
            if self.calls > self.limits["max_calls"]:
                fail("too_many_calls", f"more than {self.limits['max_calls']} tool calls "
                     "in one run")
            send_raw('{"t":"call","tool":' + json.dumps(tool[:200]) + ',"args":', args, "}")
            answer = read_line().decode("utf-8", "surrogatepass").rstrip("\n")
            return answer if answer[:1] in ("o", "e") else "ebad answer from the host"
        except MemoryError:
            fail("memory", "out of memory")
        except BaseException as exc:  # a callable must never let an exception escape
            return "e" + f"bridge failure: {type(exc).__name__}"

    def done(self, kind, payload, stack):
        """Called once by the prelude when the function's promise settles; never raises."""
        with contextlib.suppress(BaseException):
            self.outcome = (kind, payload, stack)
        return None


def apply_run_limits(limits):
    mem = int(limits["memory_bytes"])
    cpu = float(limits["cpu_seconds"])
    used = resource.getrusage(resource.RUSAGE_SELF)
    soft = int(used.ru_utime + used.ru_stime + cpu) + 2  # the parent's watchdog is exact
    resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    # The address space as it is now (Python, quickjs, the prelude) plus the JS heap and
    # room for the JSON text of results and calls.
    with open("/proc/self/statm") as f:
        vsize = int(f.read().split()[0]) * resource.getpagesize()
    room = vsize + mem + 4 * int(limits["output_bytes"]) + (64 << 20)
    resource.setrlimit(resource.RLIMIT_AS, (room, room))


def lock_down():
    """What this process may do from now on: no files, no children, no core dumps."""
    for rlimit, value in ((resource.RLIMIT_NOFILE, 8), (resource.RLIMIT_FSIZE, 0),
                          (resource.RLIMIT_CORE, 0), (resource.RLIMIT_NPROC, 0)):
        # RLIMIT_NPROC 0 may be refused (a root child): the uid drop covers that case.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(rlimit, (value, value))
    with contextlib.suppress(OSError):
        os.closerange(3, 1024)


UNBALANCED = "SyntaxError: unbalanced braces: the code closes more blocks than it opens"
SOURCE_OF = None  # set at warm-up: a JS function giving a function's source text


def compile_code(ctx, code):
    """The wrapped code as a JS function, or a SyntaxError's (message, line, column)."""
    try:
        fn = ctx.eval(code)
    except quickjs.JSException as exc:
        text = str(exc)
        message = text.splitlines()[0] if text else "SyntaxError"
        if not message.startswith("SyntaxError"):
            return None, (message, None, None)
        line, column = user_position(text)
        # The engine names the column; the search by prefixes is for one that does not (it
        # evaluates the code again and again).
        return None, (message, line, column if column else column_of(ctx, code, message, line))
    # The function's source must be the whole text: code that closes the wrapper's braces
    # early ("}); ...; (async function(){") would otherwise change what runs.
    if not isinstance(fn, quickjs.Object) or "(" + SOURCE_OF(fn) + ")" != code:
        return None, (UNBALANCED, None, None)
    return fn, None


def column_of(ctx, code, message, line):
    """QuickJS reports no column: find the shortest prefix of the line that fails alike."""
    if not line:
        return None
    lines = code.split("\n")
    if line > len(lines):
        return None
    start = sum(len(x) + 1 for x in lines[: line - 1])
    text = lines[line - 1]

    def same(cut):
        try:
            ctx.eval(code[: start + cut])
        except quickjs.JSException as exc:
            s = str(exc)
            return s.splitlines()[0] == message and user_line(s) == line
        except Exception:
            return False
        return False

    lo, hi = 0, len(text)
    if not same(hi):
        return None
    while lo < hi:
        mid = (lo + hi) // 2
        if same(mid):
            hi = mid
        else:
            lo = mid + 1
    quoted = re.search(r"'(.+)'$", message)
    end = lo  # the column (1-based) of the last character the error needed
    if quoted and text[:end].endswith(quoted.group(1)):
        return end - len(quoted.group(1)) + 1
    return max(end, 1)


def main():
    state = Run()
    hello = json.loads(read_line())
    ctx = quickjs.Context()
    ctx.add_callable("__sy_bridge", state.bridge)
    ctx.add_callable("__sy_done", state.done)
    start = ctx.eval("\n" * PRELUDE_LINE_BASE + hello["prelude"])
    global SOURCE_OF
    SOURCE_OF = ctx.eval("((apply, ts) => (f) => typeof f === 'function' ? apply(ts, f, []) : '')"
                         "(Reflect.apply, Function.prototype.toString)")
    lock_down()
    send({"t": "ready"})

    job = json.loads(read_line())
    if job["op"] == "check":
        # Compiling runs nothing, but code written to close the wrapper's braces runs while
        # it is evaluated: with no tools, and within these limits.
        state.checking = True
        apply_run_limits(CHECK_LIMITS)
        ctx.set_memory_limit(CHECK_LIMITS["memory_bytes"])
        # The engine's own interrupt: a loop run while compiling ends in half a second, not
        # at the process's whole-second CPU limit or the parent's wall clock.
        ctx.set_time_limit(CHECK_LIMITS["cpu_seconds"])
        _fn, problem = compile_code(ctx, job["code"])
        if problem is None:
            finish({"t": "syntax_ok"})
        message, line, column = problem
        if message.startswith("InternalError: interrupted"):  # it ran: it left the wrapper
            message = UNBALANCED
        finish({"t": "syntax", "message": message, "line": line, "column": column})

    limits = job["limits"]
    state.limits = limits
    apply_run_limits(limits)
    ctx.set_memory_limit(int(limits["memory_bytes"]))
    fn, problem = compile_code(ctx, job["code"])
    if problem is not None:
        message, line, _column = problem
        fail("syntax", message, line)
    try:
        start(fn, job["input"], int(limits["output_bytes"]))
        while ctx.execute_pending_job():
            pass
    except quickjs.JSException as exc:
        text = str(exc)
        message = text.splitlines()[0] if text else "InternalError"
        fail(classify(message), message, user_line(text))
    if state.outcome is None:
        fail("error", "the function never finished: it awaits a promise that nothing will "
             "ever settle")
    kind, payload, stack = state.outcome
    if kind == "returned":
        size = len(payload.encode("utf-8", "surrogatepass"))
        if size > limits["output_bytes"]:
            fail("output_too_large", f"the result is {size} bytes of JSON, over the limit of "
                 f"{limits['output_bytes']}")
        send_raw('{"t":"returned","output":', payload, "}")
        os._exit(0)
    fail(classify(payload) if kind == "error" else kind, payload, user_line(stack))


if __name__ == "__main__":
    try:
        main()
    except MemoryError:
        try:
            fail("memory", "out of memory")
        except BaseException:
            os._exit(3)
    except BaseException as exc:  # report, then exit: the parent decides
        try:
            fail("crashed", f"the sandbox failed: {type(exc).__name__}: {exc}"[:500])
        except BaseException:
            os._exit(4)
