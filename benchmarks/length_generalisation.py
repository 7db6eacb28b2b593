"""Length generalisation, the Universal Transformer paper's protocol (its Table 4), through the real CLIs.

    .venv/bin/python benchmarks/length_generalisation.py [--tasks identity,reverse,addition]
        [--models transformer,transformer_rel,...] [--train_steps 3000[,task:N...]] [--num_samples 200] [--report_only]
        [--seeds 1,2[;model:1,2,3]] [--offsets none|random|random:400|shared:400|step] [--offsets_warmup shared:40@6000]
        [--hparams [model:]overrides[;...]] [--write] [--record]

Each (task, model) pair trains with `t2t-relpos-trainer` on decimal strings of length <= 40
(`algorithmic_<task>_decimal40`) for the same number of steps, then `t2t-relpos-decoder --decode_split=eval`
greedily decodes the first `--num_samples` evaluation strings (lengths 1-400, uniform) and reports char and
sequence accuracy. `--offsets` trains with position offsets (`position_start_index`, the paper's randomized
offsets): "random" is tensor2tensor's (an offset in [0, the batch's length) drawn anew for the encoder, the
decoder and every recurrent step), "random:N" the same in [0, N), "shared:N" one offset in [0, N) per batch for
all of them, "step" tensor2tensor's step-wise offsets (Universal Transformers only). Relative models do not read
offsets and train as without them. `--offsets_warmup OFFSETS@STEPS` trains the first STEPS steps with OFFSETS and
the rest with `--offsets` (a curriculum over the offsets' range; ours, not the paper's). Beside the decoded
accuracy, each finished pair's teacher-forced accuracy by length is measured (`benchmarks/teacher_forced.py`,
tensor2tensor's evaluation metric). `--seeds` trains each pair with each seed; the table then gives every seed's
row and the mean +- std over seeds. Runs live in `--work_dir` (kept: a finished pair's figures are reused when
its steps and samples match, and kept per steps and samples, `RUN/results/steps20000_samples100/`, so a run
trained on to more steps keeps those of the fewer; an unfinished one resumes from its checkpoint). `--jobs 2`
runs two pairs at once, each with TensorFlow on one thread (a core each on a two-core machine). `--report_only`
trains nothing: it tabulates the pairs finished so far and names the others with their latest checkpoint's
step (long runs span sessions). The paper's figures (Transformer and UT, trained far longer at base size) are
printed beside ours. `--record` appends every finished pair's accuracy by length bucket to
benchmarks/results/length_generalisation.json and its training curve (training accuracy by step, means over
windows of 500 steps) to length_generalisation_curves.json, which `benchmarks/plots.py` draws; `--record=curves`
appends the curves alone, for pairs whose accuracy is recorded already.
"""

import argparse
import concurrent.futures
import json
import os
import re
import shutil
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position
from t2t_relpos import files  # noqa: E402  pylint: disable=wrong-import-position

MODELS = {  # name -> hparams set (the CPU sets: 2+2 layers or 8 recurrent steps, width 64; the UTs pre-norm)
    "transformer": "transformer_cpu",
    "transformer_rel": "transformer_cpu_rel",
    "universal_transformer": "universal_transformer_cpu",
    "universal_transformer_rel": "universal_transformer_cpu_rel",
    "adaptive_universal_transformer": "adaptive_universal_transformer_cpu",
    "adaptive_universal_transformer_rel": "adaptive_universal_transformer_cpu_rel",
}
TASKS = {"identity": "copy", "reverse": "reverse", "addition": "addition"}
# Table 4 of Dehghani et al. (2018): char / seq accuracy at length 400 after training on length 40.
PAPER = {
    "transformer": {"identity": (0.53, 0.03), "reverse": (0.13, 0.06), "addition": (0.07, 0.0)},
    "universal_transformer": {"identity": (0.91, 0.35), "reverse": (0.96, 0.46), "addition": (0.34, 0.02)},
}
ACCURACY = re.compile(r"^char_accuracy = ([0-9.]+)\s+seq_accuracy = ([0-9.]+)", re.M)
PONDER = re.compile(r"encoder_ponder_time ([0-9.]+)")
# The trainer's progress line: teacher-forced token accuracy of the step's batch (training lengths, <= 40).
TRAIN_ACCURACY = re.compile(r"^step \d+/\d+\s+loss [0-9.e+-]+\s+accuracy ([0-9.]+)", re.M)
# The decoder's accuracy by reference length: "  reference length  11-40 char_accuracy = 0.14  seq_accuracy = ..."
BUCKET = re.compile(r"^\s+reference length\s+(\d+-\d+)\s+char_accuracy = ([0-9.]+)\s+seq_accuracy = ([0-9.]+)", re.M)
# Buckets shown beside the overall figures: inside the training lengths, and the longest.
SHOWN_BUCKETS = ("11-40", "201-400")
CURVE_WINDOW = 500  # Steps over which a recorded training curve's points average the logged accuracies.
# Teacher-forced accuracy by length (tensor2tensor's evaluation metric) of a finished pair's decoded strings.
TEACHER_FORCED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "teacher_forced.py")
RESULTS_DESCRIPTION = (
    "Length generalisation (Dehghani et al. 2018, Table 4 protocol): trained on decimal strings of length <= 40, "
    "the first num_samples evaluation strings (length 1-400) decoded greedily; char and seq accuracy over all of "
    "them and by reference-length bucket. Recorded by `benchmarks/length_generalisation.py --record`; rows copied "
    "from the tables of benchmarks/README.md say `code as of <date>`, and have only the buckets those tables gave.")

