"""Device time per kernel of a jitted JAX function, read from a `jax.profiler` trace.

    summary = kernel_times(fn, args, calls=3, log_dir="/tmp/trace/attention_long_relative")

`kernel_times` runs `fn(*args)` `calls` times under `jax.profiler.trace(..., create_perfetto_trace=True)` and
reads the Perfetto JSON the profiler writes: every complete event ("ph": "X") on a device process (a process
whose name starts with "/device:" or names a GPU) is a kernel or a copy the device ran. On an H100 with jax
0.11.2 the device process held one line, the stream ("Stream #14(Compute,Memset)"); lines that summarise the
stream ("XLA Ops", "XLA Modules", "Steps", ...), which TensorBoard's profile tools draw, would count its kernels
twice and are left out. The summary gives, per call, the number of kernels, their total time, and the time and
count per kernel name (XLA names a kernel after its fusion, e.g. `input_reduce_fusion_2`; the events' `hlo_op`
argument is no help where XLA runs the program as CUDA graphs: it names the graph, `command_buffer_1`, for
every kernel), which `classify` sorts into matrix products, gathers, copies, reductions, elementwise loops and
other.

On a host without a device (JAX on the CPU) the trace has no device process: the summary then says so
(`kernels` 0, `device` False) rather than inventing figures.
"""

import collections
import glob
import gzip
import json
import os

_DERIVED_LINES = ("XLA Ops", "XLA Modules", "Steps", "Framework", "Source", "TraceMe", "Launch Stats",
                  "XLA TraceMe")


def kernel_times(fn, args, calls, log_dir):
    """{device, kernels, us, ops: {kernel name: [us, count]}, lines} per call of `fn(*args)`, from a trace."""
    import jax  # pylint: disable=import-outside-toplevel

    jax.block_until_ready(fn(*args))  # Compiled and warm before the trace starts.
    with jax.profiler.trace(log_dir, create_perfetto_trace=True):
        for _ in range(calls):
            jax.block_until_ready(fn(*args))
    paths = sorted(glob.glob(os.path.join(log_dir, "plugins", "profile", "*", "perfetto_trace.json.gz")))
    if not paths:
        return {"device": False, "kernels": 0, "us": 0.0, "ops": {}, "lines": [], "error": "no perfetto trace"}
    with gzip.open(paths[-1], "rt", encoding="utf-8") as f:
        return summarise(json.load(f), calls)


def summarise(trace, calls):
    """The per-call summary of a Perfetto trace (the JSON object `kernel_times` reads)."""
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    processes, threads = {}, {}
    for event in events:
        if event.get("ph") != "M":
            continue
        if event.get("name") == "process_name":
            processes[event["pid"]] = event["args"]["name"]
        elif event.get("name") == "thread_name":
            threads[(event["pid"], event["tid"])] = event["args"]["name"]
    ops = collections.defaultdict(lambda: [0.0, 0])
    lines = collections.Counter()
    for event in events:
        process = str(processes.get(event.get("pid"), ""))
        if event.get("ph") != "X" or not (process.startswith("/device:") or "GPU" in process):
            continue
        line = threads.get((event["pid"], event.get("tid")), "")
        lines[line] += 1
        if line.startswith(_DERIVED_LINES):
            continue
        op = event.get("name", "?")  # XLA names its kernels after their fusions; cuBLAS's name the algorithm.
        ops[op][0] += float(event.get("dur", 0.0)) / calls
        ops[op][1] += 1
    kernels = sum(count for _, count in ops.values()) / calls
    return {"device": bool(lines), "kernels": kernels, "us": sum(us for us, _ in ops.values()),
            "ops": {op: [us, count / calls] for op, (us, count) in sorted(ops.items(), key=lambda kv: -kv[1][0])},
            "lines": sorted(lines.items())}


def classify(op):
    """A coarse class of a kernel by its name: matmul, gather, copy, reduce, loop or other (first match wins, so
    `input_transpose_fusion` is a copy and `input_reduce_fusion` a reduction)."""
    name = op.lower()
    for cls, keys in (("matmul", ("gemm", "dot", "cublas", "xmma", "cutlass", "matmul")),
                      ("gather", ("gather", "scatter", "dynamic-slice", "dynamic_slice", "dynamic-update")),
                      ("copy", ("copy", "transpose", "memcpy", "memset", "concatenate", "broadcast", "slice")),
                      ("reduce", ("reduce", "input_")),
                      ("loop", ("loop_", "fusion", "add", "multiply", "select", "convert"))):
        if any(key in name for key in keys):
            return cls
    return "other"


def by_class(summary):
    """{class: [us, kernels]} per call."""
    out = collections.defaultdict(lambda: [0.0, 0.0])
    for op, (us, count) in summary["ops"].items():
        totals = out[classify(op)]
        totals[0] += us
        totals[1] += count
    return dict(out)
