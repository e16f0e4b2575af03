"""Small JSON Schema builders for the parts of the OpenAPI document that no model describes:
parameters, the event stream's framing. Bodies come from pydantic models (app.api.schemas for
requests, app.api.responses for responses)."""

from __future__ import annotations

from typing import Any

REF = "#/components/schemas/{model}"


def typed(type_: str | list[str], **kw: Any) -> dict[str, Any]:
    return {"type": type_, **kw}


def obj(props: dict[str, Any], *, optional: tuple[str, ...] = (),
        extra: bool | dict[str, Any] = False) -> dict[str, Any]:
    return {"type": "object", "properties": props,
            "required": [k for k in props if k not in optional], "additionalProperties": extra}


def ref(name: str) -> dict[str, str]:
    return {"$ref": REF.format(model=name)}


UUID = typed("string", format="uuid")