CURVES_DESCRIPTION = (
    "Training curves of the length-generalisation runs (trained on decimal strings of length <= 40): per finished "
    "pair and seed, train_accuracy_by_step maps a step S to the mean training-batch token accuracy of the steps "
    "the trainer logged in (S - curve_window, S]; a curriculum's (offsets_warmup) from step 0, its warm-up included. "
    "Recorded by `benchmarks/length_generalisation.py --record`; drawn by benchmarks/plots.py.")


def length_buckets(text):
    """{"11-40": (char accuracy, seq accuracy), ...} from the last accuracy-by-length report in `text`."""
    buckets = {}
    for name, char, seq in BUCKET.findall(text):
        if name in buckets and name == next(iter(buckets)):  # A later report starts: keep only the last one.
            buckets = {}
        buckets[name] = (float(char), float(seq))
    return buckets


OFFSETS = {  # --offsets -> (hparams overrides, the run name's suffix); N fills in the range.
    "none": ("", ""),
    "random": ("position_start_index=random", "_offsets_random"),
    "random:N": ("position_start_index=random,max_position_offset={n}", "_offsets_random{n}"),
    "shared:N": ("position_start_index=random,position_offset_shared=true,max_position_offset={n}",
                 "_offsets_shared{n}"),
    "step": ("position_start_index=step", "_offsets_step"),
}


def offsets_setting(text, model):
    """(hparams overrides, run-name suffix) of `--offsets text` for `model` (nothing for relative models)."""
    kind, _, n = text.partition(":")
    key = f"{kind}:N" if n else kind
    if key not in OFFSETS or (n and not n.isdigit()):
        raise SystemExit(f"error: --offsets={text}: one of none, random, random:N, shared:N, step")
    if model.endswith("_rel") or kind == "none":
        return "", ""
    if kind == "step" and not model.startswith(("universal", "adaptive")):
        raise SystemExit(f"error: --offsets=step is for Universal Transformers, not {model}")
    overrides, suffix = OFFSETS[key]
    return overrides.format(n=n), suffix.format(n=n)


def warmup_of(model, args):
    """(args of the pair's warm-up run, its steps), or None without `--offsets_warmup` or for a relative model.

    `--offsets_warmup OFFSETS@STEPS` (e.g. `shared:40@6000`, or `none@12000`: first without offsets) trains the
    first STEPS steps with OFFSETS: the run of `--offsets OFFSETS --train_steps STEPS`, reused where it exists.
    The pair's own run continues a copy of it at step STEPS with `--offsets`: a curriculum over the offsets'
    range (ours; the paper draws from one range).
    """
    text = getattr(args, "offsets_warmup", None)
    if not text:
        return None
    offsets, at, steps = text.partition("@")
    if not at or not steps.isdigit() or int(steps) < 1 or getattr(args, "offsets", "none") == "none":
        raise SystemExit(f"error: --offsets_warmup={text}: give OFFSETS@STEPS (e.g. shared:40@6000) beside "
                         "--offsets, the range it widens to")
    offsets_setting(offsets, model)  # A bad OFFSETS is an error.
    if not offsets_setting(args.offsets, model)[0]:
        return None  # The pair reads no offsets (a relative model): nothing to warm up.
    return argparse.Namespace(**{**vars(args), "offsets": offsets, "offsets_warmup": None}), int(steps)


def _entries(text, separator, names):
    """`text` split at `separator` into plain entries and {name: [values]} of its `name:value` entries, `name`
    one of `names` (`--hparams` and `--train_steps` both take entries for one model or task beside plain ones)."""
    plain, named = [], {}
    for entry in filter(None, str(text).split(separator)):
        name, colon, value = entry.partition(":")
        if colon and name in names:
            named.setdefault(name, []).append(value)
        else:
            plain.append(entry)
    return plain, named


def hparams_for(model, args):
    """`model`'s share of `--hparams`: entries `model:overrides` (`;` between them) are that model's, the rest
    every model's, so one invocation can train, say, a pre-norm Transformer beside the (pre-norm) UT."""
    shared, own = _entries(getattr(args, "hparams", ""), ";", MODELS)
    return ",".join(shared + own.get(model, []))


def overrides_of(model, args):
    """The pair's hparams overrides: its position offsets' and its `--hparams`."""
    return ",".join(o for o in (offsets_setting(getattr(args, "offsets", "none"), model)[0],
                                hparams_for(model, args)) if o)


def run_name(task, model, args, seed=None):
    """The pair's run directory name: seed 1 without offsets or overrides keeps the name of the runs before seeds."""
    seed = getattr(args, "seed", 1) if seed is None else seed
    extra = hparams_for(model, args)
    offsets = offsets_setting(getattr(args, "offsets", "none"), model)[1]
    warmup = warmup_of(model, args)
    if warmup:  # e.g. _offsets_shared40_to_shared400_at6000
        offsets = ((offsets_setting(warmup[0].offsets, model)[1] or "_offsets_none") + "_to"
                   + offsets.replace("_offsets", "") + f"_at{warmup[1]}")
    return (f"{task}_{model}" + offsets
            + ("_" + re.sub(r"[^A-Za-z0-9._]+", "-", extra) if extra else "") + (f"_s{seed}" if seed != 1 else ""))


