"""Switchyard's exception tree: one root, retry semantics declared by type.

`JobInterrupt` and its kin derive from BaseException on purpose: a handler's
`except Exception` must not swallow a cancel, a suspension or a shutdown.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any


class SwitchyardError(Exception):
    """Root of every error Switchyard raises on purpose.

    One that a client's request can cause says what it means over HTTP (`http_status`,
    `code`, `details()`, `headers()`), next to where it is raised; app/http/errors.py turns any
    of them into the response, and the rest into a 500.
    """

    http_status: int | None = None
    code = "error"

    def details(self) -> dict[str, Any]:
        return {}

    def headers(self) -> dict[str, str]:
        """Response headers the error's meaning asks for (a Retry-After)."""
        return {}


class RetryableError(SwitchyardError):
    """The attempt failed for a passing reason; retry with backoff while attempts remain.

    `delay` overrides the computed backoff (e.g. a provider's Retry-After);
    `count_attempt=False` gives the attempt back (rate limits are not failures).
    """

    def __init__(self, message: str, *, delay: float | None = None, count_attempt: bool = True):
        super().__init__(message)
        self.delay = delay
        self.count_attempt = count_attempt


class PermanentError(SwitchyardError):
    """Retrying cannot help: the job fails now."""


class NonDeterministicStep(PermanentError):
    """The handler called its steps in a different order than the recorded run."""


class UnknownJobType(PermanentError):
    http_status, code = 422, "unknown_job_type"

    def details(self) -> dict[str, Any]:
        return {"field": "job_type"}


class JobTypeUnavailable(PermanentError):
    """A known job type that this machine cannot run: its module or a system part is missing."""

    http_status, code = 422, "job_type_unavailable"

    def __init__(self, name: str, reason: str):
        super().__init__(f"job type {name} is unavailable on this machine: {reason}")
        self.job_type = name
        self.reason = reason

    def details(self) -> dict[str, Any]:
        return {"field": "job_type", "job_type": self.job_type, "reason": self.reason}


class InvalidPayload(PermanentError):
    http_status, code = 422, "invalid_payload"

    def __init__(self, message: str, *, details: dict | None = None):
        super().__init__(message)
        self.fields = details or {}

    def details(self) -> dict[str, Any]:
        return {"field": "payload", **self.fields}


class JobTimeout(PermanentError):
    pass


class JobInterrupt(BaseException):
    """Stops a handler at a step boundary; the runner decides what becomes of the job."""


class CancelRequested(JobInterrupt):
    pass


class LostOwnership(JobInterrupt):
    """The row no longer says this worker runs this attempt (reclaimed, canceled, timed out)."""


class ShutdownRequested(JobInterrupt):
    """The worker is stopping and the grace period is over: give the job back."""


class Suspend(JobInterrupt):
    """Park the job in `waiting` until its children finish or its timer comes due."""

    def __init__(self, reason: str, *, wake_at: datetime | None = None,
                 wait_for: list[str] | None = None, wait_any: bool = False,
                 wait_approvals: list[str] | None = None):
        super().__init__(reason)
        self.reason = reason
        self.wake_at = wake_at
        self.wait_for = wait_for
        # Resume when one child has ended or one approval is decided, not all (ctx.wait_any).
        self.wait_any = wait_any
        self.wait_approvals = wait_approvals
