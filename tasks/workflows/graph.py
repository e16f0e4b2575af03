"""Dependency graphs of named steps: what each step waits for, its cycles, its run order.

A graph is `{step: [the steps it depends on]}` in declared order; a dependency that names no
step in the graph is ignored here (spec.problems reports it). Every walk is iterative and the
results keep declared order, so messages and layers are the same on every run.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence

from tasks.workflows.errors import WorkflowError

Graph = Mapping[str, Sequence[str]]


def closure(graph: Graph) -> dict[str, set[str]]:
    """Each step's upstream: every step it waits for, directly or through others.

    A step on a cycle is its own upstream (that is how `cycles` finds it).
    """
    result: dict[str, set[str]] = {}
    for name in graph:
        seen: set[str] = set()
        stack = list(_known(graph, name))
        while stack:
            dep = stack.pop()
            if dep not in seen:
                seen.add(dep)
                stack.extend(_known(graph, dep))
        result[name] = seen
    return result


def cycles(graph: Graph) -> list[list[str]]:
    """One cycle per strongly connected group, e.g. ["a", "b", "c", "a"]: a depends on b …

    Each starts at the group's first step in declared order and is a shortest way round.
    """
    reach = closure(graph)
    found: list[list[str]] = []
    placed: set[str] = set()
    for name in graph:
        if name in placed or name not in reach[name]:
            continue
        group = {other for other in reach[name] if name in reach[other]}
        placed |= group
        found.append(_shortest_loop(graph, name, group))
    return found


def _shortest_loop(graph: Graph, start: str, group: set[str]) -> list[str]:
    came_from: dict[str, str] = {}
    queue = deque([start])
    while queue:
        node = queue.popleft()
        for dep in _known(graph, node):
            if dep == start:
                loop = [start, node]
                while loop[-1] != start:
                    loop.append(came_from[loop[-1]])
                return loop[::-1]  # built backwards from the edge that closes the loop
            if dep in group and dep not in came_from:
                came_from[dep] = node
                queue.append(dep)
    raise AssertionError(f"{start} is on no cycle")  # closure() put it on one


def layers(graph: Graph) -> list[list[str]]:
    """Steps in the order they may run: each layer depends only on earlier layers."""
    waiting = {name: set(_known(graph, name)) for name in graph}
    result: list[list[str]] = []
    while waiting:
        ready = [name for name, deps in waiting.items() if not deps]
        if not ready:
            loops = ", ".join(" → ".join(loop) for loop in cycles(graph))
            raise WorkflowError(f"the steps cannot be ordered: cycle {loops}")
        result.append(ready)
        for name in ready:
            del waiting[name]
        for deps in waiting.values():
            deps.difference_update(ready)
    return result


def _known(graph: Graph, name: str) -> list[str]:
    return [dep for dep in graph.get(name, ()) if dep in graph]
