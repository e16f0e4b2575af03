"""`code.run_task`: a repository and a task → a verified branch and a pull request.

clone → repo map → explore (read-only tools) → plan (JSON, validated) → build (the
tool loop per subtask) → verify (the repository's own checks, up to max_iterations
rounds; debug mode when an error repeats; a self-review where there is nothing to run)
→ deliver (commit, push, pull request). Every phase and every model and tool call is a
step of the job (tasks.coding.loop): a worker killed mid-build resumes at the call it
was in, with the checkout rebuilt from the clone plus the last recorded patch.
"""

from __future__ import annotations

import dataclasses
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tasks.coding import (
    branch_owner,
    environments,
    git,
    github,
    plans,
    prompts,
    repo_files,
    repomap,
    sandbox,
    setup_plan,
    tools,
    verify,
)
from tasks.coding.loop import Agent, Checkout
from tasks.coding.payloads import RunTaskPayload
from tasks.coding.tokens import require_for_pull_request, token_for
from tasks.coding.workspace import workspace_for
from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.services import artifacts
from tasks.settings import get_settings

MAP_CHARS = 8000
EXPLORE_TURNS = 8
BUILD_TURNS = 15
FIX_TURNS = 10
OUTPUT_CHARS = 6000  # of a failed check's output, what the model reads back
DIFF_CHARS = 60_000  # of the diff, what the feed shows
# Fix rounds in a row that change nothing before verify stops: one such round is given
# another try (the next may be in debug mode), two mean the model has nothing more to try.
IDLE_ROUNDS = 2
ALL_TOOLS = tuple(s["name"] for s in tools.TOOL_SCHEMAS)


@dataclass(frozen=True)
class Verification:
    tests_passed: bool | None  # None: nothing to run, a self-review stood in
    rounds: int
    debug_mode: bool
    summary: str
    baseline: list[str] = field(default_factory=list)  # what failed before any edit
    fixed: list[str] = field(default_factory=list)
    broken: list[str] = field(default_factory=list)
    failing: list[str] = field(default_factory=list)  # after the last round
    # failed before and do not pass now (skipped, removed), or checks that run no more
    unproven: list[str] = field(default_factory=list)
    not_run: list[str] = field(default_factory=list)  # checks whose runner is not installed


def network_for(project_id: Any) -> bool:
    if not get_settings().code_network_allowed:
        return False
    value = pg.fetch_value("SELECT settings -> 'code_network' FROM projects WHERE id = %s",
                           (str(project_id),))
    return value is True


def phase(ctx: JobContext, name: str, status: str, detail: str = "") -> None:
    ctx.emit("phase", f"{name} {status}" + (f": {detail}" if detail else ""),
             {"phase": name, "status": status, **({"detail": detail} if detail else {})})


def start(ctx: JobContext, repo_url: str, branch: str | None, task: str, kind: str, *,
          source: git.Source | None = None) -> tuple[Agent, dict[str, Any]]:
    """The checkout (cloned once, as a step) and the agent that works in it. A tenant's
    repo_url is checked (tasks.coding.git.check_source); a `source` is the server's own."""
    checkout = Checkout(workspace_for(str(ctx.job_id)), source, branch)
    policy = sandbox.RunPolicy.from_settings(network=network_for(ctx.project_id))
    agent = Agent(ctx, checkout, policy, context={"task": task, "kind": kind})
    phase(ctx, "clone", "started")
    # Checked once, in the step: a replay keeps the source it was cloned from, whatever the
    # settings (or DNS) say now.
    cloned = ctx.step("clone", clone, ctx, checkout, repo_url)
    checkout.source = git.Source(cloned["source"]["url"], cloned["source"]["kind"])
    checkout.token = token_for(ctx.project_id, checkout.source)
    checkout.base = cloned["base"]
    phase(ctx, "clone", "completed", cloned["base"][:12])
    return agent, cloned


def clone(ctx: JobContext, checkout: Checkout, repo_url: str) -> dict[str, Any]:
    if checkout.source is None:
        checkout.source = git.check_source(repo_url, list(get_settings().local_repos))
    if checkout.source.local and checkout.branch is not None:
        branch_owner.check(ctx.project_id, checkout.branch)
    checkout.token = token_for(ctx.project_id, checkout.source)
    checkout.base, checkout.synced = checkout.clone(), True
    return {"base": checkout.base, "branch": git.current_branch(checkout.ws.root),
            "source": {"url": checkout.source.url, "kind": checkout.source.kind}}