def seeds_for(model, args):
    """`model`'s seeds: `--seeds` is comma-separated seeds, or those with `model:seeds` entries (`;` between
    them) for the models that get others, e.g. `1,2;adaptive_universal_transformer_rel:1,2,3,4`."""
    plain, own = _entries(args.seeds, ";", MODELS)
    text = own[model][-1] if model in own else ",".join(plain) or "1"
    try:
        return [int(seed) for seed in text.split(",")]
    except ValueError:
        raise SystemExit(f"error: --seeds={args.seeds}: give comma-separated integers, or those with "
                         f"model:seeds entries (`;` between them)") from None


def with_seed(args, seed):
    """`args` for one seed of the run (the functions below read `args.seed`)."""
    return argparse.Namespace(**{**vars(args), "seed": seed})


def _keys(key):
    """(task, model, seed) of a results key: (task, model) is seed 1."""
    return (*key, 1) if len(key) == 2 else tuple(key)


def steps_for(task, args):
    """`task`'s training steps: `--train_steps` is N, or N with `task:N` entries for the tasks that need longer
    (e.g. `2000,reverse:6000`: every model learns copy by 2000 steps, reverse takes longer)."""
    plain, per_task = _entries(args.train_steps, ",", TASKS)
    if not all(steps.isdigit() and int(steps) >= 1 for steps in plain + sum(per_task.values(), [])):
        raise SystemExit(f"error: --train_steps={args.train_steps}: give N, or N with task:N entries "
                         f"(tasks: {', '.join(TASKS)})")
    steps = per_task.get(task, plain)
    if not steps:
        raise SystemExit(f"error: --train_steps={args.train_steps} gives no steps for {task}")
    return int(steps[-1])


def finished(task, model, args):
    """The saved result of a pair trained and decoded with these `--train_steps` and `--num_samples`, or None."""
    saved = _saved(task, model, args)
    return tuple(saved["result"]) if saved else None


def _setting_dir(task, model, args, setting=None):
    """Where the pair's figures at these `--train_steps` and `--num_samples` (or `setting`) are kept
    (`RUN/results/steps20000_samples100`): a run trained on to more steps keeps its earlier figures beside the new."""
    setting = setting or _setting(task, args)
    return os.path.join(args.work_dir, run_name(task, model, args), "results",
                        f"steps{setting['train_steps']}_samples{setting['num_samples']}")


def _saved(task, model, args):
    """The pair's saved figures at these steps and samples ({"setting", "result", "buckets", "train_accuracy"}),
    or None. A run finished before the figures were kept per setting has one `RUN/result.json`, of its last
    setting, without "buckets" and "train_accuracy" (the last in the pair's log are its)."""
    for saved in (os.path.join(_setting_dir(task, model, args), "result.json"),
                  os.path.join(args.work_dir, run_name(task, model, args), "result.json")):
        previous = json.loads(_read(saved) or "null")
        if previous and previous["setting"] == _setting(task, args):
            return previous
    return None


def _keep_older_result(task, model, args):
    """Before a run finished without per-setting figures (one `RUN/result.json`) trains on: its figures, with the
    decoded accuracy by length and the training accuracy that are the last in the pair's log now (training on
    appends newer ones) and its teacher-forced cache, move to a setting directory of their own."""
    run_dir = os.path.join(args.work_dir, run_name(task, model, args))
    older = json.loads(_read(os.path.join(run_dir, "result.json")) or "null")
    if not older:
        return
    target = _setting_dir(task, model, args, older["setting"])
    os.makedirs(target, exist_ok=True)
    forced = os.path.join(run_dir, f"teacher_forced_{older['setting']['num_samples']}.txt")
    if f"/ckpt-{older['setting']['train_steps']}," in _read(forced).partition("\n")[0]:
        os.replace(forced, os.path.join(target, "teacher_forced.txt"))
    log = _log_of(task, model, args)
    _save(os.path.join(target, "result.json"), {
        **older, "buckets": length_buckets(log), "train_accuracy": _last_train_accuracy(log)})
    os.remove(os.path.join(run_dir, "result.json"))


def _setting(task, args):
    """What a saved result must have been made with to be reused."""
    return {"train_steps": steps_for(task, args), "num_samples": args.num_samples}


def checkpoint_step(task, model, args):
    """The step of an unfinished pair's latest checkpoint (0 if none): how far a resumable run has got."""
    found = re.search(r'model_checkpoint_path: "ckpt-(\d+)"', _read(os.path.join(
        args.work_dir, run_name(task, model, args), "checkpoint")))
    return int(found.group(1)) if found else 0


