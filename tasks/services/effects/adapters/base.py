"""What an adapter returns, and the shape every adapter has, so the ledger treats them alike.

An adapter never touches the database: it calls out (or asks the provider what
became of an earlier call) and describes what happened. The ledger records it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

# succeeded / failed: the provider said so; recorded and replayed forever.
# unknown: the request may have reached the provider and we cannot tell; a person decides.
# not_sent: the provider certainly did not act (or will de-duplicate by the key), so the
#   intent is withdrawn and the call may be made again later.
# absent (reconcile only): the provider says it never received this key.
ProviderStatus = Literal["succeeded", "failed", "unknown", "not_sent", "absent"]


@dataclass(frozen=True)
class ProviderResult:
    status: ProviderStatus
    response: Any = None
    provider_ref: str | None = None
    error: str | None = None
    retryable: bool = True  # not_sent only: may a later attempt succeed without a fix?
    retry_after: float | None = None  # not_sent only: the provider's Retry-After
    rate_limited: bool = False  # not_sent only: a 429 is not the attempt's fault


def not_sent(error: str, *, retryable: bool = True, retry_after: float | None = None,
             rate_limited: bool = False) -> ProviderResult:
    return ProviderResult("not_sent", error=error, retryable=retryable,
                          retry_after=retry_after, rate_limited=rate_limited)


def cannot_tell(why: str) -> ProviderResult:
    """A reconcile that has no way to learn the outcome: a person must decide."""
    return ProviderResult("unknown", error=why)


@dataclass(frozen=True)
class Credentials:
    """What one effect may authenticate with: the project's own secrets (tasks.services.keystore),
    and whether the operator's credential may stand in for a missing one
    (SWITCHYARD_SHARED_CREDENTIALS). The values stay out of repr."""

    own: Mapping[str, str] = field(default_factory=dict, repr=False)
    shared: bool = False

    def pick(self, name: str, operators: str) -> str:
        """The project's `name` secret, else the operator's value if shared, else ""."""
        return self.own.get(name) or (operators if self.shared else "")

    def missing(self, name: str, operator_setting: str) -> str:
        if self.shared:
            return f"no credential: set the project secret {name!r} or {operator_setting}"
        return (f"no credential: set the project secret {name!r} (the operator does not "
                f"lend {operator_setting} to projects: SWITCHYARD_SHARED_CREDENTIALS)")


Call = Callable[[str, dict[str, Any], Credentials], ProviderResult]
Reconcile = Callable[[str, dict[str, Any], str | None, Credentials], ProviderResult]


@dataclass(frozen=True)
class Adapter:
    """`call(key, args, creds)` performs the effect, passing the key to the provider where
    it can; `reconcile(key, args, provider_ref, creds)` asks the provider what became of an
    earlier call. `secrets`: the project secrets it may use, and nothing else is read."""

    action_type: str
    call: Call
    reconcile: Reconcile
    secrets: tuple[str, ...] = ()
