"""The outline a model writes for a report: findings with bullets, notes and figures.

`parse_outline` is the one gate: a handler holds a valid `Outline` or the job fails
saying what was wrong (as tasks.startup.packet does for packets).
"""

from __future__ import annotations

import json

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from tasks.engine.errors import PermanentError


class Figure(BaseModel):
    model_config = ConfigDict(extra="ignore")

    label: str = Field(min_length=1, max_length=60)
    value: float = Field(allow_inf_nan=False)


class Finding(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=120)
    bullets: list[str] = Field(min_length=1, max_length=6)
    notes: str = Field(default="", max_length=2000)
    figures: list[Figure] = Field(default_factory=list, max_length=8)  # a chart when present


class Outline(BaseModel):
    model_config = ConfigDict(extra="ignore")

    title: str = Field(min_length=1, max_length=200)
    subtitle: str = Field(default="", max_length=300)
    summary: str = Field(min_length=1, max_length=2000)
    findings: list[Finding] = Field(min_length=1, max_length=20)
    sources: list[str] = Field(default_factory=list, max_length=30)


def parse_outline(text: str) -> Outline:
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise PermanentError("the outline is not JSON: no object in the model's answer")
    try:
        data = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise PermanentError(f"the outline is not valid JSON: {exc}") from None
    try:
        return Outline.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or 'outline'}: {e['msg']}"
                             for e in exc.errors())
        raise PermanentError(f"the outline does not match the schema: {problems}") from None