def refuse_a_run_past_its_steps(task, model, args):
    """One `error:` line if the pair's run has trained past `--train_steps` without figures kept at those steps:
    the trainer would stop at once and the decoder read the later checkpoint, filing its figures as these."""
    step = checkpoint_step(task, model, args)
    if step > steps_for(task, args) and finished(task, model, args) is None:
        raise SystemExit(f"error: {_pair_text((task, model, getattr(args, 'seed', 1)))} has trained to step {step}, "
                         f"past --train_steps={steps_for(task, args)}, and has no figures kept at that step: leave "
                         f"it out, or give it {step} steps or more")


def _pair_text(key):
    """A pair as the report names it: "addition / transformer seed 2"."""
    task, model, seed = _keys(key)
    return f"{TASKS[task]} / {model} seed {seed}"


def run_one(task, model, args):
    """Trains and decodes one pair; returns (char accuracy, seq accuracy, seconds, ponder time or None)."""
    run_dir = os.path.join(args.work_dir, run_name(task, model, args))
    log = run_dir + ".log"
    setting_dir = _setting_dir(task, model, args)
    previous = finished(task, model, args)
    if previous is not None:
        return previous
    threads = 1 if args.jobs > 1 else 0
    _keep_older_result(task, model, args)
    start_after_warmup(task, model, args, run_dir, threads)
    with common.RunClock(run_dir) as clock:
        trained = _train(task, model, args, run_dir, steps_for(task, args), threads)
    began = time.perf_counter()
    os.makedirs(setting_dir, exist_ok=True)
    decoded = common.run_cli(
        "decoder", f"--output_dir={run_dir}", "--decode_split=eval",
        "--decode_to_file=" + os.path.join(setting_dir, "decoded_eval.txt"),
        f"--decode_hparams=beam_size=1,batch_size=50,num_samples={args.num_samples}", log=log, threads=threads)
    char, seq = (float(v) for v in ACCURACY.search(decoded).groups())
    ponder = PONDER.findall(trained)
    result = (char, seq, clock.total + time.perf_counter() - began, float(ponder[-1]) if ponder else None)
    _save(os.path.join(setting_dir, "result.json"), {
        "setting": _setting(task, args), "result": result, "buckets": length_buckets(decoded),
        "train_accuracy": _last_train_accuracy(_read(log))})
    teacher_forced(task, model, args)
    return result


def _train(task, model, args, run_dir, steps, threads):
    """Trains (or resumes) the pair's run in `run_dir` to `steps`; the trainer's output.

    Checkpoints every 1000 steps: a run stopped midway resumes (raising --train_steps continues it too)."""
    overrides = overrides_of(model, args)
    return common.run_cli(
        "trainer", f"--problem=algorithmic_{task}_decimal40", f"--hparams_set={MODELS[model]}",
        *([f"--hparams={overrides}"] if overrides else []),
        f"--output_dir={run_dir}", f"--train_steps={steps}", "--eval_steps=4",
        f"--checkpoint_every={min(1000, steps)}", "--log_every=500",
        f"--seed={getattr(args, 'seed', 1)}", log=run_dir + ".log", threads=threads)


# The hparams an --offsets setting decides: a warm-up's are replaced whole by the continuation's.
OFFSET_HPARAMS = ("position_start_index", "max_position_offset", "position_offset_shared")


def start_after_warmup(task, model, args, run_dir, threads):
    """Before a pair's first step with `--offsets_warmup`: its warm-up run, trained to its steps (or found
    there), is copied at that step into `run_dir` (weights, Adam state, step), with `--offsets`'s hparams in
    its stored hparams.json and its training time so far (prorated to that step) carried over."""
    warmup = warmup_of(model, args)
    if warmup is None or os.path.exists(os.path.join(run_dir, "checkpoint")):
        return
    first, steps = warmup
    first_dir = os.path.join(args.work_dir, run_name(task, model, first))
    prefix = f"ckpt-{steps}"
    if not os.path.exists(os.path.join(first_dir, prefix + ".index")):
        with common.RunClock(first_dir):
            _train(task, model, first, first_dir, steps, threads)
    os.makedirs(run_dir, exist_ok=True)
    for name in os.listdir(first_dir):
        if name.startswith(prefix + "."):
            shutil.copy(os.path.join(first_dir, name), run_dir)
    with open(os.path.join(first_dir, "hparams.json"), encoding="utf-8") as f:
        stored = json.load(f)
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel  # Only here: the hparams parser.

    offsets = registry.hparams(MODELS[model]).parse(offsets_setting(args.offsets, model)[0])
    stored["hparams"].update({name: offsets.get(name) for name in OFFSET_HPARAMS})
    with open(os.path.join(run_dir, "hparams.json"), "w", encoding="utf-8") as f:
        json.dump(stored, f, indent=1)
    seconds = common.run_seconds(first_dir) * steps / max(steps, checkpoint_step(task, model, first))
    common.write_run_seconds(run_dir, seconds)
    with open(os.path.join(run_dir, "checkpoint"), "w", encoding="utf-8") as f:  # Last: the copy is whole.
        f.write(f'model_checkpoint_path: "{prefix}"\nall_model_checkpoint_paths: "{prefix}"\n')


