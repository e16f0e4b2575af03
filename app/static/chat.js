/* The project page's chat pane: newest page first, older pages on demand; a reply streams in by
   its deltas and is replaced by the stored message once its job completes. */
import { api, h, $, fill, empty, busy, fail } from "./ui.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const CHAT_PAGE = 30;
const chatLog = $("#chat-log");
const streaming = new Map(); // reply job id -> bubble element
const settled = new Set(); // reply jobs whose answer is stored

function bubble(role, content, extra) {
  return h("div", { class: `msg ${role}`, ...extra },
    h("div", { class: "who" }, role === "user" ? "You" : "Co-pilot"),
    h("div", { class: "text" }, content));
}

const chatOlder = $("#chat-older");
const chatIds = new Set(); // messages shown, by id
let chatNext = null; // the `before` of the next older page
let loaded = false;
// Deltas that come before the first page (the stream opens at once, and on another section
// the chat loads only when the Overview is shown): held, then played once the page is in.
const early = [];
const EARLY_MAX = 2000;

const stored = (m) => bubble(m.role, m.content, { dataset: { id: m.id, final: "true" } });

/** The newest page: the pane's first fill, and later what it lacks (a stored reply takes
 * the place of its streamed bubble). Older pages, once shown, stay. */
async function loadChat() {
  const data = await api("GET", `/api/projects/${enc}/chat?limit=${CHAT_PAGE}`);
  const first = chatIds.size === 0;
  if (first) {
    chatNext = data.next;
    chatOlder.hidden = !chatNext;
  }
  const messages = data.items.slice().reverse(); // oldest first on the page
  const replied = new Set(messages.filter((m) => m.role === "assistant").map((m) => m.job_id));
  for (const m of messages) {
    if (chatIds.has(m.id)) continue;
    chatIds.add(m.id);
    if (m.role === "assistant" && m.job_id) settled.add(m.job_id);
    const streamed = m.role === "assistant" && streaming.get(m.job_id);
    if (streamed) {
      streaming.delete(m.job_id);
      streamed.replaceWith(stored(m));
    } else {
      chatLog.querySelector(":scope > .empty, :scope > p.muted")?.remove();
      chatLog.append(stored(m));
    }
    if (first && m.role === "user" && m.job_id && !replied.has(m.job_id) && !streaming.has(m.job_id)) {
      chatLog.append(pendingBubble(m.job_id));
    }
  }
  if (!chatIds.size) fill(chatLog, empty("Ask anything about the project. Replies stream in as they are written."));
  chatLog.scrollTop = chatLog.scrollHeight;
  if (!loaded) {
    loaded = true;
    for (const e of early.splice(0)) onDelta(e);
  }
}

panel("overview", loadChat);

chatOlder.addEventListener("click", (ev) => busy(ev.currentTarget, async () => {
  const data = await api("GET", `/api/projects/${enc}/chat?limit=${CHAT_PAGE}&before=${encodeURIComponent(chatNext)}`);
  const fromBottom = chatLog.scrollHeight - chatLog.scrollTop;
  const nodes = [];
  for (const m of data.items.slice().reverse()) {
    if (chatIds.has(m.id)) continue;
    chatIds.add(m.id);
    if (m.role === "assistant" && m.job_id) settled.add(m.job_id);
    nodes.push(stored(m));
  }
  chatLog.prepend(...nodes);
  chatLog.scrollTop = chatLog.scrollHeight - fromBottom; // keep what was in view in view
  chatNext = data.next;
  chatOlder.hidden = !chatNext;
}));

function pendingBubble(jobId) {
  const b = bubble("assistant", "", { class: "msg assistant streaming", dataset: { jobId, deltas: "0" } });
  b.querySelector(".text").append(h("span", { class: "typing", "aria-label": "writing" }, "…"));
  streaming.set(jobId, b);
  return b;
}

/** A reply's streamed text. */
export function onDelta(e) {
  if (!loaded) {
    if (early.length < EARLY_MAX) early.push(e);
    return;
  }
  if (settled.has(e.job_id)) return;
  let b = streaming.get(e.job_id);
  if (!b) {
    if (!e.live) return;
    b = pendingBubble(e.job_id);
    chatLog.querySelector(".empty")?.remove();
    chatLog.append(b);
  }
  const text = b.querySelector(".text");
  text.querySelector(".typing")?.remove();
  text.append(document.createTextNode(e.data?.text ?? ""));
  b.dataset.deltas = String(Number(b.dataset.deltas) + 1);
  chatLog.scrollTop = chatLog.scrollHeight;
}

/** A job's terminal status event: if it was a reply being streamed, it is stored or it failed. */
export function onChatJobEnd(e) {
  const b = streaming.get(e.job_id);
  if (!b) return;
  if (e.data?.status === "completed") {
    settled.add(e.job_id);
    loadChat().catch(fail); // the stored message replaces the streamed one
  } else {
    streaming.delete(e.job_id);
    b.classList.remove("streaming");
    b.classList.add("failed");
    b.querySelector(".text").append(h("p", { class: "error" }, `The reply ${e.data?.status}. `,
      h("a", { href: `/jobs/${e.job_id}` }, "See why")));
  }
}

$("#chat-form").addEventListener("submit", (ev) => {
  ev.preventDefault();
  const form = ev.currentTarget;
  const input = form.elements.message;
  const message = input.value.trim();
  if (!message) return;
  busy(form.querySelector("button"), async () => {
    const r = await api("POST", `/api/projects/${enc}/chat`, { message });
    input.value = "";
    chatLog.querySelector(".empty")?.remove();
    chatIds.add(r.message_id);
    chatLog.append(bubble("user", message, { dataset: { id: r.message_id } }));
    if (!streaming.has(r.job_id) && !settled.has(r.job_id)) chatLog.append(pendingBubble(r.job_id));
    chatLog.scrollTop = chatLog.scrollHeight;
  });
});
$("#chat-input").addEventListener("keydown", (ev) => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); $("#chat-form").requestSubmit(); }
});
