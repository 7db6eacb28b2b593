"""One training step three ways: on one device, on two replicas under MirroredStrategy, and accumulated over two
micro-batches; with and without a global-norm clip. All must give the same step.

The three runs are one process (`distributed_check.py`, on two logical CPU devices), shared by the module's
tests: a module of its own, so that under `pytest -n` tests/test_training.py's tests are not tied to its worker."""

import json
import os
import subprocess
import sys

import pytest

from test_training import ENV

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.fixture(scope="module")
def one_step_three_ways():
    out = subprocess.run([sys.executable, os.path.join(HERE, "distributed_check.py")], capture_output=True,
                         text=True, timeout=600, env=ENV, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("way", ["mirrored", "accumulated"])
@pytest.mark.parametrize("clipped", ["", "_clipped"])
def test_replicas_and_accumulation_match_one_device(one_step_three_ways, way, clipped):
    """Also with a global-norm clip: Keras alone clips each replica's part before the sum (25% off)."""
    reference, other = one_step_three_ways[f"one_device{clipped}"], one_step_three_ways[f"{way}{clipped}"]
    assert other["step"] == reference["step"] == 2
    assert other["losses"] == pytest.approx(reference["losses"], abs=1e-4)
    assert other["checksum"] == pytest.approx(reference["checksum"], rel=1e-5)
    assert other["first"] == pytest.approx(reference["first"], abs=1e-5)
