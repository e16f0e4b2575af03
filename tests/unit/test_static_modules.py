"""The browser's ES modules as served, with no build step: every relative import names a file
that exists and a name that file exports (`node --check` reads one file, never its imports)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

STATIC = Path(__file__).resolve().parents[2] / "app" / "static"
IMPORT = re.compile(r'^import\s+(?:\{([^}]*)\}\s+from\s+)?"(\./[\w.]+\.js)";', re.M)
EXPORT_DECLARED = re.compile(r"^export\s+(?:async\s+)?(?:function|const|let|class)\s+(\w+)", re.M)
EXPORT_LIST = re.compile(r"^export\s*\{([^}]*)\}", re.M)


def names(listed: str, side: int) -> set[str]:
    """The names of `{ a as b, c }`: side 0 is what an import asks for (a, c), side -1 what an
    export list offers (b, c)."""
    return {part.split(" as ")[side].strip() for part in listed.split(",") if part.strip()}


def exports(source: str) -> set[str]:
    out = set(EXPORT_DECLARED.findall(source))
    for listed in EXPORT_LIST.findall(source):
        out |= names(listed, -1)
    return out


MODULES = sorted(p.name for p in STATIC.glob("*.js") if IMPORT.search(p.read_text()))


def test_every_page_script_is_a_module_and_reads_no_global() -> None:
    """Issue 22: no classic script is left, so nothing reads the window.SY of old."""
    templates = STATIC.parent / "templates"
    scripts = re.findall(r"<script[^>]*>", "".join(p.read_text() for p in templates.glob("*.html")))
    assert scripts and all('type="module"' in tag for tag in scripts), scripts
    for path in STATIC.glob("*.js"):
        assert not re.search(r"\bSY\.|=\s*SY;|globalThis\.SY", path.read_text()), path.name


def test_the_project_page_is_split_into_modules() -> None:
    assert {"project.js", "jobs_table.js", "chat.js", "feed.js", "inbox.js"} <= set(MODULES)


@pytest.mark.parametrize("module", MODULES)
def test_each_import_names_a_module_that_exports_it(module: str) -> None:
    for listed, target in IMPORT.findall((STATIC / module).read_text()):
        path = STATIC / target
        assert path.is_file(), f"{module} imports {target}, which is not in app/static"
        missing = names(listed, 0) - exports(path.read_text())
        assert not missing, f"{module} imports {sorted(missing)} from {target}: not exported"


def test_no_module_imports_itself_round_a_cycle() -> None:
    graph = {m: [t[2:] for _, t in IMPORT.findall((STATIC / m).read_text())] for m in MODULES}

    def reachable(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph.get(start, []))
        while todo:
            node = todo.pop()
            if node not in seen:
                seen.add(node)
                todo.extend(graph.get(node, []))
        return seen

    assert [m for m in graph if m in reachable(m)] == []
