/* The v1, v2… buttons of a project panel's saved things (workflows, functions): one row's
   versions, and which one is on show (aria-pressed, across every row of the panel). */
import { h, busy } from "./ui.js";

/** `name`'s version buttons; `chosen` is the { name, version } on show; `pick(v)` shows v. */
export function versionButtons(name, versions, chosen, pick) {
  return h("span", { class: "versions", role: "group", "aria-label": `Versions of ${name}` }, versions.map((v) =>
    h("button", { type: "button", class: "ghost version", dataset: { version: v },
      "aria-pressed": String(chosen?.name === name && chosen?.version === v),
      onclick: (ev) => busy(ev.currentTarget, () => pick(v)) }, `v${v}`)));
}

/** Mark `name`'s `version` as the one on show in `box` (each row carries its data-name). */
export function pressVersion(box, name, version) {
  for (const b of box.querySelectorAll("button.version")) {
    b.setAttribute("aria-pressed", String(b.closest("[data-name]").dataset.name === name && Number(b.dataset.version) === version));
  }
}
