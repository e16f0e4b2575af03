"""Models by role: which provider and model answer a kind of call.

The seed's coding agent planned with a stronger model and built with a faster one. A call's
`purpose` names its role; the role's model is, first found: the project's setting
`llm_models.<role>` ({"provider"?, "model"?}), the operator's `SWITCHYARD_LLM_PROVIDER_<ROLE>` /
`SWITCHYARD_LLM_MODEL_<ROLE>`, then `SWITCHYARD_LLM_PROVIDER` / `SWITCHYARD_LLM_MODEL`. A
project chooses among the models the operator runs or lists (project_allowed).
What answered is recorded per call (llm_usage: provider, model, step), so a job's page shows
which model did what.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.settings import DEFAULT_MODELS, SettingsError

ROLES: tuple[str, ...] = ("plan", "build", "explore", "review", "chat", "packet", "report",
                          "nightshift", "function")

# A call's purpose -> its role. A purpose not listed is its own role only if it is one.
ROLE_OF_PURPOSE = {
    "code.plan": "plan", "planner.plan": "plan", "planner.revise": "plan",
    "code.fix": "build", "code.debug": "build", "agent.task": "build",
    "code.explore": "explore", "code.review": "review",
    "chat": "chat", "packet": "packet", "outline": "report", "summary": "report",
    "nightshift": "nightshift", "function_code": "function", "function_llm": "function",
}


def role_of(purpose: str) -> str | None:
    role = ROLE_OF_PURPOSE.get(purpose, purpose)
    return role if role in ROLES else None


@dataclass(frozen=True)
class Choice:
    provider: str
    model: str


def choose(role: str | None, default: Choice, operator: dict[str, tuple[str, str]],
           project: Any) -> Choice:
    """The role's provider and model. `operator`: role -> (provider or "", model or "") from
    the environment; `project`: the project's `llm_models` setting (a dict, or None)."""
    provider, model = default.provider, default.model
    if role is None:
        return default
    env_provider, env_model = operator.get(role, ("", ""))
    chosen = project.get(role) if isinstance(project, dict) else None
    for want_provider, want_model in ((env_provider, env_model),
                                      (chosen.get("provider") or "", chosen.get("model") or "")
                                      if isinstance(chosen, dict) else ("", "")):
        if want_provider and want_provider != provider:  # another provider: its own model
            provider, model = want_provider, want_model or DEFAULT_MODELS[want_provider]
        elif want_model:
            model = want_model
    return Choice(provider, model)


def operator_choices(role_models: tuple[tuple[str, str, str], ...]
                     ) -> dict[str, tuple[str, str]]:
    """role -> (provider, model) from SWITCHYARD_LLM_PROVIDER_<ROLE> / _MODEL_<ROLE>
    (Settings.llm_role_models)."""
    out: dict[str, tuple[str, str]] = {}
    for name, provider, model in role_models:
        role = name.lower()
        if role not in ROLES:
            raise SettingsError(f"SWITCHYARD_LLM_MODEL_{name} / _PROVIDER_{name}: no role "
                                f"{role!r}; the roles are {', '.join(ROLES)}")
        if provider and provider not in DEFAULT_MODELS:
            raise SettingsError(f"SWITCHYARD_LLM_PROVIDER_{name} must be one of "
                                f"{', '.join(DEFAULT_MODELS)}, got {provider!r}")
        out[role] = (provider, model)
    return out


def offered(default: Choice, operator: dict[str, tuple[str, str]],
            listed: tuple[str, ...]) -> list[Choice]:
    """Every model a project may choose for a role (project_allowed says yes to each): the
    default, the operator's roles', then those listed for projects ("provider/model"; a
    model's own name may hold a slash), each once."""
    runs = [default] + [choose(role, default, operator, None) for role in ROLES
                        if role in operator]
    named = [Choice(*item.split("/", 1)) for item in listed if "/" in item]
    return list(dict.fromkeys(runs + named))


def project_allowed(choice: Choice, default: Choice,
                    operator: dict[str, tuple[str, str]], listed: tuple[str, ...]) -> bool:
    """A project's choice must be a model the operator runs already (the default, a role's)
    or lists for projects (SWITCHYARD_LLM_PROJECT_MODELS, "provider/model"): a tenant must
    not pick a model that costs more than budgets count, nor one whose rate limit it could
    exhaust and so pause that model for every tenant."""
    own = {default} | {choose(role, default, operator, None) for role in operator}
    return choice in own or f"{choice.provider}/{choice.model}" in listed
