"""The repo map: the files the rest of a repository relies on most, with their signatures.

After Aider's: a file refers to another when it uses a name the other defines; a PageRank over
those references (optionally tilted towards the files and names a task mentions) orders the
files, and the map shows as many of them, best first, as the character budget allows.
"""

from __future__ import annotations

import os
import re
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tasks.coding.ranking import Ranking, rank
from tasks.coding.symbols import Definition, FileSymbols, extract, language_for

MAX_FILES = 5000
MAX_FILE_BYTES = 256 * 1024
MAX_DEFS_PER_FILE = 30  # one vast file must not crowd out the rest of the map
SKIP_DIRS = frozenset({
    "node_modules", "bower_components", "vendor", "vendors", "third_party", "third-party",
    "external", "dist", "build", "out", "target", "coverage", "site-packages", "__pycache__",
    "venv", "env", "Pods", "Carthage", "Godeps", "migrations",
})
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PATHLIKE = re.compile(r"[\w.-]+(?:/[\w.-]+)+|[\w-]+\.[A-Za-z]{1,4}\b")


@dataclass(frozen=True)
class FileEntry:
    path: str
    rank: float
    definitions: list[str]

    def as_dict(self) -> dict[str, Any]:
        return {"path": self.path, "rank": self.rank, "definitions": list(self.definitions)}


@dataclass(frozen=True)
class RepoMap:
    text: str
    files: list[FileEntry]  # the files the text shows, best first
    total_files: int  # source files found, shown or not

    def as_dict(self) -> dict[str, Any]:
        return {"text": self.text, "files": [f.as_dict() for f in self.files],
                "total_files": self.total_files}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> RepoMap:
        return cls(text=data["text"], total_files=data["total_files"],
                   files=[FileEntry(f["path"], f["rank"], list(f["definitions"]))
                          for f in data["files"]])


def build_map(root: Path, *, budget_chars: int = 8000, focus: Iterable[str] = (),
              max_files: int = MAX_FILES) -> RepoMap:
    """Map the source files under `root`; `focus`: paths and names the task mentions."""
    paths, total = source_files(root, max_files)
    symbols: dict[str, FileSymbols] = {}
    for path in paths:
        data = _read(root / path)
        language = language_for(path)
        if data is not None and language is not None:
            symbols[path] = extract(data, language)
    text, files = render(symbols, rank(symbols, focus), budget_chars, total)
    return RepoMap(text=text, files=files, total_files=total)


def source_files(root: Path, max_files: int = MAX_FILES) -> tuple[list[str], int]:
    """Relative paths of the files we can parse, shallowest first, capped; and how many exist."""
    found: list[str] = []
    for directory, dirs, files in os.walk(root):  # symlinks are not followed: they may lead out
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and d not in SKIP_DIRS)
        base = Path(directory).relative_to(root)
        for name in files:
            if language_for(name) and not name.endswith((".min.js", ".bundle.js", ".d.ts")) \
                    and not (Path(directory) / name).is_symlink():
                found.append((base / name).as_posix())
    # Top-level code is usually what the rest builds on, so a cap keeps the shallow files.
    found.sort(key=lambda p: (p.count("/"), p))
    return sorted(found[:max_files]), len(found)


def _read(path: Path) -> bytes | None:
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            return None
        data = path.read_bytes()
    except OSError:
        return None
    if b"\0" in data[:8192]:
        return None  # binary
    if len(data) > 4096 and data.count(b"\n") * 400 < len(data):
        return None  # minified or generated: lines of hundreds of characters
    return data


