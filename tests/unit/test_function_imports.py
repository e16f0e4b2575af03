"""Imports and require() are refused before anything runs, naming the line (pure text)."""

from __future__ import annotations

import pytest

from tasks.functions import imports


@pytest.mark.parametrize(("reason", "code", "line", "column", "name"), [
    ("a named import", "import { createClient } from '@supabase/supabase-js';\nreturn 1",
     1, 1, "@supabase/supabase-js"),
    ("a default import", "import x from 'y'\nreturn x", 1, 1, "y"),
    ("a namespace import", "const a = 1;\nimport * as fs from \"fs\";", 2, 1, "fs"),
    ("a side-effect import", "  import 'dotenv/config';\nreturn 1", 1, 3, "dotenv/config"),
    ("an import over lines", "import {\n  a,\n  b,\n} from 'lib';", 1, 1, "lib"),
    ("a byte order mark first", "\ufeffimport x from 'y'", 1, 1, "y"),
    ("a dynamic import", "const m = await import('lodash');", 1, 17, "lodash"),
])
def test_an_import_is_refused_naming_its_line_and_module(
        reason: str, code: str, line: int, column: int, name: str) -> None:
    problem = imports.find_unavailable(code)
    assert problem is not None, reason
    assert (problem.line, problem.column) == (line, column), reason
    assert problem.message.startswith("imports are not available: ")
    assert f"remove the import of '{name}'" in problem.message
    assert "`supabase`" in problem.message and "`tools`" in problem.message


@pytest.mark.parametrize(("reason", "code", "line", "column", "name"), [
    ("a require", "const axios = require('axios');\nreturn 1", 1, 15, "axios"),
    ("double quotes, indented", "async function main() {\n  const f = require(\"node-fetch\");\n}",
     2, 13, "node-fetch"),
    ("a destructured require", "const { createClient } = require('@supabase/supabase-js')",
     1, 26, "@supabase/supabase-js"),
])
def test_a_require_is_refused_naming_its_line_and_module(
        reason: str, code: str, line: int, column: int, name: str) -> None:
    problem = imports.find_unavailable(code)
    assert problem is not None, reason
    assert (problem.line, problem.column) == (line, column), reason
    assert problem.message.startswith("require() is not available: ")
    assert f"remove require('{name}')" in problem.message


@pytest.mark.parametrize(("reason", "code"), [
    ("a plain script", "return input.n + 1"),
    ("names that start with import", "const imported = input.important;\nreturn imported"),
    ("a string mid-line", "const s = \"import x from 'y'\";\nreturn s"),
    ("a line comment", "// const axios = require('axios');\nreturn 1"),
    ("a comment after code", "const a = 1; // import x from 'y' was here\nreturn a"),
    ("a method named require", "return tools.require('x') || policy.require(\"y\")"),
    ("a name ending in require", "const must_require = (x) => x;\nreturn must_require('x')"),
    ("require without a string", "return typeof require"),
    ("module.exports", "module.exports = async (input) => input;"),
    ("an export", "export async function runTask(input) { return input; }"),
])
def test_code_without_imports_passes(reason: str, code: str) -> None:
    assert imports.find_unavailable(code) is None, reason
