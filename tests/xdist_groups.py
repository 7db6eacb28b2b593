"""A pytest plugin: under `pytest -n N` a test module that defines a module-scoped fixture runs on one worker.

Such fixtures train or export a model once for their module (30-70 s each on 2 cores). xdist's default `load`
scheduling hands a module's tests to every worker, and each worker then builds the fixture again. Here `load`
(the default of `-n N`) becomes xdist's scope scheduling with such a module as one unit and every other test a
unit of its own.
(`--dist loadgroup` with `xdist_group` marks would say the same, but it groups nothing on pytest 9.2 with
pytest-xdist 3.8: pytest-dev/pytest-xdist#1386.)
"""

import functools
import os

import pytest

try:
    from xdist.scheduler import LoadScopeScheduling
except ImportError:  # Without xdist nothing calls the hook below; the class only needs a base.
    LoadScopeScheduling = object

MARK = 'scope="module"'


@functools.lru_cache(maxsize=None)
def defines_a_module_fixture(path):
    """Whether the test module at `path` defines a module-scoped fixture: a search of its text, so a mention in a
    string counts too (which costs only parallelism)."""
    try:
        with open(path, encoding="utf-8") as f:
            return MARK in f.read()
    except OSError:
        return False


class ModuleFixtureScheduling(LoadScopeScheduling):
    """`load` scheduling, except that a module defining a module-scoped fixture is one work unit."""

    def _split_scope(self, nodeid):
        path = nodeid.split("::", 1)[0]
        return path if defines_a_module_fixture(os.path.join(self.config.rootpath, path)) else nodeid


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config, log):
    # Called by xdist only, so LoadScopeScheduling is xdist's here.
    if config.getvalue("dist") == "load":
        return ModuleFixtureScheduling(config, log)
    return None