def project_setup_commands(project_id: Any) -> tuple[str, ...]:
    value = pg.fetch_value("SELECT settings -> 'code_setup' FROM projects WHERE id = %s",
                           (str(project_id),))
    return tuple(c for c in value if isinstance(c, str)) if isinstance(value, list) else ()


def setup(agent: Agent) -> dict[str, Any]:
    """The repository's environment, installed (or reused) between clone and explore, as the
    step `setup`; every later command of the job runs with it."""
    ctx = agent.ctx
    phase(ctx, "setup", "started")
    out: dict[str, Any] = agent.step_in_checkout("setup", _set_up, agent, leaves_traces=True)
    if out["status"] in ("installed", "reused") and not environments.is_ready(out["key"]):
        # Recorded on another machine, or evicted since: installed again, recording nothing.
        agent.step_in_checkout("setup-again", _set_up, agent, leaves_traces=True,
                               record=False)
    if out["status"] in ("installed", "reused"):
        agent.policy = dataclasses.replace(agent.policy, env=environments.mounts(
            out["key"], out["variables"]))
    detail = {"installed": f"installed in {out['seconds']:.1f} s", "reused": "reused",
              "nothing": "nothing declared", "failed": out.get("error", "failed")}[out["status"]]
    phase(ctx, "setup", "failed" if out["status"] == "failed" else "completed",
          "; ".join([detail, *out.get("notes", [])]))
    return out


def subject(task: str, limit: int = 72) -> str:
    """A commit's subject line: the task's first line, cut at a word with an ellipsis when
    longer than `limit` (it was cut mid-word: "…so the test")."""
    line = (task.strip().splitlines() or ["Changes"])[0].strip()
    if len(line) <= limit:
        return line
    cut = line[:limit - 1]
    return (cut.rsplit(" ", 1)[0] if " " in cut else cut).rstrip(" ,;:.-") + "…"


def setup_result(out: dict[str, Any]) -> dict[str, Any]:
    """The setup as the job's result tells it; a failed one with its error and the end of
    its output (the installer's own words), which otherwise showed only as tests failing."""
    told = {k: out.get(k) for k in ("status", "kinds", "seconds", "notes")}
    if out.get("status") == "failed":
        told |= {"error": out.get("error"), "output": str(out.get("output", ""))[-2000:]}
    return told


def _set_up(agent: Agent) -> dict[str, Any]:
    root = agent.checkout.ws.root
    tools = environments.installer()
    plan = setup_plan.plan_setup(root, installer=tools.name,
                                 toolchains=environments.toolchains(),
                                 project_commands=project_setup_commands(agent.ctx.project_id))
    assert agent.checkout.source is not None
    key = setup_plan.environment_key(root, plan, project=str(agent.ctx.project_id),
                                     repository=agent.checkout.source.url,
                                     installer=tools.name,
                                     python_version=environments.python_version())
    done = environments.set_up(root, plan, key, agent.policy, tools)
    agent.ctx.emit("setup", f"setup {done['status']}", {
        k: done.get(k) for k in ("status", "kinds", "seconds", "notes", "error")}
        | {"output": done.get("output", "")[-4000:]})
    return {**done, "variables": plan.variables}


def _parse_plan(text: str) -> dict[str, Any]:
    plan, errors = plans.parse_plan(text)
    return {"plan": plan.as_dict() if plan else None, "errors": errors}


def explore_and_plan(agent: Agent, task: str) -> tuple[str, str, plans.Plan]:
    ctx = agent.ctx
    phase(ctx, "map", "started")
    mapped = agent.step_in_checkout("map", lambda: repomap.build_map(
        agent.checkout.ws.root, budget_chars=MAP_CHARS,
        focus=repomap.focus_terms(task)).as_dict())
    phase(ctx, "map", "completed", f"{mapped['total_files']} files")
    phase(ctx, "explore", "started")
    explored = agent.loop("explore", purpose="code.explore", system=prompts.EXPLORE,
                          prompt=prompts.task_prompt(task, mapped["text"]),
                          tool_names=tuple(tools.READ_ONLY_TOOLS), max_turns=EXPLORE_TURNS)
    phase(ctx, "explore", "completed")
    phase(ctx, "plan", "started")
    plan = make_plan(agent, task, mapped["text"], explored.summary)
    phase(ctx, "plan", "completed", f"{len(plan.subtasks)} subtasks")
    return mapped["text"], explored.summary, plan