def teacher_forced(task, model, args):
    """{"201-400": (char, seq), ...}: the finished pair's teacher-forced accuracy by reference length on the
    strings it decoded (`benchmarks/teacher_forced.py`: each symbol predicted from the true ones before it, as
    tensor2tensor's trainer evaluates), measured once, at the checkpoint of these `--train_steps` (so a run
    trained on since keeps its figures at this step count); {} for an unfinished pair or one whose checkpoint of
    that step is gone."""
    if finished(task, model, args) is None:
        return {}
    checkpoint = os.path.join(args.work_dir, run_name(task, model, args), f"ckpt-{steps_for(task, args)}")
    path = _teacher_forced_path(task, model, args)
    cached = _read(path)
    if (f"/ckpt-{steps_for(task, args)}," not in cached.partition("\n")[0]
            or (task == "addition" and "by digit kind:" not in cached)):
        if os.path.exists(path):
            os.remove(path)  # Measured at another checkpoint (before figures were kept per setting), or without kinds.
        if not os.path.exists(checkpoint + ".index"):
            return {}
        common.run_python(TEACHER_FORCED, f"--output_dir={os.path.dirname(checkpoint)}",
                          f"--checkpoint_path={checkpoint}", "--split=eval", f"--num_samples={args.num_samples}",
                          *(["--digit_kinds"] if task == "addition" else []),
                          log=path, threads=1 if args.jobs > 1 else 0, name="teacher_forced.py")
    return length_buckets(_read(path))


def _teacher_forced_path(task, model, args):
    """Where a pair's teacher-forced figures are cached (teacher_forced.py's output): beside its figures at these
    steps and samples, or, for a run finished before those were kept per setting, in the run's directory."""
    if os.path.exists(os.path.join(_setting_dir(task, model, args), "result.json")):
        return os.path.join(_setting_dir(task, model, args), "teacher_forced.txt")
    return os.path.join(args.work_dir, run_name(task, model, args), f"teacher_forced_{args.num_samples}.txt")


# teacher_forced.py --digit_kinds: a bucket's accuracy by what the sum's digits need; the kinds the report shows.
DIGIT_KINDS = re.compile(r"^\s+reference length\s+(\d+-\d+)\s+(both operands .*)$", re.M)
DIGIT_KIND = re.compile(r"(both operands|one operand|final carry) ([0-9.]+)")
SHOWN_KINDS = ("both operands", "one operand")


def digit_kinds(task, model, args):
    """{"201-400": {"both operands": 0.10, "one operand": 0.99, ...}, ...}: a finished addition pair's
    teacher-forced accuracy by reference length and by the operands each digit of the sum needs."""
    teacher_forced(task, model, args)  # Measures it where it is not cached yet.
    text = _read(_teacher_forced_path(task, model, args))
    return {bucket: {kind: float(value) for kind, value in DIGIT_KIND.findall(cells)}
            for bucket, cells in DIGIT_KINDS.findall(text)}


def digit_kind_table(results, args):
    """Per finished addition pair, teacher-forced accuracy of the digits that need both operands and of those
    that need one, inside the training lengths and at the longest (a table), or "" without addition pairs."""
    rows = []
    for key in results:
        task, model, seed = _keys(key)
        if task != "addition":
            continue
        kinds = digit_kinds(task, model, with_seed(args, seed))
        if kinds:
            rows.append([TASKS[task], model, str(seed)] + [
                f"{kinds[b][k]:.2f}" if k in kinds.get(b, {}) else ""
                for b in SHOWN_BUCKETS for k in SHOWN_KINDS])
    if not rows:
        return ""
    return common.markdown_table(["task", "model", "seed"] + [f"{k}, {b}" for b in SHOWN_BUCKETS for k in SHOWN_KINDS],
                                 rows, align="llr" + "r" * len(SHOWN_BUCKETS) * len(SHOWN_KINDS))


def _save(path, figures):
    """Writes `figures` as JSON to `path` whole or not at all (a kill mid-write leaves no half a result to reuse)."""
    with files.atomic_write(path, what="the pair's result") as f:
        json.dump(figures, f)


def _last_train_accuracy(log):
    """The last training batch's accuracy in a pair's log (a float), or None before the first progress line."""
    found = TRAIN_ACCURACY.findall(log)
    return float(found[-1]) if found else None


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def _log_of(task, model, args):
    return _read(os.path.join(args.work_dir, run_name(task, model, args) + ".log"))


def _buckets_of(task, model, args):
    """The finished pair's decoded accuracy by reference length, at these steps (from the pair's log for a run
    finished before figures were kept per setting)."""
    saved = _saved(task, model, args) or {}
    if "buckets" in saved:
        return {name: tuple(values) for name, values in saved["buckets"].items()}
    return length_buckets(_log_of(task, model, args))


def _training_accuracy(task, model, args):
    """The last training batch's teacher-forced accuracy (lengths <= 40) at these steps: has the model learned the
    task? (An older run's log gives its latest.)"""
    saved = _saved(task, model, args) or {}
    if saved.get("train_accuracy") is not None:
        return f"{saved['train_accuracy']:.2f}"
    found = _last_train_accuracy(_log_of(task, model, args))
    return "" if found is None else f"{found:.2f}"


