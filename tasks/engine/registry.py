"""Job types: name -> payload model, handler, queue and policy. One registry per process."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from tasks.engine import system_parts
from tasks.engine.errors import InvalidPayload, JobTypeUnavailable, UnknownJobType
from tasks.engine.queues import QUEUES
from tasks.engine.retry import RetryPolicy

if TYPE_CHECKING:  # tasks.engine.context imports the engine below this module
    from tasks.engine.context import JobContext

Handler = Callable[["JobContext", Any], Any]  # (context, validated payload) -> JSON-able result


@dataclass(frozen=True)
class JobType:
    name: str
    payload_model: type[BaseModel]
    handle: Handler
    queue: str = "default"
    max_attempts: int = 3
    timeout_seconds: int | None = None
    retry_policy: RetryPolicy = field(default_factory=RetryPolicy)
    # False for types only the engine enqueues (approval executions, system-wide sweeps):
    # the HTTP API refuses them, so no owner can run an effect or a sweep directly.
    public: bool = True
    # What to release on this machine once a job has ended in any state (completed, failed,
    # canceled, timed out): called with the job's id by the worker that ran it last.
    on_end: Callable[[str], None] | None = None
    # Programs from the machine (tasks.engine.system_parts.PARTS) a run needs: without one the job
    # fails at once, saying what is missing and how to install it.
    requires: tuple[str, ...] = ()
    # What a new job of this type needs of its project beyond a valid payload (a credential
    # to deliver with): called with the project id and payload before the job is stored;
    # raises InvalidPayload saying what to set, so work that could not land never starts.
    admit: Callable[[str, dict[str, Any]], None] | None = None

    def __post_init__(self) -> None:
        if self.queue not in QUEUES:
            raise ValueError(f"job type {self.name}: unknown queue {self.queue!r}")
        if "." not in self.name:
            raise ValueError(f"job type {self.name!r} must be named domain.action")

    def parse(self, payload: Any, *, strict: bool = False) -> BaseModel:
        """Validate a payload; InvalidPayload names each bad field.

        Strict is for the JSON a client sent: `false` or `"3"` is no number there (as the
        contract and the OpenAPI document say). Lenient is for payloads built in Python
        (workers, spawns, the engine's own jobs)."""
        try:
            if strict:
                return self.payload_model.model_validate_json(
                    json.dumps(_integral_floats(payload)), strict=True)
            return self.payload_model.model_validate(payload)
        except ValidationError as exc:
            fields = {
                ".".join(str(p) for p in err["loc"]) or "payload": err["msg"]
                for err in exc.errors()
            }
            summary = "; ".join(f"{k}: {v}" for k, v in fields.items())
            raise InvalidPayload(f"invalid payload for {self.name}: {summary}",
                                 details={"fields": fields}) from None


def integral(value: Any) -> Any:
    """JSON has one number type: 2.0 is the integer 2 (as JSON Schema says); 2.5 is not."""
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _integral_floats(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _integral_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_integral_floats(v) for v in value]
    return integral(value)


_registry: dict[str, JobType] = {}
# Built-in job types whose module could not be imported here, with the reason.
_unavailable: dict[str, str] = {}
# Set by tasks.catalog once it has imported every system's job module: before that, an
# unknown name most likely means this process never imported the catalog.
_catalog_loaded = False


def register(job_type: JobType) -> JobType:
    existing = _registry.get(job_type.name)
    if existing is not None and existing is not job_type:
        raise ValueError(f"job type {job_type.name} is registered twice")
    _registry[job_type.name] = job_type
    return job_type


def catalog_loaded() -> None:
    global _catalog_loaded
    _catalog_loaded = True


def mark_unavailable(names: tuple[str, ...], reason: str) -> None:
    """These job types exist but cannot run in this process (tasks.catalog says why)."""
    _unavailable.update(dict.fromkeys(names, reason))


def get(name: str) -> JobType:
    try:
        return _registry[name]
    except KeyError:
        if name in _unavailable:
            raise JobTypeUnavailable(name, _unavailable[name]) from None
        hint = "" if _catalog_loaded else (" (no system's job types are registered in this "
                                           "process: import tasks.catalog first)")
        raise UnknownJobType(f"unknown job_type {name!r}{hint}") from None


def names() -> list[str]:
    return sorted(_registry)


def public_names() -> list[str]:
    return [n for n in names() if _registry[n].public]


def get_public(name: str) -> JobType:
    """A job type a client may enqueue; an internal one is refused like an unknown one, and
    one whose system part this machine lacks (Chromium, git) says what to install rather
    than accept a job that can only fail (API.md: 422 job_type_unavailable)."""
    job_type = get(name)
    if not job_type.public:
        raise UnknownJobType(f"job_type {name!r} is internal: Switchyard enqueues it itself")
    system_parts.require(job_type.name, job_type.requires)
    return job_type


def unavailable() -> dict[str, str]:
    """Built-in job types this process could not load, with the reason for each."""
    return dict(_unavailable)
