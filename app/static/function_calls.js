/* A function.run job's tool calls, read from its steps: call:<n>:<tool> records a call (what it
   asked, and its result or error), child:<n> the outcome of a nested function it started. A run
   that waited (for a child, a model) is replayed from the top when it resumes, the recorded
   calls answered from the record: each call says how many replays answered it that way,
   counted from the job's "running" status events after the call was recorded. */
import { api, h, $, fill, badge, jobLink, pretty, empty, debounce } from "./ui.js";
import { subscribe } from "./bus.js";

const CALL = /^call:(\d+):(.+)$/;
const CHILD = /^child:(\d+)$/;
const card = $("#function-calls");

async function runStarts(job) {
  const page = await api("GET", `/api/jobs/${encodeURIComponent(job.id)}/events/history?types=status&limit=500`);
  return page.items.filter((e) => e.data?.status === "running").map((e) => Date.parse(e.created_at));
}

function callItem(call, child, starts) {
  const out = call.step.output || {};
  const recorded = Date.parse(call.step.finished_at || call.step.started_at || "");
  const replays = isNaN(recorded) ? 0 : starts.filter((t) => t > recorded).length;
  return h("li", { class: "fn-call", dataset: { index: call.index, tool: call.tool, replays } },
    h("div", { class: "step-head" },
      h("span", { class: "seq muted" }, `#${call.index + 1}`), " ", h("code", { class: "tool" }, call.tool), " ",
      badge(call.step.status), " ",
      replays ? h("span", { class: "badge s-waiting replays", title: "Answered from the record when the run was replayed" },
        `replayed ${replays}×`) : null),
    out.call ? h("p", { class: "mono small call-args" }, out.call) : null,
    out.error ? h("p", { class: "error" }, out.error) : null,
    "result" in out ? h("details", {}, h("summary", {}, "Result"), pretty(out.result)) : null,
    "found" in out ? h("p", { class: "muted small" }, out.found ? "The secret was found (its value is never recorded)." : "No such secret.") : null,
    out.child ? h("p", { class: "small" }, "Nested run ", jobLink(out.child),
      child?.output?.error ? [" ", h("span", { class: "error" }, child.output.error)]
        : child ? [" ", h("span", { class: "muted" }, "answered "), h("code", {}, JSON.stringify(child.output?.output ?? null))]
          : [" ", h("span", { class: "muted" }, "still running")]) : null);
}

async function render(job) {
  const calls = [];
  const children = new Map();
  for (const step of job.steps || []) {
    const c = CALL.exec(step.name);
    if (c) calls.push({ index: Number(c[1]), tool: c[2], step });
    const k = CHILD.exec(step.name);
    if (k) children.set(Number(k[1]), step);
  }
  const starts = await runStarts(job);
  card.hidden = false;
  const replays = Math.max(0, starts.length - 1);
  fill($("#function-calls-summary"),
    `${calls.length} tool call${calls.length === 1 ? "" : "s"} · `,
    h("span", { id: "function-replays", dataset: { replays } },
      replays ? `replayed ${replays} time${replays === 1 ? "" : "s"} (each resume runs the code again from the top)`
        : "not replayed"));
  fill($("#function-calls-list"), calls.length ? calls.map((c) => callItem(c, children.get(c.index), starts))
    : empty("No tool call recorded."));
}

const update = debounce((job) => render(job).catch(() => {}), 300);
subscribe("job", ({ job }) => { if (job.job_type === "function.run") update(job); });
