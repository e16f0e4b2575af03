/* A DAG as an inline SVG, no library: workflow runs, plans and workflow definitions draw with it.
   Nodes sit in rows by topological layer (a node one row below its deepest dependency), edges are
   curves from a dependency down to its dependant, and each node is coloured by its status. */
import { svg } from "./ui.js";

const W = 176, H = 52, GAP_X = 20, GAP_Y = 46, PAD = 6, NAME_CHARS = 22, BYPASS = 48;
let drawn = 0; // each drawing's arrow marker needs an id of its own on the page

/** Each node's layer: 0 without dependencies, else one past its deepest one. Unknown names and
    cycles (which the APIs refuse, but a drawing must not hang on) count as no dependency. */
export function layers(nodes) {
  const byId = new Map(nodes.map((n) => [n.id, n]));
  const layer = new Map();
  const visiting = new Set();
  const depth = (id) => {
    if (layer.has(id)) return layer.get(id);
    if (visiting.has(id) || !byId.has(id)) return -1;
    visiting.add(id);
    const deepest = Math.max(-1, ...(byId.get(id).depends_on || []).map(depth));
    visiting.delete(id);
    layer.set(id, deepest + 1);
    return deepest + 1;
  };
  nodes.forEach((n) => depth(n.id));
  return layer;
}

/** Rows of node ids; a row's order follows its dependencies' mean position (fewer crossings). */
function rows(nodes, layer) {
  const out = [];
  nodes.forEach((n) => (out[layer.get(n.id)] ||= []).push(n));
  const x = new Map();
  return out.map((row) => {
    const key = (n) => {
      const xs = (n.depends_on || []).filter((d) => x.has(d)).map((d) => x.get(d));
      return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : Infinity;
    };
    const sorted = row.map((n, i) => ({ n, i, k: key(n) }))
      .sort((a, b) => (a.k === b.k ? a.i - b.i : a.k === Infinity ? 1 : b.k === Infinity ? -1 : a.k - b.k))
      .map((e) => e.n);
    sorted.forEach((n, i) => x.set(n.id, i - (sorted.length - 1) / 2));
    return sorted;
  });
}

const words = (status) => String(status || "").replaceAll("_", " ");
const cut = (text) => (text.length > NAME_CHARS ? text.slice(0, NAME_CHARS - 1) + "…" : text);

/**
 * nodes: [{id, label?, depends_on: [id], status?, href?, detail?}] → an <svg>. Every text goes in
 * as a text node. Each node is a <g class="dag-node s-<status>" data-name data-status>, a link
 * when it has an href; its full name and status are its <title> (a tooltip and its accessible name).
 */
export function drawDag(nodes, caption) {
  const id = `dag-arrow-${++drawn}`;
  const layer = layers(nodes);
  const grid = rows(nodes, layer);
  const widest = Math.max(1, ...grid.map((r) => r.length));
  const narrow = widest * (W + GAP_X) - GAP_X + 2 * PAD;
  const height = Math.max(1, grid.length) * (H + GAP_Y) - GAP_Y + 2 * PAD;
  const span = (n, dep) => layer.get(n.id) - layer.get(dep);
  // An edge that skips a row goes round the right of the rows it skips, not through their nodes.
  const skips = nodes.some((n) => (n.depends_on || []).some((d) => layer.has(d) && span(n, d) > 1));
  const width = narrow + (skips ? BYPASS : 0);
  const at = new Map();
  grid.forEach((row, y) => {
    const left = (narrow - (row.length * (W + GAP_X) - GAP_X)) / 2;
    row.forEach((n, i) => at.set(n.id, { x: left + i * (W + GAP_X), y: PAD + y * (H + GAP_Y) }));
  });
  const root = svg("svg", { class: "dag", viewBox: `0 0 ${width} ${height}`, width, height, role: "img" },
    svg("title", {}, caption || "Dependency graph"),
    svg("defs", {}, svg("marker", { id, viewBox: "0 0 8 8", refX: 7, refY: 4, markerWidth: 7,
      markerHeight: 7, orient: "auto" }, svg("path", { d: "M0,0 L8,4 L0,8 z", class: "dag-arrow" }))));
  for (const n of nodes) {
    for (const dep of n.depends_on || []) {
      const from = at.get(dep), to = at.get(n.id);
      if (!from || !to) continue;
      root.append(svg("path", { class: "dag-edge", d: span(n, dep) > 1 ? bypass(from, to, narrow) : direct(from, to),
        "marker-end": `url(#${id})`, "data-from": dep, "data-to": n.id }));
    }
  }
  for (const n of nodes) root.append(nodeShape(n, at.get(n.id)));
  return root;
}

function direct(from, to) {
  const x1 = from.x + W / 2, y1 = from.y + H, x2 = to.x + W / 2, y2 = to.y - 2, mid = (y1 + y2) / 2;
  return `M${x1},${y1} C${x1},${mid} ${x2},${mid} ${x2},${y2}`;
}

/** Out to the lane right of every row (`narrow` is where the rows end), down, and back in. */
function bypass(from, to, narrow) {
  const x1 = from.x + W, y1 = from.y + H / 2, x2 = to.x + W + 2, y2 = to.y + H / 2;
  const lane = narrow + BYPASS / 2, r = 10;
  return `M${x1},${y1} H${lane - r} Q${lane},${y1} ${lane},${y1 + r} V${y2 - r} Q${lane},${y2} ${lane - r},${y2} H${x2}`;
}

function nodeShape(n, { x, y }) {
  const label = String(n.label ?? n.id);
  const status = n.status || "none";
  const shape = svg("g", { class: `dag-node s-${status}`, "data-name": n.id, "data-status": status },
    svg("title", {}, [label, n.status ? words(n.status) : null, n.detail].filter(Boolean).join(" · ")),
    svg("rect", { x, y, width: W, height: H, rx: 7 }),
    svg("text", { x: x + 10, y: y + 21, class: "dag-name" }, cut(label)),
    svg("text", { x: x + 10, y: y + 40, class: "dag-status" }, cut(n.status ? words(n.status) : n.detail || "")));
  if (!n.href) return shape;
  return svg("a", { href: n.href, class: "dag-link" }, shape);
}
