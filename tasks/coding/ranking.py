"""Which files the rest of a repository relies on: a PageRank over "file A uses a name file B
defines", weighted after Aider's repo map, optionally tilted towards what a task mentions."""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from tasks.coding.symbols import FileSymbols

DAMPING = 0.85
# A name defined in this many files (`get`, `constructor`, `main`) says nothing about which
# one a use means; linking all of them would also cost quadratic time.
GENERIC_NAME_DEFINERS = 20


@dataclass(frozen=True)
class Ranking:
    ranks: dict[str, float]  # file -> PageRank, summing to 1
    received: dict[tuple[str, str], float]  # (file, name) -> rank sent by the files using it
    focused: frozenset[str]  # the files the focus names


def rank(symbols: Mapping[str, FileSymbols], focus: Iterable[str] = ()) -> Ranking:
    """Each file's PageRank; each (file, name)'s share of the rank its uses send; the focus."""
    defines: dict[str, set[str]] = defaultdict(set)
    for path, fs in symbols.items():
        for d in fs.definitions:
            defines[d.name].add(path)
    uses: dict[str, Counter[str]] = defaultdict(Counter)
    for path, fs in symbols.items():
        for name in fs.references:
            if name in defines:
                uses[name][path] += 1

    terms = {t.strip().removeprefix("./").replace("\\", "/") for t in focus} - {""}
    links: list[tuple[str, str, str, float]] = []  # (from, to, name, weight)
    for name in sorted(uses):
        definers = sorted(defines[name])
        if len(definers) > GENERIC_NAME_DEFINERS:
            continue
        weight = _name_weight(name, len(definers), name in terms)
        for user, count in uses[name].items():
            if user in defines[name]:
                continue  # a file using a name it defines itself most likely means its own
            links.extend((user, to, name, weight * math.sqrt(count)) for to in definers)

    edges: dict[tuple[str, str], float] = defaultdict(float)
    for user, to, _, weight in links:
        edges[user, to] += weight
    focused = _focused(symbols, defines, terms)
    restarts = dict.fromkeys(symbols, 1.0)
    for path in focused:  # as much again as all files together, shared by the focused ones
        restarts[path] += len(symbols) / len(focused)
    ranks = pagerank(sorted(symbols), edges, restarts)

    out_weight: dict[str, float] = defaultdict(float)
    for (user, _), weight in edges.items():
        out_weight[user] += weight
    scores: dict[tuple[str, str], float] = defaultdict(float)
    for user, to, name, weight in links:
        scores[to, name] += DAMPING * ranks[user] * weight / out_weight[user]
    return Ranking(ranks, dict(scores), frozenset(focused))


def _name_weight(name: str, definers: int, mentioned: bool) -> float:
    weight = 1.0
    if mentioned:
        weight *= 10
    if _code_like(name) and len(name) >= 8:
        weight *= 10  # `parse_config_file` links two files more surely than `run` does
    if name.startswith("_"):
        weight *= 0.1  # private by convention: a use from elsewhere is likely another thing
    if definers > 5:
        weight *= 0.1
    return weight


def _code_like(name: str) -> bool:
    return "_" in name.strip("_") or (any(c.isupper() for c in name[1:]) and not name.isupper())


def _focused(symbols: Mapping[str, FileSymbols], defines: Mapping[str, set[str]],
             terms: set[str]) -> set[str]:
    """The files a task's terms name: by path, file name or stem, or as a distinctive name's
    (few) definers."""
    focused: set[str] = set()
    for path in symbols:
        name = path.rsplit("/", 1)[-1]
        if {path, name, name.split(".", 1)[0]} & terms or any(
                path.endswith("/" + t) for t in terms if "/" in t):
            focused.add(path)
    for term in terms:
        if _code_like(term) and 0 < len(defines.get(term, ())) <= 3:
            focused |= defines[term]
    return focused


def pagerank(nodes: list[str], edges: Mapping[tuple[str, str], float],
             personalisation: Mapping[str, float] | None = None, *, damping: float = DAMPING,
             tolerance: float = 1e-9, max_iterations: int = 200) -> dict[str, float]:
    """Scores summing to 1. A node's score flows along its out-edges in proportion to their
    weights; with probability 1 - damping (and always from a node without out-edges) the walk
    restarts at a node drawn from `personalisation` (uniform when absent).

    Deterministic: every sum runs in the order of `nodes`, so equal input gives equal floats.
    """
    if not nodes:
        return {}
    index = {node: i for i, node in enumerate(nodes)}
    weights = [max(0.0, (personalisation or {}).get(node, 1.0 if personalisation is None else 0.0))
               for node in nodes]
    total = sum(weights)
    restart = [w / total for w in weights] if total > 0 else [1 / len(nodes)] * len(nodes)

    out: list[list[tuple[int, float]]] = [[] for _ in nodes]
    for (src, dst), weight in sorted(edges.items()):
        if weight > 0 and src in index and dst in index:
            out[index[src]].append((index[dst], weight))
    for targets in out:
        norm = sum(w for _, w in targets)
        targets[:] = [(j, w / norm) for j, w in targets]

    score = list(restart)
    for _ in range(max_iterations):
        dangling = sum(score[i] for i, targets in enumerate(out) if not targets)
        base = (1 - damping) + damping * dangling
        nxt = [base * r for r in restart]
        for i, targets in enumerate(out):
            flow = damping * score[i]
            for j, share in targets:
                nxt[j] += flow * share
        change = sum(abs(a - b) for a, b in zip(nxt, score, strict=True))
        score = nxt
        if change < tolerance * len(nodes):
            break
    return {node: score[i] for i, node in enumerate(nodes)}
