"""The coding agent on real-shaped repositories: every case in bench/coding_cases/ run through
the real job (clone, setup, baseline, explore, plan, build, verify, deliver) on a real worker,
its fix replayed as scripted tool calls (the scripted provider's recorded sessions), twice:
the first run installs the repository's dependencies from the configured package indexes
(cold), the second reuses them (warm).

    python bench/coding_harness.py [--cases py-wordy,node-pad] [--timeout 600]

Services come from DATABASE_URL / BROKER_URL (a scratch database is made), or are started
embedded. Prints per case: setup cold and warm seconds, the baseline, the verdict, and what
delivery would open (a pull request, or a draft when unverified); exits 1 when a case's
verdict is not the one it expects. Targets (issue 24): every case verified, warm setup <= 5 s.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
CASES = ROOT / "bench" / "coding_cases"


def load_cases(names: list[str] | None) -> list[dict[str, Any]]:
    cases = [json.loads(p.read_text()) for p in sorted(CASES.glob("*.json"))]
    if names:
        cases = [c for c in cases if c["name"] in names]
        missing = set(names) - {c["name"] for c in cases}
        if missing:
            raise SystemExit(f"no such case: {', '.join(sorted(missing))}")
    return cases


def session(case: dict[str, Any]) -> dict[str, Any]:
    """The case's fix as the model's turns: look, plan one subtask, make each edit, finish."""
    edits = [{"tool_calls": [{"name": "edit_file", "input": e}]} for e in case["edits"]]
    where = ", ".join(sorted({e["path"] for e in case["edits"]}))
    return {"name": case["name"], "match": [case["name"]], "turns": {
        "explore": [{"tool_calls": [{"name": "finish", "input": {
            "summary": f"The bug is in {where}."}}]}],
        "plan": [{"text": json.dumps({"subtasks": [{"title": "Fix it",
                                                     "description": case["task"]}]})}],
        "build": [*edits, {"tool_calls": [{"name": "finish", "input": {"summary": "fixed"}}]}],
        "fix": [{"tool_calls": [{"name": "finish", "input": {"summary": "no further idea"}}]}],
    }}


def bare_repo(repos: Path, case: dict[str, Any]) -> Path:
    work = repos.parent / "work" / case["name"]
    for path, body in case["files"].items():
        (work / path).parent.mkdir(parents=True, exist_ok=True)
        (work / path).write_text(body)
    git = ["git", "-C", str(work), "-c", "user.name=bench", "-c", "user.email=bench@example"]
    subprocess.run([*git, "init", "-q", "-b", "main"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "the case"], check=True)
    bare = repos / f"{case['name']}.git"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(bare)], check=True)
    return bare


def setup_services(stack: contextlib.ExitStack, tmp: Path) -> None:
    from app.ops.embedded import embedded_postgres, embedded_redis, scratch_database

    admin = os.environ.get("DATABASE_URL") or stack.enter_context(embedded_postgres(tmp))
    broker = os.environ.get("BROKER_URL") or stack.enter_context(embedded_redis(tmp / "redis"))
    url = stack.enter_context(scratch_database(admin, "switchyard_coding_harness"))
    os.environ.update({"DATABASE_URL": url, "BROKER_URL": broker})


def start_worker(stack: contextlib.ExitStack, tmp: Path) -> None:
    from tasks.engine.queues import QUEUES

    log = open(tmp / "worker.log", "w")  # noqa: SIM115 - closed with the stack
    stack.callback(log.close)
    proc = subprocess.Popen(
        [sys.executable, "-m", "celery", "-A", "tasks.celery_app", "worker", "-P", "threads",
         "-c", "2", "-Q", ",".join(QUEUES), "--without-gossip", "--without-mingle",
         "--loglevel", "WARNING", "-n", f"harness-{os.getpid()}@%h"],
        cwd=ROOT, stdout=log, stderr=subprocess.STDOUT)

    def stop() -> None:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()

    stack.callback(stop)


def run_job(project: str, repo: Path, task: str, timeout: float) -> dict[str, Any]:
    from tasks import catalog
    from tasks.engine import pg
    from tasks.engine.enqueue import EnqueueRequest, enqueue

    catalog.load()
    job = enqueue(EnqueueRequest(project, "code.run_task", {"repo_url": str(repo),
                                                             "task": task})).job_id
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        row = pg.fetch_one_dict("SELECT status, result, last_error FROM agent_jobs WHERE id = %s",
                                (job,))
        if row and row["status"] in ("completed", "failed", "canceled"):
            return {"id": str(job), **row}
        time.sleep(0.5)
    raise TimeoutError(f"job {job} did not finish in {timeout} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", help="comma-separated case names (default: all)")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per job")
    args = parser.parse_args()
    cases = load_cases(args.cases.split(",") if args.cases else None)
    with contextlib.ExitStack() as stack:
        tmp = Path(tempfile.mkdtemp(prefix="switchyard-harness-"))
        tmp.chmod(0o755)  # the sandbox user passes through to the checkouts
        repos, sessions = tmp / "repos", tmp / "sessions"
        repos.mkdir()
        sessions.mkdir()
        for case in cases:
            bare_repo(repos, case)
            (sessions / f"{case['name']}.json").write_text(json.dumps(session(case)))
        os.environ.update({
            "SWITCHYARD_LLM_PROVIDER": "scripted", "SWITCHYARD_SCRIPTED_SESSIONS": str(sessions),
            "SWITCHYARD_LOCAL_REPOS": str(repos), "SWITCHYARD_DATA_DIR": str(tmp / "data"),
            "SWITCHYARD_LOG_LEVEL": "WARNING"})
        setup_services(stack, tmp)
        from tasks.engine import pg

        owner, project = str(uuid.uuid4()), str(uuid.uuid4())
        pg.execute("INSERT INTO owners (id, name) VALUES (%s, 'harness')", (owner,))
        pg.execute("INSERT INTO projects (id, owner_id, name) VALUES (%s, %s, 'harness')",
                   (project, owner))
        start_worker(stack, tmp)
        print(f"{'case':<14} {'cold s':>7} {'warm s':>7}  {'baseline':<22} {'verdict':<12} "
              "delivery")
        failures = 0
        warm_max = 0.0
        for case in cases:
            runs = [run_job(project, repos / f"{case['name']}.git", case["task"], args.timeout)
                    for _ in ("cold", "warm")]
            results = [r["result"] or {} for r in runs]
            cold, warm = (r.get("setup", {}).get("seconds") for r in results)
            verdict = results[-1].get("verdict") if runs[-1]["status"] == "completed" \
                else f"job {runs[-1]['status']}"
            expected = case["expect"]
            ok = verdict == expected["verdict"] and all(
                r["status"] == "completed" for r in runs) and (
                "baseline" not in expected or results[-1].get("baseline") == expected["baseline"])
            failures += not ok
            warm_max = max(warm_max, warm or 0.0)
            baseline = ", ".join(results[-1].get("baseline") or []) or "clean"
            delivery = "pull request" if verdict == "verified" else "draft pull request"
            print(f"{case['name']:<14} {cold or 0:7.2f} {warm or 0:7.2f}  {baseline[:22]:<22} "
                  f"{verdict:<12} {delivery}{'' if ok else '   <-- expected ' + str(expected)}")
            if not ok:
                print(f"    last error: {runs[-1].get('last_error')}; result: "
                      f"{json.dumps(results[-1])[:600]}")
        load = os.getloadavg()
        print(f"\n{len(cases) - failures}/{len(cases)} cases as expected; warm setup at most "
              f"{warm_max:.2f} s (target 5 s); load {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
        if failures:
            sys.exit(1)


if __name__ == "__main__":
    main()