def training_curve(task, model, args):
    """{step: training-batch token accuracy} from the trainer's TensorBoard events, written while it trains.

    The progress lines reach the pair's log only when the trainer ends; the events show a run still training.
    """
    curve = common.event_scalars(os.path.join(args.work_dir, run_name(task, model, args), "train"), "accuracy")
    warmup = warmup_of(model, args)
    if warmup:  # The steps before the copy are the warm-up run's.
        before = training_curve(task, model, warmup[0])
        curve = {**{step: v for step, v in before.items() if step <= warmup[1]}, **curve}
    return curve


def curve_table(pairs, args, steps):
    """Training accuracy at the given steps, one row per pair and seed (empty where a run has not got there)."""
    rows = []
    for key in pairs:
        task, model, seed = _keys(key)
        curve = training_curve(task, model, with_seed(args, seed))
        rows.append([TASKS[task], model, str(seed)] + [f"{curve[s]:.2f}" if s in curve else "" for s in steps])
    return common.markdown_table(["task", "model", "seed", *(f"step {s}" for s in steps)], rows,
                                 align="llr" + "r" * len(steps))


def seed_summary(results, args):
    """Per pair, the mean +- std over seeds of char accuracy at 201-400 and overall (a table), or "" for 1 seed."""
    by_pair = {}
    for key, (char, seq, _, _) in results.items():
        task, model, seed = _keys(key)
        seed_args = with_seed(args, seed)
        far = _buckets_of(task, model, seed_args).get(SHOWN_BUCKETS[-1])
        forced = teacher_forced(task, model, seed_args).get(SHOWN_BUCKETS[-1])
        by_pair.setdefault((task, model), []).append((seed, char, seq, far, forced))
    if all(len(runs) == 1 for runs in by_pair.values()):
        return ""
    rows = []
    for (task, model), runs in by_pair.items():
        far, forced = ([r[i][0] for r in runs if r[i] is not None] for i in (3, 4))
        rows.append([TASKS[task], model, ",".join(str(r[0]) for r in sorted(runs)),
                     common.spread(far) if far else "", common.spread(forced) if forced else "",
                     common.spread([r[1] for r in runs]), common.spread([r[2] for r in runs])])
    return common.markdown_table(["task", "model", "seeds", f"char acc, length {SHOWN_BUCKETS[-1]}",
                                  f"teacher-forced, {SHOWN_BUCKETS[-1]}", "char acc", "seq acc"], rows,
                                 align="llrrrrr")


def _steps_text(tasks, args):
    """ "2000 steps", or "2000 steps (reverse: 6000)" where tasks trained for different numbers of steps."""
    budgets = {task: steps_for(task, args) for task in dict.fromkeys(tasks)}
    common_steps = max(set(budgets.values()), key=list(budgets.values()).count, default=0)
    others = [f"{TASKS[task]}: {steps}" for task, steps in budgets.items() if steps != common_steps]
    return f"{common_steps} steps" + (f" ({', '.join(others)})" if others else "")


