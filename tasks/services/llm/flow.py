"""Flow control for model calls: daily budgets per project and a model pause every worker obeys.

`call_llm` is the one door handlers use (inside a checkpointed step): it refuses
while the model (or its whole provider) is paused, parks the job until midnight UTC when
the project has spent its day's budget, records what each call used, and turns a 429 into
a pause of that model and a 529 into one of the provider, shared through Redis, so one
worker's rate limit slows them all.
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from decimal import Decimal
from functools import lru_cache
from typing import Any

import redis

from tasks.engine import pg, telemetry
from tasks.engine.errors import PermanentError, Suspend
from tasks.services.llm import client_for, get_client, unconfigured
from tasks.services.llm.errors import ProviderBusy
from tasks.services.llm.roles import (
    ROLES,
    Choice,
    choose,
    offered,
    operator_choices,
    project_allowed,
    role_of,
)
from tasks.services.llm.types import LLMClient, LLMRequest, LLMResult
from tasks.settings import get_settings

log = logging.getLogger(__name__)

Id = str | uuid.UUID
# A rate limit pauses its model: providers limit models (or families of them) apart, so a 429
# on the model one role uses leaves the other roles' models alone. An overloaded provider
# (Anthropic's 529) pauses all its models: the key of model EVERY_MODEL.
PAUSE_KEY = "switchyard:llm:paused:{provider}:{model}"
EVERY_MODEL = "*"
BUDGET_REASON = "llm_budget"

# Lengthen a pause, never shorten it: a later, shorter retry-after must not end a longer one.
_EXTEND_PAUSE = """
local left = redis.call('PTTL', KEYS[1])
if left < tonumber(ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[1])
end
return 0
"""


# --- budgets ---------------------------------------------------------------

@dataclass(frozen=True)
class BudgetStatus:
    """A project's LLM spending today (UTC) against its budgets (None: no budget)."""

    tokens_used: int
    usd_used: float
    token_budget: int | None
    usd_budget: float | None
    resets_at: datetime  # the next midnight UTC
    # What all the owner's projects spent today, against the operator's ceiling (None: none).
    owner_usd_used: float = 0.0
    owner_usd_ceiling: float | None = None

    @property
    def exceeded(self) -> str | None:
        """Which budget is spent, in words, or None."""
        if self.owner_usd_ceiling is not None and self.owner_usd_used >= self.owner_usd_ceiling:
            return (f"${self.owner_usd_used:.4f} spent today by the owner's projects, the "
                    f"operator's ceiling is ${self.owner_usd_ceiling:.2f} "
                    "(SWITCHYARD_LLM_DAILY_USD_PER_OWNER)")
        if self.token_budget is not None and self.tokens_used >= self.token_budget:
            return f"{self.tokens_used} of {self.token_budget} tokens used today"
        if self.usd_budget is not None and self.usd_used >= self.usd_budget:
            return f"${self.usd_used:.4f} of ${self.usd_budget:.2f} spent today"
        return None


_BUDGET_SQL = """
SELECT p.settings -> 'llm_daily_token_budget' AS token_budget,
       p.settings -> 'llm_daily_usd_budget' AS usd_budget,
       d.start + interval '1 day' AS resets_at, u.tokens, u.usd, o.usd AS owner_usd
FROM projects p
CROSS JOIN LATERAL (SELECT date_trunc('day', now(), 'UTC') AS start) d
CROSS JOIN LATERAL (
    SELECT coalesce(sum(input_tokens + output_tokens), 0)::bigint AS tokens,
           coalesce(sum(cost_usd), 0) AS usd
    FROM llm_usage WHERE project_id = p.id AND created_at >= d.start) u
CROSS JOIN LATERAL (
    SELECT coalesce(sum(l.cost_usd), 0) AS usd FROM llm_usage l
    WHERE l.created_at >= d.start AND l.project_id IN (
        SELECT id FROM projects WHERE owner_id = p.owner_id)) o
WHERE p.id = %s
"""


def budget_status(project_id: Id) -> BudgetStatus | None:
    """Today's usage and the budgets from projects.settings; None if the project is gone."""
    row = pg.fetch_one_dict(_BUDGET_SQL, (str(project_id),))
    if row is None:
        return None
    return BudgetStatus(
        tokens_used=int(row["tokens"]), usd_used=float(row["usd"]),
        token_budget=_budget(row["token_budget"], "llm_daily_token_budget", int),
        usd_budget=_budget(row["usd_budget"], "llm_daily_usd_budget", float),
        resets_at=row["resets_at"], owner_usd_used=float(row["owner_usd"]),
        owner_usd_ceiling=get_settings().llm_daily_usd_per_owner or None,
    )


