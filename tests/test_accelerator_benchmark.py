"""benchmarks/accelerator.py at tiny sizes on the JAX backend: its figures, its exactness check and its table."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PATH = os.path.join(_ROOT, "benchmarks", "accelerator.py")


def _module():
    spec = importlib.util.spec_from_file_location("benchmark_accelerator", _PATH)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_flatness_is_the_per_repetition_ratio_of_longest_to_shortest():
    accelerator = _module()
    rows = [{"model": "m", "batch": 2, "search": "beam", "length": 25, "ms_per_step": [1.0, 2.0, 1.0]},
            {"model": "m", "batch": 2, "search": "beam", "length": 200, "ms_per_step": [1.5, 2.0, 3.0]},
            {"model": "m", "batch": 2, "search": "beam", "length": 100, "ms_per_step": [9.0, 9.0, 9.0]}]
    assert accelerator.flatness(rows) == {("m", 2, "beam"): (1.5, 1.0, 3.0)}


def test_tiny_run_on_jax_decodes_exactly_and_reports_every_part(tmp_path):
    pytest.importorskip("jax")
    out = tmp_path / "figures.json"
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")
    proc = subprocess.run([sys.executable, _PATH, "--quick", "--decode_models", "rel64", "--lengths", "3,6",
                           "--batches", "2", "--shapes", "small", "--settings", "mixed", "--reps", "2",
                           "--json", str(out)], cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    figures = json.loads(out.read_text())
    assert figures["device"].startswith("cpu")
    decoding = figures["decoding"]
    assert {(r["search"], r["length"]) for r in decoding} == {(s, n) for s in ("greedy", "beam") for n in (3, 6)}
    # The cached greedy tokens are what the teacher-forced full pass predicts, every one of them.
    assert all(r["greedy_agreement"] == 1.0 and len(r["ms_per_step"]) == 2 and min(r["ms_per_step"]) > 0
               for r in decoding)
    (training,) = figures["training"]
    assert len(training["ratios"]) == 2 and all(r > 0 for r in training["ratios"])
    assert training["params"]["relative"] > training["params"]["absolute"]
    (attention,) = figures["attention"]
    assert attention["setting"] == "mixed" and len(attention["ratios"]) == 2
    memory = figures["memory"]
    assert memory["length"] == 64 and memory["relative"] > 0 and memory["absolute"] > 0
    report = figures["report"]
    assert "| rel64 |     2 | beam 4 |" in report and "one attention layer, forward + backward" in report
