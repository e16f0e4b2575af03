"""The two shapes of a function's code, turned into one JS expression (pure text work).

(a) a module: `export async function runTask(input, tools) {...}` (or `export default`);
(b) a script body that uses `input`, `tools` and `supabase` and `return`s a value.

Models write both with other names for the entry: a module exporting `main` or `handler`,
a script that declares `async function main(input)` and never calls it, or Node's CommonJS
(`module.exports = async (input, tools) => …`, `exports.handler = …`). Either runs what
module.exports names, else the first function of ENTRIES it holds: a module in any case, a
script only if its own code ran to its end without returning (a script that returns was
called already).
A UTF-8 byte order mark, which some editors save, is dropped (QuickJS refuses it).

Either becomes `(async function (input, tools, supabase) {<head>\n<code>\n<tail>})`, an
expression that evaluates to a function without running any of the code, so the same
text serves the syntax check and the run. The user's code starts on line 2: a line
number from QuickJS minus HEAD_LINES is the user's. The user's code sits in a block of
its own, so it may declare its own `tools` or `supabase` without clashing.

A module's `export` keywords are blanked to spaces (`export default` becomes
`__sy_default =`, the same width), which keeps every line and column where it was.
Only `export` at the start of a line is rewritten: a template literal holding a line
that starts with `export ` would be changed too (accepted: the cost of not parsing).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

HEAD_LINES = 1
# A line starting with one of these makes the code a module.
_MODULE_LINE = re.compile(
    r"^[ \t]*export[ \t]+(default\b|async[ \t]+function\b|function\b|const\b|let\b|var\b"
    r"|class\b|\{)", re.MULTILINE)
_EXPORT_DEFAULT = re.compile(r"^([ \t]*)export[ \t]+default\b", re.MULTILINE)
_EXPORT_DECL = re.compile(
    r"^([ \t]*)export(?=[ \t]+(async[ \t]+function|function|const|let|var|class)\b)",
    re.MULTILINE)
# `export { runTask };` names what a declaration already made: blank the whole statement.
_EXPORT_LIST = re.compile(r"^([ \t]*)export[ \t]*\{[^}\n]*\}[ \t]*;?", re.MULTILINE)


PREFIX = "(async function (input, tools, supabase) {"  # every shape's head starts so
ENTRIES = ("runTask", "__sy_default", "main", "handler")
# CommonJS, as models write it for Node: `module.exports` is the entry, or names it as one of
# these. `var`, not `let`: the user's own `var module` then redeclares it instead of being a
# SyntaxError; `__sy_module` keeps the object even if the user's block shadows `module`.
CJS_ENTRIES = ("runTask", "default", "main", "handler")
_CJS_HEAD = ("var module = {exports: {}}, exports = module.exports; "
             "const __sy_module = module, __sy_exports = exports;")
_CJS_ENTRY = (
    "const __sy_cjs = typeof __sy_module.exports === 'function' ? __sy_module.exports : ["
    + ", ".join(f"'{name}'" for name in CJS_ENTRIES)
    + "].map((k) => __sy_module.exports?.[k]).find((f) => typeof f === 'function'); "
    # Code that exported something but no function would otherwise end as `null`.
    "if (__sy_cjs === undefined && (__sy_module.exports !== __sy_exports"
    " || Object.keys(__sy_exports).length > 0)) throw new TypeError('module.exports holds no"
    " function to run: assign one to module.exports (or to exports.handler, exports.default"
    " or exports.main)'); ")
# What module.exports names, else the first of ENTRIES declared in the user's block (typeof:
# an undeclared name is no error).
_ENTRY = (_CJS_ENTRY + "const __sy_entry = [__sy_cjs, " + ", ".join(
    f"typeof {name} === 'function' ? {name} : undefined" for name in ENTRIES)
    + "].find((f) => f !== undefined);")


@dataclass(frozen=True)
class Wrapped:
    shape: Literal["module", "script"]
    text: str  # one JS expression: the async function to call with (input, tools, supabase)

    @property
    def body(self) -> str:
        """The function's body alone: what a spec-compliant Function constructor parses as a
        body, so code that closes the wrapper's braces is a syntax error there."""
        return self.text[len(PREFIX):-2]


def shape_of(code: str) -> Literal["module", "script"]:
    return "module" if _MODULE_LINE.search(code) else "script"


def _unexport(code: str) -> str:
    code = _EXPORT_LIST.sub(lambda m: " " * len(m.group(0)), code)
    code = _EXPORT_DEFAULT.sub(lambda m: m.group(1) + "__sy_default =", code)
    return _EXPORT_DECL.sub(lambda m: m.group(1) + "      ", code)


def wrap(code: str) -> Wrapped:
    code = code.removeprefix("\ufeff")
    # Code may end in a line comment: the tail always starts on a line of its own.
    if shape_of(code) == "module":
        head = PREFIX + '"use strict"; let __sy_default; ' + _CJS_HEAD + ' {\n'
        tail = ("\n;" + _ENTRY + " if (__sy_entry === undefined) throw new TypeError("
                "'the module has no function to run: export runTask (or a default, main or "
                "handler function)'); return await __sy_entry(input, tools);}})")
        return Wrapped("module", head + _unexport(code) + tail)
    head = PREFIX + " let __sy_default; " + _CJS_HEAD + " {\n"
    tail = ("\n;" + _ENTRY
            + " if (__sy_entry !== undefined) return await __sy_entry(input, tools);}})")
    return Wrapped("script", head + code + tail)


def user_line(wrapped_line: int | None, code: str, *, clamp: bool = False) -> int | None:
    """A line of the wrapped text as a line of the user's code: None if it is the wrapper's,
    unless clamp (a syntax error found in the wrapper's tail: "unexpected end of input"
    belongs to the user's last line)."""
    if wrapped_line is None:
        return None
    line = wrapped_line - HEAD_LINES
    last = code.count("\n") + 1
    if clamp:
        return min(max(line, 1), last)
    return line if 1 <= line <= last else None
