/* The monitor's schedules: each project's daily runs (night shift, digest, nudge) at its local
   hour, in its time zone, with the next runs (GET /api/monitor/schedules). */
import { api, h, $, fill, time, empty } from "./ui.js";

const NAMES = { "nightshift.cycle_project": "Night shift", "drip.process_digests": "Digest",
  "drip.process_nudges": "Nudge" };

async function load() {
  const box = $("#schedules");
  let data;
  try { data = await api("GET", "/api/monitor/schedules"); } catch (e) {
    fill(box, h("p", { class: "muted" }, `No schedules: ${e.message}`));
    return;
  }
  if (!data.items.length) {
    fill(box, empty("No project has a daily schedule (night shift on, or a confirmed contact for digests)."));
    return;
  }
  fill(box, h("div", { class: "table-wrap" }, h("table", { class: "schedules" },
    h("thead", {}, h("tr", {}, ["Project", "Schedule", "Local time", "Next runs"]
      .map((t) => h("th", { scope: "col" }, t)))),
    h("tbody", {}, data.items.map((s) => h("tr", { dataset: { project: s.project_id, schedule: s.schedule } },
      h("td", {}, h("a", { href: `/projects/${s.project_id}` }, s.project_name)),
      h("td", {}, NAMES[s.schedule] || s.schedule),
      h("td", {}, `${s.local_time} `, h("span", { class: "muted small" }, s.timezone)),
      h("td", { class: "next-runs" }, s.next_runs.map((t) => h("div", {}, time(t))))))))));
}

load();
setInterval(() => { if (!document.hidden) load(); }, 60000);
