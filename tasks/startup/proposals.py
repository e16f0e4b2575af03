"""Only what the project can carry out is proposed. A packet or the night shift that proposed
an effect the project's settings (or the operator) forbid made an approval that could only
fail once approved: money is off by default, so every packet past idea asked the founder to
approve an ad campaign that then failed, naming a setting to turn on.

The model is told which kinds it may not propose and why (`prompt`); what it proposes anyway
is set aside (`within`), kept in the packet under `set_aside` and named in the job's log with
the setting that would allow it. Pure: the refusals come with the project's context
(projects.project_context), computed by the effects' own policy.
"""

from __future__ import annotations

from typing import Any


def _refused(context: dict[str, Any]) -> dict[str, str]:
    # A context checkpointed before refusals were part of it has none: nothing is set aside.
    refused = context.get("actions_refused")
    return refused if isinstance(refused, dict) else {}


def prompt(context: dict[str, Any]) -> str:
    """The line the model reads about the kinds of action it must not propose ('' if none)."""
    refused = _refused(context)
    if not refused:
        return ""
    return ("Do not propose actions of these types, which this project may not perform: "
            + "; ".join(f"{kind} ({why})" for kind, why in sorted(refused.items())) + ".")


def within(actions: list[dict[str, Any]], context: dict[str, Any],
           ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(the actions the project may carry out, those set aside as {type, title, reason})."""
    refused = _refused(context)
    kept: list[dict[str, Any]] = []
    aside: list[dict[str, Any]] = []
    for action in actions:
        reason = refused.get(str(action.get("type")))
        if reason is None:
            kept.append(action)
        else:
            aside.append({"type": action.get("type"), "title": action.get("title"),
                          "reason": reason})
    return kept, aside


def log_line(aside: list[dict[str, Any]]) -> str:
    """What the job says about the actions it set aside ('' if none)."""
    if not aside:
        return ""
    reasons = {str(a["type"]): str(a["reason"]) for a in aside}
    return (f"{len(aside)} proposed action(s) set aside, not allowed for this project: "
            + "; ".join(f"{kind}: {why}" for kind, why in sorted(reasons.items())))
