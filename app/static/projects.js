/* The projects list and the create form. */
import { api, h, $, fill, time, empty, busy, flash } from "./ui.js";

{
  const list = $("#projects");

  function render(items) {
    list.removeAttribute("aria-busy");
    if (!items.length) {
      fill(list, empty("No projects yet. Create one to start submitting work to your agents."));
      return;
    }
    fill(list, h("ul", { class: "rows" }, items.map((p) =>
      h("li", { class: "row project", dataset: { id: p.id } },
        h("div", { class: "grow" },
          h("a", { href: `/projects/${p.id}`, class: "title" }, p.name),
          p.goal ? h("p", { class: "muted clamp" }, p.goal) : null),
        h("div", { class: "meta" },
          h("span", { class: "badge" }, p.phase || "idea"),
          p.night_shift ? h("span", { class: "badge s-waiting", title: "Night shift on" }, "night shift") : null,
          time(p.created_at))))));
  }

  async function load() {
    try { render((await api("GET", "/api/projects")).items); } catch (e) {
      list.removeAttribute("aria-busy");
      fill(list, h("p", { class: "error", role: "alert" }, e.message));
    }
  }

  $("#new-project").addEventListener("submit", (ev) => {
    ev.preventDefault();
    const form = ev.currentTarget;
    const f = form.elements;
    const body = { name: f.name.value.trim(), night_shift: f.night_shift.checked };
    if (!body.name) {  // spaces pass the browser's `required`
      flash("Give the project a name.", "error");
      f.name.focus();
      return;
    }
    if (f.goal.value.trim()) body.goal = f.goal.value.trim();
    busy(form.querySelector("button"), async () => {
      const p = await api("POST", "/api/projects", body);
      flash(`Project “${p.name}” created.`, "ok", { href: `/projects/${p.id}`, text: "Open it" });
      form.reset();
      await load();
    });
  });

  load();
}
