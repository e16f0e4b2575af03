"""The list of built-in job types per module says what each module really registers."""

from __future__ import annotations

import importlib

from tasks import registry
from tasks.handlers import MODULES


def test_each_handler_module_registers_exactly_the_job_types_listed_for_it() -> None:
    assert not registry.unavailable(), "every handler module imports in the test environment"
    for module, listed in MODULES.items():
        mod = importlib.import_module(f"tasks.handlers.{module}")
        defined = {v.name for v in vars(mod).values() if isinstance(v, registry.JobType)}
        assert defined == set(listed), module
        for name in listed:
            assert registry.get(name).name == name
