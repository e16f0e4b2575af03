"""The one root for workflow errors: a bad definition, template or condition never heals."""

from __future__ import annotations

from tasks.engine.errors import PermanentError


class WorkflowError(PermanentError):
    """A workflow definition, template or condition is wrong; retrying cannot help."""
