"""benchmarks/opennmt_tf.py skips cleanly, in one line and without building anything, when the data is absent."""

import os
import subprocess
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "opennmt_tf.py")


def test_skips_cleanly_without_the_data(tmp_path):
    result = subprocess.run([sys.executable, _PATH, f"--multi30k={tmp_path}", f"--work_dir={tmp_path / 'w'}",
                             f"--opennmt_venv={tmp_path / 'venv'}"], capture_output=True, text=True, timeout=60,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "skipped" in result.stdout and "train.en.gz" in result.stdout
    assert not os.path.exists(tmp_path / "w") and not os.path.exists(tmp_path / "venv")


def test_the_base_shape_runs_with_its_default_steps(tmp_path):
    """--shape base trains 200 steps; its default token-count interval must divide them (it once was 200 // 30 = 6,
    and the script refused its own defaults before looking for the data)."""
    result = subprocess.run([sys.executable, _PATH, "--shape=base", f"--multi30k={tmp_path}",
                             f"--work_dir={tmp_path / 'w'}", f"--opennmt_venv={tmp_path / 'venv'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout


def _benchmark_module():
    import importlib.util  # pylint: disable=import-outside-toplevel
    sys.path.insert(0, os.path.dirname(_PATH))
    try:
        spec = importlib.util.spec_from_file_location("opennmt_tf_benchmark", _PATH)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(os.path.dirname(_PATH))
    return module


def test_each_toolkit_gets_the_allocator_asked_for_whatever_the_callers_environment(monkeypatch):
    """Our tools default to BFC and OpenNMT-tf to TensorFlow's malloc-backed allocator: --allocator shipped keeps
    that difference, bfc / tensorflow remove it, and a TF_CPU_ALLOCATOR_USE_BFC in the caller's environment
    (the test suite sets one) must not decide for either side."""
    benchmark = _benchmark_module()
    monkeypatch.setenv("TF_CPU_ALLOCATOR_USE_BFC", "caller")
    chosen = {allocator: {name: benchmark.toolkit_environment(name, allocator).get("TF_CPU_ALLOCATOR_USE_BFC")
                          for name in ("ours", "theirs")} for allocator in ("shipped", "bfc", "tensorflow")}
    assert chosen == {"shipped": {"ours": None, "theirs": "false"}, "bfc": {"ours": "true", "theirs": "true"},
                      "tensorflow": {"ours": "false", "theirs": "false"}}
    assert benchmark.toolkit_environment("theirs", "bfc")["TF_NUM_INTRAOP_THREADS"] == "1"
