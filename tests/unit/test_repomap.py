"""The repo map: definitions per language, the most-used file first, the budget, determinism."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tasks.coding.ranking import pagerank, rank
from tasks.coding.repomap import RepoMap, build_map, focus_terms, source_files
from tasks.coding.symbols import extract, language_for

# A small web app: `core/db.py` is what everything else uses; `cli.py` uses much and is used by
# nothing; `web/app.js` and `web/view.js` lean on `web/util.js`.
REPO = {
    "core/__init__.py": "",
    "core/db.py": '''
class Database:
    """The one connection."""

    def query(self, sql: str, *params: object) -> list[tuple]:
        return []

    def execute_script(self, script: str) -> None:
        pass


def connect_database(url: str) -> Database:
    return Database()
''',
    "core/models.py": '''
from core.db import Database, connect_database


class UserRecord:
    def save(self, db: Database) -> None:
        db.query("insert")


def load_user(user_id: int) -> UserRecord:
    db = connect_database("x")
    db.query("select")
    return UserRecord()
''',
    "core/reports.py": '''
from core.db import Database, connect_database


def monthly_report(db: Database) -> str:
    db.execute_script("refresh")
    return str(db.query("select"))


def build_all() -> None:
    monthly_report(connect_database("x"))
''',
    "cli.py": '''
import sys

from core.db import connect_database
from core.models import load_user
from core.reports import monthly_report


def main(argv: list[str]) -> int:
    db = connect_database(argv[0])
    print(load_user(1), monthly_report(db))
    return 0
''',
    "web/util.js": '''
export function formatCurrency(amount, currency) {
  return `${amount} ${currency}`;
}
export class HttpClient {
  constructor(baseUrl) { this.baseUrl = baseUrl; }
  fetchJson(path) { return fetch(this.baseUrl + path); }
}
''',
    "web/app.js": '''
import { HttpClient, formatCurrency } from './util.js';
const client = new HttpClient('/api');
export async function renderTotals(node) {
  const data = await client.fetchJson('/totals');
  node.textContent = formatCurrency(data.total, 'EUR');
}
''',
    "web/view.js": '''
import { formatCurrency } from './util.js';
export const priceTag = (amount) => formatCurrency(amount, 'EUR');
''',
    "node_modules/lib/index.js": "export function vendored() {}\n",
    ".git/hooks/pre-commit.py": "def hook(): pass\n",
    "build/gen.py": "def generated(): pass\n",
    "assets/logo.png": "\x89PNG",
    "README.md": "# the app\n",
}


def write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return write(tmp_path / "repo", REPO)


def test_the_most_used_module_ranks_first_and_unused_ones_last(repo: Path) -> None:
    repo_map = build_map(repo)

    paths = [f.path for f in repo_map.files]
    assert paths[0] == "core/db.py"
    assert paths.index("web/util.js") < paths.index("web/app.js")
    assert paths.index("core/db.py") < paths.index("cli.py")
    assert repo_map.total_files == 8  # vendored, hidden, build output and non-source left out
    assert repo_map.text.startswith("core/db.py:\n  class Database\n    def query(self, sql: str")
    ranks = [f.rank for f in repo_map.files]
    assert ranks == sorted(ranks, reverse=True)


def test_skipped_places_and_files(repo: Path) -> None:
    (repo / "big.py").write_text("x = 1\n" * 60_000)  # over MAX_FILE_BYTES
    (repo / "bin.py").write_bytes(b"def f():\0 pass\n")
    (repo / "app.min.js").write_text("function a(){}" * 10)
    paths, total = source_files(repo)
    assert "big.py" in paths and "bin.py" in paths  # found; _read refuses them
    assert not any(p.startswith(("node_modules/", ".git/", "build/")) for p in paths)
    assert "app.min.js" not in paths
    assert {f.path for f in build_map(repo).files}.isdisjoint({"big.py", "bin.py"})
    assert total == len(paths)


def test_a_file_cap_keeps_the_shallowest_files(repo: Path) -> None:
    paths, total = source_files(repo, max_files=2)
    assert paths == ["cli.py", "core/__init__.py"]
    assert total == 8
    assert build_map(repo, max_files=2).total_files == 8


@pytest.mark.parametrize("focus", [(), ("web/view.js", "monthly_report")])
def test_the_map_fits_every_budget_and_shows_what_it_lists(repo: Path,
                                                           focus: tuple[str, ...]) -> None:
    for budget in range(0, 1500, 7):
        repo_map = build_map(repo, budget_chars=budget, focus=focus)
        assert len(repo_map.text) <= budget
        assert (len(repo_map.text) > 0) == (budget >= len("cli.py"))  # the shortest path
        for entry in repo_map.files:
            assert entry.path in repo_map.text
            for line in entry.definitions:
                assert line in repo_map.text


def test_a_tight_budget_keeps_the_best_definitions(repo: Path) -> None:
    text = build_map(repo, budget_chars=90).text
    assert text.splitlines()[0] == "core/db.py:"
    assert "def connect_database(url: str) -> Database" in text or "class Database" in text


def test_a_generous_budget_shows_everything_once(repo: Path) -> None:
    repo_map = build_map(repo, budget_chars=100_000)
    assert len(repo_map.files) == repo_map.total_files
    assert "more files" not in repo_map.text
    assert repo_map.text.count("def load_user(user_id: int) -> UserRecord") == 1


def test_the_map_is_deterministic_and_json(repo: Path, tmp_path: Path) -> None:
    first = build_map(repo, budget_chars=600)
    again = build_map(write(tmp_path / "copy", dict(reversed(list(REPO.items())))),
                      budget_chars=600)
    assert first == again
    stored = json.loads(json.dumps(first.as_dict()))
    assert RepoMap.from_dict(stored) == first
    assert set(stored) == {"text", "files", "total_files"}


def test_the_map_is_the_same_under_any_hash_seed(repo: Path) -> None:
    # A replayed job runs in another process: set and dict orders must not leak into the map.
    script = ("import json, sys; from pathlib import Path; from tasks.coding.repomap import "
              "build_map; print(json.dumps(build_map(Path(sys.argv[1]), budget_chars=500, "
              "focus=['web', 'connect_database', 'the']).as_dict()))")
    outputs = {
        subprocess.run([sys.executable, "-c", script, str(repo)], check=True, text=True,
                       capture_output=True, cwd=Path(__file__).parents[2],
                       env={**os.environ, "PYTHONHASHSEED": seed}).stdout
        for seed in ("1", "2", "3")
    }
    assert len(outputs) == 1


def test_focus_brings_a_named_file_forward(repo: Path) -> None:
    plain = [f.path for f in build_map(repo).files]
    focused = build_map(repo, focus=["web/view.js"])
    assert plain.index("web/view.js") > 0
    assert focused.files[0].path == "web/view.js"
    assert focused.files[0].definitions == ["const priceTag = (amount)"]


def test_focus_by_a_distinctive_name_brings_its_definer_forward(repo: Path) -> None:
    words = focus_terms("Make `monthly_report` include totals; see core/reports.py.")
    assert "monthly_report" in words and "core/reports.py" in words
    focused = build_map(repo, focus=["monthly_report"], budget_chars=400)
    assert focused.files[0].path == "core/reports.py"


def test_an_empty_repository(tmp_path: Path) -> None:
    assert build_map(tmp_path) == RepoMap(text="", files=[], total_files=0)


def test_a_large_file_shows_its_best_definitions_and_says_how_many_more(tmp_path: Path) -> None:
    body = "\n".join(f"def helper_{i}(x):\n    return x\n" for i in range(80))
    write(tmp_path, {"lib.py": body, "use.py": "from lib import helper_7\nhelper_7(1)\n"})
    text = build_map(tmp_path).text
    assert "def helper_7(x)" in text
    assert "⋮ 50 more" in text  # MAX_DEFS_PER_FILE shown of 80


SIGNATURES = [
    pytest.param("python", "class A(B):\n    def m(\n        self,\n        x: int,\n"
                 "    ) -> str:\n        return ''\n",
                 ["class A(B)", "  def m(self, x: int) -> str"], id="python, multi-line params"),
    pytest.param("python", "def f(  # noqa: D102\n    color='#fff',  # why\n) -> None:\n"
                 "    pass\n", ["def f(color='#fff') -> None"], id="python, comments dropped"),
    pytest.param("javascript", "function f(\n  a, // first\n  url = 'http://x'\n) {}\n",
                 ["function f(a, url = 'http://x')"], id="javascript, comments dropped"),
    pytest.param("python", "def outer():\n    def inner():\n        pass\n    return inner\n",
                 ["def outer()"], id="python, a function's local helper is not listed"),
    pytest.param("python", "LIMIT = 10\nCONFIG = {\n    'a': 1,\n}\n",
                 ["LIMIT = 10", "CONFIG"], id="python, module constants"),
    pytest.param("python", "DASHES = re.compile(r'-{2,}')\nFMT = \"{a} {{b}}\"\n",
                 ["DASHES = re.compile(r'-{2,}')", 'FMT = "{a} {{b}}"'],
                 id="python, a brace inside a string is no block"),
    pytest.param("javascript", "class W extends B {\n  render(props) {\n    return 1;\n  }\n}\n"
                 "module.exports.make = function (a) { return a; };\n",
                 ["class W extends B", "  render(props)", "module.exports.make = function (a)"],
                 id="javascript, class, method, CommonJS export"),
    pytest.param("typescript", "export interface Shape {\n  area(): number;\n}\n"
                 "export type Id = string;\n", ["interface Shape", "  area(): number",
                                                "type Id = string"], id="typescript"),
    pytest.param("tsx", "export const Button = ({label}: Props) => <b>{label}</b>;\n",
                 ["const Button = ({label}: Props)"], id="tsx component"),
    pytest.param("go", "package p\ntype Server struct {\n\tName string\n}\n"
                 "func (s *Server) Start(port int) error {\n\treturn nil\n}\n",
                 ["type Server struct", "func (s *Server) Start(port int) error"], id="go"),
    pytest.param("rust", "pub struct P { x: i32 }\nimpl P {\n    pub fn new(x: i32) -> Self {"
                 " P { x } }\n}\n", ["pub struct P", "impl P", "  pub fn new(x: i32) -> Self"],
                 id="rust"),
    pytest.param("rust", "pub const D: Cfg<'static> = Cfg { name: \"{x}\" };\n",
                 ["pub const D: Cfg<'static> = Cfg"], id="rust, a lifetime is no quote"),
    pytest.param("java", "public class Foo {\n  @Override\n  public String toString() {"
                 " return \"\"; }\n}\n", ["public class Foo", "  public String toString()"],
                 id="java, annotation dropped"),
    pytest.param("ruby", "module M\n  class K < Base\n    def run(a, b = 2)\n      a\n    end\n"
                 "  end\nend\n", ["module M", "  class K < Base", "    def run(a, b = 2)"],
                 id="ruby"),
]


@pytest.mark.parametrize(("language", "source", "expected"), SIGNATURES)
def test_definitions_and_signatures(language: str, source: str, expected: list[str]) -> None:
    found = extract(source.encode(), language).definitions
    assert ["  " * d.depth + d.signature for d in found] == expected


def test_references_leave_out_the_definitions_own_names() -> None:
    symbols = extract(b"def f(x):\n    return g(x) + g(1)\n", "python")
    assert sorted(symbols.references) == ["g", "g", "x", "x"]


@pytest.mark.parametrize(("name", "language"), [
    ("a.py", "python"), ("a.tsx", "tsx"), ("a.mjs", "javascript"), ("A.JAVA", "java"),
    ("a.md", None), ("Makefile", None),
])
def test_language_by_suffix(name: str, language: str | None) -> None:
    assert language_for(name) == language


def test_pagerank_sums_to_one_and_follows_the_links() -> None:
    ranks = pagerank(["a", "b", "c"], {("a", "c"): 1.0, ("b", "c"): 1.0})
    assert sum(ranks.values()) == pytest.approx(1.0)
    assert ranks["c"] > ranks["a"] == pytest.approx(ranks["b"])
    assert pagerank([], {}) == {}


def test_a_file_using_a_name_it_defines_itself_sends_nothing_for_it() -> None:
    symbols = {
        "a.py": extract(b"def run(): pass\nrun()\n", "python"),
        "b.py": extract(b"def run(): pass\n", "python"),
    }
    ranking = rank(symbols)
    assert ranking.received == {}
    assert ranking.ranks["a.py"] == pytest.approx(ranking.ranks["b.py"])
