"""One training step three ways: on one device, on two replicas under MirroredStrategy, and accumulated over two
micro-batches; with and without a global-norm clip. All must give the same step.

The three runs are one process (`distributed_check.py`, on two logical CPU devices), shared by the module's
tests: a module of its own, so that under `pytest -n` tests/test_training.py's tests are not tied to its worker."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from test_training import ENV

HERE = os.path.dirname(os.path.abspath(__file__))
# How far the change of the weights over the two steps may be from one device's, relative to its size: the three
# ways differ by 4e-6 (float32 sums in another order); clipping each replica's part alone is 0.6 off.
TOLERANCE = 1e-4


@pytest.fixture(scope="module")
def one_step_three_ways():
    out = subprocess.run([sys.executable, os.path.join(HERE, "distributed_check.py")], capture_output=True,
                         text=True, timeout=600, env=ENV, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _distance(run, reference):
    """How far `run`'s change of the weights is from `reference`'s, relative to the size of `reference`'s."""
    delta, expected = np.asarray(run["delta"]), np.asarray(reference["delta"])
    return float(np.linalg.norm(delta - expected) / np.linalg.norm(expected))


@pytest.mark.parametrize("way", ["mirrored", "accumulated"])
@pytest.mark.parametrize("clipped", ["", "_clipped"])
def test_replicas_and_accumulation_match_one_device(one_step_three_ways, way, clipped):
    """Also with a global-norm clip: Keras alone clips each replica's part before the sum."""
    reference, other = one_step_three_ways[f"one_device{clipped}"], one_step_three_ways[f"{way}{clipped}"]
    assert other["step"] == reference["step"] == 2
    assert other["losses"] == pytest.approx(reference["losses"], abs=1e-4)
    assert _distance(other, reference) < TOLERANCE


def test_the_clipped_check_tells_one_clip_of_the_sum_from_a_clip_per_replica(one_step_three_ways):
    """The clipped comparison above can fail: the clip changes the step (by far more than the tolerance), and
    the step with each replica's part clipped alone before the sum is far from the step of one device."""
    clipped, unclipped = one_step_three_ways["one_device_clipped"], one_step_three_ways["one_device"]
    per_replica = one_step_three_ways["per_replica_clipped"]
    assert _distance(unclipped, clipped) > 100 * TOLERANCE
    assert per_replica["step"] == 2
    assert per_replica["losses"][0] == pytest.approx(clipped["losses"][0], abs=1e-4)  # The same start...
    assert abs(per_replica["losses"][1] - clipped["losses"][1]) > 1e-3  # ...and another step.
    assert _distance(per_replica, clipped) > 100 * TOLERANCE
