/* A unified diff on the page: the files it touches with their added and removed line counts, then
   one collapsible block per file, each line coloured by kind. The text is the repository's and the
   model's: every line is a text node, never markup. */
import { h } from "./ui.js";

const OPEN_UP_TO = 600; // lines: a diff longer than this opens folded, one file at a time

/** The lines of a diff, each tagged: meta (file headers), hunk, add, del or ctx. */
export function diffLines(text) {
  const out = [];
  let inHunk = false;
  for (const line of String(text).split("\n")) {
    let kind;
    if (line.startsWith("diff --git ")) { inHunk = false; kind = "file"; }
    else if (line.startsWith("@@")) { inHunk = true; kind = "hunk"; }
    else if (!inHunk) kind = "meta"; // ---/+++ and index lines: not a removal or an addition
    else if (line.startsWith("+")) kind = "add";
    else if (line.startsWith("-")) kind = "del";
    else if (line.startsWith("\\")) kind = "meta";
    else kind = "ctx";
    out.push({ kind, line });
  }
  while (out.length && out[out.length - 1].line === "") out.pop();
  return out;
}

/** The lines split into files: at each `diff --git`, the path from the `+++ b/` line. */
function byFile(lines) {
  const files = [];
  for (const l of lines) {
    if (l.kind === "file" || !files.length) files.push({ path: null, lines: [] });
    const f = files[files.length - 1];
    f.lines.push(l);
    if (l.kind === "file" && f.path === null) f.path = l.line.replace(/^diff --git a\/.* b\//, "");
    if (l.kind === "meta" && l.line.startsWith("+++ ") && !l.line.startsWith("+++ /dev/null")) {
      f.path = l.line.slice(4).replace(/^b\//, "");
    }
  }
  return files;
}

function counts(added, removed) {
  return [h("span", { class: "n-add" }, `+${added ?? 0}`), " ", h("span", { class: "n-del" }, `−${removed ?? 0}`)];
}

const lineEl = (l) => h("span", { class: `dl ${l.kind}` }, l.line || " ");

/** The `diff` event's data: {diff, truncated, files: [{path, added, removed}]}. */
export function diffView(d) {
  const files = Array.isArray(d.files) ? d.files : [];
  const lines = diffLines(d.diff || "");
  const blocks = byFile(lines);
  const stats = new Map(files.map((f) => [f.path, f]));
  const open = lines.length <= OPEN_UP_TO;
  return [
    files.length ? h("ul", { class: "diff-files" }, files.map((f) =>
      h("li", { dataset: { path: f.path } }, h("code", {}, f.path), " ", counts(f.added, f.removed)))) : null,
    d.truncated ? h("p", { class: "warn small diff-truncated" },
      "The diff was cut to fit the page; the branch holds all of it.") : null,
    blocks.length ? blocks.map((b) => {
      const s = stats.get(b.path);
      return h("details", { class: "diff-file", open, dataset: { path: b.path ?? "" } },
        h("summary", {}, h("code", {}, b.path ?? "diff"), s ? [" ", counts(s.added, s.removed)] : null),
        h("pre", { class: "diff" }, b.lines.map(lineEl)));
    }) : h("p", { class: "empty" }, "The diff is empty."),
  ];
}
