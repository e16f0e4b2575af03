/* The coding panel's trajectory: GET /api/jobs/<jid>/trajectory drawn as a timeline when it is
   opened (and again when opened after the job moved on), and offered as a JSON download. */
import { api, h, $, fill, pretty, empty, fail, badge } from "./ui.js";

{
  const jid = $("#job").dataset.jobId;
  const url = `/api/jobs/${encodeURIComponent(jid)}/trajectory`;
  const link = $("#coding-trajectory-download");
  link.href = url;
  link.download = `trajectory-${jid}.json`;

  function block(label, text) {
    return text ? h("details", {}, h("summary", {}, label), h("pre", { class: "output" }, String(text))) : null;
  }

  function item(i) {
    const head = h("div", { class: "step-head" }, h("span", { class: "seq muted" }, `#${i.seq}`), " ",
      h("span", { class: `badge kind-${i.kind}` }, i.kind), " ", h("strong", {}, i.kind === "tool" ? i.tool || i.step : i.step), " ",
      badge(i.status));
    const body = [];
    if (i.kind === "model") {
      body.push(i.text ? h("p", { class: "model-text" }, i.text) : null,
        i.tool_calls?.length ? h("p", { class: "muted small" }, `calls ${i.tool_calls.map((c) => c.name).join(", ")}`) : null,
        h("p", { class: "muted small" }, `${i.tokens_in ?? "?"} tokens in, ${i.tokens_out ?? "?"} out`));
    } else if (i.kind === "tool") {
      body.push(block("Input", JSON.stringify(i.input, null, 2)), block(i.is_error ? "Error" : "Result", i.result),
        block("Patch", i.patch));
    } else if (i.kind === "setup") {
      body.push(h("p", { class: "small" }, `${i.status}${i.kinds?.length ? ` (${i.kinds.join(", ")})` : ""}`), block("Output", i.output));
    } else if (i.kind === "verify") {
      body.push(h("p", { class: "small" }, h("span", { class: `badge ${i.passed ? "s-completed" : "s-failed"}` },
        i.baseline ? (i.passed ? "baseline clean" : "baseline failing") : i.passed ? "passed" : "failed")),
      ...(i.checks || []).map((c) => block(`${c.command} → exit ${c.exit_code}`, c.output)));
    }
    if (i.output_preview) body.push(block(`Output (cut: ${i.output_bytes} bytes)`, i.output_preview));
    if (i.error) body.push(h("p", { class: "error" }, i.error));
    return h("li", { class: `step s-${i.status}`, dataset: { seq: i.seq, kind: i.kind } },
      h("span", { class: "dot", "aria-hidden": "true" }), h("div", { class: "step-body" }, head, ...body));
  }

  $("#coding-trajectory").addEventListener("toggle", async (e) => {
    if (!e.target.open) return;
    const list = $("#coding-trajectory-list");
    try {
      const doc = await api("GET", url);
      fill(list, doc.items.length ? doc.items.map(item) : empty("Nothing recorded yet."));
    } catch (err) { fail(err); }
  });
}
