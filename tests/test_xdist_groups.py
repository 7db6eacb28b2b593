"""`pytest -n 2`: a module-scoped fixture is built by one worker, not by each (the plugin `xdist_groups.py`)."""

import os
import subprocess
import sys

import pytest

MODULE = '''
import os
import pytest


@pytest.fixture(scope="module")
def built():
    with open(os.environ["BUILDS"], "a", encoding="utf-8") as f:
        f.write(f"{os.getpid()}\\n")


@pytest.mark.parametrize("i", range(8))
def test_uses_the_fixture(built, i):
    pass


@pytest.mark.parametrize("i", range(8))
def test_does_not(i):
    pass
'''


def _builds(tmp_path, plugins):
    (tmp_path / "test_module.py").write_text(MODULE)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text(f"pytest_plugins = {list(plugins)}\n")
    builds = tmp_path / "builds.txt"
    env = dict(os.environ, BUILDS=str(builds), PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "2", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    return builds.read_text().split()


@pytest.mark.parametrize("plugins, builds", [((), 2), (("xdist_groups",), 1)], ids=["alone", "with_plugin"])
def test_a_module_fixture_is_built_by_one_worker(tmp_path, plugins, builds):
    # Without the plugin xdist hands the fixture's tests to both workers (the case that shows the test can fail).
    assert len(_builds(tmp_path, plugins)) == builds


ORDERED = """
import os


def record(name):
    with open(os.environ["ORDER"], "a", encoding="utf-8") as f:
        f.write(name + "\\n")


def test_first():
    record("first")


def test_second():
    record("second")


def test_long():
    record("long")
"""


def test_the_long_tests_start_first(tmp_path):
    # A worker runs the tests it is given in its order of collection, which puts those of LONG_FIRST first.
    (tmp_path / "test_ordered.py").write_text(ORDERED)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    (tmp_path / "conftest.py").write_text('import xdist_groups\n'
                                          'xdist_groups.LONG_FIRST = ("test_ordered.py::test_long",)\n'
                                          'pytest_plugins = ["xdist_groups"]\n')
    order = tmp_path / "order.txt"
    env = dict(os.environ, ORDER=str(order), PYTHONPATH=os.path.dirname(os.path.abspath(__file__)))
    result = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "1", str(tmp_path)],
                            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert order.read_text().split() == ["long", "first", "second"]
