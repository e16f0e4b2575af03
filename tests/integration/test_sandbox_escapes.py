"""The JS sandbox against escape and abuse attempts, through the real pool of child processes.

Each attempt must end as a clear Failed (or a harmless Returned), and the next run from the
same pool must still be healthy. Limits are small where a limit is what is tested, so the
whole file stays fast; no assertion depends on how fast the machine is.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tasks.engine.errors import PermanentError
from tasks.functions import sandbox
from tasks.functions.sandbox import Failed, Limits, Paused, Returned, Suspended, SyntaxProblem
from tasks.functions.sandbox_pool import Child, fences, get_pool
from tasks.settings import get_settings

SMALL = Limits(memory_bytes=16 << 20, cpu_seconds=0.5, wall_seconds=20.0,
               output_bytes=64 << 10, max_calls=20)
STANDARD_GLOBALS = {
    "Object", "Function", "Error", "EvalError", "RangeError", "ReferenceError", "SyntaxError",
    "TypeError", "URIError", "InternalError", "AggregateError", "Array", "parseInt",
    "parseFloat", "isNaN", "isFinite", "decodeURI", "decodeURIComponent", "encodeURI",
    "encodeURIComponent", "escape", "unescape", "Infinity", "NaN", "undefined", "Number",
    "Boolean", "String", "Math", "Reflect", "Symbol", "eval", "globalThis", "Date", "RegExp",
    "JSON", "Proxy", "Map", "Set", "WeakMap", "WeakSet", "ArrayBuffer", "SharedArrayBuffer",
    "Uint8ClampedArray", "Int8Array", "Uint8Array", "Int16Array", "Uint16Array", "Int32Array",
    "Uint32Array", "BigInt64Array", "BigUint64Array", "Float32Array", "Float64Array",
    "DataView", "Atomics", "Promise", "BigInt",
    # ES2022-2025, in QuickJS-ng (issue 25: the built-ins models use)
    "SuppressedError", "Iterator", "queueMicrotask", "DisposableStack", "AsyncDisposableStack",
    "Float16Array", "WeakRef", "FinalizationRegistry", "DOMException", "btoa", "atob",
    "console",  # the prelude's: each line a recorded log call
}


class Host:
    """A recording on_call: answers the clock and randomness, logs, and a few failures."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def __call__(self, tool: str, args: Any) -> Any:
        self.calls.append((tool, args))
        if tool == "now":
            return 1_700_000_000_000
        if tool == "random":
            return 0.25
        if tool == "keystore.get":
            raise LookupError(f"no secret named {args['name']}")
        if tool == "tasks.run":
            raise Suspended({"waiting_for": args["name"]})
        if tool == "db":
            return {"data": [{"id": 1}], "error": None}
        return None


def run(code: str, limits: Limits = SMALL, host: Host | None = None) -> Any:
    return sandbox.run(code, {"n": 2}, host or Host(), limits)


def assert_healthy() -> None:
    """A normal run from the same pool right after: the abuse left nothing behind."""
    assert run("return input.n + 40", Limits()) == Returned(42)


def failed(kind: str, *words: str) -> Callable[[Any], None]:
    def check(outcome: Any) -> None:
        assert isinstance(outcome, Failed), outcome
        assert outcome.kind == kind, outcome
        for word in words:
            assert word in outcome.message, outcome

    return check


def returned(value: Any) -> Callable[[Any], None]:
    def check(outcome: Any) -> None:
        assert outcome == Returned(value)

    return check


PROBE = ("const g = constructor.constructor('return this')(); "
         "return ['process', 'require', 'std', 'os', 'fetch', 'XMLHttpRequest', 'WebAssembly', "
         "'setTimeout', 'setInterval', '__sy_bridge', '__sy_done', '__date_clock', '__call', "
         "'Deno', 'Bun', 'module', 'exports', 'importScripts']"
         ".filter((n) => typeof g[n] !== 'undefined')")

