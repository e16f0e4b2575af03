/* The project page's memory: what its agents wrote down as they worked. */
import { api, h, $, clear, time, empty, debounce } from "./ui.js";

import { panel } from "./sections.js";

const enc = encodeURIComponent($("#project").dataset.projectId);

async function loadMemory() {
  const data = await api("GET", `/api/projects/${enc}/memory`);
  const box = clear($("#memory"));
  if (!data.items.length) {
    box.append(empty("Nothing remembered yet. Agents write what they learn here as they work."));
    return;
  }
  box.append(h("dl", { class: "memory" }, data.items.map((m) => [
    h("dt", {}, h("span", { class: "badge" }, m.category), " ", h("strong", {}, m.key), " ",
      h("span", { class: "small" }, time(m.updated_at))),
    h("dd", {}, m.content)])));
}
export const refreshMemory = debounce(panel("memory", loadMemory), 800);
