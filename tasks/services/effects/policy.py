"""May this project perform this kind of effect, and how many a day.

Two layers. The operator's (`Operator`, from SWITCHYARD_EFFECTS_ALLOWED and
SWITCHYARD_EFFECT_CAP_CEILINGS) says which kinds tenants may turn on at all and
the most of each a day; the project's settings choose within it:
settings = {"permissions": {"email": true, ...}, "caps": {"email_per_day": 50, ...}}.
Anything not set falls back to DEFAULTS; money and code pushes are off until a
project turns them on. A setting outside the operator's policy is refused when it
is written (`violations`), and a setting written before the operator tightened the
policy is held to it when an effect runs (`policy_for`). Pure: the ledger reads
the row and counts, this decides.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from tasks.engine.errors import PermanentError
from tasks.settings import Settings, add_check, get_settings


@dataclass(frozen=True)
class Policy:
    allowed: bool
    cap_per_day: int


DEFAULTS: dict[str, Policy] = {
    "email": Policy(allowed=True, cap_per_day=50),
    "deploy_hook": Policy(allowed=True, cap_per_day=20),
    "github_dispatch": Policy(allowed=False, cap_per_day=20),
    "ad_campaign": Policy(allowed=False, cap_per_day=5),
}


class EffectRefused(PermanentError):
    """The project's settings forbid this effect now; nothing was recorded or sent."""

    def __init__(self, message: str, *, action_type: str):
        super().__init__(message)
        self.action_type = action_type


class NotPermitted(EffectRefused):
    pass


class CapReached(EffectRefused):
    def __init__(self, message: str, *, action_type: str, cap: int):
        super().__init__(message, action_type=action_type)
        self.cap = cap


KINDS = tuple(DEFAULTS)
CEILINGS: dict[str, int] = {"email": 500, "deploy_hook": 200, "github_dispatch": 200,
                            "ad_campaign": 50}
SETTINGS_HINT = "SWITCHYARD_EFFECTS_ALLOWED"
# Operator credentials SWITCHYARD_SHARED_CREDENTIALS may lend besides the effects' own:
# `github`, the token of clones, pushes and pull requests (tasks.coding.tokens).
SHARED_NOT_EFFECTS = ("github",)


@dataclass(frozen=True)
class Operator:
    """What the operator lets any tenant do: kinds that may be enabled, and daily ceilings."""

    allowed: frozenset[str]
    ceilings: dict[str, int]

    @classmethod
    def parse(cls, allowed: str, ceilings: str) -> Operator:
        """`allowed`: "email,deploy_hook" (empty: every kind); `ceilings`:
        "email=100,deploy_hook=10" over CEILINGS. ValueError naming what is wrong."""
        kinds = [k.strip() for k in allowed.split(",") if k.strip()] or list(KINDS)
        unknown = [k for k in kinds if k not in KINDS]
        if unknown:
            raise ValueError(f"SWITCHYARD_EFFECTS_ALLOWED names unknown effect kinds "
                             f"{unknown}: use some of {list(KINDS)}")
        limits = dict(CEILINGS)
        for item in (i.strip() for i in ceilings.split(",")):
            if not item:
                continue
            kind, _, raw = item.partition("=")
            kind = kind.strip().removesuffix("_per_day")
            if kind not in KINDS or not re.fullmatch(r"\s*\d+\s*", raw):
                raise ValueError(f"SWITCHYARD_EFFECT_CAP_CEILINGS: {item!r} is not KIND=N with "
                                 f"KIND one of {list(KINDS)} and N a whole number")
            limits[kind] = int(raw)
        return cls(allowed=frozenset(kinds), ceilings=limits)


EVERYTHING = Operator(allowed=frozenset(KINDS), ceilings=dict(CEILINGS))


def violations(settings: dict[str, Any], operator: Operator) -> dict[str, str]:
    """What a tenant's new `permissions` and `caps` ask beyond the operator's policy,
    by field name ("settings.permissions.ad_campaign"): empty when all of it fits."""
    problems: dict[str, str] = {}
    for kind, allowed in (settings.get("permissions") or {}).items():
        field = f"settings.permissions.{kind}"
        if kind not in KINDS:
            problems[field] = f"unknown effect kind: one of {list(KINDS)}"
        elif allowed and kind not in operator.allowed:
            problems[field] = (f"the operator does not allow {kind} effects on this server "
                               f"({SETTINGS_HINT})")
    for name, cap in (settings.get("caps") or {}).items():
        field = f"settings.caps.{name}"
        kind = name.removesuffix("_per_day")
        if kind not in KINDS or not name.endswith("_per_day"):
            problems[field] = f"unknown cap: one of {[k + '_per_day' for k in KINDS]}"
        elif isinstance(cap, int) and cap > operator.ceilings[kind]:
            problems[field] = (f"at most {operator.ceilings[kind]} a day on this server "
                               f"(SWITCHYARD_EFFECT_CAP_CEILINGS)")
    return problems