def report(results, args, seconds, unfinished=(), failed=()):
    """The run log's section; `unfinished` (pairs without a result at these steps) are named below the table, with
    those of them that `failed` in this invocation marked."""
    rows = []
    tasks = [_keys(key)[0] for key in [*results, *unfinished]]
    for key, (char, seq, took, ponder) in results.items():
        task, model, seed = _keys(key)
        seed_args = with_seed(args, seed)
        paper = PAPER.get(model.replace("_rel", "").replace("adaptive_", ""), {}).get(task)
        buckets = _buckets_of(task, model, seed_args)
        shown = [f"{buckets[b][0]:.2f}" if b in buckets else "" for b in SHOWN_BUCKETS]
        forced = teacher_forced(task, model, seed_args).get(SHOWN_BUCKETS[-1])
        shown.append(f"{forced[0]:.2f}" if forced else "")
        rows.append([TASKS[task], model, str(seed), _training_accuracy(task, model, seed_args), *shown,
                     f"{char:.2f}", f"{seq:.2f}", f"{paper[0]:.2f} / {paper[1]:.2f}" if paper else "",
                     "" if ponder is None else f"{ponder:.2f}", f"{took / 60:.1f}"])
    headers = ["task", "model", "seed", "train acc", *(f"char acc, length {b}" for b in SHOWN_BUCKETS),
               f"teacher-forced, {SHOWN_BUCKETS[-1]}", "char acc",
               "seq acc", "paper (char / seq)", "ponder (enc.)", "minutes"]
    offsets = getattr(args, "offsets", "none")
    if offsets == "none":
        offsets_note = ""
    else:
        offsets_hparams = OFFSETS[offsets.split(":")[0] + (":N" if ":" in offsets else "")][0]
        offsets_note = (f" Trained with position offsets `--offsets={offsets}` (hparams "
                        f"`{offsets_hparams.format(n=offsets.partition(':')[2])}`"
                        "; relative models do not read them).")
    if getattr(args, "offsets_warmup", None):
        offsets_note += (f" The first {args.offsets_warmup.partition('@')[2]} steps with "
                         f"`--offsets={args.offsets_warmup.partition('@')[0]}` (`--offsets_warmup`: a curriculum "
                         "over the offsets' range, not the paper's protocol).")
    for model in dict.fromkeys(_keys(key)[1] for key in [*results, *unfinished]):
        if hparams_for(model, args):
            offsets_note += f" {model} with `{hparams_for(model, args)}`."
    summary = seed_summary(results, args)
    kind_table = digit_kind_table(results, args)
    return "\n".join([
        "## " + (getattr(args, "title", None) or "Length generalisation (UT paper, Table 4 protocol)"), "",
        f"`{common.command_line()}` — {common.today()}, " + (
            "collected from the finished runs" if getattr(args, "report_only", False) else
            f"took {seconds / 60:.0f} min") + f"; the pairs' runs (kept in `{common.shown_path(args.work_dir)}` and "
        f"reused when finished) took {sum(r[2] for r in results.values()) / 60:.0f} min of wall time in all, "
        f"{args.jobs} at a time.  ",
        f"Machine: {common.machine_description()}.", "",
        f"Train on decimal strings of length <= 40 for {_steps_text(tasks, args)} with the `*_cpu` sets (width 64, "
        f"the UTs pre-norm), decode the first {args.num_samples} evaluation strings (length 1-400) greedily: char and "
        "seq accuracy over all of them, and char accuracy of those of lengths 11-40 (inside the training lengths) "
        "and 201-400; teacher-forced: char accuracy at 201-400 with each symbol predicted from the true ones before "
        "it (tensor2tensor's evaluation metric, `benchmarks/teacher_forced.py`); "
        f"{args.jobs} pair(s) at a time"
        f"{', each on one TensorFlow thread' if args.jobs > 1 else ''}; minutes: the pair's wall time (training "
        "over all the invocations that trained it, and the last decoding). The paper's "
        "rows are its base-size models trained to convergence: a reference for the trend, not a like-for-like "
        "comparison." + offsets_note, "",
        common.markdown_table(headers, rows, align="llr" + "r" * (len(headers) - 3))] + (
            ["", "Over seeds (mean +- sample std):", "", summary] if summary else []) + (
            ["", "Addition, teacher-forced, by what the sum's digits need: both operands (digit i, below the shorter "
             "operand's length) or one (the longer operand's other digits, with a carry at most; a model that copies "
             "the longer operand gets these right, and they are 73% of the digits at 201-400):", "", kind_table]
            if kind_table else []) + ([
            "", "Not finished (resumable; their latest checkpoints): " + ", ".join(
                f"{_pair_text(key)} at step "
                f"{checkpoint_step(key[0], key[1], with_seed(args, _keys(key)[2]))} of {steps_for(key[0], args)}"
                + (" (failed in this invocation: its log says why)" if key in failed else "")
                for key in unfinished) + "."] if unfinished else []) + [
            "", "Training-batch token accuracy (lengths <= 40) by step, from the trainers' TensorBoard events, "
            "finished and unfinished pairs alike (whether and when each model learned the task):", "",
            curve_table(list(results) + list(unfinished), args,
                        _curve_steps(max((steps_for(task, args) for task in tasks), default=0),
                                     switch=_warmup_steps(args)))])


def record_rows(results, args):
    """Rows of benchmarks/results/length_generalisation.json, one per finished pair: char and seq accuracy over all
    the decoded strings and by reference-length bucket, with where they came from (`common.provenance`)."""
    rows = []
    for key, (char, seq, took, ponder) in results.items():
        task, model, seed = _keys(key)
        seed_args = with_seed(args, seed)
        train_accuracy = _training_accuracy(task, model, seed_args)
        rows.append({
            "task": TASKS[task], "model": model, "hparams_set": MODELS[model], "train_steps": steps_for(task, args),
            "hparams": overrides_of(model, args),
            **({"offsets_warmup": args.offsets_warmup} if warmup_of(model, args) else {}),
            "num_samples": args.num_samples, "train_accuracy": float(train_accuracy) if train_accuracy else None,
            "buckets": {name: {"char": c, "seq": q} for name, (c, q) in _buckets_of(task, model, seed_args).items()},
            "teacher_forced_buckets": {name: {"char": c, "seq": q}
                                       for name, (c, q) in teacher_forced(task, model, seed_args).items()},
            **({"teacher_forced_digit_kinds": digit_kinds(task, model, seed_args)} if task == "addition" else {}),
            "char_accuracy": char, "seq_accuracy": seq, "ponder_time": ponder, "minutes": round(took / 60, 1),
            **common.provenance(seed=seed)})
    return rows


