/* The project page's activity feed: the stream's events newest first (reply deltas show in the
   chat pane instead), at most FEED_LIMIT of them unless older pages were asked for. */
import { api, h, $, time, badge, stepOutcome, jobLink, busy } from "./ui.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const FEED_LIMIT = 200; // live events push the oldest out, unless older pages were asked for
const FEED_TYPES = "status,step,log,tool_call,tool_result,artifact,error,phase,plan,verify,debug_mode,diff,pull_request"; // not delta
const feed = $("#feed");
const feedOlder = $("#feed-older");
const ICON = { status: "●", step: "▸", log: "✎" };
const inFeed = new Set();
let oldestSeen = null; // the smallest event id the stream or a page brought, of any type
let pagedBack = false;

function feedItem(e) {
  const status = e.type === "status" ? e.data?.status : e.type === "step" ? e.data?.status : null;
  return h("li", { class: `ev ev-${e.type}`, dataset: { eventId: e.id, status: status || "" } },
    h("span", { class: "ev-icon", "aria-hidden": "true" }, ICON[e.type] || "•"),
    h("span", { class: "ev-body" },
      e.job_id ? [jobLink(e.job_id), " "] : null,
      e.type === "status" ? [stepOutcome(e), "is ", badge(e.data?.status || e.message)]
        : h("span", {}, e.message)),
    time(e.created_at));
}

export function addToFeed(e) {
  oldestSeen = oldestSeen === null ? e.id : Math.min(oldestSeen, e.id);
  if (e.type === "delta" || inFeed.has(e.id)) return; // reply text shows in the chat pane
  inFeed.add(e.id);
  $("#feed-empty").hidden = true;
  feedOlder.hidden = false;
  // Newest first; a late event (committed after later ones were shown) goes where its id says.
  const top = feed.firstElementChild;
  const after = !top || Number(top.dataset.eventId) < e.id ? top
    : [...feed.children].find((li) => Number(li.dataset.eventId) < e.id);
  feed.insertBefore(feedItem(e), after || null);
  while (!pagedBack && feed.children.length > FEED_LIMIT) {
    inFeed.delete(Number(feed.lastElementChild.dataset.eventId));
    feed.lastElementChild.remove();
  }
}

feedOlder.addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
  const last = feed.lastElementChild;
  const before = Math.min(oldestSeen ?? Infinity, last ? Number(last.dataset.eventId) : Infinity);
  const q = Number.isFinite(before) ? `&before=${before}` : "";
  const page = await api("GET", `/api/projects/${enc}/events/history?limit=50&types=${FEED_TYPES}${q}`);
  pagedBack = true;
  for (const e of page.items) {
    oldestSeen = Math.min(oldestSeen ?? e.id, e.id);
    if (inFeed.has(e.id)) continue;
    inFeed.add(e.id);
    feed.append(feedItem(e));
  }
  if (page.next === null) feedOlder.hidden = true;
}));
