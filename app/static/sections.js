/* The project page's sections (Overview, Jobs, Code, …): one shown at a time, named by the URL's
   hash (/projects/<pid>#jobs) so each can be linked to, bookmarked and reached with Back.

   A panel registers the loader of what it shows under its section. Nothing loads until its
   section is first shown; after that a panel's refresh runs at once while the section is shown
   and, while it is hidden, only marks it stale, to load once when it is shown again. So a page
   opened on #settings asks for the project and its settings, never the jobs or the chat, and
   a hidden section costs nothing however busy the project's stream is. */
import { $, fail } from "./ui.js";

const nav = $("#sections");
const NAMES = [...nav.querySelectorAll("a[data-section]")].map((a) => a.dataset.section);
const DEFAULT = NAMES[0];
const panels = new Map(NAMES.map((n) => [n, []])); // section -> [{ load, loaded, stale }]
let current = null;
let base = document.title; // "<project> · Switchyard" once the head has read the project

const label = (name) => nav.querySelector(`a[data-section="${name}"]`).textContent;
const retitle = () => { document.title = current ? `${label(current)} · ${base}` : base; };

/** The page's title without the section ("Launch week · Switchyard"). */
export function title(text) { base = text; retitle(); }

/** One load of a panel at a time: a refresh while one is out asks for one more after it (an
    older answer never lands over a newer one); a load that fails leaves the panel to load
    again when it is next refreshed or shown. */
async function run(p) {
  if (p.running) { p.again = true; return; }
  p.running = true;
  try {
    do {
      p.again = false;
      p.stale = false;
      try {
        await p.load();
        p.loaded = true;
      } catch (e) {
        p.loaded = false;
        fail(e);
      }
    } while (p.again);
  } finally {
    p.running = false;
  }
}

/** Register `load` (async, fills its panel) under `section`; returns refresh(): reload now if
    the section is shown, else when it next is. `everyShow`: load each time the section is
    shown (a form that must start from what is stored now, not from its last visit). */
export function panel(section, load, { everyShow = false } = {}) {
  if (!panels.has(section)) throw new Error(`no section ${section}`);
  const p = { load, everyShow, loaded: false, stale: false, running: false, again: false };
  panels.get(section).push(p);
  if (current === section) run(p);
  return () => {
    if (current === section) run(p);
    else if (p.loaded) p.stale = true;
  };
}

/** The section a hash names ("#jobs"); no hash is the default one; another hash (the skip
    link's #main) names none, and the section shown stays. */
const named = (hash) => (!hash ? DEFAULT : NAMES.includes(hash.slice(1)) ? hash.slice(1) : null);
const follow = () => { const name = named(location.hash); if (name) show(name); };

/** Show `name`'s section and load what it shows that is not loaded or is stale. */
export function show(name) {
  if (!panels.has(name)) name = DEFAULT;
  if (name === current) return;
  current = name;
  for (const el of document.querySelectorAll("#project-body > .section")) el.hidden = el.dataset.section !== name;
  for (const a of nav.querySelectorAll("a[data-section]")) {
    if (a.dataset.section === name) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  retitle();
  for (const p of panels.get(name)) if (!p.loaded || p.stale || p.everyShow) run(p);
}

/** The section shown now (null before start). */
export const shown = () => current;

/** Show the section the URL names and follow the navigation from now on. A link in the bar
    changes the hash without the browser's jump to an element of that id (#jobs is also the
    jobs table's box): the section opens at the top of the page's head. */
export function start() {
  nav.addEventListener("click", (ev) => {
    const a = ev.target.closest("a[data-section]");
    if (!a || ev.metaKey || ev.ctrlKey || ev.shiftKey || ev.button !== 0) return;
    ev.preventDefault();
    if (location.hash !== `#${a.dataset.section}`) history.pushState(null, "", `#${a.dataset.section}`);
    show(a.dataset.section);
    // A screen reader follows the reader into the section it opened, not back to the bar.
    document.querySelector(`#section-${a.dataset.section}`).focus({ preventScroll: true });
  });
  window.addEventListener("popstate", follow);
  window.addEventListener("hashchange", follow);
  show(named(location.hash) || DEFAULT);
}