# (id, code, check, why)
ATTEMPTS: list[tuple[str, str, Callable[[Any], None], str]] = [
    ("infinite_loop", "for (;;) {}", failed("timeout"), "CPU budget"),
    ("loop_inside_a_promise", "await new Promise(() => { while (true) {} })",
     failed("timeout"), "CPU budget, async"),
    ("loop_after_await", "await tools.log('x'); while (true) {}", failed("timeout"),
     "CPU budget after a host call"),
    ("array_growth", "const a = []; while (true) a.push(new Array(1e5).fill(1));",
     failed("memory", "out of memory"), "QuickJS heap limit"),
    ("string_repeat", "return 'x'.repeat(1e9);", failed("memory"), "QuickJS heap limit"),
    ("deep_recursion", "function f(n) { return f(n + 1) + 1 } return f(0);",
     failed("error", "RangeError: Maximum call stack size exceeded"), "stack limit"),
    ("catastrophic_regex", "return /(a+)+$/.test('a'.repeat(40) + '!');", failed("timeout"),
     "the regex engine is not interruptible: the process is"),
    ("global_probe", PROBE, returned([]), "no host object reachable from JS"),
    ("globals_are_the_standard_ones", "return Object.getOwnPropertyNames(globalThis)",
     lambda o: (isinstance(o, Returned) and set(o.output) <= STANDARD_GLOBALS)
     or pytest.fail(str(o)), "nothing but the language's own globals"),
    ("require", "return require('fs').readFileSync('/etc/passwd', 'utf8')",
     failed("error", "ReferenceError", "require"), "no module system"),
    ("dynamic_import", "return await import('os')", failed("error", "could not load module"),
     "no module loader"),
    ("dynamic_import_std", "const std = await import('std'); return std.getenv('HOME')",
     failed("error", "could not load module"), "the wheel has no std/os modules"),
    ("fetch", "return await fetch('http://127.0.0.1:5432/')",
     failed("error", "ReferenceError", "fetch"), "no network API"),
    ("xhr", "return new XMLHttpRequest()", failed("error", "ReferenceError"),
     "no network API"),
    ("set_timeout", "setTimeout(() => 1, 10); return 1", failed("error", "setTimeout"),
     "no timers"),
    ("set_interval", "setInterval(() => 1, 10); return 1", failed("error", "setInterval"),
     "no timers"),
    ("environment", "return typeof process === 'undefined' ? null : process.env",
     returned(None), "no process object, no environment"),
    ("eval_is_harmless", "return eval('input.n * 21')", returned(42), "eval stays inside"),
    ("function_constructor", "return Function('return 40 + 2')()", returned(42),
     "Function stays inside"),
    ("constructor_walk", "return (async () => {}).constructor('return 1')"
     ".constructor.name", returned("AsyncFunction"), "constructors lead nowhere"),
    ("webassembly", "return typeof WebAssembly", returned("undefined"), "no WebAssembly"),
    ("atomics_wait", "return Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0)",
     failed("error", "cannot block"), "no blocking the thread"),
    ("throw_string", "throw 'oops'", failed("error", "oops"), "non-Error thrown"),
    ("throw_object", "throw {code: 7}", failed("error", '{"code":7}'), "non-Error thrown"),
    ("throw_null", "throw null", failed("error", "null"), "non-Error thrown"),
    ("return_undefined", "let x = 1;", failed("error", "undefined"), "no result"),
    ("return_function", "return () => 1", failed("error", "a function"), "not JSON"),
    ("return_cyclic", "const a = {}; a.self = a; return a", failed("error", "circular"),
     "not JSON"),
    ("return_bigint", "return 10n", failed("error", "BigInt"), "not JSON"),
    ("modern_builtins", "return [[1, 2, 3].at(-1), Object.hasOwn({a: 1}, 'a'), "
     "[3, 1, 2].toSorted(), 'x'.replaceAll('x', 'y'), [1, [2]].flat()]",
     returned([3, True, [1, 2, 3], "y", [1, 2]]), "ES2023 built-ins (issue 25)"),
    ("no_clock_but_the_host", "return typeof performance", returned("undefined"),
     "performance.now() would be a clock outside the record"),
    ("unhandled_rejection", "Promise.reject(new Error('ignored')); return 1", returned(1),
     "a stray rejection does not change the result"),
    ("never_resolves", "await new Promise(() => {})", failed("error", "never finished"),
     "nothing left to run: a clear failure, not a hang"),
    ("too_many_calls", "for (let i = 0; i < 1000; i++) await tools.log('x')",
     failed("too_many_calls"), "call budget"),
    ("clock_spam", "let t = 0; for (let i = 0; i < 1000; i++) t += Date.now(); return t",
     failed("too_many_calls"), "the clock is a recorded call"),
    ("giant_tool_args", "await tools.log('x'.repeat(1e6))", failed("output_too_large", "log"),
     "call argument cap"),
    ("giant_output", "return 'x'.repeat(1e6)", failed("output_too_large"), "result cap"),
    ("giant_output_array", "return new Array(20000).fill('0123456789')",
     failed("output_too_large"), "result cap on JSON size"),
    ("cyclic_tool_args", "const c = {}; c.c = c; await tools.log('m', c)",
     failed("error", "not JSON"), "garbage to the bridge is refused in JS"),
    ("bigint_tool_args", "await tools.websearch(10n)", failed("error", "not JSON"),
     "garbage to the bridge is refused in JS"),
    ("function_tool_args", "return await tools.log(() => 1, {f() {}})", returned(None),
     "functions vanish in JSON, as everywhere"),
    ("syntax_error", "let a = 1;\nlet b = a +* 2;", failed("syntax", "SyntaxError"),
     "syntax errors are reported"),
    ("wrapper_breakout", "}}); globalThis.pwned = 1; (async function () { {",
     failed("syntax"), "the code cannot close the wrapper it runs in"),
    ("freeze_everything", "Object.freeze(Object.prototype); Object.freeze(Array.prototype);"
     " return 1", returned(1), "a frozen world dies with its process"),
]