def make_plan(agent: Agent, task: str, repo_map: str, report: str) -> plans.Plan:
    """Asked once, asked again with the schema's complaints, then one subtask (a warning)."""
    messages: list[dict[str, Any]] = [
        {"role": "user", "content": prompts.plan_prompt(task, repo_map, report)}]
    for attempt in (1, 2):
        answer = agent.ask(f"llm:plan:{attempt}", purpose="code.plan", system=prompts.PLAN,
                           messages=messages, max_tokens=2000)
        parsed = agent.ctx.step(f"plan:parse:{attempt}", _parse_plan, answer.text)
        plan = plans.Plan.from_dict(parsed["plan"]) if parsed["plan"] else None
        errors = parsed["errors"]
        if plan is not None:
            agent.ctx.emit("plan", f"{len(plan.subtasks)} subtasks",
                           {"subtasks": plan.as_dict()["subtasks"], "fallback": False})
            return plan
        messages += [{"role": "assistant", "content": answer.text or "(empty)"},
                     {"role": "user", "content": prompts.plan_retry(errors)}]
    plan = plans.fallback_plan(task)
    agent.ctx.emit("log", "the model gave no valid plan twice: the task is one subtask",
                   {"level": "warning", "errors": errors[:10]})
    agent.ctx.emit("plan", "1 subtask (fallback)",
                   {"subtasks": plan.as_dict()["subtasks"], "fallback": True})
    return plan


def build(agent: Agent, task: str, repo_map: str, report: str, plan: plans.Plan,
          purpose: str = "code.build") -> list[str]:
    phase(agent.ctx, "build", "started")
    subtasks = plan.as_dict()["subtasks"]
    summaries = []
    for n, sub in enumerate(subtasks, start=1):
        done = agent.loop(f"build:{n}", purpose=purpose, system=prompts.BUILD,
                          prompt=prompts.subtask_prompt(task, repo_map, report, sub, n,
                                                        len(subtasks)),
                          tool_names=ALL_TOOLS, max_turns=BUILD_TURNS, subtask=n - 1)
        summaries.append(done.summary)
    phase(agent.ctx, "build", "completed")
    return summaries


def run_checks(agent: Agent, round_: int, baseline: list[dict[str, Any]] | None = None,
               set_aside: frozenset[str] = frozenset()) -> dict[str, Any]:
    """The repository's checks, run in the sandbox; their results as the step's output.
    Round 0 is the baseline, before any edit: what already failed is not the agent's doing.

    A check whose runner is not installed is set aside (not run, with the fix) at the
    baseline; later, only if it was set aside then (`set_aside`, by name). What a check
    prints is the repository's, and so the agent's, to write: a check that ran at the
    baseline and now says its runner is missing (a planted pytest.py saying so) failed."""
    root = agent.checkout.ws.root
    results: list[dict[str, Any]] = []
    not_run: list[str] = []
    aside: list[str] = []
    for check in verify.detect_commands(root):
        _clear_reports(root)
        ran = sandbox.run_command(root, check.command, agent.policy)
        why = verify.runner_missing(check, ran.exit_code, ran.output)
        if why and (round_ == 0 or check.name in set_aside):
            not_run.append(why)
            aside.append(check.name)
            continue
        results.append({"name": check.name, "command": check.command,
                        "exit_code": ran.exit_code, "timed_out": ran.timed_out,
                        "tests": _report(root, check),
                        "output": verify.truncate(ran.output.replace("\x00", "\\0"),
                                                  OUTPUT_CHARS)})
    _clear_reports(root)
    for r in results:
        r["passed"] = r["exit_code"] is not None and verify.passed(
            verify.Check(r["name"], r["command"]), r["exit_code"])
    judged = verify.verdict(baseline, results)
    # Every check, passed ones as one line each (given only the failed ones, a clean round
    # read "No checks ran."), then why the round is not verified if the checks do not say.
    summary = "\n\n".join(part for part in (verify.failure_summary(
        [(verify.Check(r["name"], r["command"]), r["exit_code"], r["output"])
         for r in results], OUTPUT_CHARS), verify.verdict_notes(judged)) if part)
    if results:
        label = "baseline" if round_ == 0 else f"round {round_}"
        state = ("clean" if judged.passed else "already failing") if round_ == 0 \
            else ("passed" if judged.passed else "failed")
        agent.ctx.emit("verify", f"{label}: {state}",
                       {"round": round_, "baseline": round_ == 0,
                        "commands": [r["command"] for r in results],
                        "passed": judged.passed, "output": (summary or "all checks passed")[:4000],
                        "fixed": judged.fixed[:50], "broken": judged.broken[:50],
                        "failing": judged.failing[:50], "unproven": judged.unproven[:50],
                        "self_review": False,
                        "not_run": not_run})
    return {"ran": bool(results), "passed": judged.passed, "summary": summary,
            "results": results, "fixed": judged.fixed, "broken": judged.broken,
            "failing": judged.failing, "unproven": judged.unproven, "not_run": not_run,
            "set_aside": aside}


