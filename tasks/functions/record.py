"""What a function's tool calls leave in the record, and how a replay is checked against it.

Pure logic, no I/O. Each call is identified by its tool and a fingerprint of its arguments;
a replay that asks, at some position, for another call than the one recorded there is
a non-deterministic function, named with both calls. Secret values read through the
keystore never enter the record, an event or an error: `Secrets.scrub` replaces them.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from typing import Any

from tasks.services import secret_forms

SCRUBBED = "[secret]"
DESCRIBED = 120  # characters of a call's arguments shown in a message


@dataclass
class Secrets:
    """The secret values this run has read; every text leaving the run is scrubbed of them."""

    values: set[str] = field(default_factory=set)
    # What text() replaces, longest first; computed when a secret is added, not per string.
    _forms: list[str] = field(default_factory=list, init=False, repr=False)

    def __post_init__(self) -> None:
        self._refresh()

    def add(self, value: str | None) -> None:
        if value and value not in self.values:
            self.values.add(value)
            self._refresh()

    def _refresh(self) -> None:
        # Longest first: a secret that contains another is replaced whole. Its encoded
        # forms too: a query carrying it comes back in an error URL-encoded (web search), a
        # header base64-encoded, a dump in hex (tasks.services.secret_forms).
        found = {f for s in self.values for f in secret_forms.forms(s)}
        self._forms = sorted(found, key=len, reverse=True)

    def scrub(self, value: Any) -> Any:
        """`value` (any JSON) with every secret value in its strings and keys replaced."""
        if not self.values:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.scrub(v) for v in value]
        if isinstance(value, dict):
            return {self.text(str(k)): self.scrub(v) for k, v in value.items()}
        return value

    def text(self, text: str) -> str:
        for form in self._forms:
            text = text.replace(form, SCRUBBED)
        return text


@dataclass(frozen=True)
class Call:
    """One tool call as the function made it (arguments already scrubbed)."""
    index: int  # from 0, in the order the function made its calls
    tool: str
    args: Any

    @property
    def step_name(self) -> str:
        return f"call:{self.index}:{self.tool}"

    @property
    def fingerprint(self) -> str:
        encoded = json.dumps([self.tool, self.args], sort_keys=True, default=str)
        return hashlib.sha256(encoded.encode()).hexdigest()[:32]

    def describe(self) -> str:
        args = json.dumps(self.args, sort_keys=True, default=str, ensure_ascii=False)
        if len(args) > DESCRIBED:
            args = args[:DESCRIBED - 1] + "…"
        return f"{self.tool}({args})"

    def entry(self, **outcome: Any) -> dict[str, Any]:
        """The step output recording this call and its outcome."""
        return {"call": self.describe(), "tool": self.tool, "hash": self.fingerprint, **outcome}


def mismatch(call: Call, recorded_name: str, recorded: Any) -> str | None:
    """Why the recorded step at this call's position is not this call, or None if it is."""
    if isinstance(recorded, dict) and recorded_name == call.step_name \
            and recorded.get("hash") == call.fingerprint:
        return None
    was = recorded.get("call") if isinstance(recorded, dict) and "call" in recorded \
        else f"the step {recorded_name!r}"
    return (f"non-deterministic function: call {call.index + 1} was {was} and is now "
            f"{call.describe()} (a function must make the same tool calls in the same order "
            "on every replay; time and randomness come from Date.now() and Math.random(), "
            "which are recorded)")