@pytest.mark.parametrize(("code", "check"), [(c, k) for _, c, k, _ in ATTEMPTS],
                         ids=[a[0] for a in ATTEMPTS])
def test_each_abuse_is_refused_and_the_pool_stays_healthy(code: str, check: Any) -> None:
    check(run(code))
    assert_healthy()


def test_a_50_mb_string_result_is_output_too_large_with_the_default_limits() -> None:
    outcome = run("return 'x'.repeat(50e6)", Limits())
    assert isinstance(outcome, Failed) and outcome.kind == "output_too_large", outcome
    assert_healthy()


def test_prototype_pollution_does_not_reach_the_next_run() -> None:
    assert run("Object.prototype.polluted = 'yes'; Array.prototype.map = null;"
               " JSON.stringify = () => 'x'; globalThis.leftover = 1; return 1") == Returned(1)
    assert run("return [({}).polluted ?? null, typeof [].map, typeof leftover,"
               " JSON.stringify({a: 1})]") == Returned([None, "function", "undefined", '{"a":1}'])


def test_a_runtime_error_points_at_the_users_line_in_both_shapes() -> None:
    script = "const a = 1;\nconst b = null;\n\nreturn b.field;"
    assert run(script) == Failed("error", "TypeError: cannot read property 'field' of null", 4)
    module = ("// a comment\nexport async function runTask(input, tools) {\n"
              "  const x = input.n;\n  return helper(x);\n}\n"
              "function helper(x) {\n  return x.y.z;\n}\n")
    outcome = run(module)
    assert isinstance(outcome, Failed) and outcome.kind == "error", outcome
    assert outcome.line == 7, outcome
    thrown = run("await tools.log('a');\n\nthrow new RangeError('mine');")
    assert thrown == Failed("error", "RangeError: mine", 3)


def test_both_code_shapes_run() -> None:
    assert run("return {doubled: input.n * 2, awaited: await Promise.resolve(3)}") == Returned(
        {"doubled": 4, "awaited": 3})
    module = ("export async function runTask(input, tools) {\n"
              "  await tools.log('start', {n: input.n});\n  return input.n + 1;\n}\n")
    host = Host()
    assert run(module, host=host) == Returned(3)
    assert host.calls == [("log", {"message": "start", "data": {"n": 2}})]
    default = "export default async function (input) {\n  return input.n * 10;\n}\n"
    assert run(default) == Returned(20)
    listed = "async function runTask(input) { return 'listed' }\nexport { runTask };\n"
    assert run(listed) == Returned("listed")
    nothing = "export const x = 1;\n"
    assert run(nothing) == Failed(
        "error", "TypeError: the module has no function to run: export runTask (or a "
                 "default, main or handler function)")


@pytest.mark.parametrize(("reason", "code"), [
    ("a module exporting main", "export async function main(input) {\n  return input.n + 1;\n}\n"),
    ("a module exporting a handler arrow",
     "export const handler = async (event) => event.n + 1;\n"),
    ("a script declaring main, never calling it",
     "async function main(input) {\n  return input.n + 1;\n}\n"),
    ("a script declaring a handler arrow", "const handler = async (input) => input.n + 1;\n"),
    ("a module saved with a UTF-8 BOM", "\ufeffexport async function runTask(input) {\n"
                                        "  return input.n + 1;\n}\n"),
    ("a script saved with a UTF-8 BOM", "\ufeffreturn input.n + 1;\n"),
])
def test_the_shapes_models_write_run_too(reason: str, code: str) -> None:
    assert run(code) == Returned(3), reason


