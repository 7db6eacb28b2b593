"""benchmarks/input_pipeline.py: it skips cleanly without the data, and turns drains into the right rates."""

import importlib.util
import os
import subprocess
import sys

import pytest

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks",
                     "input_pipeline.py")
_SPEC = importlib.util.spec_from_file_location("benchmark_input_pipeline", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
sys.path.insert(0, os.path.dirname(_PATH))
_SPEC.loader.exec_module(bench)


def test_skips_cleanly_without_the_data(tmp_path):
    result = subprocess.run([sys.executable, _PATH, f"--newstest={tmp_path}", f"--work_dir={tmp_path / 'w'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and "newstest2013.en.gz" in result.stdout
    assert not os.path.exists(tmp_path / "w")


def test_rates_are_medians_of_tokens_over_wall_and_cpu_time():
    # (examples, tokens, wall s, cpu s) per drain.
    samples = {"tokenize": [(100, 3000, 1.0, 2.0), (100, 3000, 2.0, 2.0), (100, 3000, 0.5, 1.0)],
               "read": [(400, 0, 1.0, 1.0)]}
    rates = bench.rates(samples)
    assert rates["tokenize"]["tokens"] == pytest.approx(3000.0)  # Median of 3000, 1500, 6000.
    assert rates["tokenize"]["tokens_range"] == (1500.0, 6000.0)
    assert rates["tokenize"]["tokens_cpu"] == pytest.approx(1500.0)
    assert rates["tokenize"]["tokens_per_element"] == pytest.approx(30.0)
    assert rates["read"]["elements"] == pytest.approx(400.0) and rates["read"]["tokens"] == 0
