/* A project's page: its parts (one module each) loaded, then fed by the project's live stream. */
import { h, $, fill, fail, stream } from "./ui.js";
import { loadProject, refreshProject } from "./project_header.js";
import { TERMINAL, loadJobs, onJobEvent } from "./jobs_table.js";
import "./job_form.js";
import "./code_task_form.js";
import { addToFeed } from "./feed.js";
import { loadChat, onDelta, onChatJobEnd } from "./chat.js";
import { loadApprovals, refreshApprovals } from "./inbox.js";
import { loadMemory, refreshMemory } from "./memory.js";
import "./packets.js";
import "./effects.js";
import "./artifacts.js";
import { loadWorkflows } from "./workflows_panel.js";
import "./workflow_save.js";
import { loadPlans } from "./plans_panel.js";
import { loadFunctions } from "./functions_panel.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const TAIL = 100; // the stream opens this many events back; older ones on demand

function onEvent(e) {
  document.dispatchEvent(new CustomEvent("sy:event", { detail: e })); // packets.js, effects.js, artifacts.js
  addToFeed(e);
  if (e.type === "delta") { onDelta(e); return; }
  if (!e.job_id) return;
  onJobEvent(e);
  if (e.type === "status" && TERMINAL.has(e.data?.status)) {
    onChatJobEnd(e);
    if (e.live) { refreshApprovals(); refreshMemory(); refreshProject(); }
  }
  if (e.type === "log" && e.live) refreshApprovals();
}

async function start() {
  try {
    await loadProject();
  } catch (e) {
    fill($("#project-body"), h("div", { class: "card" },
      h("p", { class: "error", role: "alert" }, e.status === 404 ? "This project does not exist, or it is not yours." : e.message),
      h("p", {}, h("a", { href: "/" }, "Back to your projects"))));
    $("#launch").disabled = true;
    $("#live").hidden = true;
    return;
  }
  const loads = [loadJobs(), loadChat(), loadApprovals(), loadMemory(), loadWorkflows(), loadPlans(), loadFunctions()];
  for (const r of await Promise.allSettled(loads)) if (r.status === "rejected") fail(r.reason);
  // Opens TAIL events back, then goes live; after a dropped connection the stream resumes
  // from the last id it saw. Older events come a page at a time ("Older events").
  stream(`/api/projects/${enc}/events?tail=${TAIL}`, onEvent, $("#live"));
}
start();
