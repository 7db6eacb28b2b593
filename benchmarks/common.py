"""Helpers shared by the benchmark scripts: machine line, interleaved timing, peak memory, the run log's sections
(docs/studies/benchmark_runs.md), and the results files under benchmarks/results/ that the plots are drawn from.

Nothing here imports TensorFlow at module level, so a parent process that only launches workers stays light.
"""

import datetime
import fnmatch
import json
import math
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import threading
import time
from importlib import metadata

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# Where `--write` puts a script's generated section; the report (benchmarks/README.md) is edited by hand from it.
RUN_LOG = os.path.join(REPO, "docs", "studies", "benchmark_runs.md")
RESULTS = os.path.join(REPO, "benchmarks", "results")
# The package's code, whose commit a recorded figure names; in it, what the scripts write is not code.
CODE = ("t2t_relpos", "problems", "hparams", "benchmarks")
NOT_CODE = ("benchmarks/results/*", "benchmarks/README.md", "benchmarks/*.png")
UNCOMMITTED = " + uncommitted changes"
_RESULT_PREFIX = "BENCHMARK_RESULT_JSON: "


def _version(package):
    """Installed version of `package`, or "absent"."""
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "absent"


def _meminfo_bytes(field):
    """A field of /proc/meminfo (e.g. "MemTotal") in bytes, or None where unknown."""
    try:
        with open("/proc/meminfo", encoding="utf-8") as f:
            return int(next(line for line in f if line.startswith(field + ":")).split()[1]) * 1024
    except (OSError, StopIteration):
        return None