def _budget(value: Any, name: str, kind: type[int] | type[float]) -> Any:
    if value is None:
        return None
    # A typo in a budget must not silently lift it: the job fails and says why.
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal) or value < 0:
        raise PermanentError(f"project setting {name} must be a number >= 0, got {value!r}")
    if kind is int and value != int(value):
        raise PermanentError(f"project setting {name} must be a whole number, got {value!r}")
    return kind(value)


def check_budget(project_id: Id) -> None:
    """Suspend the job until midnight UTC if the project has spent a daily budget.

    The limit is checked before a call, not reserved: the call that crosses it
    finishes, and the next one waits.
    """
    status = budget_status(project_id)
    if status is None or status.exceeded is None:
        return
    log.info("llm budget spent", extra={"action": "llm_budget_exceeded",
                                        "project_id": str(project_id),
                                        "detail": status.exceeded,
                                        "wake_at": status.resets_at.isoformat()})
    raise Suspend(BUDGET_REASON, wake_at=status.resets_at)


def record_usage(project_id: Id, job_id: Id | None, result: LLMResult,
                 step_seq: int | None = None) -> None:
    pg.execute(
        "INSERT INTO llm_usage (project_id, job_id, step_seq, provider, model, input_tokens, "
        "output_tokens, cost_usd) VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
        (str(project_id), str(job_id) if job_id is not None else None, step_seq,
         result.provider,
         result.model, result.usage.input_tokens, result.usage.output_tokens,
         Decimal(str(result.cost_usd))),
    )


# --- the provider pause ------------------------------------------------------

@lru_cache(maxsize=4)
def _redis(url: str) -> redis.Redis | None:
    """Redis for the shared pause: the broker's, when the broker is Redis."""
    if not url.startswith(("redis://", "rediss://", "unix://")):
        return None
    return redis.Redis.from_url(url, socket_timeout=2, socket_connect_timeout=2)


# The pause when the broker is not Redis: then it holds for this process only.
_local_until: dict[str, float] = {}
_local_lock = threading.Lock()


def pause_provider(provider: str, model: str, seconds: float) -> None:
    """Stop every worker calling `model` of `provider` for `seconds` (an existing longer
    pause stays)."""
    ms = max(1, round(seconds * 1000))
    key = PAUSE_KEY.format(provider=provider, model=model)
    client = _redis(get_settings().broker_url)
    if client is None:
        with _local_lock:
            until = time.monotonic() + ms / 1000
            _local_until[key] = max(_local_until.get(key, 0.0), until)
        return
    try:
        client.eval(_EXTEND_PAUSE, 1, key, ms, f"{time.time() + ms / 1000:.3f}")
    except redis.RedisError as exc:
        # The provider will say 429 again if it still means it; nothing else is lost.
        log.warning("could not record the provider pause",
                    extra={"action": "llm_pause_unrecorded", "provider": provider,
                           "model": model, "error": str(exc)})


def paused_for(provider: str, model: str) -> float:
    """Seconds left of the pause on `model` of `provider`, or on all its models, whichever is
    longer (0.0 if none). Fails open if Redis is away."""
    keys = [PAUSE_KEY.format(provider=provider, model=m) for m in (model, EVERY_MODEL)]
    client = _redis(get_settings().broker_url)
    if client is None:
        with _local_lock:
            return max(0.0, *(_local_until.get(k, 0.0) - time.monotonic() for k in keys))
    try:
        with client.pipeline(transaction=False) as both:  # one round trip
            for key in keys:
                both.pttl(key)
            left_ms = max(both.execute())
    except redis.RedisError:
        return 0.0
    return left_ms / 1000 if left_ms > 0 else 0.0


# --- the door ----------------------------------------------------------------

