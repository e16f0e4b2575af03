/* The job page of a page check: each check's verdict and details as a table, with the
   screenshots it took; other jobs' files listed for download. */
import { api, h, $, fill, pretty } from "./ui.js";
import { subscribe } from "./bus.js";

const enc = encodeURIComponent($("#job").dataset.jobId);
const box = $("#job-files");

function checkRow(name, r, shots) {
  const details = Object.fromEntries(Object.entries(r).filter(([k]) => !["ok", "artifact_id"].includes(k)));
  const shot = r.artifact_id && shots.get(r.artifact_id);
  return h("tr", { dataset: { check: name, ok: String(r.ok) } },
    h("th", { scope: "row" }, name),
    h("td", {}, h("span", { class: `badge ${r.ok ? "ok" : "bad"}` }, r.ok ? "passes" : "fails")),
    h("td", {}, shot ? h("a", { href: shot.url, target: "_blank", rel: "noopener" },
      h("img", { class: "thumb", src: shot.url, alt: `${name} screenshot` })) : null,
      Object.keys(details).length ? pretty(details) : null));
}

async function render(job) {
  if (!["browser.check_page", "research.generate_report"].includes(job.job_type)) return;
  const { items } = await api("GET", `/api/jobs/${enc}/artifacts`);
  const shots = new Map(items.map((a) => [a.id, a]));
  const parts = [];
  if (job.job_type === "browser.check_page" && job.result?.checks) {
    parts.push(h("p", {}, "Checked ", h("a", { href: job.result.final_url, rel: "noopener noreferrer" }, job.result.final_url),
      ` (HTTP ${job.result.status})`));
    parts.push(h("div", { class: "table-wrap" }, h("table", { class: "check-results" },
      h("thead", {}, h("tr", {}, ["Check", "Verdict", "Details"].map((t) => h("th", { scope: "col" }, t)))),
      h("tbody", {}, Object.entries(job.result.checks).map(([n, r]) => checkRow(n, r, shots))))));
  }
  if (items.length) {
    parts.push(h("ul", { class: "artifacts" }, items.map((a) =>
      h("li", { class: "artifact", dataset: { id: a.id } }, h("a", { href: a.url, download: a.name }, a.name)))));
  }
  if (!parts.length) return;
  box.hidden = false;
  fill($("#job-files-body"), parts);
}

subscribe("job", ({ job }) => { render(job).catch(() => {}); });
