/* The project's files: reports and screenshots its jobs wrote (images as thumbnails), and the
   forms that ask for a report or a landing-page check. New files appear live (artifact events). */
import { api, h, $, fill, time, jobLink, empty, fail, debounce, busy, flash, short } from "./ui.js";
import { addJob } from "./jobs_table.js";
import { subscribe } from "./bus.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);

function size(n) {
  return n < 1024 ? `${n} B` : n < 1048576 ? `${(n / 1024).toFixed(1)} KiB` : `${(n / 1048576).toFixed(1)} MiB`;
}

function item(a) {
  const image = a.content_type.startsWith("image/");
  return h("li", { class: "artifact", dataset: { id: a.id, kind: a.kind } },
    image ? h("a", { href: a.url, target: "_blank", rel: "noopener" },
      h("img", { class: "thumb", src: a.url, alt: a.name, loading: "lazy" })) : null,
    h("div", {},
      h("a", { href: a.url, download: a.name }, a.name), " ",
      h("span", { class: "badge" }, a.kind),
      h("div", { class: "meta small" }, size(a.size), " · ", time(a.created_at), " · ", jobLink(a.job_id))));
}

async function load() {
  const { items } = await api("GET", `/api/projects/${enc}/artifacts`);
  fill($("#artifacts"), items.length ? h("ul", { class: "artifacts" }, items.map(item))
    : empty("No file yet. Ask for a report or a page check below."));
}

function submitter(formId, build) {
  $(formId).addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        const r = await api("POST", `/api/projects/${enc}/jobs`, build(form.elements));
        flash(`Job ${short(r.job_id)} queued.`, "ok", { href: `/jobs/${r.job_id}`, text: "Open" });
        await addJob(r.job_id);
      } catch (e) {
        fail(e);
      }
    });
  });
}

submitter("#report-form", (f) => ({ job_type: "research.generate_report",
  payload: { topic: f.topic.value.trim(), format: f.format.value } }));
submitter("#check-form", (f) => ({ job_type: "browser.check_page",
  payload: { url: f.url.value.trim() } }));

const reload = debounce(panel("files", load), 300);
subscribe("artifact", (e) => { if (e.live) reload(); });