def for_role(client: LLMClient, purpose: str, project_id: Id) -> LLMClient:
    """The client of the call's role (tasks.services.llm.roles) when `client` is the
    configured default; a client a caller built itself answers as it is."""
    if client is not get_client():
        return client
    role = role_of(purpose)
    if role is None:
        return client
    project = pg.fetch_value("SELECT settings -> 'llm_models' FROM projects WHERE id = %s",
                             (str(project_id),))
    settings, default = get_settings(), Choice(client.provider, client.model)
    operator = operator_choices(settings.llm_role_models)
    choice = choose(role, default, operator, project)
    if not project_allowed(choice, default, operator, settings.llm_project_models):
        # Allowed when set, since withdrawn by the operator: the operator's choice answers.
        log.warning("a project's model for %s is not allowed; using the operator's", role,
                    extra={"action": "llm_model_refused", "project_id": str(project_id)})
        choice = choose(role, default, operator, None)
    if (choice.provider, choice.model) == (client.provider, client.model):
        return client
    return client_for(choice.provider, choice.model)


def project_choices() -> dict[str, Any]:
    """What a project's Settings offer per role (the project page renders it): each role's
    model as the server chooses it, and the models a project may pick instead, of providers
    set up on this server; each as "provider/model"."""
    settings = get_settings()
    default = Choice(settings.llm_provider, settings.llm_model)
    operator = operator_choices(settings.llm_role_models)
    name = "{0.provider}/{0.model}".format
    # Pairs, not an object: the page lists the roles in this order (JSON objects get sorted).
    return {"roles": [[role, name(choose(role, default, operator, None))] for role in ROLES],
            "offered": [name(c) for c in offered(default, operator, settings.llm_project_models)
                        if unconfigured(c.provider) is None]}


def call_llm(client: LLMClient, req: LLMRequest, *, project_id: Id, job_id: Id | None,
             on_text: Callable[[str], None] | None = None,
             step_seq: int | None = None) -> LLMResult:
    """Call the model if the provider and the budget allow; record what it used.

    Raises ProviderBusy (a RetryableError that uses no attempt) while the model or its
    provider is paused or when it answers 429/529, Suspend("llm_budget") when a daily budget
    is spent, and whatever the provider raises otherwise. With `on_text` the answer
    is streamed, each text delta passed to it as it arrives. The call goes to its role's
    model (for_role) when the operator or the project chose one. `step_seq` (the calling step,
    `ctx.current_step`) lets the job's page show what each step cost.
    """
    client = for_role(client, req.purpose, project_id)
    wait = paused_for(client.provider, client.model)
    if wait > 0:
        # A little spread, so the jobs parked by one pause do not all return at once.
        raise ProviderBusy(client.provider, wait + random.uniform(0, min(1.0, wait * 0.2)),
                           f"{client.provider} {client.model} is paused for {wait:.1f}s after "
                           "a rate limit")
    check_budget(project_id)
    # GenAI semantic conventions: the provider, the models asked and answering, the tokens.
    with telemetry.span(f"chat {client.model}", {
            "gen_ai.operation.name": "chat", "gen_ai.system": client.provider,
            "gen_ai.request.model": client.model, "gen_ai.request.max_tokens": req.max_tokens,
            "switchyard.llm.purpose": req.purpose}) as current:
        result = _ask(client, req, on_text, job_id)
        telemetry.annotate(current, {"gen_ai.response.model": result.model,
                                     "gen_ai.usage.input_tokens": result.usage.input_tokens,
                                     "gen_ai.usage.output_tokens": result.usage.output_tokens,
                                     "gen_ai.response.finish_reasons":
                                         [result.stop_reason or ""]})
    record_usage(project_id, job_id, result, step_seq)
    log.info("llm called", extra={"action": "llm_called", "job_id": str(job_id),
                                  "project_id": str(project_id), "purpose": req.purpose,
                                  "provider": result.provider, "model": result.model,
                                  "input_tokens": result.usage.input_tokens,
                                  "output_tokens": result.usage.output_tokens,
                                  "cost_usd": result.cost_usd})
    return result


def _ask(client: LLMClient, req: LLMRequest, on_text: Callable[[str], None] | None,
         job_id: Id | None) -> LLMResult:
    try:
        return client.complete(req) if on_text is None else client.stream(req, on_text)
    except ProviderBusy as busy:
        model = EVERY_MODEL if busy.overloaded else client.model
        pause_provider(busy.provider, model, busy.retry_after)
        log.warning("llm provider paused", extra={"action": "llm_provider_paused",
                                                  "provider": busy.provider, "model": model,
                                                  "seconds": busy.retry_after,
                                                  "job_id": str(job_id), "error": str(busy)})
        raise
