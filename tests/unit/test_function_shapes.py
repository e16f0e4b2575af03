"""The code shapes of a function and the line mapping (pure text; CommonJS exports are
called in an in-process QuickJS, no child process)."""

from __future__ import annotations

import json

import pytest
import quickjs

from tasks.functions import shapes


@pytest.mark.parametrize(("code", "shape"), [
    ("export async function runTask(input, tools) {}", "module"),  # Tasker style
    ("  export default async function (input) {}", "module"),  # indented default export
    ("export default function run(input) {}", "module"),
    ("async function runTask() {}\nexport { runTask };", "module"),  # an export list
    ("return input.n + 1", "script"),  # a script body
    ("const exported = 1;\nreturn exported", "script"),  # a name that starts with export
    ("// export async function runTask\nreturn 1", "script"),  # a comment is not an export
    ("const s = 'export default 1';\nreturn s", "script"),  # nor is a string mid-line
])
def test_the_shape_is_decided_by_a_line_starting_with_export(code: str, shape: str) -> None:
    assert shapes.shape_of(code) == shape


def test_unexporting_keeps_every_line_and_column() -> None:
    code = ("export async function runTask(input) {\n  return 1;\n}\n"
            "export default async function (input) {}\nexport { runTask };\n"
            "export const a = 1;")
    text = shapes.wrap(code).text
    body = text.split("\n")[shapes.HEAD_LINES: shapes.HEAD_LINES + code.count("\n") + 1]
    assert [len(line) for line in body] == [len(line) for line in code.split("\n")]
    assert body[0] == "       async function runTask(input) {"
    assert body[3] == "__sy_default = async function (input) {}"
    assert body[4].strip() == ""
    assert body[5] == "       const a = 1;"


def test_the_users_first_line_follows_the_head() -> None:
    for code in ("return 1", "export async function runTask() { return 1 }"):
        text = shapes.wrap(code).text
        assert text.split("\n")[shapes.HEAD_LINES].endswith("return 1" if "export" not in code
                                                              else "{ return 1 }")


def test_a_code_ending_in_a_line_comment_still_closes_the_wrapper() -> None:
    text = shapes.wrap("return 1 // done").text
    assert "// done\n;" in text and text.endswith("}})")


@pytest.mark.parametrize(("wrapped", "clamp", "user"), [
    (None, False, None),  # no line known
    (1, False, None),  # the head is the wrapper's
    (2, False, 1),  # the user's first line
    (4, False, 3),  # the user's last line
    (5, False, None),  # the tail is the wrapper's ...
    (5, True, 3),  # ... but a syntax error there is at the end of the user's code
    (1, True, 1),
])
def test_lines_map_to_the_users_code(wrapped: int | None, clamp: bool, user: int | None) -> None:
    assert shapes.user_line(wrapped, "a\nb\nc", clamp=clamp) == user


def test_a_byte_order_mark_is_dropped_and_lines_stay() -> None:
    assert shapes.wrap("\ufeffreturn 1").text == shapes.wrap("return 1").text
    assert shapes.wrap("\ufeffexport default async function () {}").shape == "module"


def settle(code: str, input: object) -> str:
    """The wrapped code called in an in-process QuickJS (no tools, no fences): its output as
    JSON, or the error it threw as text."""
    ctx = quickjs.Context()
    ctx.eval("globalThis.__out = 'pending'; (" + shapes.wrap(code).text + ")("
             + json.dumps(input) + ", {}, {}).then((v) => { globalThis.__out = JSON.stringify("
             "v === undefined ? null : v); }, (e) => { globalThis.__out = String(e); })")
    while ctx.execute_pending_job():
        pass
    return str(ctx.eval("__out"))


@pytest.mark.parametrize(("reason", "code"), [
    ("module.exports is the function",
     "module.exports = async (input, tools) => ({n: input.n + 1});"),
    ("a function expression", "module.exports = async function (input) {\n"
                               "  return {n: input.n + 1};\n};\n"),
    ("module.exports.handler", "module.exports.handler = async (input) => ({n: input.n + 1});"),
    ("exports.handler", "exports.handler = async (input) => ({n: input.n + 1});"),
    ("exports.default", "exports.default = async (input) => ({n: input.n + 1});"),
    ("exports.main", "exports.main = async (input) => ({n: input.n + 1});"),
    ("an object naming main", "async function main(input) {\n  return {n: input.n + 1};\n}\n"
                              "module.exports = { main };"),
    ("a helper and 'use strict' first", "'use strict';\nconst inc = (n) => n + 1;\n"
                                        "module.exports = async (input) => ({n: inc(input.n)});"),
    ("a byte order mark first", "\ufeffexports.handler = async (input) => ({n: input.n + 1});"),
    ("a synchronous handler", "module.exports = (input) => ({n: input.n + 1});"),
])
def test_commonjs_exports_name_the_function_that_runs(reason: str, code: str) -> None:
    assert settle(code, {"n": 1}) == '{"n":2}', reason


def test_module_exports_without_a_function_says_so() -> None:
    assert settle("module.exports = {limit: 3};", None).startswith(
        "TypeError: module.exports holds no function to run")


@pytest.mark.parametrize(("reason", "code"), [
    ("a module of its own", "const module = {name: 'm'};\nreturn {n: input.n, m: module.name};"),
    ("a var named exports", "var exports = 1;\nreturn {n: input.n, m: exports};"),
    ("a plain script", "return {n: input.n};"),
    ("a bare main", "async function main(input) { return {n: input.n}; }"),
])
def test_code_that_never_exports_runs_as_before(reason: str, code: str) -> None:
    assert settle(code, {"n": 1}).startswith('{"n":1'), reason