def render(symbols: dict[str, FileSymbols], ranking: Ranking, budget: int, total: int
           ) -> tuple[str, list[FileEntry]]:
    """As many of the best definitions as fit in `budget` chars, grouped by file, files best first
    (those the focus names before all), then the paths of other files while room is left."""
    ranks = ranking.ranks
    # The focus sends its rank on to what it uses, which may outrank it: it still leads.
    ordered = sorted(symbols, key=lambda p: (p not in ranking.focused, -ranks[p], p))
    items = _priorities(ordered, symbols, ranking)
    low, high = 0, len(items)  # the longest prefix of `items` that fits: sizes grow with it
    while low < high:
        middle = (low + high + 1) // 2
        if _size(_choose(items[:middle]), symbols) <= budget:
            low = middle
        else:
            high = middle - 1
    chosen = _choose(items[:low])
    used = _size(chosen, symbols)
    for path in ordered:
        separator = 1 if used else 0
        if path not in chosen and used + separator + len(path) <= budget:
            chosen[path] = set()
            used += separator + len(path)

    blocks: list[str] = []
    files: list[FileEntry] = []
    for path in (p for p in ordered if p in chosen):
        lines = _lines(symbols[path].definitions, chosen[path])
        blocks.append("\n".join([path + ":", *("  " + line for line in lines)]) if lines else path)
        files.append(FileEntry(path, round(ranks[path], 8),
                               [ln for ln in lines if not ln.startswith("⋮")]))
    note = f"⋮ {total - len(files)} more files"
    if total > len(files) and blocks and used + 1 + len(note) <= budget:
        blocks.append(note)
    return "\n".join(blocks), files


def _priorities(ordered: list[str], symbols: dict[str, FileSymbols], ranking: Ranking
                ) -> list[tuple[str, int]]:
    """Every (file, definition index), most deserving of a place first.

    The focused files' definitions lead. Then a definition's claim is the rank its uses send
    it, plus an equal part of the rank its file holds for its own sake (restarts): so among
    definitions nothing uses, those of the better-ranked files come first.
    """
    position = {path: i for i, path in enumerate(ordered)}
    claims: list[tuple[bool, float, int, int, int, str]] = []
    for path in ordered:
        definitions = symbols[path].definitions
        received = [ranking.received.get((path, d.name), 0.0) for d in definitions]
        # A name defined twice in a file (an overload, a Rust impl) received its share once.
        # (Summed in a fixed order: a set's order changes with the process's hash seed.)
        own = max(0.0, ranking.ranks[path] - sum(ranking.received.get((path, name), 0.0)
                                                 for name in sorted({d.name for d in definitions})))
        for i, d in enumerate(definitions):
            claims.append((path not in ranking.focused, -(received[i] + own / len(definitions)),
                           position[path], d.depth, i, path))
    claims.sort()
    per_file: Counter[str] = Counter()
    items: list[tuple[str, int]] = []
    for *_, i, path in claims:
        per_file[path] += 1
        if per_file[path] <= MAX_DEFS_PER_FILE:
            items.append((path, i))
    return items


def _choose(items: list[tuple[str, int]]) -> dict[str, set[int]]:
    chosen: dict[str, set[int]] = defaultdict(set)
    for path, i in items:
        chosen[path].add(i)
    return chosen


def _size(chosen: dict[str, set[int]], symbols: dict[str, FileSymbols]) -> int:
    """The length of the text showing `chosen` (blocks joined by newlines)."""
    sizes = [len(path) + 1 + sum(len(ln) + 3 for ln in _lines(symbols[path].definitions, shown))
             if shown else len(path) for path, shown in chosen.items()]
    return sum(sizes) + max(0, len(sizes) - 1)


def _lines(definitions: tuple[Definition, ...], chosen: set[int]) -> list[str]:
    """The chosen definitions and those enclosing them (a method shows its class), in order."""
    shown: set[int] = set()
    parents: list[int] = []
    for i, d in enumerate(definitions):
        del parents[d.depth:]
        if i in chosen:
            shown.update(parents, [i])
        parents.append(i)
    lines = ["  " * definitions[i].depth + definitions[i].signature for i in sorted(shown)]
    if shown and len(shown) < len(definitions):
        lines.append(f"⋮ {len(definitions) - len(shown)} more")
    return lines


def focus_terms(text: str) -> list[str]:
    """The paths and names a task's text mentions, for `build_map(focus=...)`."""
    paths = {p.strip(".-") for p in _PATHLIKE.findall(text)}
    words = {w for w in _WORD.findall(text) if len(w) >= 3}
    return sorted((paths | words) - {""})
