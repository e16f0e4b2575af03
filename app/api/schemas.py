"""Request bodies, validated strictly: a wrong type is an error, never silently coerced."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    GetCoreSchemaHandler,
    GetJsonSchemaHandler,
    field_validator,
    model_validator,
)
from pydantic_core import core_schema

from tasks.engine.registry import integral
from tasks.services.llm import unconfigured
from tasks.services.llm.roles import ROLES, Choice, choose, operator_choices, project_allowed
from tasks.settings import DEFAULT_MODELS, get_settings
from tasks.startup.local_days import valid_zone

NO_NUL = r"^[^\x00]*$"


def _no_nul(value: str) -> str:
    if "\x00" in value:
        raise ValueError("must not contain the NUL character (\\u0000)")
    return value


class _Storable:
    """PostgreSQL text and jsonb cannot hold NUL: refused here (422), not at the insert (500)."""

    def __get_pydantic_core_schema__(self, source: Any, handler: GetCoreSchemaHandler):
        return core_schema.no_info_after_validator_function(_no_nul, handler(source))

    def __get_pydantic_json_schema__(self, schema: Any, handler: GetJsonSchemaHandler):
        return {**handler(schema), "pattern": NO_NUL}


Text = Annotated[str, _Storable()]
Integral = BeforeValidator(integral)  # after the bounds in Annotated[...], or their schema breaks


def has_nul(value: Any) -> bool:
    if isinstance(value, str):
        return "\x00" in value
    if isinstance(value, dict):
        return any(has_nul(k) or has_nul(v) for k, v in value.items())
    if isinstance(value, list):
        return any(has_nul(v) for v in value)
    return False


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)


Cap = Annotated[int, Field(ge=0), Integral]


class EffectPermissions(Strict):
    """Which effect kinds the project turns on (tasks.services.effects.policy.KINDS), within the
    operator's SWITCHYARD_EFFECTS_ALLOWED."""

    email: bool | None = None
    deploy_hook: bool | None = None
    github_dispatch: bool | None = None
    ad_campaign: bool | None = None


class EffectCaps(Strict):
    """The most of each kind a day, within the operator's SWITCHYARD_EFFECT_CAP_CEILINGS."""

    email_per_day: Cap | None = None
    deploy_hook_per_day: Cap | None = None
    github_dispatch_per_day: Cap | None = None
    ad_campaign_per_day: Cap | None = None


def merge_patch(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """JSON Merge Patch (RFC 7396): the keys sent change, null removes one, objects merge."""
    out = dict(target)
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict):
            inner = out.get(key)
            out[key] = merge_patch(inner if isinstance(inner, dict) else {}, value)
        else:
            out[key] = value
    return out


class RoleModel(Strict):
    """The provider and model one role's calls go to (tasks.services.llm.roles); a provider
    without a model asks for that provider's default model."""

    provider: Literal[tuple(DEFAULT_MODELS)] | None = None  # type: ignore[valid-type]
    model: Text | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("provider")
    @classmethod
    def _configured(cls, value: str | None) -> str | None:
        # The keys are the operator's: a project picks among the providers set up for it.
        if value is not None and (missing := unconfigured(value)) is not None:
            raise ValueError(f"the operator has not set up {value}: {missing}")
        return value


LlmRole = Literal[ROLES]  # type: ignore[valid-type]


class ProjectSettings(Strict):
    """What a project's agents may use and do (services/effects/policy.py, services/llm/flow.py).

    Sent as a merge patch: null clears a setting, or a key of `permissions` or `caps`."""

    contact_email: Text | None = Field(default=None, max_length=320)
    deploy_hook_url: Text | None = Field(default=None, max_length=2000)
    github_repo: Text | None = Field(default=None, max_length=200)
    permissions: EffectPermissions | None = None
    caps: EffectCaps | None = None
    llm_daily_token_budget: Annotated[int, Field(ge=0), Integral] | None = None
    llm_daily_usd_budget: float | None = Field(default=None, ge=0)
    # Models by role: {"plan": {"provider": "anthropic", "model": "claude-opus-4-6"}, ...}.
    llm_models: dict[LlmRole, RoleModel | None] | None = None
    # The IANA zone its daily schedules keep (digests, nudges, the night shift): they run at
    # SWITCHYARD_DAILY_HOUR on its clock, across DST changes (tasks.startup.local_days).
    timezone: Text | None = Field(default=None, min_length=1, max_length=64)

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str | None) -> str | None:
        if value is not None and not valid_zone(value):
            raise ValueError(f"{value!r} is not an IANA time zone name (e.g. Europe/Berlin, "
                             "America/New_York, UTC)")
        return value
    # The coding agent's `run` tool may reach the network (only where the operator allows
    # it at all: SWITCHYARD_CODE_NETWORK_ALLOWED; off either way by default).
    code_network: bool | None = None
    # Commands the coding agent's setup phase runs after installing what the repository
    # declares (with the package indexes' network alone), like a CI job's setup steps.
    code_setup: list[Annotated[Text, Field(min_length=1, max_length=2000)]] | None = Field(
        default=None, max_length=20)

    @model_validator(mode="after")
    def _models_allowed(self) -> ProjectSettings:
        # A role's model is the operator's bill and limits: only what it runs or lists.
        settings = get_settings()
        default = Choice(settings.llm_provider, settings.llm_model)
        operator = operator_choices(settings.llm_role_models)
        for role, chosen in (self.llm_models or {}).items():
            if chosen is None:
                continue
            choice = choose(role, default, operator, {role: chosen.model_dump()})
            if not project_allowed(choice, default, operator, settings.llm_project_models):
                raise ValueError(
                    f"llm_models.{role}: {choice.provider}/{choice.model} is not a model this "
                    "server offers projects (its own, or SWITCHYARD_LLM_PROJECT_MODELS)")
        return self

    def applied_to(self, current: dict[str, Any]) -> dict[str, Any]:
        return merge_patch(current, self.model_dump(exclude_unset=True))


