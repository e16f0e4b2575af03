"""The catalog's list of job types per module says what each module really registers."""

from __future__ import annotations

import importlib

from tasks.catalog import JOB_MODULES
from tasks.engine import registry


def test_each_job_module_registers_exactly_the_job_types_listed_for_it() -> None:
    assert not registry.unavailable(), "every job module imports in the test environment"
    for module, listed in JOB_MODULES.items():
        mod = importlib.import_module(module)
        defined = {v.name for v in vars(mod).values() if isinstance(v, registry.JobType)}
        assert defined == set(listed), module
        for name in listed:
            assert registry.get(name).name == name


def test_every_registered_job_type_is_listed_in_the_catalog() -> None:
    listed = {name for names in JOB_MODULES.values() for name in names}
    built_in = {n for n in registry.names()
                if registry.get(n).handle.__module__.startswith("tasks.")}
    assert built_in <= listed