def test_runtask_is_preferred_and_a_script_that_returns_is_not_called_again() -> None:
    both = ("export function main() { return 'main' }\n"
            "export async function runTask() { return 'runTask' }\n")
    assert run(both) == Returned("runTask")
    returns = "function main() { throw new Error('called') }\nreturn 'top level';\n"
    assert run(returns) == Returned("top level")


def test_the_script_may_declare_its_own_tools_and_supabase() -> None:
    assert run("const tools = 1; let supabase = 2; return tools + supabase") == Returned(3)


def test_suspended_pauses_the_run_and_discards_its_process(
        monkeypatch: pytest.MonkeyPatch) -> None:
    host = Host()
    pool = get_pool()
    taken: list[Child] = []
    take = pool.take

    def recording_take() -> Child:
        taken.append(take())
        return taken[-1]

    monkeypatch.setattr(pool, "take", recording_take)
    outcome = run("const r = await tools.tasks.run('child_fn', {a: 1});\nreturn r;", host=host)
    assert outcome == Paused({"waiting_for": "child_fn"})
    assert host.calls == [("tasks.run", {"name": "child_fn", "input": {"a": 1}})]
    # The paused run's process is gone (killed and reaped), not handed back to the pool.
    assert len(taken) == 1 and taken[0].proc.returncode is not None
    assert taken[0] not in pool._ready
    monkeypatch.undo()
    assert_healthy()


def test_a_host_exception_is_a_catchable_js_error() -> None:
    code = ("try { await tools.keystore.get('stripe') } catch (e) {"
            " return [e instanceof Error, e.message] }")
    assert run(code) == Returned([True, "no secret named stripe"])
    uncaught = run("await tools.log('x');\nawait tools.keystore.get('stripe');")
    assert uncaught == Failed("error", "Error: no secret named stripe", 2)


def test_time_and_randomness_go_through_the_host() -> None:
    host = Host()
    code = ("return [Date.now(), Math.random(), new Date().toISOString(), typeof Date(),"
            " new Date(0).getTime(), new Date() instanceof Date]")
    assert run(code, host=host) == Returned(
        [1_700_000_000_000, 0.25, "2023-11-14T22:13:20.000Z", "string", 0, True])
    assert [tool for tool, _ in host.calls] == ["now", "random", "now", "now", "now"]


def test_every_tool_sends_its_documented_arguments() -> None:
    host = Host()
    code = """
      await tools.llm('hi', {system: 'be brief', max_tokens: 10});
      await tools.websearch('quickjs');
      await tools.log('note', {k: 1});
      await tools.memory.get('fact', 'k');
      await tools.memory.set('fact', 'k', 'v');
      const r = await supabase.from('leads').select('id,name').eq('a', 1).neq('b', 2)
        .gt('c', 3).lt('d', 4).in('e', [5]).order('id', {ascending: false}).limit(5);
      await tools.db.from('leads').insert({name: 'x'});
      await tools.db.from('leads').update({name: 'y'}).eq('id', 1);
      await tools.db.from('leads').delete().eq('id', 1);
      return r;
    """
    assert run(code, host=host) == Returned({"data": [{"id": 1}], "error": None})
    base = {"columns": None, "filters": [], "order": None, "limit": None, "values": None}
    assert host.calls == [
        ("llm", {"prompt": "hi", "system": "be brief", "max_tokens": 10}),
        ("websearch", {"query": "quickjs"}),
        ("log", {"message": "note", "data": {"k": 1}}),
        ("memory.get", {"category": "fact", "key": "k"}),
        ("memory.set", {"category": "fact", "key": "k", "content": "v"}),
        ("db", {**base, "table": "leads", "op": "select", "columns": "id,name",
                "filters": [["eq", "a", 1], ["neq", "b", 2], ["gt", "c", 3], ["lt", "d", 4],
                            ["in", "e", [5]]],
                "order": {"column": "id", "ascending": False}, "limit": 5}),
        ("db", {**base, "table": "leads", "op": "insert", "values": {"name": "x"}}),
        ("db", {**base, "table": "leads", "op": "update", "values": {"name": "y"},
                "filters": [["eq", "id", 1]]}),
        ("db", {**base, "table": "leads", "op": "delete", "filters": [["eq", "id", 1]]}),
    ]


