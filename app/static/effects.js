/* The effect ledger on the project page: an effect whose outcome nobody knows waits in the inbox
   until a person has checked with the provider and resolved it; recent effects show below. */
import { api, h, $, fill, time, badge, jobLink, pretty, empty, busy, flash, fail, debounce } from "./ui.js";
import { subscribe } from "./bus.js";
import { touchesProject } from "./job_kinds.js";
import { knownType } from "./jobs_table.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const RECENT = 10;
export const UNKNOWN_TEXT = "unknown — check with the provider";

function statusBadge(status) {
  return status === "unknown" ? h("span", { class: "badge s-unknown", dataset: { status } }, UNKNOWN_TEXT)
    : badge(status);
}

function effectCard(e) {
  const unknown = e.status === "unknown";
  const note = unknown ? h("input", { type: "text", class: "note", maxlength: "2000", "aria-label": "Note",
    placeholder: "What did the provider say? (optional)" }) : null;
  const resolveButton = (outcome, cls) => h("button", { type: "button", class: `${cls} resolve-${outcome}`,
    onclick: (ev) => resolve(ev.currentTarget, e, outcome, note) }, `Resolve ${outcome}`);
  return h("article", { class: `effect ${e.status}`, dataset: { id: e.id, status: e.status } },
    h("h3", {}, h("code", { class: "kind" }, e.kind), " ", statusBadge(e.status)),
    h("p", { class: "meta small" }, h("span", {}, h("span", { class: "muted" }, "key "), h("code", {}, e.key)),
      e.provider_ref ? h("span", {}, h("span", { class: "muted" }, "provider ref "), h("code", {}, e.provider_ref)) : null,
      e.job_id ? h("span", {}, h("span", { class: "muted" }, "job "), jobLink(e.job_id)) : null,
      time(e.created_at)),
    unknown ? h("p", { class: "small" }, "The worker stopped during the call, and the provider cannot be asked ",
      "whether it acted. Check with the provider, then say what happened: resolving it failed lets ",
      "the action be approved again; succeeded counts it as done.") : null,
    e.error ? h("p", { class: "error small" }, e.error) : null,
    e.resolution ? h("p", { class: "small resolution" }, `Resolved ${e.resolution.outcome} by a person`,
      e.resolution.note ? `: ${e.resolution.note}` : "", " ", time(e.resolution.at)) : null,
    h("details", {}, h("summary", {}, "Arguments"), pretty(e.args)),
    unknown ? h("div", { class: "buttons" }, note, resolveButton("succeeded", "primary"),
      resolveButton("failed", "danger")) : null);
}

function resolve(button, e, outcome, note) {
  return busy(button, async () => {
    try {
      await api("POST", `/api/effects/${encodeURIComponent(e.id)}/resolve`, { outcome, note: note.value.trim() });
      flash(`The ${e.kind} effect is resolved as ${outcome}.`, "ok");
    } finally {
      await load().catch(fail); // a 409 also means: show the effect as it is now
    }
  });
}

async function load() {
  const { items } = await api("GET", `/api/projects/${enc}/effects`);
  const unknown = items.filter((e) => e.status === "unknown");
  const known = items.filter((e) => e.status !== "unknown").slice(0, RECENT);
  fill($("#effects-unknown"), unknown.length ? h("div", { class: "effects unknown" },
    h("h3", { class: "inbox-head" }, `Needs checking (${unknown.length})`), unknown.map(effectCard)) : null);
  fill($("#effects"), known.length ? h("div", { class: "effects" }, known.map(effectCard))
    : empty(unknown.length ? "Nothing else has left the building yet."
      : "Nothing has left the building yet. Deploys, emails and other effects show here once approved."));
}

const reload = debounce(panel("overview", load), 500);
subscribe("job", ({ job }) => { if (touchesProject(job.job_type)) reload(); });
subscribe("log", (e) => { if (e.live && touchesProject(knownType(e.job_id))) reload(); });
