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


@pytest.mark.slow  # 57 s of a core: run before a session's device time (`pytest -m slow`; benchmarks/README.md).
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


def _gpu_trace():
    spec = importlib.util.spec_from_file_location("gpu_trace", os.path.join(_ROOT, "benchmarks", "gpu_trace.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_trace_summary_counts_stream_kernels_per_call_and_skips_derived_lines():
    gpu_trace = _gpu_trace()

    def kernel(tid, name, dur, **args):
        return {"ph": "X", "pid": 1, "tid": tid, "name": name, "dur": dur, "args": args}

    events = [{"ph": "M", "name": "process_name", "pid": 1, "args": {"name": "/device:GPU:0"}},
              {"ph": "M", "name": "process_name", "pid": 2, "args": {"name": "/host:CPU"}},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 7, "args": {"name": "Stream #7(Compute)"}},
              {"ph": "M", "name": "thread_name", "pid": 1, "tid": 8, "args": {"name": "XLA Ops"}},
              kernel(7, "gemm_fusion_dot", 30.0), kernel(7, "gemm_fusion_dot", 10.0),
              kernel(7, "input_reduce_fusion", 4.0), kernel(7, "loop_add_fusion", 6.0, hlo_op="command_buffer_1"),
              kernel(8, "gemm_fusion_dot", 40.0),  # The derived line repeats the stream's kernels.
              {"ph": "X", "pid": 2, "tid": 1, "name": "python", "dur": 900.0}]
    summary = gpu_trace.summarise({"traceEvents": events}, calls=2)
    assert summary["device"] and summary["kernels"] == 2.0 and summary["us"] == 25.0
    assert summary["ops"] == {"gemm_fusion_dot": [20.0, 1.0], "loop_add_fusion": [3.0, 0.5],
                              "input_reduce_fusion": [2.0, 0.5]}
    assert gpu_trace.by_class(summary) == {"matmul": [20.0, 1.0], "loop": [3.0, 0.5], "reduce": [2.0, 0.5]}
    assert not gpu_trace.summarise({"traceEvents": events[1:2] + events[-1:]}, calls=1)["device"]
    assert [gpu_trace.classify(name) for name in (
        "sm90_xmma_gemm_f32f32", "input_transpose_fusion_1", "input_reduce_fusion_2", "input_concatenate_fusion",
        "loop_select_fusion", "Memset 0")] == ["matmul", "copy", "reduce", "copy", "loop", "copy"]


def test_profile_table_says_when_a_trace_has_no_device_events():
    accelerator = _module()
    on_gpu = {"device": True, "kernels": 3, "us": 30.0, "ops": {"gemm_fusion_dot": [25.0, 2], "Memset": [5.0, 1]},
              "lines": []}
    on_cpu = {"device": False, "kernels": 0, "us": 0.0, "ops": {}, "lines": []}
    table = accelerator.profile_table([("attention, long", {"relative": on_gpu, "absolute": on_cpu})])
    row = next(line for line in table.splitlines() if "relative" in line)
    assert [cell.strip() for cell in row.strip("|").split("|")] == [
        "attention, long", "relative", "3", "30", "25 (2)", "", "", "", "5 (1)", ""]
    assert "no device events in the trace" in table
