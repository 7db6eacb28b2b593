"""Where a training step's time goes: the trainer's own step, timed, and its ops ranked by self time.

    .venv/bin/python benchmarks/profile_step.py --problem=translate_local --data_dir=DIR \
        --hparams_set=transformer_cpu_rel [--hparams=...] [--steps 300] [--profile_steps 100] [--top 25]

Builds the run exactly as `t2t-relpos-trainer` does (`Trainer`, its input pipeline and `tf.function` step, one
TensorFlow thread so that the figures are per core), takes `--warmup_steps` steps (tracing, the XLA compiles of
the first length buckets), then times `--steps` steps: median step time, and non-padding source + target tokens
per CPU-second and per wall second. With `--profile_steps` > 0 it records that many further steps with
`tf.profiler` and prints the ops with the largest self time per step (host ops; the idle threads and the
input pipeline's iterator ops, which run beside the step, are left out). It says how much of the profiled
steps' time the ranked ops cover; `--host_tracer_level 3` traces more of the small kernels. Turning the profile
into a table needs the `xprof` package (`pip install xprof`); without it only the timings are printed. Nothing
is written outside `--work_dir`.
"""

import argparse
import collections
import glob
import json
import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")  # As t2t_relpos/cli/common.py: the trainer's allocator.


def build(args, output_dir):
    """(trainer, its compiled step, an iterator over its training batches)."""
    # pylint: disable=import-outside-toplevel
    import tensorflow as tf

    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
    from t2t_relpos import registry
    from t2t_relpos.hparams import stored
    from t2t_relpos.training import trainer as trainer_lib

    hparams, problem_name, model_name = stored.resolve_for_run(
        output_dir, args.hparams_set, args.hparams, [], [], problem=args.problem, model=None)
    trainer = trainer_lib.Trainer(registry.problem(problem_name), hparams, output_dir, model_name=model_name,
                                  data_dir=args.data_dir, seed=1, checkpoint_every=10 ** 9, eval_every=0,
                                  eval_steps=1, verbose=False)
    step = trainer._build_train_step()  # pylint: disable=protected-access
    return step, iter(trainer._train_dataset())  # pylint: disable=protected-access


def take_steps(step, iterator, count):
    """Runs `count` steps: (seconds of each, non-padding tokens in all, CPU seconds of the process)."""
    seconds, tokens = [], 0.0
    cpu = time.process_time()
    for _ in range(count):
        began = time.perf_counter()
        stats = step(iterator)
        tokens += float(stats["tokens"]) + float(stats["source_tokens"])
        seconds.append(time.perf_counter() - began)
    return seconds, tokens, time.process_time() - cpu


def op_table(profile_dir, steps, top):
    """Rows (type, op name, ms per step, share of the step's busy time) of the recorded profile, or None."""
    try:
        from xprof.convert import raw_to_tool_data  # pylint: disable=import-outside-toplevel
    except ImportError:
        return None
    paths = glob.glob(os.path.join(profile_dir, "plugins", "profile", "*", "*.xplane.pb"))
    data, _ = raw_to_tool_data.xspace_to_tool_data(paths, "framework_op_stats", {"use_saved_result": False})
    table = json.loads(data)[0]
    columns = {column["id"]: i for i, column in enumerate(table["cols"])}
    rows = []
    for row in table["rows"]:
        cells = [cell["v"] if cell else None for cell in row["c"]]
        kind = cells[columns["type"]]
        if cells[columns["host_or_device"]] != "Host" or kind == "IDLE" or kind.startswith(("Dataset", "Iterator")):
            continue
        rows.append((kind, cells[columns["operation"]], cells[columns["total_self_time"]] / 1000 / steps))
    busy = sum(r[2] for r in rows)
    by_type = collections.Counter()
    for kind, _, ms in rows:
        by_type[kind] += ms
    rows.sort(key=lambda r: -r[2])
    return busy, [(k, n, ms, ms / busy) for k, n, ms in rows[:top]], by_type.most_common(top)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--problem", required=True)
    parser.add_argument("--data_dir", default=None)
    parser.add_argument("--hparams_set", required=True)
    parser.add_argument("--hparams", default="")
    parser.add_argument("--warmup_steps", type=int, default=100)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--profile_steps", type=int, default=100)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--host_tracer_level", type=int, default=2, choices=(1, 2, 3),
                        help="tf.profiler's host tracer level: 2 is TensorFlow's default, 3 traces more of the "
                             "small kernels (Mul, RealDiv, ...) that 2 leaves out")
    parser.add_argument("--work_dir", default=None, help="default: a temporary directory, removed afterwards")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as scratch:
        work_dir = args.work_dir or scratch
        step, iterator = build(args, os.path.join(work_dir, "run"))
        take_steps(step, iterator, args.warmup_steps)
        seconds, tokens, cpu = take_steps(step, iterator, args.steps)
        print(f"{args.hparams_set} {args.hparams}: median step {statistics.median(seconds) * 1000:.1f} ms, "
              f"{tokens / cpu:,.0f} tokens per CPU-second, {tokens / sum(seconds):,.0f} per wall second "
              f"({args.steps} steps after {args.warmup_steps})", flush=True)
        if args.profile_steps <= 0:
            return 0
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        profile_dir = os.path.join(work_dir, "profile")
        tf.profiler.experimental.start(profile_dir, options=tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=args.host_tracer_level, python_tracer_level=0, device_tracer_level=0))
        profiled, _, _ = take_steps(step, iterator, args.profile_steps)
        tf.profiler.experimental.stop()
        table = op_table(profile_dir, args.profile_steps, args.top)
        if table is None:
            print("(pip install xprof to rank the profiled ops; the raw profile is in --work_dir)")
            return 0
        busy, rows, by_type = table
        step_ms = sum(profiled) * 1000 / len(profiled)
        print(f"busy host time {busy:.1f} ms per step, {busy / step_ms:.0%} of the profiled steps' {step_ms:.1f} ms "
              "(the rest is not in the op statistics: XLA-compiled clusters, untraced kernels); the ops with the most "
              "self time:")
        for kind, name, ms, share in rows:
            print(f"  {ms:7.2f} ms  {share:6.1%}  {kind:<26} {name[:90]}")
        print("by op type: " + ", ".join(f"{kind} {ms:.1f}" for kind, ms in by_type))
    return 0


if __name__ == "__main__":
    sys.exit(main())
