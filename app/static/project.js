/* A project's page: its sections (sections.js) each load their panels when first shown, and the
   project's live stream feeds them all through the bus. */
import { h, $, fill, stream } from "./ui.js";
import { start as startSections } from "./sections.js";
import { loadProject, refreshProject } from "./project_header.js";
import { onJobEvent, knownType } from "./jobs_table.js";
import { TERMINAL, touchesProject } from "./job_kinds.js";
import "./job_form.js";
import "./code_task_form.js";
import "./code_tasks.js";
import { addToFeed } from "./feed.js";
import { onDelta, onChatJobEnd } from "./chat.js";
import { refreshApprovals } from "./inbox.js";
import { refreshMemory } from "./memory.js";
import "./packets.js";
import "./effects.js";
import "./artifacts.js";
import "./workflows_panel.js";
import "./workflow_save.js";
import "./plans_panel.js";
import "./functions_panel.js";
import "./project_settings.js";
import "./secrets_panel.js";
import { publish, subscribe } from "./bus.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const TAIL = 100; // the stream opens this many events back; older ones on demand

// Every event reaches the panels through the bus, by type (each panel module subscribes to its
// own: packets.js, effects.js, artifacts.js, plans_panel.js, …); these are the page's.
function onEvent(e) {
  addToFeed(e);
  publish(e);
}
subscribe("delta", onDelta);
for (const type of ["status", "step"]) subscribe(type, (e) => { if (e.job_id) onJobEvent(e); });
subscribe("status", (e) => { if (e.job_id && TERMINAL.has(e.data?.status)) onChatJobEnd(e); });
// The inbox, the memory and the head follow the jobs that touch the project (an approval is
// proposed while a job runs or waits, memory written and the phase moved by the time it ends);
// a panel whose section is hidden only notes that it is stale.
subscribe("job", ({ job }) => {
  if (!touchesProject(job.job_type)) return;
  refreshApprovals();
  if (TERMINAL.has(job.status)) { refreshMemory(); refreshProject(); }
});
subscribe("log", (e) => { if (e.live && touchesProject(knownType(e.job_id))) refreshApprovals(); });

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
  startSections();
  // Opens TAIL events back, then goes live; after a dropped connection the stream resumes
  // from the last id it saw. Older events come a page at a time ("Older events").
  stream(`/api/projects/${enc}/events?tail=${TAIL}`, onEvent, $("#live"));
}
start();
