/* The job page's LLM usage: tokens and dollars per step and in total, refreshed as the job moves. */
import { api, h, $, fill, empty, debounce } from "./ui.js";
import { subscribe } from "./bus.js";

const enc = encodeURIComponent($("#job").dataset.jobId);
const box = $("#llm-usage");
const dollars = (n) => `$${Number(n).toFixed(4)}`;

function row(label, u, attrs) {
  return h("tr", attrs, h("th", { scope: "row" }, label), h("td", { class: "models" }, (u.models || []).join(", ")),
    h("td", { class: "num calls" }, String(u.calls)),
    h("td", { class: "num input" }, String(u.input_tokens)), h("td", { class: "num output" }, String(u.output_tokens)),
    h("td", { class: "num tokens" }, String(u.input_tokens + u.output_tokens)), h("td", { class: "num cost" }, dollars(u.cost_usd)));
}

async function load() {
  let usage;
  try { usage = await api("GET", `/api/jobs/${enc}/llm-usage`); } catch (e) {
    fill(box, h("p", { class: "muted" }, `No usage: ${e.message}`));
    return;
  }
  if (!usage.total.calls) {
    fill(box, empty("No model calls."));
    return;
  }
  fill(box, h("div", { class: "table-wrap" }, h("table", { class: "usage" },
    h("thead", {}, h("tr", {}, ["Step", "Model", "Calls", "Input tokens", "Output tokens", "Tokens", "Cost"]
      .map((t, i) => h("th", { scope: "col", class: i > 1 ? "num" : null }, t)))),
    h("tbody", {}, usage.steps.map((s) => row(s.seq === null ? "outside a step" : `#${s.seq} ${s.name ?? ""}`, s,
      { dataset: { seq: s.seq ?? "", name: s.name ?? "" } }))),
    h("tfoot", {}, row("Total", usage.total, { class: "total" })))));
}

const reload = debounce(load, 300);
subscribe("job", reload);
load();
