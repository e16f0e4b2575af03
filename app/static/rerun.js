/* The job page's reruns: a "Rerun from here" action on each step of a finished job (the
   payload editable, POST /api/jobs/<jid>/rerun), and, on a rerun, the two runs' step outputs
   side by side. Steps before the chosen one are copied and replayed, not run. */
import { api, h, $, fill, jobLink, pretty, busy, fail } from "./ui.js";
import { subscribe } from "./bus.js";
import { TERMINAL } from "./job_kinds.js";

const enc = encodeURIComponent($("#job").dataset.jobId);
let compared = null; // the original's id whose comparison is drawn
let draws = 0; // comparisons asked for so far: only the last one asked draws
// The form a person opened, kept across the timeline's redraws (each event redraws it).
let open = null; // { step, text }

function form(job, step) {
  if (!open || open.step !== step.name) open = { step: step.name, text: JSON.stringify(job.payload, null, 2) };
  const text = h("textarea", { class: "mono", rows: 6, "aria-label": "Payload of the rerun (JSON)",
    oninput: () => { if (open) open.text = text.value; } }, open.text);
  const problem = h("p", { class: "error", role: "alert", hidden: true });
  const go = h("button", { type: "submit", class: "primary" }, `Rerun from ${step.name}`);
  const box = h("form", { class: "rerun-form", dataset: { step: step.name } },
    h("p", { class: "muted small" }, `Steps before #${step.seq} are copied and replayed, not run; an effect already performed answers with its recorded outcome.`),
    text, problem, h("div", { class: "actions" }, go,
      h("button", { type: "button", class: "ghost", onclick: () => { open = null; box.remove(); } }, "Cancel")));
  box.addEventListener("submit", (ev) => {
    ev.preventDefault();
    let payload;
    try { payload = JSON.parse(text.value); } catch (e) {
      problem.hidden = false;
      problem.textContent = `The payload is not JSON: ${e.message}`;
      return;
    }
    busy(go, async () => {
      const made = await api("POST", `/api/jobs/${enc}/rerun`, { from_step: step.name, payload });
      window.location.assign(`/jobs/${made.job_id}`);
    });
  });
  return box;
}

function decorate(job) {
  if (!TERMINAL.has(job.status)) return;
  const seen = new Set();
  for (const step of job.steps || []) {
    if (seen.has(step.name)) continue; // a rerun starts at a name's first step
    seen.add(step.name);
    const item = document.querySelector(`#timeline li.step[data-seq="${step.seq}"] .step-head`);
    if (!item || item.querySelector(".rerun")) continue;
    const show = () => {
      document.querySelector("#timeline .rerun-form")?.remove();
      item.parentElement.append(form(job, step));
    };
    const button = h("button", { type: "button", class: "secondary small rerun", dataset: { step: step.name } },
      "Rerun from here");
    button.addEventListener("click", () => { open = null; show(); });
    item.append(" ", button);
    if (open && open.step === step.name && !item.parentElement.querySelector(".rerun-form")) show();
  }
}

async function compare(job) {
  const card = $("#rerun-compare");
  if (!job.rerun_of) { card.hidden = true; return; }
  if (compared === job.rerun_of && card.dataset.status === job.status) return;
  compared = job.rerun_of;
  card.dataset.status = job.status;
  card.hidden = false;
  fill($("#rerun-of"), "A rerun of ", jobLink(job.rerun_of), ".");
  const mine = ++draws; // a slower answer for an older read of the job must not draw over this
  let original;
  try { original = await api("GET", `/api/jobs/${encodeURIComponent(job.rerun_of)}`); } catch (e) {
    if (mine !== draws) return;
    fill($("#rerun-table"), h("p", { class: "muted" }, `The original cannot be read: ${e.message}`));
    return;
  }
  if (mine !== draws) return;
  const bySeq = (steps) => new Map((steps || []).map((s) => [s.seq, s]));
  const before = bySeq(original.steps), after = bySeq(job.steps);
  const seqs = [...new Set([...before.keys(), ...after.keys()])].sort((a, b) => a - b);
  const cell = (s) => s ? h("td", { class: `s-${s.status}` }, h("span", { class: "muted small" }, s.status),
    s.attempts === 0 ? h("span", { class: "muted small" }, " (copied)") : null, pretty(s.output ?? s.error ?? null))
    : h("td", { class: "muted" }, "—");
  fill($("#rerun-table"), h("div", { class: "table-wrap" }, h("table", { class: "compare" },
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Step"), h("th", { scope: "col" }, "Original"),
      h("th", { scope: "col" }, "This run"))),
    h("tbody", {}, seqs.map((seq) => {
      const s = after.get(seq) || before.get(seq);
      return h("tr", { dataset: { seq } }, h("th", { scope: "row" }, `#${seq} ${s.name}`),
        cell(before.get(seq)), cell(after.get(seq)));
    })))));
}

subscribe("job", (e) => { decorate(e.job); compare(e.job).catch(fail); });
