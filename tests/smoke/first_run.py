"""The first run, the way a user makes it: every system of a running `switchyard up` driven
through the HTTP API, then the UI in Chromium. `.ci/first-run` runs it as an ordinary user
against `up` on a fresh clone; by hand:

    python tests/smoke/first_run.py http://127.0.0.1:8000/ sy_... \
        --demo-repo ./.switchyard/repos/calculator.git

The standard library (urllib) and playwright only, which the README's install brings, so it
runs from the user's own virtualenv; the browser is Debian's /usr/bin/chromium, never a
downloaded one. Each step is a named check with a timeout, run side by side (the worker takes
8 jobs at once); each prints one PASS or FAIL line as it ends, and the last line is
`smoke: N passed, M failed`. Exit status 0 only when every check passed.

The page the browser check loads is served by this script on loopback: `up` must be started
with SWITCHYARD_EGRESS_ALLOW=127.0.0.1 (the egress guard refuses loopback by default).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.server
import json
import os
import subprocess
import sys
import threading
import time
import traceback
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

CHROMIUM = Path("/usr/bin/chromium")
DEMO_TASK = "Fix the failing test in the calculator"
TERMINAL = ("completed", "failed", "canceled")
PHASES = ("idea", "validation", "build", "launch", "growth")

# A landing page that passes every check of browser.check_page.
LANDING = b"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>Tidewater: tide-aware scheduling</title>
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="description" content="Scheduling for harbour masters that knows the tides.">
<link rel="canonical" href="http://127.0.0.1/">
<meta property="og:title" content="Tidewater">
<meta property="og:description" content="Scheduling that knows the tides.">
<meta property="og:image" content="http://127.0.0.1/og.png">
<meta name="twitter:card" content="summary">
<style>body{font:18px sans-serif;margin:0;padding:16px} input,button{display:block;
min-height:48px;min-width:200px;font-size:18px;margin:8px 0}</style>
</head><body><h1>Tidewater</h1><p>Join the waitlist.</p>
<form method="post" action="/join"><input type="email" name="email" placeholder="you@port.example">
<button type="submit">Join</button></form></body></html>"""

FUNCTION = "export async function runTask(input, tools) {\n  return {hello: input.who};\n}\n"


class CheckFailed(Exception):
    pass


def require(cond: object, message: str) -> None:
    if not cond:
        raise CheckFailed(message)


class Api:
    def __init__(self, base: str, token: str) -> None:
        self.base = base.rstrip("/")
        self.token = token

    def raw(self, method: str, path: str, body: Any = None, *,
            timeout: float = 20.0) -> tuple[int, bytes, str]:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.base + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read(), r.headers.get("content-type", "")
        except urllib.error.HTTPError as e:
            return e.code, e.read(), e.headers.get("content-type", "")

    def call(self, method: str, path: str, body: Any = None,
             ok: tuple[int, ...] = (200, 201, 202)) -> Any:
        status, data, _ = self.raw(method, path, body)
        if status not in ok:
            raise CheckFailed(f"{method} {path} answered {status}: {data[:500]!r}")
        return json.loads(data) if data else None

    def get(self, path: str) -> Any:
        return self.call("GET", path)

    def post(self, path: str, body: Any) -> Any:
        return self.call("POST", path, body)

    def project(self, name: str) -> str:
        return self.post("/api/projects", {"name": name, "goal": (
            "sell tide-aware scheduling to harbour masters")})["id"]

    def job(self, project: str, job_type: str, payload: dict[str, Any]) -> str:
        return self.post(f"/api/projects/{project}/jobs",
                         {"job_type": job_type, "payload": payload})["job_id"]

    def wait_job(self, job_id: str, deadline: float, want: str = "completed") -> dict[str, Any]:
        job = until(lambda: (j := self.get(f"/api/jobs/{job_id}"))["status"] in TERMINAL and j,
                    deadline, f"job {job_id} to end")
        if job["status"] != want:
            raise CheckFailed(f"job {job_id} ({job['job_type']}) ended {job['status']}, not "
                              f"{want}: {str(job.get('last_error'))[:800]}")
        return job

    def artifact(self, job_id: str, content_type: str) -> bytes:
        items = self.get(f"/api/jobs/{job_id}/artifacts")["items"]
        found = [a for a in items if a["content_type"] == content_type]
        require(found, f"no {content_type} artifact among "
                       f"{[(a['name'], a['content_type']) for a in items]}")
        url = found[0]["url"]
        status, data, ctype = self.raw("GET", url if url.startswith("/") else "/" + url)
        require(status == 200, f"GET {url} answered {status}")
        require(ctype.startswith(content_type), f"{url} came as {ctype}")
        return data


