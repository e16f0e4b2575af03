/* The project page's Functions panel: the project's functions with their versions, a chosen
   version's code (read-only), a form that runs it with a JSON input, and its recent runs,
   whose statuses follow the project's live stream. */
import { api, h, $, fill, time, badge, jobLink, empty, busy, flash, fail, debounce, short } from "./ui.js";
import { versionButtons, pressVersion } from "./version_picker.js";
import { subscribe } from "./bus.js";
import { isKind } from "./job_kinds.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const box = $("#functions");
const detail = $("#function-detail");
let chosen = null; // { name, version } on show
const fnUrl = (name) => `/api/projects/${enc}/functions/${encodeURIComponent(name)}`;

panel("functions", loadFunctions);

async function loadFunctions() {
  const data = await api("GET", `/api/projects/${enc}/functions`);
  fill(box, data.items.length ? h("ul", { class: "rows" }, data.items.map((f) =>
    h("li", { class: "row function", dataset: { name: f.name } },
      h("button", { type: "button", class: "link title mono", onclick: () => choose(f.name, f.versions[0]) }, f.name),
      versionButtons(f.name, f.versions, chosen, (v) => choose(f.name, v)),
      f.description ? h("span", { class: "muted small clamp" }, f.description) : null)))
    : empty("No functions yet. Save one below, or let an agent write one."));
}

// Saving checks the syntax first: a 422 names the line and column, and nothing is written.
$("#function-save").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  const f = form.elements;
  const error = $("#function-save-error");
  error.hidden = true;
  const body = { name: f.name.value.trim(), code: f.code.value };
  if (f.description.value.trim()) body.description = f.description.value.trim();
  busy(form.querySelector("button[type=submit]"), async () => {
    try {
      const saved = await api("POST", `/api/projects/${enc}/functions`, body);
      flash(`Function ${saved.name} saved as v${saved.version}.`, "ok");
      form.reset();
      await loadFunctions();
      await choose(saved.name, saved.version);
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
      if (e.details && e.details.line) focusLine(f.code, e.details.line);
    }
  });
});

function focusLine(textarea, line) {
  const lines = textarea.value.split("\n");
  const start = lines.slice(0, line - 1).reduce((n, l) => n + l.length + 1, 0);
  textarea.focus();
  textarea.setSelectionRange(start, start + (lines[line - 1] || "").length);
}

async function choose(name, version) {
  const fn = await api("GET", `${fnUrl(name)}?version=${version}`);
  chosen = { name, version };
  pressVersion(box, name, version);
  detail.hidden = false;
  fill(detail,
    h("h3", {}, h("span", { class: "mono" }, fn.name), " ", h("span", { class: "muted" }, `v${fn.version}`)),
    fn.description ? h("p", { class: "muted" }, fn.description) : null,
    h("p", { class: "meta small" }, h("span", { class: "muted" }, "saved "), time(fn.created_at),
      fn.created_by_job ? [h("span", { class: "muted" }, " by job "), jobLink(fn.created_by_job)] : null),
    h("pre", { class: "code", id: "function-code", tabindex: 0, "aria-label": `Code of ${fn.name} v${fn.version}` }, fn.code),
    runForm(fn),
    h("h4", {}, "Recent runs"),
    h("div", { id: "function-runs" }, h("p", { class: "muted" }, "Loading…")));
  await loadRuns();
}

function runForm(fn) {
  const error = h("p", { class: "error", role: "alert", hidden: true });
  const input = h("textarea", { id: "fn-input", name: "input", rows: 3, class: "mono", spellcheck: "false" }, "{}");
  const form = h("form", { id: "function-run", class: "stack" },
    h("label", { for: "fn-input" }, "Input ", h("span", { class: "muted" }, "(any JSON value)")),
    input, error,
    h("button", { type: "submit", class: "primary" }, `Run v${fn.version}`));
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    error.hidden = true;
    let value;
    try {
      value = input.value.trim() ? JSON.parse(input.value) : null;
    } catch (e) {
      error.textContent = `The input is not valid JSON: ${e.message}`;
      error.hidden = false;
      input.focus();
      return;
    }
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        const r = await api("POST", `${fnUrl(fn.name)}/runs`, { input: value, version: fn.version });
        flash(`Function ${fn.name} started: job ${short(r.job_id)}.`, "ok", { href: `/jobs/${r.job_id}`, text: "Open the job" });
        await loadRuns();
      } catch (e) {
        error.textContent = e.message;
        error.hidden = false;
      }
    });
  });
  return form;
}

function outcome(r) {
  if (r.last_error) return h("span", { class: "error clamp" }, r.last_error);
  if (r.status !== "completed") return null;
  return h("code", { class: "clamp fn-output" }, JSON.stringify(r.result?.output ?? null));
}

async function loadRuns() {
  if (!chosen) return;
  const { name } = chosen;
  const data = await api("GET", `${fnUrl(name)}/runs?limit=10`);
  const target = $("#function-runs");
  if (!target || chosen?.name !== name) return; // another function was chosen meanwhile
  fill(target, data.items.length ? h("ul", { class: "rows" }, data.items.map((r) =>
    h("li", { class: "row fn-run", dataset: { jobId: r.job_id, status: r.status } },
      jobLink(r.job_id), badge(r.status),
      r.version ? h("span", { class: "muted" }, `v${r.version}`) : h("span", { class: "muted" }, "newest"),
      h("span", { class: "muted small" }, `${r.calls} call${r.calls === 1 ? "" : "s"}`),
      outcome(r), time(r.created_at))))
    : empty("Not run yet."));
}

const refreshRuns = debounce(() => loadRuns().catch(fail), 500);
subscribe("job", ({ job }) => { if (chosen && isKind(job.job_type, "function.run")) refreshRuns(); });
