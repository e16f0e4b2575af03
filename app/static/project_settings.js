/* The Settings section: the project's name, goal, night shift, time zone and contact; its model
   budgets; which effects it may perform and how many a day; which model answers each kind of
   call; the coding agent's setup commands and network. Each form sends only its own part
   as a merge patch (PATCH /api/projects/<pid>: an emptied field is null, which clears it); a
   refusal (422) shows the API's message beside the form and changes nothing. */
import { api, h, $, fill, busy, flash } from "./ui.js";
import { panel } from "./sections.js";
import { refreshProject } from "./project_header.js";

const root = $("#project");
const enc = encodeURIComponent(root.dataset.projectId);
// Per effect kind: offered (the operator allows it at all), default_allowed, default_cap, ceiling
// (tasks.services.effects.policy.choices, rendered into the page).
const KINDS = JSON.parse(root.dataset.effectKinds || "{}");
const KIND_NAMES = { email: "Email", deploy_hook: "Deploy hook", github_dispatch: "GitHub dispatch",
  ad_campaign: "Ad campaign" };
// Per role in order, the model the server chooses, and the models a project may pick instead, each as
// "provider/model" (tasks.services.llm.flow.project_choices, rendered into the page).
const MODELS = JSON.parse(root.dataset.llmModels || '{"roles": [], "offered": []}');
const SERVER_CHOICE = Object.fromEntries(MODELS.roles);
const ROLE_NAMES = { plan: "Planning", build: "Building and debugging", explore: "Exploring a repository",
  review: "Reviewing", chat: "Chat", packet: "Packets", report: "Reports", nightshift: "Night shift",
  function: "Functions" };
const NETWORK_OFFERED = root.dataset.codeNetwork === "offered";
let project = null;

const text = (input) => input.value.trim() || null;
/** An emptied number field is null (the setting is cleared); one the browser cannot read
    ("1,000", "10k") or past what JSON holds is refused before anything is sent, never sent as
    null (the forms say novalidate so that otherwise the API's own words are shown). */
function number(input) {
  if (input.validity.badInput || (input.value !== "" && !Number.isFinite(Number(input.value)))) {
    const name = input.labels?.[0]?.textContent.trim() || input.getAttribute("aria-label") || input.name;
    throw new Error(`${name}: not a number`);
  }
  return input.value === "" ? null : Number(input.value);
}

/** `fields` with what already holds left out (another tab's or job's change since this page
    read the project is not overwritten by a form that did not touch it). */
function changed(fields, now) {
  return Object.fromEntries(Object.entries(fields).filter(([k, v]) => v !== (now[k] ?? null)));
}

function zones() {
  const list = $("#st-zones");
  if (list.children.length || !Intl.supportedValuesOf) return;
  list.append(...Intl.supportedValuesOf("timeZone").map((z) => h("option", { value: z })));
}

function permissionRow(kind, settings) {
  const k = KINDS[kind];
  const allowed = settings.permissions?.[kind] ?? k.default_allowed;
  const cap = settings.caps?.[`${kind}_per_day`];
  return h("tr", { dataset: { kind } },
    h("th", { scope: "row" }, KIND_NAMES[kind] || kind,
      k.offered ? null : h("div", { class: "muted small" }, "not offered on this server")),
    h("td", {}, h("input", { type: "checkbox", name: `allow-${kind}`, "aria-label": `Allow ${KIND_NAMES[kind] || kind}`,
      checked: k.offered && allowed, disabled: !k.offered })),
    h("td", {}, h("input", { type: "number", name: `cap-${kind}`, min: 0, max: k.ceiling, step: 1,
      inputmode: "numeric", value: cap ?? "", placeholder: String(k.default_cap),
      "aria-label": `${KIND_NAMES[kind] || kind} a day at most (default ${k.default_cap}, at most ${k.ceiling})`,
      disabled: !k.offered })));
}

/** A role's row: the server's choice, each model offered, and a stored choice the server no
    longer offers, shown as it is (kept unless another is picked). */
function modelRow(role, chosen) {
  const stored = chosen ? `${chosen.provider ?? ""}/${chosen.model ?? ""}` : "";
  const options = [h("option", { value: "" }, `${SERVER_CHOICE[role]} (the server's choice)`),
    ...MODELS.offered.map((m) => h("option", { value: m, selected: m === stored }, m))];
  if (stored && !MODELS.offered.includes(stored)) {
    // Set through the API: maybe a provider or a model alone (the other part the server's),
    // or a model withdrawn since (the server's choice answers meanwhile: flow.for_role).
    const named = `${chosen.provider || "the server's provider"}/${chosen.model || "its default model"}`;
    const why = chosen.provider && chosen.model ? "no longer offered: the server's choice answers" : "set through the API";
    options.push(h("option", { value: stored, selected: true }, `${named} (${why})`));
  }
  return h("tr", { dataset: { role } },
    h("th", { scope: "row" }, ROLE_NAMES[role] || role),
    h("td", {}, h("select", { name: `model-${role}`, "aria-label": `Model for ${ROLE_NAMES[role] || role}`,
      dataset: { stored } }, options)));
}

/** The models form's change: only the roles whose pick differs from what is stored; the
    server's choice clears the role (null), another is {provider, model}. */
function modelsPatch(form) {
  const llm = {};
  for (const select of form.querySelectorAll("select[name^=model-]")) {
    if (select.value === select.dataset.stored) continue;
    const cut = select.value.indexOf("/");
    llm[select.name.slice("model-".length)] = select.value === "" ? null
      : { provider: select.value.slice(0, cut), model: select.value.slice(cut + 1) };
  }
  return Object.keys(llm).length ? { llm_models: llm } : {};
}