def curve_rows(results, args):
    """Rows of benchmarks/results/length_generalisation_curves.json, one per finished pair: its training curve,
    `train_accuracy_by_step` = {"500": mean training-batch token accuracy of the steps logged in (0, 500], "1000":
    the same over (500, 1000], ...} up to the pair's steps (a curriculum's from step 0, its warm-up included)."""
    rows = []
    for key in results:
        task, model, seed = _keys(key)
        windows = {}
        for step, value in training_curve(task, model, with_seed(args, seed)).items():
            if 0 < step <= steps_for(task, args):
                windows.setdefault(-(-step // CURVE_WINDOW) * CURVE_WINDOW, []).append(value)
        rows.append({
            "task": TASKS[task], "model": model, "hparams_set": MODELS[model], "train_steps": steps_for(task, args),
            "hparams": overrides_of(model, args),
            **({"offsets_warmup": args.offsets_warmup} if warmup_of(model, args) else {}),
            "curve_window": CURVE_WINDOW,
            "train_accuracy_by_step": {str(end): round(sum(values) / len(values), 3)
                                       for end, values in sorted(windows.items())},
            **common.provenance(seed=seed)})
    return rows


def _curve_steps(train_steps, switch=None):
    """The steps shown: every 500 up to 2000 (where the models differ), then about eight more to the end; with a
    warm-up, also its last step (`switch`) and 500 steps after it, where the wider offsets set in."""
    every = max(1000, train_steps // 8 // 1000 * 1000)
    steps = [s for s in (500, 1000, 1500, 2000) if s <= train_steps] + list(range(3000, train_steps + 1, every))
    if switch and switch < train_steps:
        steps = sorted({*steps, switch, switch + 500})
    return steps


def _warmup_steps(args):
    """STEPS of `--offsets_warmup OFFSETS@STEPS`, or None."""
    steps = (getattr(args, "offsets_warmup", None) or "").partition("@")[2]
    return int(steps) if steps.isdigit() else None


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--tasks", default=",".join(TASKS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--train_steps", default="3000", help="N, or N with task:N entries, e.g. 2000,reverse:6000")
    parser.add_argument("--num_samples", type=int, default=200)
    parser.add_argument("--jobs", type=int, default=1, help="pairs run at once (each on one thread if > 1)")
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "length_generalisation"))
    parser.add_argument("--report_only", action="store_true", help="train nothing: tabulate the pairs already "
                        "finished in --work_dir at these steps and samples, and name the unfinished ones")
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    parser.add_argument("--section", default="length_generalisation", help="run log section to write: "
                        "comparisons of their own get sections of their own, leaving the main table alone")
    parser.add_argument("--title", help="the section's heading (default: Length generalisation (UT paper, "
                        "Table 4 protocol))")
    parser.add_argument("--record", nargs="?", const="all", choices=("all", "curves"),
                        help="append every finished pair's accuracy by length to "
                        "benchmarks/results/length_generalisation.json and its training curve to "
                        "length_generalisation_curves.json (drawn by benchmarks/plots.py); --record=curves: the "
                        "curves only (of pairs whose accuracy is recorded already)")
    parser.add_argument("--seeds", default="1", help="comma-separated seeds: each pair trains once per seed; "
                        "model:seeds entries (`;` between entries) give one model others, e.g. "
                        "1,2;adaptive_universal_transformer_rel:1,2,3,4")
    parser.add_argument("--hparams", default="", help="overrides for every model, e.g. norm_position=pre, or for "
                        "one, transformer:norm_position=pre (`;` between entries; the run directories' names end "
                        "with them)")
    parser.add_argument("--offsets", default="none", help="position offsets in training: none, "
                        "random (tensor2tensor's), random:N, shared:N (one offset in [0, N) per batch for the "
                        "encoder, decoder and every step) or step")
    parser.add_argument("--offsets_warmup", help="OFFSETS@STEPS, e.g. shared:40@6000 or none@12000: train the "
                        "first STEPS steps with OFFSETS (that run is reused where it exists), then go on with "
                        "--offsets (a curriculum over the offsets' range; ours, not the paper's)")
    args = parser.parse_args(argv)
    common.refuse_uncommitted_writes(args)
    os.makedirs(args.work_dir, exist_ok=True)
    if not args.report_only:
        common.stop_tools_on_termination()
    began = time.perf_counter()
    results = {}
    runs = [(task, model, seed) for task in args.tasks.split(",") for model in args.models.split(",")
            for seed in seeds_for(model, args)]
    for task, model, seed in runs:  # Refuses a setting a pair cannot take before anything runs.
        offsets_setting(args.offsets, model)
        warmup = warmup_of(model, args)
        if warmup and warmup[1] >= steps_for(task, args):
            raise SystemExit(f"error: --offsets_warmup={args.offsets_warmup}: {task} trains for "
                             f"{steps_for(task, args)} steps in all, not more than the warm-up's {warmup[1]}")
        if not args.report_only:
            refuse_a_run_past_its_steps(task, model, with_seed(args, seed))
    unfinished, failed = [], []
    if args.report_only:
        found = {run: finished(*run[:2], with_seed(args, run[2])) for run in runs}
        results = {run: result for run, result in found.items() if result is not None}
        unfinished = [run for run in runs if found[run] is None]
    else:
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {run: pool.submit(run_one, *run[:2], with_seed(args, run[2])) for run in runs}
            for run in runs:  # In order, so the log reads task by task.
                try:
                    results[run] = futures[run].result()
                except Exception as error:  # pylint: disable=broad-except  # The other pairs' results still stand.
                    failed.append(run)
                    print(f"error: {_pair_text(run)} failed: {error}", file=sys.stderr, flush=True)
                    continue
                print(*run, results[run], flush=True)
        unfinished = failed
    text = report(results, args, time.perf_counter() - began, unfinished, failed)
    print(text)
    if args.write:
        common.replace_section(args.section, text)
    if args.record and results:
        if args.record == "all":
            common.record("length_generalisation", record_rows(results, args), description=RESULTS_DESCRIPTION)
        common.record("length_generalisation_curves", curve_rows(results, args), description=CURVES_DESCRIPTION)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