def _clear_reports(root: Path) -> None:
    reports = root / verify.REPORTS
    if reports.is_symlink() or reports.is_file():
        reports.unlink()
    elif reports.is_dir():
        shutil.rmtree(reports, ignore_errors=True)


def _report(root: Path, check: verify.Check) -> dict[str, list[str]] | None:
    """The tests a check's JUnit report names, passed and failed (None: no report)."""
    if check.report is None or (root / verify.REPORTS).is_symlink():
        return None
    found = verify.junit_tests(repo_files.text(root / check.report, verify.REPORT_MAX_BYTES))
    return None if found is None else {"passed": found[0][:2000], "failed": found[1][:2000]}


def self_review(agent: Agent, task: str, round_: int) -> tuple[bool, str]:
    diff = agent.step_in_checkout(f"review-diff:{round_}", git.diff_text,
                                  agent.checkout.ws.root, agent.checkout.base, DIFF_CHARS)
    answer = agent.ask(f"llm:review:{round_}", purpose="code.review", system=prompts.REVIEW,
                       messages=[{"role": "user", "content": prompts.review_prompt(task, diff)}],
                       max_tokens=1000)
    passed = answer.text.strip().upper().startswith("PASS")
    return passed, answer.text


def baseline(agent: Agent) -> dict[str, Any]:
    """The checks once before any edit: which tests already fail."""
    return agent.step_in_checkout("verify:baseline", run_checks, agent, 0, leaves_traces=True)


def verify_loop(agent: Agent, task: str, max_iterations: int,
                before: dict[str, Any] | None = None) -> Verification:
    ctx = agent.ctx
    phase(ctx, "verify", "started")
    history = verify.ErrorHistory()
    debug = False
    passed: bool | None = None
    summary = ""
    judged: dict[str, Any] = {}
    round_ = 0
    not_run: list[str] = []
    base_results = before["results"] if before and before["ran"] else None
    set_aside = frozenset(before.get("set_aside", [])) if before else frozenset()
    idle = 0  # fix rounds in a row that changed nothing
    for round_ in range(1, max_iterations + 1):
        if idle:
            # The files are the ones just checked: their checks would say the same again.
            ctx.emit("verify", f"round {round_}: nothing changed since round {round_ - 1}, "
                     + ("stopping" if idle >= IDLE_ROUNDS else "its checks stand"),
                     {"round": round_, "unchanged": True, "passed": passed})
            if idle >= IDLE_ROUNDS:
                break
        else:
            checked = agent.step_in_checkout(f"verify:{round_}", run_checks, agent, round_,
                                             base_results, set_aside, leaves_traces=True)
            passed, summary, judged, not_run = _judge(agent, task, round_, checked)
        if passed is not False or round_ == max_iterations:
            break
        if history.add(summary) and not debug:
            debug = True
            ctx.emit("debug_mode", "the same error again: debugging the root cause",
                     {"error": summary[:2000]})
        system = verify.DEBUG_SYSTEM_PROMPT + "\n\n" + verify.debug_prompt(history) \
            if debug else prompts.FIX
        edits = len(agent.checkout.patches)
        agent.loop(f"fix:{round_}", purpose="code.debug" if debug else "code.fix",
                   system=system, prompt=prompts.fix_prompt(task, summary, round_),
                   tool_names=ALL_TOOLS, max_turns=FIX_TURNS)
        idle = idle + 1 if len(agent.checkout.patches) == edits else 0
    phase(ctx, "verify", "completed",
          "self-review" if passed is None else ("passed" if passed else "failed"))
    return Verification(passed, round_, debug, summary,
                        baseline=before["failing"] if before and before["ran"] else [],
                        fixed=judged.get("fixed", []), broken=judged.get("broken", []),
                        unproven=judged.get("unproven", []),
                        failing=judged.get("failing", []), not_run=not_run)