/** The coding form's change: the setup commands (one a line, blank lines dropped; none
    clears them) only when their text was edited, so a save of the switch alone never rewrites
    them; and the network switch where the server offers it. */
function codingPatch(form) {
  const s = project.settings || {};
  const setup = form.elements.code_setup;
  const patch = {};
  if (setup.value !== setup.dataset.filled) {
    const lines = setup.value.split("\n").map((l) => l.trim()).filter(Boolean);
    patch.code_setup = lines.length ? lines : null;
  }
  if (NETWORK_OFFERED && form.elements.code_network.checked !== (s.code_network === true)) {
    patch.code_network = form.elements.code_network.checked;
  }
  return patch;
}

const FILL = {
  "#settings-form": (f, p, s) => {
    f.name.value = p.name;
    f.goal.value = p.goal || "";
    f.night_shift.checked = p.night_shift;
    f.timezone.value = s.timezone || "";
    f.contact_email.value = s.contact_email || "";
  },
  "#budgets-form": (f, p, s) => {
    f.llm_daily_token_budget.value = s.llm_daily_token_budget ?? "";
    f.llm_daily_usd_budget.value = s.llm_daily_usd_budget ?? "";
  },
  "#permissions-form": (f, p, s) => {
    fill($("#permissions-rows"), Object.keys(KINDS).map((kind) => permissionRow(kind, s)));
    f.deploy_hook_url.value = s.deploy_hook_url || "";
    f.github_repo.value = s.github_repo || "";
  },
  "#models-form": (f, p, s) => {
    fill($("#models-rows"), MODELS.roles.map(([role]) => modelRow(role, s.llm_models?.[role])));
  },
  "#coding-form": (f, p, s) => {
    const commands = s.code_setup || [];
    // A command set through the API may span lines: one a line cannot show it, so the field
    // is read-only then (the API edits it) and the switch can still be saved.
    const multiline = commands.some((c) => c.includes("\n"));
    f.code_setup.value = f.code_setup.dataset.filled = commands.join("\n");
    f.code_setup.readOnly = multiline;
    $("#st-setup-hint").textContent = multiline
      ? "A command here spans several lines: change these through the API (PATCH /api/projects/<id>, settings.code_setup)."
      : "Run in order after what the repository declares is installed, like a CI job's setup steps.";
    f.code_network.checked = s.code_network === true;
    $("#st-network-hint").textContent = NETWORK_OFFERED
      ? "Through the server's egress guard; off, only the package indexes are reached, during setup."
      : "Not offered on this server (SWITCHYARD_CODE_NETWORK_ALLOWED).";
  },
};

/** Fill `forms` from the project as stored, and let them be used. */
function show(forms) {
  for (const id of forms) {
    const form = $(id);
    FILL[id](form.elements, project, project.settings || {});
    form.querySelector("fieldset").disabled = false;
  }
  $("#st-network").disabled = !NETWORK_OFFERED;
}

async function load() {
  project = await api("GET", `/api/projects/${enc}`);
  zones();
  show(Object.keys(FILL));
}

/** What the permissions form changes: a kind's switch or cap only where it differs from what
    holds now (so an untouched default stays a default; an emptied cap goes back to it). */
function permissionsPatch(form) {
  const s = project.settings || {};
  const permissions = {};
  const caps = {};
  for (const [kind, k] of Object.entries(KINDS)) {
    if (!k.offered) continue;
    const checked = form.elements[`allow-${kind}`].checked;
    if (checked !== (s.permissions?.[kind] ?? k.default_allowed)) permissions[kind] = checked;
    caps[`${kind}_per_day`] = number(form.elements[`cap-${kind}`]);
  }
  return { permissions, caps: changed(caps, s.caps || {}),
    ...changed({ deploy_hook_url: text(form.elements.deploy_hook_url),
      github_repo: text(form.elements.github_repo) }, s) };
}

const PATCHES = {
  "#settings-form": (f) => {
    const e = f.elements;
    return { ...changed({ name: e.name.value.trim(), goal: e.goal.value.trim(),
      night_shift: e.night_shift.checked }, { ...project, goal: project.goal ?? "" }),
    settings: changed({ timezone: text(e.timezone), contact_email: text(e.contact_email) },
      project.settings || {}) };
  },
  "#budgets-form": (f) => ({ settings: changed({
    llm_daily_token_budget: number(f.elements.llm_daily_token_budget),
    llm_daily_usd_budget: number(f.elements.llm_daily_usd_budget) }, project.settings || {}) }),
  "#permissions-form": (f) => ({ settings: permissionsPatch(f) }),
  "#models-form": (f) => ({ settings: modelsPatch(f) }),
  "#coding-form": (f) => ({ settings: codingPatch(f) }),
};

/** The API's message and, under it, each field it names. */
function showError(box, e) {
  const fields = Object.entries(e.details?.fields || {});
  fill(box, e.message, fields.length ? h("ul", {}, fields.map(([k, m]) => h("li", {}, h("code", {}, k), ": ", m))) : null);
  box.hidden = false;
}

for (const [id, patch] of Object.entries(PATCHES)) {
  const form = $(id);
  const error = form.querySelector(".error");
  form.addEventListener("submit", (ev) => {
    ev.preventDefault();
    error.hidden = true;
    busy(form.querySelector("button[type=submit]"), async () => {
      try {
        project = await api("PATCH", `/api/projects/${enc}`, patch(form));
      } catch (e) {
        showError(error, e);
        return;
      }
      flash("Saved.", "ok");
      show([id]); // as stored; the other forms keep what is typed in them
      refreshProject();
    });
  });
}

// Read again each time the section is shown: the forms start from what is stored now.
panel("settings", load, { everyShow: true });
