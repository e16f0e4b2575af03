/* The Settings section's secrets: their names and when each was set (a value never comes back),
   a form that sets one (a new name, or a new value for a name) and a delete per secret. */
import { api, h, $, fill, time, empty, busy, flash } from "./ui.js";
import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);
const form = $("#secret-form");
const error = $("#secret-error");
const url = (name) => `/api/projects/${enc}/secrets/${encodeURIComponent(name)}`;

function item(s) {
  return h("li", { dataset: { name: s.name } }, h("code", {}, s.name),
    h("span", { class: "muted small" }, "set ", time(s.updated_at)),
    h("button", { type: "button", class: "danger", onclick: (ev) => busy(ev.currentTarget, async () => {
      if (!confirm(`Delete the secret ${s.name}? What reads it will fail until it is set again.`)) return;
      await api("DELETE", url(s.name));
      flash(`Secret ${s.name} deleted.`, "ok");
      await load();
      form.elements.name.focus(); // its button is gone: focus stays in the section
    }) }, "Delete"));
}

async function load() {
  const { items } = await api("GET", `/api/projects/${enc}/secrets`);
  fill($("#secrets"), items.length ? h("ul", { class: "secrets" }, items.map(item))
    : empty("No secret yet."));
}

form.addEventListener("submit", (ev) => {
  ev.preventDefault();
  error.hidden = true;
  const name = form.elements.name.value.trim();
  if (!form.elements.name.checkValidity() || !form.elements.value.value) {
    error.textContent = !form.elements.value.value ? "Give the secret a value."
      : `${form.elements.name.title}: “${name}” is not a secret's name.`;
    error.hidden = false;
    return;
  }
  busy(form.querySelector("button[type=submit]"), async () => {
    try {
      await api("PUT", url(name), { value: form.elements.value.value });
    } catch (e) {
      error.textContent = e.message;
      error.hidden = false;
      return;
    }
    form.reset(); // the value leaves the page as soon as it is stored
    flash(`Secret ${name} set.`, "ok");
    await load();
  });
});

panel("settings", load);
