"""`code.generate_mvp` (Greenlight): the coding agent's loop pointed at a fresh site.

A new repository (a bare one under the data dir) or the one given; the same explore →
plan → build → verify loop writes a small working site and its test; the change is
committed and pushed; the project's deploy hook is asked for through an approval (the
effect ledger runs it once a person approves) when the project permits deploys; a file
manifest is stored as an artifact and the decisions go to memory.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from tasks.coding import git, pipeline
from tasks.coding.payloads import GenerateMvpPayload
from tasks.engine import pg
from tasks.engine.context import JobContext
from tasks.services import approvals, artifacts
from tasks.services.effects.policy import operator, policy_for
from tasks.services.memory import write_memory
from tasks.settings import get_settings

MVP_TASK = ("Build a small working website for this product: {description}\n"
            "A static landing page (index.html) with a waitlist form asking for an email, "
            "or a tiny Flask app if the product needs a server, plus a test that proves the "
            "site builds (tests/test_site.py, runnable with pytest, no network).")


def new_repository(job_id: str) -> str:
    """data_dir/repos/mvp/<job>.git with one empty commit on main (a base to branch from)."""
    bare = (get_settings().data_dir / "repos" / "mvp" / f"{job_id}.git").resolve()
    if (bare / "HEAD").exists():
        return str(bare)
    bare.parent.mkdir(parents=True, exist_ok=True)
    bare.parent.chmod(0o711)  # a sandboxed command may not list other jobs' repositories
    ident = ["-c", "user.name=Switchyard", "-c", "user.email=agent@switchyard.local"]
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["git", "-C", tmp, "init", "-q", "-b", "main"], check=True)
        subprocess.run(["git", "-C", tmp, *ident, "commit", "-q", "--allow-empty", "-m",
                        "A new repository"], check=True)
        subprocess.run(["git", "clone", "-q", "--bare", tmp, str(bare)], check=True)
    return str(bare)


def manifest(root: Path) -> list[dict[str, Any]]:
    """Each committed file's size and SHA-256. Never followed out of the checkout: a symlink
    is described by its target's text (a link to /dev/zero must not be read), and anything
    but a regular file or a link is skipped."""
    files = []
    for name in git.tracked_files(root):
        path = root / name
        mode = path.lstat().st_mode
        if stat.S_ISLNK(mode):
            data = os.readlink(path).encode()
        elif stat.S_ISREG(mode):
            data = path.read_bytes()
        else:
            continue
        files.append({"path": name, "size": len(data),
                      "sha256": hashlib.sha256(data).hexdigest()})
    return files


def ask_for_deploy(ctx: JobContext, commit: str, branch: str, repo_url: str) -> dict[str, Any]:
    """An approval for the project's deploy hook, when the project permits deploys at all."""
    settings = pg.fetch_value("SELECT settings FROM projects WHERE id = %s",
                              (str(ctx.project_id),)) or {}
    url = settings.get("deploy_hook_url")
    if not url:
        return {"status": "skipped", "why": "the project has no deploy_hook_url"}
    if not policy_for(settings, "deploy_hook", operator()).allowed:
        return {"status": "skipped", "why": "the project does not permit deploy_hook"}
    approval = approvals.create_approval(ctx.project_id, ctx.job_id, approvals.NewApproval(
        "deploy_hook", f"Deploy the MVP ({branch} @ {commit[:12]})",
        {"url": url, "payload": {"commit": commit, "branch": branch, "repository": repo_url}}))
    return {"status": "awaiting_approval", "approval_id": str(approval)}


def generate(ctx: JobContext, p: GenerateMvpPayload, *, resumed: bool) -> dict[str, Any]:
    if p.repo_url:
        repo_url, source = p.repo_url, None
    else:
        repo_url = ctx.step("create-repository", new_repository, str(ctx.job_id))
        source = git.Source(repo_url, "local")  # the server's own: no tenant path to check
    task = MVP_TASK.format(description=p.description)
    agent, cloned = pipeline.start(ctx, repo_url, None, task, "mvp", source=source)
    agent.context["task"] = p.description
    repo_map, report, plan = pipeline.explore_and_plan(agent, task)
    pipeline.build(agent, task, repo_map, report, plan)
    verification = pipeline.verify_loop(agent, task, 3)
    delivered = pipeline.deliver(agent, task=f"MVP: {p.description}", base_branch=cloned["branch"],
                             github_repo=p.github_repo if p.repo_url else None, plan=plan,
                             verification=verification)
    files = agent.step_in_checkout("manifest", manifest, agent.checkout.ws.root)
    artifacts.write(ctx, kind="manifest", name="manifest.json",
                    content_type="application/json",
                    data=json.dumps({"repository": repo_url, **delivered, "files": files},
                                    indent=1).encode())
    deploy = {"status": "skipped", "why": "nothing was committed"}
    if delivered["commit"]:
        deploy = ctx.step("ask-for-deploy", ask_for_deploy, ctx, delivered["commit"],
                          delivered["branch"], repo_url)
    verdict = ("its tests pass" if verification.tests_passed else
               "reviewed by the model" if verification.tests_passed is None else
               "its tests still fail")
    ctx.step("write-memory", write_memory, ctx.project_id, "decision", "mvp",
             f"MVP for {p.description[:300]!r}: {len(files)} files on branch "
             f"{delivered['branch']} of {repo_url} ({verdict}); plan: "
             + "; ".join(s["title"] for s in plan.as_dict()["subtasks"]),
             job_id=ctx.job_id, step="write-memory")
    return {**delivered, "repo_url": repo_url, "iterations": verification.rounds,
            "tests_passed": verification.tests_passed, "subtasks": len(plan.subtasks),
            "debug_mode": verification.debug_mode, "resumed": resumed,
            "files": [f["path"] for f in files], "deploy": deploy, **agent.spend.as_dict()}