def _cpu_model():
    """The CPU's model name (from /proc/cpuinfo where there is one)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            models = [line.split(":", 1)[1].strip() for line in f if line.startswith("model name")]
    except OSError:
        models = []
    return models[0] if models else (platform.processor() or platform.machine())


def machine_description():
    """One line: CPU model, cores, RAM, Python, TensorFlow and Keras versions."""
    total = _meminfo_bytes("MemTotal")
    ram = f", {total / 2**30:.1f} GiB RAM" if total else ""
    return (f"{_cpu_model()}, {os.cpu_count()} cores{ram}, Python {platform.python_version()}, "
            f"TensorFlow {_version('tensorflow')}, Keras {_version('keras')}")


def available_memory_bytes():
    """MemAvailable from /proc/meminfo (None where unknown)."""
    return _meminfo_bytes("MemAvailable")


def today():
    """The date, ISO format."""
    return datetime.date.today().isoformat()


def shown_path(path):
    """`path` as a section shows it: relative to the repository where it lies inside it (a machine's own folders
    stay out of the log), otherwise as given."""
    full = os.path.abspath(path)
    return os.path.relpath(full, REPO) if full.startswith(REPO + os.sep) else path


def command_line():
    """How this script was invoked, as a shell would take it again from the repository's root: the interpreter,
    the script and absolute paths inside the repository shown relative to it (`shown_path`), the rest as given."""

    def shown(arg):
        flag, equals, value = arg.partition("=") if arg.startswith("--") else ("", "", arg)
        return flag + equals + (shown_path(value) if os.path.isabs(value) else value)

    script = [shown_path(arg) if os.path.exists(arg) else arg for arg in sys.argv[:1]]  # Run from anywhere.
    return shlex.join([shown_path(sys.executable)] + script + [shown(arg) for arg in sys.argv[1:]])


def code_changes():
    """The files of the package's code (`CODE`, less `NOT_CODE`) that differ from the commit checked out, new
    files included; None outside a git checkout."""
    # No optional locks: a status taking the index's lock would fail a commit made at the same time.
    status = subprocess.run(["git", "--no-optional-locks", "-C", REPO, "status", "--porcelain=v1", "-z",
                             "--untracked-files=all", "--", *CODE], capture_output=True, text=True, check=False)
    if status.returncode != 0:
        return None
    entries, changed = iter(status.stdout.split("\0")), []
    for entry in entries:
        if not entry:
            continue
        if entry[0] in "RC":  # A rename or copy: the next entry is the path it came from.
            next(entries, None)
        path = entry[3:]
        if not any(fnmatch.fnmatch(path, pattern) for pattern in NOT_CODE):
            changed.append(path)
    return changed


def code_version():
    """The commit the benchmark ran on (`git rev-parse --short HEAD`), "+ uncommitted changes" where the package's
    code differs from it (`code_changes`), or "unknown" outside a checkout."""
    head = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                          check=False)
    changed = code_changes() if head.returncode == 0 else None
    if changed is None:
        return "unknown"
    return head.stdout.strip() + (UNCOMMITTED if changed else "")


def require_committed(flag, path):
    """The commit that figures written to `path` (a file or folder) by `flag` will name: where `path` lies in the
    repository, the package's code must be committed, else this exits with status 2 and one line `error: ...`
    (a run without `flag` measures and prints all the same). Paths outside the repository (tests') pass."""
    version = code_version()
    if not os.path.abspath(path).startswith(REPO + os.sep):
        return version
    if version == "unknown":
        reason = "the code is not in a git checkout"
    elif version.endswith(UNCOMMITTED):
        changed = code_changes() or []
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        reason = f"the code has uncommitted changes ({', '.join(changed[:3])}{more}); commit them first"
    else:
        return version
    print(f"error: {flag} refused: {reason}, so that {shown_path(path)} names the commit its figures ran on "
          f"(without {flag} a run measures and prints only)", file=sys.stderr)
    raise SystemExit(2)


def refuse_uncommitted_writes(args):
    """A script's check before it measures: `--write` (the run log) and `--record` (benchmarks/results/) each
    `require_committed`, so that a long run is not refused only when it has finished."""
    if getattr(args, "write", False):
        require_committed("--write", RUN_LOG)
    if getattr(args, "record", False):
        require_committed("--record", RESULTS)


def provenance(seed=None):
    """What every recorded row carries: date, code, command, machine (and the seed, where there is one)."""
    row = {"date": today(), "code": code_version(), "command": command_line(), "machine": machine_description()}
    if seed is not None:
        row["seed"] = seed
    return row


def read_results(benchmark, results_dir=None):
    """The results file `<results_dir>/<benchmark>.json` (default `RESULTS`): {"benchmark", "description",
    "rows": [...]}.

    Raises:
        FileNotFoundError: there is none.
    """
    with open(os.path.join(results_dir or RESULTS, f"{benchmark}.json"), encoding="utf-8") as f:
        return json.load(f)


def results_json(results):
    """`results` as JSON text, one field a line, except objects of plain values (a row's errors per task, a length
    bucket's accuracies), which keep to one line."""
    text = json.dumps(results, indent=1)
    # JSON strings hold no raw newline, so a run of lines between braces without brackets is one flat object.
    return re.sub(r"\{\n\s+([^{}\[\]]*?)\n\s+\}", lambda m: "{" + re.sub(r",\n\s+", ", ", m.group(1)) + "}",
                  text) + "\n"


def record(benchmark, rows, results_dir=None, description=""):
    """Appends `rows` (dicts, each with `provenance`'s fields) to `<results_dir>/<benchmark>.json` (default
    `RESULTS`), written whole (a temporary name renamed into place), the rows already there kept; its path.
    Into the repository only from committed code (`require_committed`)."""
    from t2t_relpos import files  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    results_dir = results_dir or RESULTS
    require_committed("--record", results_dir)
    path = os.path.join(results_dir, f"{benchmark}.json")
    try:
        results = read_results(benchmark, results_dir)
    except FileNotFoundError:
        results = {"benchmark": benchmark, "description": description, "rows": []}
    results["rows"] += list(rows)
    os.makedirs(results_dir, exist_ok=True)
    with files.atomic_write(path, what="the results file") as f:
        f.write(results_json(results))
    print(f"Recorded {len(rows)} row(s) in {shown_path(path)}")
    return path


def _clock(fn, number, clocks=(time.perf_counter,)):
    """Seconds taken by `number` calls of `fn`, on each of `clocks` (a tuple, one figure per clock)."""
    start = [clock() for clock in clocks]
    for _ in range(number):
        fn()
    return tuple(clock() - begun for clock, begun in zip(clocks, start))


def time_interleaved(fns, reps=5, warmup=1, min_sample_s=0.05):
    """Median seconds per call of each callable in `fns` (a dict name -> callable).

    Each callable is warmed up, then a repetition times every callable once, in an order rotated from one
    repetition to the next, so drifting load (thermal, other processes) hits all of them alike. A sample
    runs a callable often enough to last about `min_sample_s`, so short calls are not lost in timer noise.
    Callables must block until their work is done.
    """
    return time_interleaved_clocks(fns, {"wall": time.perf_counter}, reps, warmup, min_sample_s)["wall"]


def time_interleaved_clocks(fns, clocks, reps=5, warmup=1, min_sample_s=0.05):
    """`time_interleaved` read on several clocks at once: {clock name: {callable name: median seconds}}.

    `clocks` maps names to clock functions, e.g. {"wall": time.perf_counter, "cpu": time.process_time}.
    The process's CPU time (all its threads) counts the work done whatever else the machine runs, so on a
    shared machine it shows what wall time hides under other processes' load. Samples are sized on wall time.
    """
    samples = interleaved_samples(fns, clocks, reps, warmup, min_sample_s)
    return {clock: {name: statistics.median(values) for name, values in by_name.items()}
            for clock, by_name in samples.items()}


def interleaved_samples(fns, clocks, reps=5, warmup=1, min_sample_s=0.05):
    """The samples behind `time_interleaved_clocks`: {clock: {callable: [seconds per call, one per rep]}}.

    Sample i of every callable comes from repetition i, so samples of the same index were taken minutes
    apart at most and can be paired (`paired_ratios`).
    """
    names, clock_names = list(fns), list(clocks)
    clock_fns = tuple(clocks.values())
    numbers = {}
    for name in names:
        for _ in range(warmup):
            fns[name]()
        once = _clock(fns[name], 1)[0]
        numbers[name] = max(1, math.ceil(min_sample_s / once)) if once > 0 else 1
    samples = {clock: {name: [] for name in names} for clock in clock_names}
    for rep in range(reps):
        shift = rep % len(names)
        for name in names[shift:] + names[:shift]:
            for clock, seconds in zip(clock_names, _clock(fns[name], numbers[name], clock_fns)):
                samples[clock][name].append(seconds / numbers[name])
    return samples


def paired_ratios(numerators, denominators):
    """Median and interquartile range of the per-repetition ratios of two sample lists (same length).

    A ratio of two medians mixes repetitions that ran under different conditions; pairing each repetition's
    two samples cancels what drifted between repetitions, and the spread shows what did not.
    """
    ratios = sorted(n / d for n, d in zip(numerators, denominators))
    if len(ratios) < 2:
        return {"median": ratios[0], "low": ratios[0], "high": ratios[0]}
    low, _, high = statistics.quantiles(ratios, n=4, method="inclusive")
    return {"median": statistics.median(ratios), "low": low, "high": high}


def peak_memory_bytes(fn, device="CPU:0"):
    """Peak bytes allocated on `device` by one call of `fn`, above what was allocated before it.

    Uses TensorFlow's allocator statistics (`tf.config.experimental.get_memory_info`). On CPU these exist
    only with oneDNN's allocator, TensorFlow's default on x86 (not with `TF_ENABLE_ONEDNN_OPTS=0`).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    try:
        tf.config.experimental.reset_memory_stats(device)
    except ValueError as error:
        raise RuntimeError(f"TensorFlow keeps no allocator statistics for {device} here "
                           f"(TF_ENABLE_ONEDNN_OPTS={os.environ.get('TF_ENABLE_ONEDNN_OPTS', 'unset')})"
                           ) from error
    before = tf.config.experimental.get_memory_info(device)["current"]
    result = fn()
    peak = tf.config.experimental.get_memory_info(device)["peak"]
    del result
    return peak - before


def emit_result(obj):
    """Worker side of `run_worker`: print a JSON result on stdout where the parent will find it."""
    print(_RESULT_PREFIX + json.dumps(obj), flush=True)


def run_worker(args, timeout=None):
    """Run `python <args>` in a fresh process; its `emit_result` object, or a dict with "error" and "returncode".

    A fresh process per measurement keeps allocations, caches and threads of one configuration from
    colouring the next, and a worker killed for memory does not take the parent down.
    """
    proc = subprocess.run([sys.executable] + list(args), capture_output=True, text=True, timeout=timeout,
                          check=False)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(_RESULT_PREFIX):
            return json.loads(line[len(_RESULT_PREFIX):])
    tail = "\n".join(proc.stderr.strip().splitlines()[-5:])
    return {"error": f"worker exited with {proc.returncode}: {tail}", "returncode": proc.returncode}


def run_cli(module, *args, log, threads=0):
    """Runs a package CLI (`t2t_relpos.cli.<module>`) as `python -c`, appending its output to `log`; its stdout,
    then its stderr (where the tools report scores and progress: the decoder's stdout carries only outputs).

    `threads` > 0 limits TensorFlow's intra- and inter-op thread pools (0: one thread per core).

    Raises:
        RuntimeError: the tool failed; the message points at `log`.
    """
    return run_python("-c", f"import t2t_relpos.cli.{module} as m; m.run()", *args, log=log, threads=threads,
                      name=module)


_CHILDREN = set()  # The tools `run_python` is running now.
_CHILDREN_LOCK = threading.RLock()  # Reentrant: the SIGTERM handler may run while its own thread holds it.
_STOPPING = threading.Event()  # Set by a termination: no new tool starts.


def stop_tools_on_termination():
    """Makes a SIGTERM to this (main-thread) script reach the tools it runs, as a Ctrl-C reaching the whole process
    group does: each running tool gets the SIGTERM (a trainer saves a checkpoint of its step and stops), no new
    one starts, and the script ends with status 143 once they have stopped. Without it a killed script's trainers
    train on alone, and the same command run again finds their directories locked."""
    import signal  # pylint: disable=import-outside-toplevel

    def terminate(signum, frame):  # pylint: disable=unused-argument
        _STOPPING.set()
        with _CHILDREN_LOCK:
            for child in _CHILDREN:
                child.send_signal(signum)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)


def run_python(*argv, log, threads=0, name="python"):
    """Runs this Python with `argv` (a script and its arguments, or `-c code ...`) as `run_cli` runs a CLI."""
    env = dict(os.environ)
    if threads:
        env.update(TF_NUM_INTRAOP_THREADS=str(threads), TF_NUM_INTEROP_THREADS=str(threads))
    with _CHILDREN_LOCK:
        if _STOPPING.is_set():
            raise RuntimeError(f"{name} not started: this script was asked to stop")
        proc = subprocess.Popen([sys.executable, *argv], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env=env)
        _CHILDREN.add(proc)
    output = ""
    try:
        try:
            output = "".join(proc.communicate())
        except BaseException:  # A termination: the tool got it too; wait for it to stop (a trainer saves first).
            output = "".join(proc.communicate())
            raise
    finally:
        with _CHILDREN_LOCK:
            _CHILDREN.discard(proc)
        with open(log, "a", encoding="utf-8") as f:
            f.write(output)
    if proc.returncode != 0:
        raise RuntimeError(f"{name} failed ({proc.returncode}); see {log}")
    return output


def event_scalars(folder, tag):
    """{step: value} of the scalar `tag` in the TensorBoard event files of `folder` (empty if there are none).

    Trainers write these as they go, so they show a run that is still training; a file being written may end
    in a partial record, and what comes before it is read.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel  # Only for reading the event files.

    values = {}
    for path in sorted(tf.io.gfile.glob(os.path.join(folder, "events.out.tfevents.*"))):
        try:
            for event in tf.compat.v1.train.summary_iterator(path):
                for value in event.summary.value:
                    if value.tag == tag:
                        values[int(event.step)] = float(tf.make_ndarray(value.tensor))
        except tf.errors.DataLossError:
            pass
    return values


def run_seconds(run_dir):
    """A run's training seconds so far, over all its invocations (file `train_seconds` in its directory)."""
    path = os.path.join(run_dir, "train_seconds")
    if not os.path.exists(path):
        return 0.0
    with open(path, encoding="utf-8") as f:
        return float(f.read())


def write_run_seconds(run_dir, total):
    path = os.path.join(run_dir, "train_seconds")
    os.makedirs(run_dir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        f.write(f"{total:.3f}\n")
    os.replace(path + ".tmp", path)  # A kill mid-write leaves the old total, never a truncated one.


class RunClock:
    """Adds the wall time spent inside the block to a run's `train_seconds` as it passes, every `every` seconds
    and at the end, so that a run trained over several invocations reports its total, and an invocation killed
    with its machine (no clean-up runs) loses at most `every` seconds of the count. `total` is the run's total
    once the block has ended."""

    def __init__(self, run_dir, every=60.0):
        self.run_dir, self.every, self.total = run_dir, every, None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._tick, daemon=True)
        self._earlier = self._began = None

    def __enter__(self):
        self._earlier, self._began = run_seconds(self.run_dir), time.perf_counter()
        self._thread.start()
        return self

    def _tick(self):
        while not self._stop.wait(self.every):
            self._record()

    def _record(self):
        total = self._earlier + time.perf_counter() - self._began
        write_run_seconds(self.run_dir, total)
        return total

    def __exit__(self, *exc_info):
        self._stop.set()
        self._thread.join()  # No tick writes after the final total.
        self.total = self._record()
        return False


def replace_section(name, text, path=None):
    """Puts `text` between `<!-- BEGIN name -->` and `<!-- END name -->` in `path` (default `RUN_LOG`), in place of
    what was there (the section appended if missing), with the commit it ran on below it. Into the repository only
    from committed code (`require_committed`)."""
    path = path or RUN_LOG
    version = require_committed("--write", path)
    begin, end = f"<!-- BEGIN {name} -->", f"<!-- END {name} -->"
    block = f"{begin}\n{text.strip()}\n\nRan on commit {version}.\n{end}"
    content = ""
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            content = f.read()
    pattern = re.compile(re.escape(begin) + r".*?" + re.escape(end), re.DOTALL)
    if pattern.search(content):
        content = pattern.sub(lambda _: block, content, count=1)
    else:
        content = content.rstrip("\n") + ("\n\n" if content.strip() else "") + block
    with open(path, "w", encoding="utf-8") as f:
        f.write(content.rstrip("\n") + "\n")
    print(f"Wrote section {name} to {shown_path(path)}")


def spread(values, digits=2):
    """"mean +- std (n seeds)" of a list of numbers (the sample standard deviation; a lone value is shown alone)."""
    if len(values) == 1:
        return f"{values[0]:.{digits}f} (1 seed)"
    mean = sum(values) / len(values)
    std = (sum((v - mean) ** 2 for v in values) / (len(values) - 1)) ** 0.5
    return f"{mean:.{digits}f} +- {std:.{digits}f} ({len(values)} seeds)"


def markdown_table(headers, rows, align=None):
    """A GitHub markdown table; `align` is a string of "l"/"r" per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(headers) - 1)
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row):
        return "| " + " | ".join(c.ljust(w) if a == "l" else c.rjust(w)
                                 for c, w, a in zip(row, widths, align)) + " |"

    rule = "|" + "|".join(("-" * (w + 1) + ":") if a == "r" else (":" + "-" * (w + 1))
                          for w, a in zip(widths, align)) + "|"
    return "\n".join([line(cells[0]), rule] + [line(row) for row in cells[1:]])
