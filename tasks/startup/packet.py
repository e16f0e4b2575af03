"""The packet: what a phase of work hands the founder — findings plus proposed actions.

A model writes it as JSON; `parse_packet` is the one gate it passes through, so a
handler either holds a valid `Packet` or the job fails saying what was wrong.
Each action type names the args its effect cannot do without; the effects
validate the rest of their own arguments.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from tasks.engine.errors import PermanentError

ActionType = Literal["deploy_hook", "email", "github_dispatch", "ad_campaign"]

REQUIRED_ARGS: dict[str, tuple[str, ...]] = {
    "deploy_hook": ("url",),
    "email": ("to", "subject", "body"),
    "github_dispatch": ("repo", "event_type"),
    "ad_campaign": ("channel", "headline", "daily_budget_usd"),
}


TITLE_MAX = 200


def _clipped(value: Any) -> Any:
    """A title past TITLE_MAX cut to it, ending in "…": a title is shown, never parsed, and a
    project named at the name's own limit made every packet's title too long for good."""
    if isinstance(value, str) and len(value) > TITLE_MAX:
        return value[:TITLE_MAX - 1].rstrip() + "…"
    return value


class PacketAction(BaseModel):
    model_config = ConfigDict(extra="forbid")

    type: ActionType
    title: str = Field(min_length=1, max_length=TITLE_MAX)
    args: dict[str, Any] = Field(default_factory=dict)

    _clip_title = field_validator("title", mode="before")(_clipped)

    @model_validator(mode="after")
    def _has_required_args(self) -> PacketAction:
        missing = [name for name in REQUIRED_ARGS[self.type] if self.args.get(name) in (None, "")]
        if missing:
            raise ValueError(f"a {self.type} action needs args {missing}")
        return self


class Packet(BaseModel):
    # Models add commentary fields now and then; dropping them beats failing the job.
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=TITLE_MAX)
    summary: str = Field(min_length=1, max_length=4000)
    insights: list[str] = Field(default_factory=list, max_length=20)
    actions: list[PacketAction] = Field(default_factory=list, max_length=10)

    _clip_title = field_validator("title", mode="before")(_clipped)


def parse_packet(text: str) -> Packet:
    """The packet in a model's answer (bare, fenced or amid prose); PermanentError if none."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise PermanentError("the packet is not JSON: no object in the model's answer")
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise PermanentError(f"the packet is not valid JSON: {exc}") from None
    try:
        return Packet.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in err['loc']) or 'packet'}: {err['msg']}"
            for err in exc.errors()
        )
        raise PermanentError(f"the packet does not match the schema: {problems}") from None
