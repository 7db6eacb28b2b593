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