def policy_for(settings: Any, action_type: str, operator: Operator = EVERYTHING) -> Policy:
    """The effective policy; a malformed setting is an error, never a silent default."""
    project = _project_policy(settings, action_type)
    if action_type not in operator.allowed:
        return Policy(allowed=False, cap_per_day=0)
    return Policy(allowed=project.allowed,
                  cap_per_day=min(project.cap_per_day, operator.ceilings[action_type]))


def _project_policy(settings: Any, action_type: str) -> Policy:
    default = DEFAULTS.get(action_type, Policy(allowed=False, cap_per_day=0))
    settings = settings if isinstance(settings, dict) else {}
    allowed = _section(settings, "permissions").get(action_type, default.allowed)
    if not isinstance(allowed, bool):
        raise PermanentError(f"projects.settings.permissions.{action_type} must be true or "
                             f"false, got {allowed!r}")
    cap_name = f"{action_type}_per_day"
    cap = _section(settings, "caps").get(cap_name, default.cap_per_day)
    if isinstance(cap, bool) or not isinstance(cap, int) or cap < 0:
        raise PermanentError(f"projects.settings.caps.{cap_name} must be a whole number >= 0, "
                             f"got {cap!r}")
    return Policy(allowed=allowed, cap_per_day=cap)


def _section(settings: dict[str, Any], name: str) -> dict[str, Any]:
    section = settings.get(name, {})
    if not isinstance(section, dict):
        raise PermanentError(f"projects.settings.{name} must be an object, got {section!r}")
    return section


def check_permitted(settings: Any, action_type: str,
                    operator: Operator = EVERYTHING) -> Policy:
    policy = policy_for(settings, action_type, operator)
    if action_type in DEFAULTS and action_type not in operator.allowed:
        raise NotPermitted(f"the operator of this server does not allow {action_type} effects "
                           f"({SETTINGS_HINT})", action_type=action_type)
    if not policy.allowed:
        raise NotPermitted(
            f"this project may not perform {action_type} effects: set "
            f"projects.settings.permissions.{action_type} to true to allow them",
            action_type=action_type)
    return policy


def refusals(settings: Any, operator: Operator = EVERYTHING) -> dict[str, str]:
    """Per kind this project may not perform now, why (check_permitted's words, which name
    the setting that would allow it): what the agents are told not to propose."""
    refused: dict[str, str] = {}
    for kind in KINDS:
        try:
            check_permitted(settings, kind, operator)
        except PermanentError as exc:  # not permitted, or a malformed setting
            refused[kind] = str(exc)
    return refused


def choices(operator: Operator) -> dict[str, dict[str, Any]]:
    """Per kind, what a project's settings page offers: whether the operator allows it at all,
    the project default when unset, and the daily ceiling a cap may not pass."""
    return {kind: {"offered": kind in operator.allowed, "default_allowed": policy.allowed,
                   "default_cap": min(policy.cap_per_day, operator.ceilings[kind]),
                   "ceiling": operator.ceilings[kind]}
            for kind, policy in DEFAULTS.items()}


def operator() -> Operator:
    """What the operator lets any tenant do (SWITCHYARD_EFFECTS_ALLOWED, _EFFECT_CAP_CEILINGS)."""
    s = get_settings()
    return Operator.parse(s.effects_allowed, s.effect_cap_ceilings)


def _check(settings: Settings) -> None:
    Operator.parse(settings.effects_allowed, settings.effect_cap_ceilings)
    unknown = settings.shared_credential_kinds - set(KINDS) - set(SHARED_NOT_EFFECTS)
    if unknown:
        raise ValueError(f"SWITCHYARD_SHARED_CREDENTIALS names unknown kinds {sorted(unknown)}: "
                         f"use some of {[*KINDS, *SHARED_NOT_EFFECTS]}")


add_check(_check)
