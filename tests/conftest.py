"""Shared test set-up: quiet TensorFlow, the backend and allocator the tools use, deterministic seeds."""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As the command-line tools do (t2t_relpos/cli/common.py).

import pytest  # pylint: disable=wrong-import-position

pytest_plugins = ["xdist_groups"]


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: long checks, left out of `make test` (a benchmark covers them)")


@pytest.fixture
def autograph_conversions(monkeypatch):
    """The functions AutoGraph converts while the test runs (appended to the list this gives)."""
    from tensorflow.python.autograph.impl import api  # pylint: disable=import-outside-toplevel

    converted, convert = [], api._convert_actual  # pylint: disable=protected-access
    monkeypatch.setattr(api, "_convert_actual",
                        lambda entity, context: converted.append(entity) or convert(entity, context))
    return converted


@pytest.fixture(autouse=True)
def _seed():
    import keras  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(1234)
    yield
