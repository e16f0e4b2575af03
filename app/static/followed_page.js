/* What the pages about one thing a job drives (a workflow run, a plan) share: the thing is read
   again at each event of the job's stream (each is a cue that it moved) and on a slow poll (for a
   stream that could not be opened), until it ends; its project in the crumbs; its steps' table. */
import { api, h, $, fill, fail, stream, debounce, short, badge, jobLink, pretty } from "./ui.js";

const POLL_MS = 5000;

/**
 * `read()` fetches and draws the thing and returns { ended, jobId } (the job whose stream to
 * follow, if any). Returns `load`, which reads it once more (after the page's own change: a
 * decision, an edit); once ended, the stream is closed and #live says "finished". When the first
 * read fails, `body` says why (`gone` for a 404) instead.
 */
export function follow(read, body, gone) {
  const live = $("#live");
  let source = null;
  let ended = false;
  async function load() {
    const state = await read();
    ended = state.ended;
    if (ended) {
      if (source) { source.close(); source = null; }
      live.dataset.state = "closed";
      live.textContent = "finished";
    }
    return state;
  }
  const reload = debounce(() => load().catch(fail), 200);
  load().then(({ jobId }) => {
    if (ended) return;
    if (jobId) source = stream(`/api/jobs/${encodeURIComponent(jobId)}/events?tail=1`, () => reload(), live);
    const poll = setInterval(() => {
      if (ended) clearInterval(poll);
      else if (!document.hidden) reload();
    }, POLL_MS);
  }).catch((e) => {
    fill(body, h("div", { class: "card" },
      h("p", { class: "error", role: "alert" }, e.status === 404 ? gone : e.message),
      h("p", {}, h("a", { href: "/" }, "Back to your projects"))));
    live.hidden = true;
  });
  return load;
}

/** The crumbs' project link: its short id at once, its name when the API answers. */
export function nameProject(projectId) {
  const link = $("#project-link");
  link.href = `/projects/${projectId}`;
  link.textContent = short(projectId);
  api("GET", `/api/projects/${encodeURIComponent(projectId)}`).then((p) => { link.textContent = p.name; }).catch(() => {});
}

/** A steps table row's Status, Job, and Output-or-error cells (a run's step, a plan's task). */
export function stepCells(s) {
  return [
    h("td", {}, badge(s.status)),
    h("td", {}, s.job_id ? jobLink(s.job_id) : h("span", { class: "muted" }, "—")),
    h("td", {}, s.error ? h("p", { class: "error" }, s.error) : null,
      s.output !== null && s.output !== undefined ? h("details", {}, h("summary", {}, "Output"), pretty(s.output)) : null),
  ];
}
