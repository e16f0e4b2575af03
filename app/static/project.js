/* A project: live activity, jobs, launch, chat, approvals, memory and a job form. */
"use strict";

(() => {
  const { api, h, $, clear, fill, time, badge, jobLink, pretty, empty, busy, flash, fail, debounce,
    duration, between, short } = SY;
  const pid = $("#project").dataset.projectId;
  const enc = encodeURIComponent(pid);
  const TERMINAL = new Set(["completed", "failed", "canceled"]);
  const FEED_LIMIT = 200;

  // ---------------------------------------------------------------- header, launch
  async function loadProject() {
    const p = await api("GET", `/api/projects/${enc}`);
    document.title = `${p.name} · Switchyard`;
    $("#p-name").textContent = p.name;
    $("#p-goal").textContent = p.goal || "";
    fill($("#p-meta"), h("span", { class: "badge" }, p.phase || "idea"),
      p.night_shift ? h("span", { class: "badge s-waiting" }, "night shift") : null,
      h("span", { class: "muted" }, "created "), time(p.created_at));
  }

  const refreshProject = debounce(() => loadProject().catch(() => {}), 800); // its phase moves

  $("#launch").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    const r = await api("POST", `/api/projects/${enc}/launch`, {});
    flash(`Launch queued as job ${short(r.job_id)}.`, "ok", { href: `/jobs/${r.job_id}`, text: "Follow it" });
    await addJob(r.job_id);
  }));

  // ---------------------------------------------------------------- jobs table
  const rows = new Map(); // job id -> { job, tr }
  const jobsBox = $("#jobs");
  const filter = $("#jobs-filter");
  let tbody = null;

  function jobCells(job, tr) {
    const last = job.steps?.length ? job.steps[job.steps.length - 1] : null;
    const progress = last ? `${last.name} ${last.status}`
      : tr?.querySelector(".progress")?.textContent || (TERMINAL.has(job.status) ? "" : "—");
    return [
      h("td", {}, jobLink(job.id)),
      h("td", { class: "type" }, SY.breakable(job.job_type)),
      h("td", {}, badge(job.status)),
      h("td", { class: "progress muted wide-only" }, progress),
      h("td", { class: "num wide-only" }, `${job.attempts}/${job.max_attempts}`),
      h("td", { class: "wide-only" }, time(job.created_at)),
      h("td", { class: "num" }, duration(between(job.started_at, job.completed_at))),
    ];
  }

  function upsertRow(job, prepend) {
    if (filter.value && job.status !== filter.value && !rows.has(job.id)) return;
    ensureTable();
    const existing = rows.get(job.id);
    const tr = existing ? existing.tr : h("tr", { dataset: { jobId: job.id } });
    tr.dataset.status = job.status;
    const cells = jobCells(job, existing?.tr);
    tr.replaceChildren(...cells);
    rows.set(job.id, { job, tr });
    if (!existing) prepend ? tbody.prepend(tr) : tbody.append(tr);
    addJobType(job.job_type);
  }

  function ensureTable() {
    if (tbody) return;
    tbody = h("tbody");
    fill(jobsBox, h("div", { class: "table-wrap" }, h("table", { class: "jobs" },
      h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Job"), h("th", { scope: "col" }, "Type"),
        h("th", { scope: "col" }, "Status"), h("th", { scope: "col", class: "wide-only" }, "Last step"),
        h("th", { scope: "col", class: "wide-only" }, "Attempts"),
        h("th", { scope: "col", class: "wide-only" }, "Created"), h("th", { scope: "col" }, "Took"))),
      tbody)));
  }

  async function loadJobs() {
    const q = filter.value ? `&status=${encodeURIComponent(filter.value)}` : "";
    const data = await api("GET", `/api/projects/${enc}/jobs?limit=50${q}`);
    rows.clear();
    tbody = null;
    jobsBox.removeAttribute("aria-busy");
    if (!data.items.length) {
      fill(jobsBox, empty(filter.value ? `No ${filter.value} jobs.`
        : "No jobs yet. Submit one below, or press Launch."));
      return;
    }
    for (const job of data.items) upsertRow(job, false);
  }
  filter.addEventListener("change", () => loadJobs().catch(fail));

  const refetching = new Map();
  function refreshJob(id) { // one GET per job per burst of events
    if (!refetching.has(id)) {
      refetching.set(id, debounce(async () => {
        try { upsertRow(await api("GET", `/api/jobs/${encodeURIComponent(id)}`), true); } catch (e) { /* gone */ }
      }, 300));
    }
    refetching.get(id)();
  }
  async function addJob(id) {
    try { upsertRow(await api("GET", `/api/jobs/${encodeURIComponent(id)}`), true); } catch (e) { fail(e); }
  }

  const knownTypes = new Set(["system.canary"]);
  function addJobType(t) {
    if (knownTypes.has(t)) return;
    knownTypes.add(t);
    $("#job-types").append(h("option", { value: t }));
  }

  // ---------------------------------------------------------------- submit a job
  $("#submit-job").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const f = form.elements;
    const err = $("#submit-error");
    err.hidden = true;
    let payload;
    try {
      payload = f.payload.value.trim() ? JSON.parse(f.payload.value) : {};
      if (payload === null || typeof payload !== "object" || Array.isArray(payload)) throw new Error("it must be a JSON object, like {}");
    } catch (e) {
      err.textContent = `The payload is not a valid JSON object: ${e.message}`;
      err.hidden = false;
      f.payload.focus();
      return;
    }
    const body = { job_type: f.job_type.value.trim(), payload };
    if (f.priority.value !== "") body.priority = Number(f.priority.value);
    if (f.max_attempts.value !== "") body.max_attempts = Number(f.max_attempts.value);
    if (f.idempotency_key.value.trim()) body.idempotency_key = f.idempotency_key.value.trim();
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        const r = await api("POST", `/api/projects/${enc}/jobs`, body);
        flash(r.created ? `Job ${short(r.job_id)} queued.` : `Same idempotency key: job ${short(r.job_id)} already exists.`,
          "ok", { href: `/jobs/${r.job_id}`, text: "Open" });
        await addJob(r.job_id);
      } catch (e) {
        err.textContent = e.message;
        err.hidden = false;
      }
    });
  });

  // ---------------------------------------------------------------- activity feed
  const feed = $("#feed");
  const ICON = { status: "●", step: "▸", log: "✎" };
  function addToFeed(e) {
    if (e.type === "delta") return; // reply text shows in the chat pane
    $("#feed-empty").hidden = true;
    const status = e.type === "status" ? e.data?.status : e.type === "step" ? e.data?.status : null;
    feed.prepend(h("li", { class: `ev ev-${e.type}`, dataset: { eventId: e.id, status: status || "" } },
      h("span", { class: "ev-icon", "aria-hidden": "true" }, ICON[e.type] || "•"),
      h("span", { class: "ev-body" },
        e.job_id ? [jobLink(e.job_id), " "] : null,
        e.type === "status" ? ["is ", badge(e.data?.status || e.message)] : h("span", {}, e.message)),
      time(e.created_at)));
    while (feed.children.length > FEED_LIMIT) feed.lastElementChild.remove();
  }

  // ---------------------------------------------------------------- chat
  const chatLog = $("#chat-log");
  const streaming = new Map(); // reply job id -> bubble element
  const settled = new Set(); // reply jobs whose answer is stored

  function bubble(role, content, extra) {
    return h("div", { class: `msg ${role}`, ...extra },
      h("div", { class: "who" }, role === "user" ? "You" : "Co-pilot"),
      h("div", { class: "text" }, content));
  }

  async function loadChat() {
    const data = await api("GET", `/api/projects/${enc}/chat`);
    const replied = new Set(data.items.filter((m) => m.role === "assistant").map((m) => m.job_id));
    const nodes = [];
    for (const m of data.items) {
      nodes.push(bubble(m.role, m.content, { dataset: { id: m.id, final: "true" } }));
      if (m.role === "assistant" && m.job_id) settled.add(m.job_id);
      if (m.role === "user" && m.job_id && !replied.has(m.job_id)) {
        const b = streaming.get(m.job_id) || pendingBubble(m.job_id);
        nodes.push(b);
      }
    }
    fill(chatLog, ...(nodes.length ? nodes
      : [empty("Ask anything about the project. Replies stream in as they are written.")]));
    chatLog.scrollTop = chatLog.scrollHeight;
  }

  function pendingBubble(jobId) {
    const b = bubble("assistant", "", { class: "msg assistant streaming", dataset: { jobId, deltas: "0" } });
    b.querySelector(".text").append(h("span", { class: "typing", "aria-label": "writing" }, "…"));
    streaming.set(jobId, b);
    return b;
  }

  function onDelta(e) {
    if (settled.has(e.job_id)) return;
    let b = streaming.get(e.job_id);
    if (!b) {
      if (!e.live) return;
      b = pendingBubble(e.job_id);
      chatLog.querySelector(".empty")?.remove();
      chatLog.append(b);
    }
    const text = b.querySelector(".text");
    text.querySelector(".typing")?.remove();
    text.append(document.createTextNode(e.data?.text ?? ""));
    b.dataset.deltas = String(Number(b.dataset.deltas) + 1);
    chatLog.scrollTop = chatLog.scrollHeight;
  }

  function onChatJobEnd(e) {
    const b = streaming.get(e.job_id);
    if (!b) return;
    streaming.delete(e.job_id);
    if (e.data?.status === "completed") {
      settled.add(e.job_id);
      loadChat().catch(fail); // the stored message replaces the streamed one
    } else {
      b.classList.remove("streaming");
      b.classList.add("failed");
      b.querySelector(".text").append(h("p", { class: "error" }, `The reply ${e.data?.status}. `,
        h("a", { href: `/jobs/${e.job_id}` }, "See why")));
    }
  }

  $("#chat-form").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const input = form.elements.message;
    const message = input.value.trim();
    if (!message) return;
    busy(form.querySelector("button"), async () => {
      const r = await api("POST", `/api/projects/${enc}/chat`, { message });
      input.value = "";
      chatLog.querySelector(".empty")?.remove();
      chatLog.append(bubble("user", message, { dataset: { id: r.message_id } }));
      if (!streaming.has(r.job_id) && !settled.has(r.job_id)) chatLog.append(pendingBubble(r.job_id));
      chatLog.scrollTop = chatLog.scrollHeight;
    });
  });
  $("#chat-input").addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("#chat-form").requestSubmit(); }
  });

  // ---------------------------------------------------------------- approvals
  const approvalsBox = $("#approvals");
  const RECENT_DECISIONS = 8;

  function approvalCard(a) {
    const pending = a.status === "pending";
    return h("article", { class: `approval ${a.status}`, dataset: { id: a.id, status: a.status } },
      h("h3", {}, a.title || a.action_type),
      h("p", { class: "meta" }, h("span", { class: "muted" }, "Action "), h("code", { class: "action-type" }, a.action_type),
        " ", badge(a.status),
        a.execution_status && a.execution_status !== "idle" ? [" ", h("span", { class: "muted" }, "execution "),
          badge(a.execution_status)] : null,
        a.execution_job_id ? [" ", jobLink(a.execution_job_id)] : null),
      h("details", { open: pending },
        h("summary", {}, "Arguments ", h("span", { class: "muted mono" }, `sha256 ${String(a.args_hash || "").slice(0, 12)}`)),
        pretty(a.action_args)),
      h("p", { class: "meta small" }, "Requested ", time(a.created_at),
        pending && a.expires_at ? [" · expires ", time(a.expires_at)] : null,
        a.decided_at ? [" · decided ", time(a.decided_at)] : null,
        a.source_job_id ? [" · from ", jobLink(a.source_job_id)] : null),
      pending ? h("div", { class: "buttons" },
        h("button", { type: "button", class: "primary approve", onclick: (ev) => decide(ev.currentTarget, a, "approved") }, "Approve"),
        h("button", { type: "button", class: "danger reject", onclick: (ev) => decide(ev.currentTarget, a, "rejected") }, "Reject"))
        : null);
  }

  function decide(button, a, decision) {
    return busy(button, async () => {
      try {
        const r = await api("POST", `/api/inbox/${encodeURIComponent(a.id)}/decision`, { decision, version: a.version });
        flash(`${decision === "approved" ? "Approved" : "Rejected"}: ${a.title || a.action_type}.`, "ok",
          r.execution_job_id ? { href: `/jobs/${r.execution_job_id}`, text: `execution job ${short(r.execution_job_id)}` } : null);
        if (r.execution_job_id) await addJob(r.execution_job_id);
      } finally {
        await loadApprovals().catch(fail); // a 409 also means: show the approval as it is now
      }
    });
  }

  async function loadApprovals() {
    const data = await api("GET", `/api/inbox?project_id=${enc}&status=all`);
    const pending = data.items.filter((a) => a.status === "pending");
    const decided = data.items.filter((a) => a.status !== "pending").slice(0, RECENT_DECISIONS);
    $("#approvals-count").textContent = pending.length ? String(pending.length) : "";
    fill(approvalsBox,
      pending.length ? h("div", { class: "approvals pending" }, pending.map(approvalCard))
        : empty("Nothing waiting for you. Actions your agents propose appear here for approval."),
      decided.length ? h("details", { class: "decided" }, h("summary", {}, `Recent decisions (${decided.length})`),
        h("div", { class: "approvals" }, decided.map(approvalCard))) : null);
  }
  const refreshApprovals = debounce(() => loadApprovals().catch(fail), 400);

  // ---------------------------------------------------------------- memory
  async function loadMemory() {
    const data = await api("GET", `/api/projects/${enc}/memory`);
    const box = clear($("#memory"));
    if (!data.items.length) {
      box.append(empty("Nothing remembered yet. Agents write what they learn here as they work."));
      return;
    }
    box.append(h("dl", { class: "memory" }, data.items.map((m) => [
      h("dt", {}, h("span", { class: "badge" }, m.category), " ", h("strong", {}, m.key), " ",
        h("span", { class: "small" }, time(m.updated_at))),
      h("dd", {}, m.content)])));
  }
  const refreshMemory = debounce(() => loadMemory().catch(fail), 800);

  // ---------------------------------------------------------------- the live stream
  function onEvent(e) {
    addToFeed(e);
    if (e.type === "delta") { onDelta(e); return; }
    if (!e.job_id) return;
    const row = rows.get(e.job_id);
    if (e.type === "step" && row) {
      row.tr.querySelector(".progress").textContent = `${e.data?.name} ${e.data?.status}`;
    }
    if (e.type === "status") {
      const status = e.data?.status;
      if (row) {
        row.job.status = status;
        row.tr.dataset.status = status;
        row.tr.querySelector(".badge").replaceWith(badge(status));
      }
      if (e.live && (row || !filter.value || filter.value === status)) refreshJob(e.job_id);
      if (TERMINAL.has(status)) {
        onChatJobEnd(e);
        if (e.live) { refreshApprovals(); refreshMemory(); refreshProject(); }
      }
    }
    if (e.type === "log" && e.live) refreshApprovals();
  }

  async function start() {
    try {
      await loadProject();
    } catch (e) {
      fill($("#project-body"), h("div", { class: "card" },
        h("p", { class: "error", role: "alert" }, e.status === 404 ? "This project does not exist, or it is not yours." : e.message),
        h("p", {}, h("a", { href: "/" }, "Back to your projects"))));
      $("#launch").disabled = true;
      $("#live").hidden = true;
      return;
    }
    const loads = [loadJobs(), loadChat(), loadApprovals(), loadMemory()];
    for (const r of await Promise.allSettled(loads)) if (r.status === "rejected") fail(r.reason);
    // Replays the project's events from the start, then goes live; the browser resumes
    // from the last id after a dropped connection.
    SY.stream(`/api/projects/${enc}/events?cursor=0`, onEvent, $("#live"));
  }
  start();
})();