def until(probe: Callable[[], Any], deadline: float, what: str, every: float = 0.5) -> Any:
    """probe() until it answers something true, or fail at the deadline saying what it waited
    for and its last answer."""
    last: Any = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise CheckFailed(f"timed out waiting for {what} (last: {str(last)[:300]})")
        time.sleep(every)


# --- the checks ----------------------------------------------------------------------------------

def check_launch_packet_phase_advance(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: launch")
    launched = api.post(f"/api/projects/{pid}/launch", {})
    api.wait_job(launched["job_id"], deadline)
    packets = api.get(f"/api/projects/{pid}/packets")["items"]
    require(len(packets) == 1, f"after launch, {len(packets)} packets")
    first = packets[0]
    require(first["title"] and first["summary"], f"an empty packet: {first}")
    inbox = api.get(f"/api/inbox?project_id={pid}&status=pending")["items"]
    advance = [a for a in inbox if a["action_type"] == "phase_advance"]
    require(advance, f"no phase_advance approval among {[a['action_type'] for a in inbox]}")
    approval = advance[0]
    decided = api.post(f"/api/inbox/{approval['id']}/decision",
                       {"decision": "approved", "version": approval["version"]})
    require(decided["status"] == "approved", f"the decision: {decided}")
    project = until(lambda: (p := api.get(f"/api/projects/{pid}"))["phase"] == "validation"
                    and p, deadline, "the project to move to validation")
    packets = api.get(f"/api/projects/{pid}/packets")["items"]
    require(len(packets) == 2, f"after the phase advance, {len(packets)} packets")
    phases = [PHASES[p["phase"]] if isinstance(p["phase"], int) else p["phase"]
              for p in packets]
    require(phases == ["validation", "idea"], f"packets' phases, newest first: {phases}")
    return f"{first['title']!r} → {packets[0]['title']!r}, phase {project['phase']}"


def check_chat(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: chat")
    sent = api.post(f"/api/projects/{pid}/chat", {"message": "What should we do this week?"})
    api.wait_job(sent["job_id"], deadline)
    items = api.get(f"/api/projects/{pid}/chat")["items"]
    replies = [m for m in items if m["role"] == "assistant" and m["content"].strip()]
    require(replies, f"no assistant reply among {items}")
    return f"{len(replies[0]['content'])} chars"


def report(fmt: str, content_type: str, magic: bytes) -> Callable[..., str]:
    def check(api: Api, deadline: float, _: argparse.Namespace) -> str:
        pid = api.project(f"first run: {fmt}")
        jid = api.job(pid, "research.generate_report",
                      {"topic": "tide-aware scheduling for harbours", "format": fmt})
        api.wait_job(jid, deadline)
        data = api.artifact(jid, content_type)
        require(data.startswith(magic), f"the {fmt} starts {data[:8]!r}")
        return f"{len(data)} bytes"
    check.__name__ = f"check_report_{fmt}"
    return check


class Landing(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/html; charset=utf-8")
        self.send_header("Content-Length", str(len(LANDING)))
        self.end_headers()
        self.wfile.write(LANDING)

    def log_message(self, *args: Any) -> None:
        pass


def check_browser_page(api: Api, deadline: float, _: argparse.Namespace) -> str:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Landing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/"
        pid = api.project("first run: page check")
        jid = api.job(pid, "browser.check_page", {"url": url, "checks": [
            "screenshot", "mobile_responsive", "waitlist_form", "meta_tags"]})
        result = api.wait_job(jid, deadline)["result"]
    finally:
        server.shutdown()
    failing = {k: v for k, v in result["checks"].items() if not v.get("ok")}
    require(not failing, f"checks that failed: {failing}")
    require(len(result["checks"]) == 4, f"checks run: {sorted(result['checks'])}")
    png = api.artifact(jid, "image/png")
    require(png.startswith(b"\x89PNG"), "the screenshot is not a PNG")
    return f"{url}: all 4 checks ok"


def check_code_task(api: Api, deadline: float, args: argparse.Namespace) -> str:
    require(args.demo_repo, "no --demo-repo (switchyard up prints it)")
    pid = api.project("first run: code task")
    jid = api.post(f"/api/projects/{pid}/code-tasks",
                   {"repo_url": args.demo_repo, "task": args.demo_task})["job_id"]
    result = api.wait_job(jid, deadline)["result"]
    require(result.get("tests_passed") is True, f"tests_passed: {result.get('tests_passed')}")
    branch = result.get("branch")
    require(branch, f"no branch in {result}")
    listed = subprocess.run(["git", "--git-dir", args.demo_repo, "branch", "--list", branch],
                            capture_output=True, text=True, timeout=30)
    require(branch in listed.stdout, f"branch {branch} is not in {args.demo_repo}: "
                                     f"{listed.stdout or listed.stderr}")
    return f"tests pass on {branch}"


def check_generate_mvp(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: mvp")
    jid = api.job(pid, "code.generate_mvp",
                  {"description": "a waitlist page for tide-aware harbour scheduling"})
    result = api.wait_job(jid, deadline)["result"]
    require(result.get("branch") and result.get("commit"), f"nothing delivered: {result}")
    require(result.get("files"), f"no files: {result}")
    require(result.get("tests_passed") is not False, f"its checks fail: {result}")
    return f"{len(result['files'])} files on {result['branch']}"


def check_workflow_condition(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: workflow")
    canary = {"steps": 2, "step_seconds": 0.1}
    saved = api.post(f"/api/projects/{pid}/workflows", {"name": "first run", "steps": [
        {"name": "build", "job_type": "system.canary", "payload": canary},
        {"name": "ship", "job_type": "system.canary", "depends_on": ["build"],
         "payload": {"steps": "{{steps.build.output.steps}}"},
         "condition": "steps.build.output.steps >= 2"},
        {"name": "hold", "job_type": "system.canary", "depends_on": ["build"],
         "payload": canary, "condition": "steps.build.output.steps > 5"},
    ]})
    jid = api.post(f"/api/workflows/{saved['id']}/runs", {"inputs": {}})["job_id"]
    api.wait_job(jid, deadline)
    run = api.get(f"/api/workflow-runs/{jid}")
    statuses = {name: s["status"] for name, s in run["steps"].items()}
    require(statuses == {"build": "completed", "ship": "completed", "hold": "skipped"},
            f"steps: {statuses}")
    return "the condition that holds ran, the other skipped"


def check_plan_auto_approve(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: plan")
    started = api.post(f"/api/projects/{pid}/plans", {
        "name": "first run", "goal": "a one-page brief on tide-aware scheduling",
        "auto_approve": True})
    plan = until(lambda: (p := api.get(f"/api/plans/{started['plan_id']}"))["status"]
                 in ("completed", "failed") and p, deadline, "the plan to end")
    require(plan["status"] == "completed", f"the plan {plan['status']}: {plan.get('error')}")
    tasks = {t["id"]: t["status"] for t in plan["tasks"]}
    require(tasks and set(tasks.values()) == {"completed"}, f"tasks: {tasks}")
    return f"{len(tasks)} tasks completed"


def check_function_run(api: Api, deadline: float, _: argparse.Namespace) -> str:
    pid = api.project("first run: function")
    api.post(f"/api/projects/{pid}/functions",
             {"name": "greet", "code": FUNCTION, "language": "javascript"})
    jid = api.post(f"/api/projects/{pid}/functions/greet/runs",
                   {"input": {"who": "first run"}})["job_id"]
    result = api.wait_job(jid, deadline)["result"]
    require(result == {"output": {"hello": "first run"}}, f"result: {result}")
    return "output {'hello': 'first run'}"


def check_ui_sign_in_launch_packet(api: Api, deadline: float, args: argparse.Namespace) -> str:
    from playwright.sync_api import expect, sync_playwright

    require(CHROMIUM.exists(), f"{CHROMIUM} is missing")
    left = lambda: max(int((deadline - time.monotonic()) * 1000), 1000)  # noqa: E731
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM))
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            errors: list[str] = []
            page.on("pageerror", lambda exc: errors.append(str(exc)))
            page.on("console", lambda msg: errors.append(msg.text) if msg.type == "error"
                    and not msg.text.startswith("Failed to load resource") else None)
            page.goto(api.base + "/", timeout=left())
            page.fill("#token", api.token, timeout=left())
            page.click("form button[type=submit]", timeout=left())
            expect(page.get_by_role("heading", name="Projects", level=1)).to_be_visible(
                timeout=left())
            page.fill("#p-name", "From the browser", timeout=left())
            page.fill("#p-goal", "sell tide-aware scheduling to harbour masters")
            page.click("#new-project button[type=submit]", timeout=left())
            link = page.locator("#projects a.title", has_text="From the browser")
            link.click(timeout=left())
            expect(page.locator("#live")).to_have_attribute("data-state", "live", timeout=left())
            page.click("#launch", timeout=left())
            packet = page.locator("#packets .packet").first
            expect(packet).to_be_visible(timeout=left())
            title = packet.locator(".packet-title").inner_text(timeout=left())
            # The sections: the launch's job in Jobs, and Settings reached by its link
            page.click("#sections a[data-section=jobs]", timeout=left())
            expect(page.locator("#jobs tr[data-job-id]").first).to_be_visible(timeout=left())
            page.goto(page.url.split("#")[0] + "#settings", timeout=left())
            expect(page.locator("#st-name")).to_have_value("From the browser", timeout=left())
            if args.shots:
                Path(args.shots).mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(Path(args.shots) / "first-run-packet.png"),
                                full_page=True)
            require(not errors, f"errors on the page: {errors}")
        finally:
            browser.close()
    return f"packet {title!r} shown"


CHECKS: list[tuple[str, Callable[[Api, float, argparse.Namespace], str], float]] = [
    ("launch → packet → approve phase advance → next packet", check_launch_packet_phase_advance,
     120),
    ("chat", check_chat, 60),
    ("report: pptx", report("pptx", "application/vnd.openxmlformats-officedocument"
                                    ".presentationml.presentation", b"PK\x03\x04"), 120),
    ("report: pdf", report("pdf", "application/pdf", b"%PDF"), 120),
    ("browser check of a page on loopback", check_browser_page, 120),
    ("demo code task: tests_passed, a branch", check_code_task, 180),
    ("code.generate_mvp", check_generate_mvp, 180),
    ("workflow with a condition", check_workflow_condition, 90),
    ("plan with auto_approve", check_plan_auto_approve, 150),
    ("function run", check_function_run, 60),
    ("UI in Chromium: sign in, Launch, the packet, the sections", check_ui_sign_in_launch_packet,
     120),
]


def run(name: str, check: Callable[[Api, float, argparse.Namespace], str], timeout: float,
        api: Api, args: argparse.Namespace) -> tuple[str, bool, str, float]:
    start = time.monotonic()
    try:
        detail = check(api, start + timeout, args)
        return name, True, detail, time.monotonic() - start
    except CheckFailed as exc:
        return name, False, str(exc), time.monotonic() - start
    except Exception as exc:
        tb = traceback.format_exc(limit=4).strip().splitlines()
        return name, False, f"{type(exc).__name__}: {exc} [{' | '.join(tb[-4:])}]", \
            time.monotonic() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("url", help="the address `switchyard up` printed")
    parser.add_argument("token", help="the API token `switchyard up` printed")
    parser.add_argument("--demo-repo", default=None, help="the demo repository `up` printed")
    parser.add_argument("--demo-task", default=DEMO_TASK)
    parser.add_argument("--only", default=None, help="run the checks whose name has this")
    parser.add_argument("--shots", default=None, help="a directory for the UI's screenshot")
    parser.add_argument("--parallel", type=int, default=int(os.environ.get(
        "SMOKE_PARALLEL", "6")), help="checks run at once")
    args = parser.parse_args()
    api = Api(args.url, args.token)
    checks = [c for c in CHECKS if not args.only or args.only in c[0]]

    start = time.monotonic()
    try:
        until(lambda: api.raw("GET", "/healthz", timeout=5)[0] == 200, start + 30, "/healthz")
        require(api.get("/api/projects") is not None, "the token is refused")
    except (CheckFailed, OSError) as exc:
        print(f"FAIL sign in with the printed token: {exc}", flush=True)
        print(f"smoke: 0 passed, {len(checks) + 1} failed", flush=True)
        return 1
    print("PASS sign in with the printed token (API)", flush=True)
    passed, failed = 1, 0
    with concurrent.futures.ThreadPoolExecutor(max(args.parallel, 1)) as pool:
        futures = [pool.submit(run, name, check, timeout, api, args)
                   for name, check, timeout in checks]
        for future in concurrent.futures.as_completed(futures):
            name, ok, detail, took = future.result()
            print(f"{'PASS' if ok else 'FAIL'} {name} ({took:.1f}s): {detail}", flush=True)
            passed, failed = passed + ok, failed + (not ok)
    print(f"smoke: {passed} passed, {failed} failed ({time.monotonic() - start:.0f}s)",
          flush=True)
    return 0 if failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
