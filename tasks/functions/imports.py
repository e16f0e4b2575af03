"""Imports and require() refused at save, naming the line: the sandbox has no module loader,
and models write Node code (`require('axios')`, `import { createClient } from
'@supabase/supabase-js'`) whose only failure would otherwise be a bare SyntaxError or a
ReferenceError at run time (pure text work, like shapes).

A static import is an `import` at the start of a line (a line inside a template literal that
starts so is refused too: the cost of not parsing, as shapes accepts for `export`). A
require() or dynamic import() may sit mid-line, so one after `//` or inside a quoted string
on its line is left alone: refusing working code costs more than letting a rare one through
to fail at run time.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_STATIC = re.compile(
    r"^([ \t]*)import\b(?![ \t]*[(.])(?:[^'\";]*?\bfrom)?\s*(['\"])([^'\"\n]+)\2", re.MULTILINE)
_DYNAMIC = re.compile(r"(?<![\w$.])import[ \t]*\([ \t]*(['\"`])([^'\"`\n]+)\1")
_REQUIRE = re.compile(r"(?<![\w$.])require[ \t]*\([ \t]*(['\"`])([^'\"`\n]+)\1[ \t]*\)")

INJECTED = ("`input`, `tools` (tools.openai, tools.llm, tools.websearch, tools.keystore, "
            "tools.memory, tools.log, tools.tasks.run) and `supabase` are injected")


@dataclass(frozen=True)
class Unavailable:
    message: str
    line: int  # 1-based, in the user's code
    column: int  # 1-based


def _in_comment_or_string(code: str, at: int) -> bool:
    before = code[code.rfind("\n", 0, at) + 1:at]
    if "//" in before or before.lstrip().startswith(("*", "/*")):
        return True
    return any(before.count(quote) % 2 == 1 for quote in "'\"`")


def _where(code: str, at: int) -> tuple[int, int]:
    return code.count("\n", 0, at) + 1, at - (code.rfind("\n", 0, at) + 1) + 1


def find_unavailable(code: str) -> Unavailable | None:
    """The first import or require() in the code, or None."""
    code = code.removeprefix("\ufeff")  # as shapes drops it: the columns stay the user's
    found: list[tuple[int, str]] = []
    for m in _STATIC.finditer(code):
        found.append((m.start() + len(m.group(1)), f"imports are not available: {INJECTED}; "
                      f"remove the import of '{m.group(3)}'"))
    for m in _DYNAMIC.finditer(code):
        if not _in_comment_or_string(code, m.start()):
            found.append((m.start(), f"imports are not available: {INJECTED}; "
                          f"remove the import of '{m.group(2)}'"))
    for m in _REQUIRE.finditer(code):
        if not _in_comment_or_string(code, m.start()):
            found.append((m.start(), f"require() is not available: {INJECTED}; "
                          f"remove require('{m.group(2)}')"))
    if not found:
        return None
    at, message = min(found)
    return Unavailable(message, *_where(code, at))
