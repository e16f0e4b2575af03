"""May this project perform this kind of effect, and how many a day: read from projects.settings.

settings = {"permissions": {"email": true, ...}, "caps": {"email_per_day": 50, ...}}.
Anything not set falls back to DEFAULTS; money and code pushes are off until a
project turns them on. Pure: the ledger reads the row and counts, this decides.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from tasks.errors import PermanentError


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


def policy_for(settings: Any, action_type: str) -> Policy:
    """The effective policy; a malformed setting is an error, never a silent default."""
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


def check_permitted(settings: Any, action_type: str) -> Policy:
    policy = policy_for(settings, action_type)
    if not policy.allowed:
        raise NotPermitted(
            f"this project may not perform {action_type} effects: set "
            f"projects.settings.permissions.{action_type} to true to allow them",
            action_type=action_type)
    return policy