def _judge(agent: Agent, task: str, round_: int, checked: dict[str, Any]
           ) -> tuple[bool | None, str, dict[str, Any], list[str]]:
    """A round's verdict from its checks: passed (None: the model's self-review stood in),
    the summary the model reads, what was fixed or broken, and the checks that could not run."""
    ctx = agent.ctx
    not_run = checked.get("not_run", [])
    # Checks that ran at the baseline and run no more are a failure, not a reason for the
    # model's review to stand in (deleting the only test file read "self-reviewed").
    if checked["ran"] or checked.get("unproven"):
        judged = {k: checked.get(k, []) for k in ("fixed", "broken", "failing", "unproven")}
        return checked["passed"], checked["summary"], judged, not_run
    # Nothing to run: the model's review of the diff stands in, marked as such.
    ok, summary = self_review(agent, task, round_)
    ctx.emit("verify", f"round {round_}: self-review {'passed' if ok else 'failed'}"
             + (f" ({len(not_run)} check(s) could not run)" if not_run else ""),
             {"round": round_, "commands": [], "passed": ok, "output": summary[:4000],
              "self_review": True, "not_run": not_run})
    return (None if ok else False), summary, {}, not_run


def diff_of(agent: Agent) -> dict[str, Any]:
    root, base = agent.checkout.ws.root, agent.checkout.base
    text = git.diff_text(root, base, DIFF_CHARS)
    files = [{"path": f.path, "added": f.added, "removed": f.deleted}
             for f in git.diff_stat(root, base)]
    out = {"diff": text, "truncated": len(text) >= DIFF_CHARS, "files": files}
    agent.ctx.emit("diff", f"{len(files)} files changed", out)
    return out


def deliver(agent: Agent, *, task: str, base_branch: str, github_repo: str | None,
            plan: plans.Plan, verification: Verification,
            open_draft_on_failure: bool = True) -> dict[str, Any]:
    """A verified change: the branch and an ordinary pull request. An unverified one: a draft
    pull request that says so (open_draft_on_failure), else the branch alone, never both."""
    ctx, checkout = agent.ctx, agent.checkout
    phase(ctx, "deliver", "started")
    diff = agent.step_in_checkout("diff", diff_of, agent)
    if not diff["files"]:
        phase(ctx, "deliver", "completed", "nothing changed")
        return {"branch": None, "commit": None, "pr_url": None, "draft": False}
    failed = verification.tests_passed is False
    patch = agent.step_in_checkout("patch", git.changes, checkout.ws.root, checkout.base)
    checkout.replace_patches(patch)  # what is pushed is exactly what the artifact holds
    artifacts.write(ctx, kind="patch", name="changes.patch", content_type="text/x-diff",
                    data=patch.encode())
    branch = git.branch_name(str(ctx.job_id), task)
    message = (f"{subject(task)}\n\nBy Switchyard's coding agent (job {ctx.job_id}).")
    commit = agent.step_in_checkout("push", git.commit_and_push, checkout.ws.root,
                                    branch=branch, message=message, token=checkout.token)
    pr_url = None
    draft = failed and open_draft_on_failure
    if github_repo and (draft or not failed):
        body = pr_body(task, plan, verification, agent.spend.as_dict())
        pr = ctx.step("pull-request", open_pr, ctx, github_repo, branch, base_branch,
                      task, body, draft)
        pr_url = pr["url"]
    phase(ctx, "deliver", "completed",
          f"{branch} (unverified{': draft pull request' if pr_url else ''})" if failed
          else branch)
    return {"branch": branch, "commit": commit, "pr_url": pr_url, "draft": bool(pr_url and draft)}


