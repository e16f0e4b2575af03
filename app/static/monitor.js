/* The monitor: queues (depth, oldest waiting, throughput chart), workers, failed jobs, canary. */
import { api, h, svg, $, clear, fill, time, badge, jobLink, empty, busy, flash, fail, duration, short, now, breakable } from "./ui.js";

{
  const POLL_MS = 2000;
  const FAILED_EVERY = 3; // polls
  const DEPTH_SAMPLES = 150; // 5 minutes of depth seen by this page
  const depthHistory = new Map(); // queue -> [depth, ...]
  const fleet = $("#monitor").dataset.scope === "fleet"; // an admin token: every tenant
  const projects = new Map(); // id -> name
  let paused = false;
  let polls = 0;

  // ---------------------------------------------------------------- charts
  /** 60 bars, one a minute, oldest on the left: completed jobs in the last hour. */
  function throughputChart(series) {
    const perMinute = new Map((series || []).map((p) => [Math.floor(Date.parse(p.minute) / 60000), p.completed]));
    const nowMin = Math.floor(now() / 60000);
    const values = [];
    for (let m = nowMin - 59; m <= nowMin; m++) values.push(perMinute.get(m) || 0);
    const peak = Math.max(1, ...values);
    const total = values.reduce((a, b) => a + b, 0);
    const W = 240, H = 44, bw = W / 60;
    const chart = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "chart", role: "img", preserveAspectRatio: "none",
      "aria-label": `${total} completed in the last hour; at most ${Math.max(...values)} in a minute` });
    chart.append(svg("title", {}, `${total} completed in the last hour, peak ${Math.max(...values)}/min`));
    chart.append(svg("line", { x1: 0, y1: H - 0.5, x2: W, y2: H - 0.5, class: "axis" }));
    values.forEach((v, i) => {
      if (!v) return;
      const bh = Math.max(2, (v / peak) * (H - 4));
      chart.append(svg("rect", { x: (i * bw + 0.5).toFixed(2), y: (H - bh).toFixed(2), width: (bw - 1).toFixed(2),
        height: bh.toFixed(2), class: "bar" }, svg("title", {}, `${v} completed ${59 - i} min ago`)));
    });
    return h("figure", { class: "chart-box" }, chart,
      h("figcaption", { class: "axis-labels small muted" }, h("span", {}, "60 min ago"),
        h("span", {}, `peak ${Math.max(...values)}/min`), h("span", {}, "now")));
  }

  /** Queue depth as this page has seen it, one point a poll (the last few minutes). */
  function depthLine(samples) {
    const W = 240, H = 24;
    const peak = Math.max(...samples, 0);
    const step = W / Math.max(1, samples.length - 1);
    const pts = samples.map((v, i) => `${(i * step).toFixed(1)},${(H - 1 - (v / Math.max(1, peak)) * (H - 3)).toFixed(1)}`);
    const line = svg("svg", { viewBox: `0 0 ${W} ${H}`, class: "depth", role: "img", preserveAspectRatio: "none",
      "aria-label": `queue depth: ${samples[samples.length - 1]} now, at most ${peak} since this page opened` });
    if (samples.length > 1) line.append(svg("polyline", { points: pts.join(" "), class: "depth-line" }));
    const seconds = Math.round(((samples.length - 1) * POLL_MS) / 1000);
    return h("div", { class: "depth-box" },
      h("div", { class: "axis-labels small muted" }, h("span", {}, seconds ? `depth, last ${duration(seconds)}` : "depth"),
        h("span", {}, `peak ${peak}`)), line);
  }

  // ---------------------------------------------------------------- queues
  const sum = (rows, k) => rows.reduce((a, r) => a + (r[k] || 0), 0);

  function renderSummary(items, workers) {
    const alive = workers.filter((w) => w.alive).length;
    const stat = (label, value, cls) => h("div", { class: `stat ${cls || ""}`, dataset: { stat: label } },
      h("span", { class: "value" }, String(value)), h("span", { class: "label" }, label));
    fill($("#summary"),
      stat("queued", sum(items, "queued")), stat("running", sum(items, "running")),
      stat("waiting", sum(items, "waiting")), stat("scheduled", sum(items, "scheduled")),
      stat("done last min", sum(items, "completed_last_minute")),
      stat("failed last hour", sum(items, "failed_last_hour"), sum(items, "failed_last_hour") ? "bad" : ""),
      fleet ? stat("workers alive", alive, alive ? "" : "bad") : stat("workers on your jobs", alive));
  }

  function renderQueues(data) {
    const box = $("#queues");
    box.removeAttribute("aria-busy");
    const byQueue = new Map();
    for (const r of data.items) {
      if (!byQueue.has(r.queue)) byQueue.set(r.queue, []);
      byQueue.get(r.queue).push(r);
    }
    for (const q of Object.keys(data.completed_per_minute || {})) if (!byQueue.has(q)) byQueue.set(q, []);
    for (const [q, rows] of byQueue) {
      const hist = depthHistory.get(q) || [];
      hist.push(sum(rows, "queued"));
      if (hist.length > DEPTH_SAMPLES) hist.shift();
      depthHistory.set(q, hist);
    }
    if (!byQueue.size) {
      fill(box, empty("No jobs queued, running or finished in the last hour. Run a canary to check the pipeline end to end."));
      return;
    }
    fill(box, h("div", { class: "queues" }, [...byQueue].map(([q, rows]) => {
      const oldest = Math.max(0, ...rows.map((r) => r.oldest_queued_seconds || 0));
      const depth = sum(rows, "queued");
      const held = sum(rows, "held_back");
      return h("article", { class: "queue", dataset: { queue: q, depth } },
        h("header", {},
          h("h3", {}, q),
          h("div", { class: "figures" },
            h("span", { class: "fig" }, h("strong", { class: "depth-value" }, String(depth)), " queued"),
            held ? h("span", { class: "fig held", title: "Not sent to a worker yet: waiting for their owner's "
              + "turn (SWITCHYARD_OWNER_MAX_ACTIVE) or the dispatch sweep" },
            "of which ", h("strong", {}, String(held)), " held back") : null,
            h("span", { class: "fig" }, h("strong", {}, String(sum(rows, "running"))), " running"),
            h("span", { class: "fig" }, h("strong", {}, String(sum(rows, "completed_last_minute"))), " done/min"),
            h("span", { class: `fig ${oldest > 60 ? "warn" : ""}` }, "oldest waiting ",
              h("strong", { class: "oldest" }, depth ? duration(oldest) : "—")))),
        throughputChart(data.completed_per_minute?.[q]),
        depthLine(depthHistory.get(q)),
        rows.length ? h("div", { class: "table-wrap" }, h("table", { class: "compact" },
          h("thead", {}, h("tr", {}, [["Job type"], ["Queued"], ["Scheduled", "wide-only"], ["Running", "wide-only"],
            ["Waiting", "wide-only"], ["Oldest", "wide-only"], ["Done/h"], ["Failed/h"]]
            .map(([t, cls]) => h("th", { scope: "col", class: cls }, t)))),
          h("tbody", {}, rows.map((r) => h("tr", { dataset: { jobType: r.job_type } },
            h("td", { class: "type" }, breakable(r.job_type)), h("td", { class: "num queued" }, r.queued),
            h("td", { class: "num wide-only" }, r.scheduled), h("td", { class: "num wide-only" }, r.running),
            h("td", { class: "num wide-only" }, r.waiting),
            h("td", { class: "num wide-only" }, r.oldest_queued_seconds === null ? "—" : duration(r.oldest_queued_seconds)),
            h("td", { class: "num" }, r.completed_last_hour),
            h("td", { class: `num ${r.failed_last_hour ? "bad" : ""}` }, r.failed_last_hour)))))) : null);
    })));
  }

  // ---------------------------------------------------------------- workers
  function renderWorkers(items) {
    const box = $("#workers");
    if (!items.length) {
      fill(box, empty(fleet ? "No worker has reported in. Start one with `switchyard worker`."
        : "No worker is running one of your jobs right now."));
      return;
    }
    fill(box, h("ul", { class: "rows workers" }, items.map((w) => {
      const state = w.stopped_at ? "stopped" : w.alive ? "alive" : "silent";
      return h("li", { class: `row worker ${state}`, dataset: { worker: w.worker, pid: w.pid } },
        h("div", { class: "grow" },
          h("strong", { class: "mono" }, w.worker), " ", badge(state),
          h("p", { class: "small muted" }, `${w.hostname || "?"} · pid ${w.pid ?? "?"} · queues ${(w.queues || []).join(", ") || "?"}`)),
        h("div", { class: "meta" },
          h("span", {}, h("strong", {}, String(w.running)), " running"),
          h("span", { class: "small" }, "heartbeat ", time(w.last_heartbeat_at)),
          w.stopped_at ? h("span", { class: "small" }, "stopped ", time(w.stopped_at)) : null));
    })));
  }

  // ---------------------------------------------------------------- failed jobs
  const filterForm = $("#failed-filter");
  function filterValues() {
    const f = filterForm.elements;
    const out = {};
    if (f.project_id.value) out.project_id = f.project_id.value;
    if (f.job_type.value.trim()) out.job_type = f.job_type.value.trim();
    return out;
  }

  async function loadFailed() {
    const filt = filterValues();
    const qs = new URLSearchParams({ status: "failed", limit: "100", ...filt });
    const data = await api("GET", `/api/jobs?${qs}`);
    const box = $("#failed");
    const all = $("#retry-all");
    all.disabled = !data.items.length;
    all.textContent = data.items.length ? `Retry all ${data.items.length === 100 ? "100+" : data.items.length} matching` : "Retry all matching";
    if (!data.items.length) {
      fill(box, empty(Object.keys(filt).length ? "No failed job matches this filter." : "No failed jobs. Everything that ran, worked."));
      return;
    }
    fill(box, h("ul", { class: "rows failed" }, data.items.map((j) => h("li", { class: "row", dataset: { jobId: j.id } },
      h("div", { class: "grow" },
        jobLink(j.id), " ", h("span", { class: "type" }, j.job_type), " ",
        h("span", { class: "muted small" }, "in ", h("a", { href: `/projects/${j.project_id}` }, projects.get(j.project_id) || short(j.project_id))),
        j.last_error ? h("p", { class: "error small clamp" }, j.last_error) : null),
      h("div", { class: "meta" },
        h("span", { class: "small" }, `${j.attempts}/${j.max_attempts} attempts`),
        h("span", { class: "small" }, "failed ", time(j.completed_at)),
        h("button", { type: "button", class: "retry-one", onclick: (ev) => busy(ev.currentTarget, async () => {
          await api("POST", `/api/jobs/${encodeURIComponent(j.id)}/retry`);
          flash(`Job ${short(j.id)} queued again.`, "ok", { href: `/jobs/${j.id}`, text: "Follow it" });
          await loadFailed();
        }) }, "Retry"))))));
  }

  filterForm.addEventListener("submit", (ev) => { ev.preventDefault(); loadFailed().catch(fail); });
  $("#retry-all").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    const r = await api("POST", "/api/jobs/retry", filterValues());
    flash(`Queued ${r.count} failed job${r.count === 1 ? "" : "s"} again${r.more ? "; more remain, press again" : ""}.`, "ok");
    await loadFailed();
  }));

  // ---------------------------------------------------------------- canary, projects
  async function loadProjects() {
    const data = await api("GET", "/api/projects");
    const canarySel = clear($("#canary-project"));
    const filterSel = $("#f-project");
    for (const p of data.items) {
      projects.set(p.id, p.name);
      canarySel.append(h("option", { value: p.id }, p.name));
      filterSel.append(h("option", { value: p.id }, p.name));
    }
    if (!data.items.length) {
      canarySel.append(h("option", { value: "" }, "no project yet"));
      $("#run-canary").disabled = true;
      $("#run-canary").title = "Create a project first: a canary runs in one of your projects.";
    }
  }
  $("#run-canary").addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
    const pid = $("#canary-project").value;
    const r = await api("POST", `/api/projects/${encodeURIComponent(pid)}/jobs`,
      { job_type: "system.canary", payload: { steps: 3, step_seconds: 0.2 } });
    flash(`Canary ${short(r.job_id)} queued.`, "ok", { href: `/jobs/${r.job_id}`, text: "Follow it" });
    poll();
  }));

  // ---------------------------------------------------------------- polling
  $("#pause").addEventListener("click", (ev) => {
    paused = !paused;
    ev.currentTarget.setAttribute("aria-pressed", String(paused));
    ev.currentTarget.textContent = paused ? "Resume" : "Pause";
  });

  let inFlight = false;
  async function poll() {
    if (inFlight) return;
    inFlight = true;
    try {
      const [queues, workers] = await Promise.all([api("GET", "/api/monitor/queues"), api("GET", "/api/monitor/workers")]);
      renderSummary(queues.items, workers.items);
      renderQueues(queues);
      renderWorkers(workers.items);
      if (polls++ % FAILED_EVERY === 0) await loadFailed();
      fill($("#updated"), "Updated ", time(new Date(now()).toISOString()), ".");
    } catch (e) {
      fill($("#updated"), h("span", { class: "error" }, `Update failed: ${e.message}`));
    } finally {
      inFlight = false;
    }
  }

  loadProjects().catch(fail).finally(poll);
  setInterval(() => { if (!paused && !document.hidden) poll(); }, POLL_MS);
}
