"""What TensorFlow's CPU allocator costs a training run: the default against BFC, through the real trainer.

    .venv/bin/python benchmarks/allocator.py [--sets transformer_cpu_rel,...] [--reps 2] [--write]

Each hparams set trains `t2t-relpos-trainer` on `algorithmic_reverse_decimal40` (generated, no data needed) for
the same steps and seed twice per repetition, once with TensorFlow's default CPU allocator
(`TF_CPU_ALLOCATOR_USE_BFC=false`) and once with the BFC allocator the command-line tools now choose, in fresh
processes on one TensorFlow thread, the two interleaved. It reports the whole process's CPU seconds in user
and kernel mode and its minor page faults (`wait4`'s resource usage), the trainer's tokens/s over its last
steps, and the final loss of each, which must be equal: the allocator changes where tensors live, not what is
computed.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

ALLOCATORS = {"default": "false", "bfc": "true"}
# Steps per set: enough that start-up (imports, tracing) is a minority of the run.
STEPS = {"transformer_cpu_rel": 300, "universal_transformer_cpu_rel": 150, "transformer_base_rel": 20}
PROGRESS = re.compile(r"^step (\d+)/\d+\s+loss ([0-9.e+-]+)\s+accuracy [0-9.]+\s+lr [0-9.e+-]+\s+tok/s ([0-9.e+]+)",
                      re.M)


def train(hparams_set, steps, allocator, work_dir):
    """One fresh trainer process; its resource usage, last tokens/s and final loss."""
    out = os.path.join(work_dir, f"{hparams_set}_{allocator}")
    shutil.rmtree(out, ignore_errors=True)
    env = dict(os.environ, TF_CPU_ALLOCATOR_USE_BFC=ALLOCATORS[allocator], TF_NUM_INTRAOP_THREADS="1",
               TF_NUM_INTEROP_THREADS="1", TF_CPP_MIN_LOG_LEVEL="2")
    command = [sys.executable, "-c", "import t2t_relpos.cli.trainer as m; m.run()",
               "--problem=algorithmic_reverse_decimal40", f"--hparams_set={hparams_set}", f"--output_dir={out}",
               f"--train_steps={steps}", f"--checkpoint_every={steps}", "--eval_steps=1",
               f"--log_every={max(1, steps // 3)}", "--seed=1"]
    began = time.perf_counter()
    with subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env) as process:
        output = process.stdout.read()
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        raise SystemExit(f"allocator: {hparams_set} with the {allocator} allocator failed:\n{output[-2000:]}")
    last = PROGRESS.findall(output)[-1]
    return {"user": usage.ru_utime, "sys": usage.ru_stime, "faults": usage.ru_minflt,
            "rss_mib": usage.ru_maxrss / 1024, "tokens_per_second": float(last[2]), "loss": last[1],
            "wall": time.perf_counter() - began}


def report(results, args, seconds):
    rows = []
    for hparams_set, by_allocator in results.items():
        med = {name: {key: statistics.median(run[key] for run in runs) for key in
                      ("user", "sys", "faults", "rss_mib", "tokens_per_second")}
               for name, runs in by_allocator.items()}
        losses = {run["loss"] for runs in by_allocator.values() for run in runs}
        for name in ALLOCATORS:
            m = med[name]
            rows.append([hparams_set, name, f"{m['user']:.1f}", f"{m['sys']:.1f}",
                         f"{m['sys'] / (m['user'] + m['sys']):.0%}", f"{m['faults'] / 1e6:.2f}",
                         f"{m['rss_mib']:.0f}", f"{m['tokens_per_second']:,.0f}",
                         "" if name == "default" else
                         f"{(med['default']['user'] + med['default']['sys']) / (m['user'] + m['sys']):.2f}x",
                         "" if name == "default" else
                         f"{m['tokens_per_second'] / med['default']['tokens_per_second']:.2f}x",
                         ", ".join(sorted(losses)) + ("" if len(losses) == 1 else " (differ!)")])
    headers = ["set (steps)", "allocator", "user CPU s", "kernel CPU s", "kernel share", "minor faults (M)",
               "peak RSS (MiB)", "tok/s, last steps", "CPU time, default / bfc", "tok/s, bfc / default",
               "final loss"]
    return "\n".join([
        "## CPU allocator: TensorFlow's default against BFC", "",
        f"`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min.  ",
        f"Machine: {common.machine_description()}.", "",
        f"`t2t-relpos-trainer --problem=algorithmic_reverse_decimal40` for each set, a fresh process per run on "
        f"one TensorFlow thread, the default allocator (`TF_CPU_ALLOCATOR_USE_BFC=false`) and BFC interleaved, "
        f"{args.reps} repetition(s), medians. CPU seconds and faults are the whole process's (start-up and "
        "tracing included); tok/s is the trainer's rate over its last logged steps (non-padding tokens over "
        "time). Equal final losses: the same training, only the memory management differs.", "",
        common.markdown_table(headers, [[f"{r[0]} ({args.steps_of[r[0]]})", *r[1:]] for r in rows],
                              align="llrrrrrrrrl")])


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--sets", default=",".join(STEPS))
    parser.add_argument("--steps", type=int, default=0, help="steps per run (0: each set's default)")
    parser.add_argument("--reps", type=int, default=2)
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "allocator"))
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    args = parser.parse_args(argv)
    common.refuse_uncommitted_writes(args)
    sets = args.sets.split(",")
    args.steps_of = {name: args.steps or STEPS.get(name, 100) for name in sets}
    os.makedirs(args.work_dir, exist_ok=True)
    began = time.perf_counter()
    results = {name: {allocator: [] for allocator in ALLOCATORS} for name in sets}
    for rep in range(args.reps):
        for name in sets:
            order = list(ALLOCATORS) if rep % 2 == 0 else list(reversed(ALLOCATORS))
            for allocator in order:
                run = train(name, args.steps_of[name], allocator, args.work_dir)
                results[name][allocator].append(run)
                print(rep, name, allocator, {k: round(v, 2) if isinstance(v, float) else v for k, v in run.items()},
                      flush=True)
    text = report(results, args, time.perf_counter() - began)
    print(text)
    if args.write:
        common.replace_section("allocator", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