def open_pr(ctx: JobContext, repo: str, head: str, base: str, task: str,
            body: str, draft: bool = False) -> dict[str, Any]:
    # The token is read here, inside the step, so it is never part of a step's input.
    token = require_for_pull_request(ctx.project_id, repo)
    pr = github.open_pull_request(repo=repo, head=head, base=base,
                                  title=task.strip().splitlines()[0][:120], body=body,
                                  token=token, draft=draft)
    ctx.emit("pull_request", f"pull request #{pr.number}",
             {"url": pr.url, "number": pr.number, "branch": head})
    return {"url": pr.url, "number": pr.number}


def pr_body(task: str, plan: plans.Plan, verification: Verification,
            spend: dict[str, Any]) -> str:
    steps = "\n".join(f"{i}. {s['title']}" for i, s in
                      enumerate(plan.as_dict()["subtasks"], start=1))
    if verification.tests_passed is None:
        verdict = ("no check could run (" + "; ".join(verification.not_run) + ")"
                   if verification.not_run else "no test or build command found")
        verdict += ": reviewed by the model against the task"
    else:
        verdict = "the checks pass" if verification.tests_passed else "the checks still fail"
        if verification.not_run:
            verdict += "; not run: " + "; ".join(verification.not_run)
    if verification.baseline:
        verdict += (f"; {len(verification.baseline)} already failed before the change"
                    f" ({len(verification.fixed)} fixed, {len(verification.broken)} broken)")
    head = ""
    if verification.tests_passed is False:
        broken = set(verification.broken)
        listed = "".join(f"\n- `{t}`" + (" (passed before this change)" if t in broken else "")
                         for t in verification.failing[:20])
        listed += "".join(f"\n- `{t}` (failed before this change; skipped or removed now)"
                          for t in verification.unproven[:20])
        head = ("Verification failed: this change does not pass the repository's checks."
                + (f"\n\nFailing:{listed}" if listed else "")
                + f"\n\n```\n{verification.summary[:3000]}\n```\n\n")
    return (f"{head}{task}\n\n### Plan\n{steps}\n\n### Verification\n{verdict} after "
            f"{verification.rounds} round(s)" + (" (debug mode)" if verification.debug_mode
                                                 else "")
            + f"\n\n### Cost\n{spend['tokens_in']} tokens in, {spend['tokens_out']} out, "
            f"${spend['cost_usd']:.4f}\n\n_Opened by Switchyard's coding agent._")


def verdict(verification: Verification, *, changed: bool) -> str:
    """What the job's result says of its work: a task that changed nothing verified nothing,
    whatever the checks said of the files as they were."""
    if not changed:
        return "unchanged"
    return {True: "verified", False: "unverified", None: "self-reviewed"}[
        verification.tests_passed]


def run_task(ctx: JobContext, p: RunTaskPayload) -> dict[str, Any]:
    resumed = ctx.replaying
    agent, cloned = start(ctx, p.repo_url, p.branch, p.task, "run_task")
    set_up = setup(agent)
    before = baseline(agent)
    repo_map, report, plan = explore_and_plan(agent, p.task)
    build(agent, p.task, repo_map, report, plan)
    verification = verify_loop(agent, p.task, p.max_iterations, before)
    delivered = deliver(agent, task=p.task, base_branch=p.branch or cloned["branch"],
                        github_repo=p.github_repo, plan=plan, verification=verification,
                        open_draft_on_failure=p.open_draft_on_failure)
    return {**delivered, "iterations": verification.rounds,
            "tests_passed": verification.tests_passed,
            "verdict": verdict(verification, changed=delivered["branch"] is not None),
            "baseline": verification.baseline, "fixed": verification.fixed,
            "broken": verification.broken, "unproven": verification.unproven,
            "subtasks": len(plan.subtasks),
            "debug_mode": verification.debug_mode, "resumed": resumed,
            "checks_not_run": verification.not_run,
            "setup": setup_result(set_up),
            **agent.spend.as_dict()}