def test_check_syntax_gives_line_and_column_in_the_users_code() -> None:
    assert sandbox.check_syntax("let a = 1;\nlet b = a +* 2;\n") == SyntaxProblem(
        "SyntaxError: unexpected token in expression: '*'", 2, 12)
    assert sandbox.check_syntax("export async function runTask(input, tools) {\n"
                                "  return await tools.llm('x');\n}\n") is None
    assert sandbox.check_syntax("const x = await tools.llm('q');\nreturn x;") is None
    problem = sandbox.check_syntax("export async function runTask(input) {\n  return (1;\n}\n")
    assert problem is not None and problem.line == 2, problem


def test_check_syntax_runs_nothing() -> None:
    # Were the code run, the check would end by its time limit and report a problem (the
    # loop comes first: a tool call first would throw, the check runs none, and stop it).
    assert sandbox.check_syntax("while (true) {}\nawait tools.log('ran');") is None


def test_check_syntax_bounds_code_that_breaks_out_of_the_wrapper() -> None:
    problem = sandbox.check_syntax("}}); while (true) {} (async function () { {")
    assert problem is not None
    assert sandbox.check_syntax("return 1") is None


def test_host_refuses_unknown_tools_and_non_json_answers() -> None:
    assert sandbox._answer("fs.read", {}, Host()) == b"eunknown tool 'fs.read'"
    assert sandbox._answer("log", {}, lambda t, a: object()).startswith(b"ethe log tool")
    assert run("try { await tools.log('x') } catch (e) { return e.message }",
               host=lambda t, a: {1, 2}) == Returned(  # type: ignore[arg-type]
        "the log tool answered something that is not JSON: Object of type set is not JSON "
        "serializable")


def _fake_child(script: str) -> Child:
    """A child that does not follow the protocol, as a compromised one might."""
    return Child(subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, stderr=subprocess.DEVNULL))


@pytest.mark.parametrize(("script", "kind"), [
    ("import sys; sys.stdout.write('{\"t\":\"call\",\"args\":\"' + 'x' * 10**7); "
     "sys.stdout.flush(); import time; time.sleep(60)", "output_too_large"),
    ("import time; time.sleep(60)", "timeout"),
    ("import os; os._exit(9)", "crashed"),
    ("print('not json', flush=True); import time; time.sleep(60)", "crashed"),
    ("import sys\nfor _ in range(1000): print('{\"t\":\"call\",\"tool\":\"log\",\"args\":1}',"
     " flush=True); sys.stdin.readline()", "too_many_calls"),
], ids=["flood", "hang", "dies", "garbage", "ignores_call_budget"])
def test_the_parent_fences_a_child_that_breaks_the_protocol(script: str, kind: str) -> None:
    child = _fake_child(script)
    limits = Limits(wall_seconds=3.0, output_bytes=64 << 10, max_calls=5)
    try:
        outcome = sandbox._drive(child, "x", "x", "null", Host(), limits)
    finally:
        child.kill()
    assert isinstance(outcome, Failed) and outcome.kind == kind, outcome
    assert child.proc.poll() is not None


def _pool_child_pid() -> tuple[Child, int]:
    """A warm child and the pid of the process that runs its JS (under bubblewrap: python,
    bwrap's last descendant)."""
    child = get_pool().take()
    return child, child.runner_pid()


def test_a_child_has_an_empty_environment_and_no_network_and_no_privileges(
        monkeypatch: pytest.MonkeyPatch) -> None:
    # A secret in the worker's environment (undone after: a short key would break every
    # later test that seals a secret).
    monkeypatch.setenv("SWITCHYARD_SECRET_KEY", "a-worker-secret-0123456789abcdef-0123456789")
    child, pid = _pool_child_pid()
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            assert f.read() == b""
        with open(f"/proc/{pid}/status") as f:
            status = dict(line.split(":", 1) for line in f.read().splitlines() if ":" in line)
        assert status["NoNewPrivs"].strip() == "1" or not fences().unprivileged_uid
        if os.geteuid() == 0:
            assert fences().unprivileged_uid
            assert status["Uid"].split()[0] == "65534"
            assert status["CapEff"].strip() == "0000000000000000"
        if fences().network_namespace:
            assert os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
        with open(f"/proc/{pid}/limits") as f:
            limits = {line[:26].strip(): line[26:].split()[:2] for line in f}
        assert limits["Max open files"] == ["8", "8"]
        assert limits["Max file size"] == ["0", "0"]
        assert limits["Max core file size"] == ["0", "0"]
        if os.geteuid() == 0:
            assert limits["Max processes"] == ["0", "0"]
        fds = os.listdir(f"/proc/{pid}/fd")
        assert sorted(fds) == ["0", "1", "2"]
        # Its own root: a mount namespace in which nothing of the machine but the system is
        assert os.stat(f"/proc/{pid}/root").st_dev != os.stat("/").st_dev
        assert os.readlink(f"/proc/{pid}/ns/mnt") != os.readlink("/proc/self/ns/mnt")
        assert os.readlink(f"/proc/{pid}/ns/pid") != os.readlink("/proc/self/ns/pid")
        seen = set(os.listdir(f"/proc/{pid}/root"))
        assert not seen & {"home", "root", "var", "work", "srv", "data"}, seen
    finally:
        child.kill()