class ProjectCreate(Strict):
    name: Text = Field(min_length=1, max_length=200, pattern=r"\S")  # not blank
    goal: Text | None = Field(default=None, max_length=10_000)
    night_shift: bool = False
    settings: ProjectSettings | None = None


class ProjectUpdate(Strict):
    name: Text | None = Field(default=None, min_length=1, max_length=200, pattern=r"\S")
    goal: Text | None = Field(default=None, max_length=10_000)
    night_shift: bool | None = None
    settings: ProjectSettings | None = None


class JobRerun(Strict):
    """POST /api/jobs/<jid>/rerun: run the job again from one of its steps."""

    from_step: Text = Field(min_length=1, max_length=200)
    payload: dict[str, Any] | None = None  # None: the original's
    # The same key again (for this job) answers the rerun it made: a client may retry.
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=200)

    @field_validator("payload")
    @classmethod
    def _payload_storable(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        if value is not None and has_nul(value):
            raise ValueError("no string in the payload may contain the NUL character (\u0000)")
        return value


class JobCreate(Strict):
    job_type: Text = Field(min_length=1, max_length=200)
    payload: dict[str, Any] = Field(default_factory=dict)
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=255)
    priority: Annotated[int, Field(ge=0, le=9), Integral] | None = None
    run_after: AwareDatetime | None = None
    max_attempts: Annotated[int, Field(ge=1, le=100), Integral] | None = None

    @field_validator("run_after")
    @classmethod
    def _run_after_storable(cls, value: datetime | None) -> datetime | None:
        # 0001-01-01T00:00+01:00 is a year-0 instant: PostgreSQL stores it, then every read
        # of the job (its page, the project's job list) fails converting it back.
        if value is not None:
            try:
                value.astimezone(UTC)
            except OverflowError:
                raise ValueError("must fall between the years 1 and 9999 in UTC") from None
        return value

    @field_validator("payload")
    @classmethod
    def _payload_storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        if has_nul(value):
            raise ValueError("no string in the payload may contain the NUL character (\\u0000)")
        return value


class JobBatch(Strict):
    """POST /api/projects/<pid>/jobs:batch: each item is read as a JobCreate on its own, so
    one bad item is refused in its result, not with the whole batch."""
    jobs: list[dict[str, Any]] = Field(min_length=1, max_length=1000)


class JobListQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    status: str | None = None
    job_type: Text | None = None
    limit: int = Field(default=50, ge=1, le=200)
    before: str | None = None


class EventPageQuery(BaseModel):
    """`GET …/events/history`: older events, newest first."""
    model_config = ConfigDict(extra="ignore")

    before: int | None = Field(default=None, ge=1, le=2**63 - 1)
    limit: int = Field(default=50, ge=1, le=500)  # app.streams.event_log.MAX_PAGE
    types: str | None = Field(default=None, pattern=r"^[a-z_]+(,[a-z_]+)*$")

    def type_list(self) -> list[str] | None:
        return self.types.split(",") if self.types else None


class ChatListQuery(BaseModel):
    model_config = ConfigDict(extra="ignore")

    limit: int = Field(default=50, ge=1, le=200)
    before: str | None = None


def iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


class WorkflowRunBody(Strict):
    """`POST /api/workflows/<wid>/runs`: the run's inputs, and optionally another version."""

    inputs: dict[str, Any] = Field(default_factory=dict)
    version: Annotated[int, Field(ge=1, le=1_000_000), Integral] | None = None
    max_parallel: Annotated[int, Field(ge=1, le=16), Integral] | None = None
    idempotency_key: Text | None = Field(default=None, min_length=1, max_length=255)

    @field_validator("inputs")
    @classmethod
    def _inputs_storable(cls, value: dict[str, Any]) -> dict[str, Any]:
        if has_nul(value):
            raise ValueError("no string in the inputs may contain the NUL character (\\u0000)")
        return value
