"""Built-in job types: the module of each, and the job types it registers on import.

Each module is imported on its own (`load`), so one that cannot be imported on this
machine — a library missing from a partial install — takes only its own job types down:
they answer `job_type_unavailable` with the reason, every other job type keeps working.
The names are listed here, not read off the module, because a module that fails to
import cannot say what it would have registered.
"""

from __future__ import annotations

import importlib
import logging

log = logging.getLogger(__name__)

MODULES: dict[str, tuple[str, ...]] = {
    "agent": ("agent.task",),
    "approval_execute": ("approval.execute",),
    "browser": ("browser.check_page",),
    "canary": ("system.canary",),
    "chat": ("chat.reply",),
    "code": ("code.run_task", "code.generate_mvp"),
    "code_merge": ("code.run_task_until_merged",),
    "functions": ("function.run", "code.generate_function"),
    "mail": ("email.process_due", "drip.process_digests", "drip.process_nudges"),
    "nightshift": ("nightshift.cycle_project",),
    "packets": ("phase0.generate_packet", "phase.generate_packet"),
    "plan": ("plan.generate",),
    "reports": ("research.generate_report",),
    "workflow": ("workflow.run",),
}


def load() -> dict[str, str]:
    """Import every handler module; the job types of those that failed, with the reason."""
    unavailable: dict[str, str] = {}
    for module, job_types in MODULES.items():
        try:
            importlib.import_module(f"{__name__}.{module}")
        except Exception as exc:  # an ImportError, or anything a module raises at import
            reason = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ModuleNotFoundError) and exc.name:
                reason = (f"the Python package {exc.name.split('.')[0]!r} is not installed "
                          f"(reinstall Switchyard: pip install -e .)")
            log.error("job types %s are unavailable: %s", ", ".join(job_types), reason,
                      extra={"action": "handler_import_failed", "handler_module": module},
                      exc_info=not isinstance(exc, ModuleNotFoundError))
            unavailable.update(dict.fromkeys(job_types, reason))
    return unavailable