def test_a_forked_process_gets_its_own_pool() -> None:
    parent_pool = get_pool()
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report whether it was handed the parent's pool, then leave
        ok = get_pool() is not parent_pool and get_pool().ready_count() == 0
        os.write(write, b"1" if ok else b"0")
        os._exit(0)
    os.close(write)
    answer = os.read(read, 1)
    os.close(read)
    os.waitpid(pid, 0)
    assert answer == b"1"
    assert_healthy()


@pytest.fixture
def fences_probed_again(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's fences and pool forgotten before and after the test."""
    from tasks.functions import sandbox_pool

    def forget() -> None:
        if sandbox_pool._pool is not None:
            sandbox_pool._pool.close()
        sandbox_pool._pool = None
        sandbox_pool._fences = None

    forget()
    yield
    monkeypatch.undo()
    get_settings.cache_clear()
    forget()


def test_without_bubblewrap_a_function_fails_closed_naming_what_is_missing(
        fences_probed_again: None, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 25.4: "the fences fail open" — a refused sandbox was a run with no namespace.
    from tasks.functions import sandbox_pool

    real = shutil.which
    monkeypatch.setattr(sandbox_pool.shutil, "which",
                        lambda name, *a, **k: None if name == "bwrap" else real(name, *a, **k))
    with pytest.raises(sandbox_pool.SandboxUnavailable, match="bubblewrap is not installed") \
            as refused:
        sandbox.run("return 1", None, lambda tool, args: None)
    assert isinstance(refused.value, PermanentError)  # function.run fails at once
    assert "SWITCHYARD_FUNCTION_FENCES=weak" in str(refused.value)
    # Only the operator's explicit opt-out runs it with weaker fences
    monkeypatch.setenv("SWITCHYARD_FUNCTION_FENCES", "weak")
    get_settings.cache_clear()
    sandbox_pool._fences = None
    assert sandbox.run("return 1", None, lambda tool, args: None) == Returned(1)
    assert not any(a.endswith("bwrap") for a in sandbox_pool.fences().prefix)


@pytest.mark.parametrize("code", [
    "}}); for (;;) {} (async function () {{",  # the script shape's two braces
    '}}})(); for (;;) {} (async function () {"use strict"; let __sy_default; {\nexport x',
    "}}); globalThis.x = 1; (async function () {{",
])
def test_code_that_leaves_the_wrapper_is_refused_before_anything_evaluates_it(
        code: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Issue 25.5: "saving parses without evaluating anything". V8 parses the body alone;
    # QuickJS, which would evaluate the wrapper, is never given such code.
    from tasks.functions import shapes

    def no_child() -> None:
        raise AssertionError("the code reached the evaluating check")

    monkeypatch.setattr(get_pool(), "take", no_child)
    verdict = sandbox.parse_only(shapes.wrap(code))
    assert verdict in ("breakout", "syntax")
    if verdict == "breakout":
        assert sandbox.check_syntax(code) == SyntaxProblem(sandbox.UNBALANCED, 1, 1)


def test_ordinary_code_and_syntax_errors_parse_as_before() -> None:
    from tasks.functions import shapes

    assert sandbox.parse_only(shapes.wrap("const x = await tools.llm('a'); return [x].at(0)")) \
        == "ok"
    module = "export async function runTask(input, tools) {\n  return {hi: input.who};\n}\n"
    assert sandbox.parse_only(shapes.wrap(module)) == "ok"
    problem = sandbox.check_syntax("const a = 1;\nreturn (a +;\n")
    assert problem is not None and problem.line == 2
