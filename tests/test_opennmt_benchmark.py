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


def test_the_profile_hook_traces_exactly_the_steps_asked_for(monkeypatch):
    """--profile: each wrapper traces steps FIRST+1 .. LAST (start at FIRST, stop at LAST), and nothing without
    the environment variable."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    benchmark = _benchmark_module()
    assert benchmark.OURS_WRAPPER.startswith(benchmark.PROFILE_HOOK)
    assert benchmark.THEIRS_WRAPPER.startswith(benchmark.PROFILE_HOOK)
    calls = []
    monkeypatch.setattr(tf.profiler.experimental, "start", lambda logdir, options=None: calls.append(("start", logdir)))
    monkeypatch.setattr(tf.profiler.experimental, "stop", lambda: calls.append(("stop",)))
    for environment, want in (({benchmark._PROFILE: "/trace,3,5"}, [(3, "start", "/trace"), (5, "stop")]), ({}, [])):
        monkeypatch.delenv(benchmark._PROFILE, raising=False)
        for name, value in environment.items():
            monkeypatch.setenv(name, value)
        namespace = {}
        exec(benchmark.PROFILE_HOOK, namespace)  # pylint: disable=exec-used
        got = []
        for step in range(1, 8):
            before = len(calls)
            namespace["trace_at"](step)
            got += [(step,) + call for call in calls[before:]]
        assert got == want


def test_the_profile_table_puts_the_op_types_side_by_side():
    benchmark = _benchmark_module()

    class Args:  # pylint: disable=too-few-public-methods
        profile, shape, versions = (20, 30), "base", ("2.32.0", "2.13.1")

    tables = {"relative": {"ours": (30.0, {"MatMul": 20.0, "Softmax": 6.0, "Mul": 4.0}, (40.0, 1100.0)),
                           "theirs": (25.0, {"MatMul": 21.0, "RandomUniform": 4.0}, (44.0, 1000.0))}}
    text = benchmark.format_profile(Args(), tables, ["datagen", "ours command", "theirs command"], 60.0, top=2)
    rows = [line for line in text.splitlines() if line.startswith("| `") or line.startswith("| other")
            or line.startswith("| **")]
    assert [cell.strip() for cell in rows[0].split("|")[1:5]] == ["`MatMul`", "20.0", "21.0", "-1.0"]
    assert [cell.strip() for cell in rows[1].split("|")[1:5]] == ["`Softmax`", "6.0", "0.0", "+6.0"]
    assert [cell.strip() for cell in rows[2].split("|")[1:5]] == ["other 2 types", "4.0", "4.0", "+0.0"]
    assert [cell.strip() for cell in rows[3].split("|")[1:5]] == ["**all traced ops**", "**30.0**", "**25.0**", "+5.0"]
    whole = [line for line in text.splitlines() if line.startswith(("| whole step", "| tokens per"))]
    assert [cell.strip() for cell in whole[0].split("|")[2:5]] == ["40.0", "44.0", "-4.0"]
    assert [cell.strip() for cell in whole[1].split("|")[2:5]] == ["1,100", "1,000", "1.10x"]
    assert "Steps 21-30" in text and "    ours command" in text and "    datagen" not in text
    assert "other" not in benchmark.format_profile(Args(), tables, [], 60.0, top=4)  # Every type has its row.


def test_a_bad_profile_range_is_refused_in_one_line(tmp_path):
    result = subprocess.run([sys.executable, _PATH, "--profile=30:20", f"--multi30k={tmp_path}",
                             f"--work_dir={tmp_path / 'w'}", f"--opennmt_venv={tmp_path / 'venv'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "--profile takes FIRST:LAST" in result.stderr


def test_the_time_of_xla_clusters_is_read_from_the_trace(tmp_path):
    """The op statistics leave XLA-compiled clusters out; the profile reads their compiling and running time
    from the trace: a new shape compiles, a shape met before only runs."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    benchmark = _benchmark_module()
    fused = tf.function(lambda x: tf.reduce_sum(tf.exp(x) * x, axis=-1), jit_compile=True)
    step = tf.function(lambda x: fused(tf.matmul(x, x)))
    seen, new = tf.random.uniform((64, 64)), tf.random.uniform((96, 96))
    step(seen)
    for name, inputs in (("new", new), ("seen", seen)):
        tf.profiler.experimental.start(str(tmp_path / name))
        step(inputs).numpy()
        tf.profiler.experimental.stop()
    new_times, seen_times = (benchmark.xla_times(str(tmp_path / name), 1) for name in ("new", "seen"))
    assert new_times[benchmark.XLA_RUN] > 0 and seen_times[benchmark.XLA_RUN] > 0
    assert new_times[benchmark.XLA_COMPILE] > 10 * seen_times[benchmark.XLA_COMPILE]
    assert benchmark.xla_times(str(tmp_path / "nothing"), 1) == {}


def test_the_report_says_whether_the_pair_ran_together_or_in_turn():
    """Under `taskset -c 1` run_pair runs the two trainers one after the other; the table's text must not
    claim they ran at the same time on swapped cores."""
    benchmark = _benchmark_module()
    assert "at the same time" in benchmark.schedule_text(2, 4)
    alone = benchmark.schedule_text(1, 2)
    assert "at the same time" not in alone and "one after the other" in alone and "2 runs" in alone
