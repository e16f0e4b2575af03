"""The one list of systems: importing this module registers every built-in job type, and
each system's sweeps and scripted answers.

Each system lists its job types in its own module; the catalog imports those modules one
by one, so one that cannot be imported on this machine (a library missing from a partial
install) takes only its own job types down: they answer `job_type_unavailable` with the
reason and every other job type keeps working. The names are listed here, not read off
the module, because a module that fails to import cannot say what it would have
registered. The engine never imports this module: the worker and the web app do.
"""

from __future__ import annotations

import importlib
import logging

from tasks.engine import registry, sweeps
from tasks.services import approvals
from tasks.settings import SettingsError

log = logging.getLogger(__name__)

# Each system and the modules that register its job types, with the names they register.
# A system whose job types need different parts of the machine keeps them in modules of
# their own (the page check needs playwright; chat must not fail with it).
SYSTEMS: dict[str, dict[str, tuple[str, ...]]] = {
    "engine": {"tasks.engine.canary": ("system.canary",)},
    "services": {"tasks.services.effects.execute": ("approval.execute",)},
    "startup OS": {
        "tasks.startup.packets": ("phase0.generate_packet", "phase.generate_packet"),
        "tasks.startup.chat": ("chat.reply",),
        "tasks.startup.mail": ("email.process_due", "drip.process_digests",
                               "drip.process_nudges"),
        "tasks.startup.nightshift": ("nightshift.cycle_project",),
        "tasks.startup.report": ("research.generate_report",),
        "tasks.startup.browser": ("browser.check_page",),
    },
    "coding agent": {
        "tasks.coding.jobs": ("code.run_task", "code.generate_mvp", "code.run_task_until_merged"),
    },
    "planner": {"tasks.planner.jobs": ("plan.generate",),
                "tasks.planner.agent": ("agent.task",)},
    "workflows": {"tasks.workflows.jobs": ("workflow.run",)},
    "functions": {"tasks.functions.jobs": ("function.run", "code.generate_function")},
}
# The modules that register each system's answers with the offline scripted provider
# (tasks.services.llm.scripted), so the demo and the tests run every system with no key.
SCRIPTED_ANSWERS = ("tasks.startup.scripted_answers", "tasks.coding.scripted_sessions",
                    "tasks.planner.scripted_answers", "tasks.functions.scripted_answers")
JOB_MODULES = {module: names for modules in SYSTEMS.values() for module, names in modules.items()}


def load() -> None:
    """Import every system's job module; mark the job types of those that fail."""
    for module, job_types in JOB_MODULES.items():
        try:
            importlib.import_module(module)
        except SettingsError:
            raise  # the operator's mistake stops the process, whichever module read it
        except Exception as exc:  # an ImportError, or anything a module raises at import
            reason = f"{type(exc).__name__}: {exc}"
            if isinstance(exc, ModuleNotFoundError) and exc.name:
                reason = (f"the Python package {exc.name.split('.')[0]!r} is not installed "
                          f"(reinstall Switchyard: pip install -e .)")
            log.error("job types %s are unavailable: %s", ", ".join(job_types), reason,
                      extra={"action": "handler_import_failed", "handler_module": module},
                      exc_info=not isinstance(exc, ModuleNotFoundError))
            registry.mark_unavailable(job_types, reason)
    registry.catalog_loaded()
    for module in SCRIPTED_ANSWERS:
        importlib.import_module(module)



def add_sweeps() -> None:
    """The services' sweeps, after the engine's."""
    sweeps.add(approvals.EXPIRE_SWEEP)


load()
add_sweeps()
