"""Learning to Execute, the Universal Transformer paper's Tables 5 (memorization) and 6 (program evaluation),
through the real CLIs.

    .venv/bin/python benchmarks/learning_to_execute.py --table 5 --train_steps N[,task:N,model:N,task/model:N]
        [--models transformer_rel,universal_transformer_rel,adaptive_universal_transformer_rel] [--seeds 1,2]
        [--hparams OVERRIDES] [--num_samples 200] [--train_samples 200] [--learned_at 0.9] [--jobs 2]
        [--work_dir DIR] [--report_only [--from_record]] [--record] [--plot PATH] [--write]

Table 5 is `copy`, `double` and `reverse` (strings of up to 55 digits), Table 6 `program`, `control` and
`addition` (programs of nesting 2, numbers of up to 5 digits); `--tasks` picks any of the six instead. Each
(task, model, seed) trains with `t2t-relpos-trainer --problem=learning_to_execute_<task> --hparams_set=<set>
--seed=S --train_steps=N` on the problem's "train" split (the paper's "mix" setting, no curriculum), then
`t2t-relpos-decoder` decodes greedily, without the targets: the first `--num_samples` examples of the "eval" split
(the paper's evaluation setting: nesting 2 with 5-digit numbers; strings of exactly 55 digits) and of the "test"
split (harder than the paper: nesting 3 with 6-digit numbers; strings of 56 to 70 digits), and `--train_samples`
fresh draws at the training setting (the demo writer's: drawn as training draws, outside the examples training
sees), which say whether the model has learned the training distribution at its budget: a pair whose greedy char
accuracy there is below `--learned_at` is reported as not having learned it (the run ends there; a longer run is
a new decision).

Models: the CPU-sized sets (width 64, 4 heads; the Transformer 2+2 layers, the UTs one block over 8 steps,
pre-norm; the adaptive UT with ACT, at most 4 steps), with ONE setting of positions, relative (k = 16, per-head
tables, no absolute position signal): `transformer_cpu_rel`, `universal_transformer_cpu_rel`,
`adaptive_universal_transformer_cpu_rel`. `--models` takes the names of MODELS or the sets' names (the sinusoidal
sets can be chosen, the table then says so per row); `--hparams` overrides every set's hparams (e.g.
`learning_rate=0.5`, the UT sets' rate, for the Transformer), in runs of their own. The paper's rows (base-size
models, trained far longer) are printed beside ours; both UTs are compared with its UT (it has one).

Char accuracy is the paper's and tensor2tensor's: the fraction of the reference's symbols that the hypothesis has
at the same position (a missing symbol is wrong, symbols past the reference's end are not counted); seq accuracy
the fraction of hypotheses equal to their reference. Both come from `t2t_relpos.decoding.scoring.sequence_accuracy`
(the decoder's, which also counts extra symbols as wrong: recorded beside as `char_strict`).

Runs live in `--work_dir` (`TASK_MODEL_sS`, its log `TASK_MODEL_sS.log`); a pair's figures are kept per steps and
samples (`RUN/results/steps3000_samples200_train200/result.json`) and reused: a finished pair is neither trained nor
decoded again, an unfinished one resumes from its checkpoint, and one trained to its steps is only decoded.
`--jobs 2` runs two pairs at once, each with TensorFlow on one thread. `--report_only` trains nothing: it
tabulates the pairs finished at these steps and samples in `--work_dir` and names the others with their latest
checkpoint's step; with `--from_record` it takes them from benchmarks/results/learning_to_execute.json instead
(the last row of each pair at these steps and samples), so that both tables, run in different sessions, are
tabulated and plotted together. `--record` appends every finished (task, model, seed) to
benchmarks/results/learning_to_execute.json with the commit (refused on uncommitted code); `--plot PATH` draws
the eval split's seq accuracy per task and model beside the paper's; `--write` puts the table into
docs/studies/benchmark_runs.md.
"""

import argparse
import concurrent.futures
import itertools
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position
from t2t_relpos import files  # noqa: E402  pylint: disable=wrong-import-position

MODELS = {  # name -> hparams set. The default: the relative ones.
    "transformer_rel": "transformer_cpu_rel",
    "universal_transformer_rel": "universal_transformer_cpu_rel",
    "adaptive_universal_transformer_rel": "adaptive_universal_transformer_cpu_rel",
    "transformer": "transformer_cpu",
    "universal_transformer": "universal_transformer_cpu",
    "adaptive_universal_transformer": "adaptive_universal_transformer_cpu",
}
DEFAULT_MODELS = ("transformer_rel", "universal_transformer_rel", "adaptive_universal_transformer_rel")
TABLES = {"5": ("copy", "double", "reverse"), "6": ("program", "control", "addition")}
TABLE_OF = {task: table for table, tasks in TABLES.items() for task in tasks}
TABLE_TITLES = {"5": "Table 5, memorization (strings of up to 55 digits)",
                "6": "Table 6, program evaluation (nesting 2, numbers of up to 5 digits)"}
# Dehghani et al. (2018), Tables 5 and 6: char / seq accuracy, greedy decoding, the evaluation setting.
PAPER = {
    "transformer": {"copy": (0.98, 0.63), "double": (0.94, 0.55), "reverse": (0.81, 0.26),
                    "program": (0.71, 0.29), "control": (0.93, 0.66), "addition": (1.0, 1.0)},
    "universal_transformer": {"copy": (1.0, 1.0), "double": (1.0, 1.0), "reverse": (1.0, 1.0),
                              "program": (0.89, 0.63), "control": (1.0, 1.0), "addition": (1.0, 1.0)},
}
# The splits decoded: fresh draws at the training setting, the paper's evaluation setting, a harder one.
SPLITS = {"train": "training setting (fresh draws)", "eval": "eval (paper's setting)", "test": "test (harder)"}
ACCURACY = re.compile(r"^char_accuracy = ([0-9.]+)\s+seq_accuracy = ([0-9.]+)", re.M)
TRAIN_ACCURACY = re.compile(r"^step \d+/\d+\s+loss [0-9.e+-]+\s+accuracy ([0-9.]+)", re.M)
FINAL_EVALUATION = re.compile(r"^Final evaluation: (.*)$", re.M)
DEMO_SEED = 0  # The training-setting draws: the same for every pair.
RESULTS_DESCRIPTION = (
    "Learning to Execute (Dehghani et al. 2018, Tables 5 and 6): trained on the problem's train split (the mix "
    "setting), decoded greedily without targets; char accuracy (the reference's symbols right at their position, "
    "over the reference's length; char_strict also counts a longer hypothesis's extra symbols as wrong) and seq "
    "accuracy on num_samples examples of the eval split (the paper's setting) and of the test split (harder), "
    "and on train_samples fresh draws at the training setting (learned: char accuracy there >= learned_at). "
    "train_batch_accuracy: the trainer's last training batch (teacher-forced tokens); trainer_eval: its final "
    "evaluation (teacher-forced, eval split). Recorded by `benchmarks/learning_to_execute.py --record`.")


def model_key(name):
    """A `--models` entry (a name of MODELS or an hparams set's) as a name of MODELS."""
    if name in MODELS:
        return name
    by_set = {hparams_set: key for key, hparams_set in MODELS.items()}
    if name in by_set:
        return by_set[name]
    raise SystemExit(f"error: --models: unknown model {name!r}; one of {', '.join(MODELS)} (or their sets "
                     f"{', '.join(MODELS.values())})")


def positions(model):
    """The model's positions, as the table says them."""
    return ("relative (k = 16, per-head tables, no absolute signal)" if model.endswith("_rel")
            else "sinusoidal (absolute)")


def paper_model(model):
    """The paper's row a model is compared with: its Transformer, or its UT (for the UT and the adaptive UT)."""
    return "transformer" if model.removesuffix("_rel") == "transformer" else "universal_transformer"


def tasks_of(args):
    """The tasks asked: `--tasks`, else those of `--table` (5, 6, or 5,6)."""
    if args.tasks:
        tasks = args.tasks.split(",")
        unknown = [t for t in tasks if t not in TABLE_OF]
        if unknown:
            raise SystemExit(f"error: --tasks: unknown task(s) {', '.join(unknown)}; of {', '.join(TABLE_OF)}")
        return tasks
    tables = args.table.split(",")
    if not tables or any(t not in TABLES for t in tables):
        raise SystemExit(f"error: --table={args.table}: 5, 6 or 5,6")
    return [task for table in tables for task in TABLES[table]]


def models_of(args):
    return list(dict.fromkeys(model_key(name) for name in args.models.split(",") if name))


def seeds_of(args):
    try:
        seeds = [int(seed) for seed in str(args.seeds).split(",")]
    except ValueError:
        raise SystemExit(f"error: --seeds={args.seeds}: comma-separated integers") from None
    return list(dict.fromkeys(seeds))


def steps_for(task, model, args):
    """The pair's training steps from `--train_steps`: N, with entries `task:N`, `model:N` and `task/model:N` for
    those that get others. The most specific entry wins: task/model, then model, then task, then N."""
    plain, named = None, {}
    for entry in filter(None, str(args.train_steps).split(",")):
        name, colon, value = entry.rpartition(":")
        if not value.isdigit() or int(value) < 1:
            raise SystemExit(f"error: --train_steps={args.train_steps}: give N, or N with task:N, model:N or "
                             f"task/model:N entries")
        if not colon:
            plain = int(value)
            continue
        entry_task, slash, entry_model = name.partition("/")
        if slash:
            known = entry_task in TABLE_OF and entry_model in MODELS
        else:
            known = name in TABLE_OF or name in MODELS
        if not known:
            raise SystemExit(f"error: --train_steps={args.train_steps}: {name!r} is not a task ({', '.join(TABLE_OF)}),"
                             f" a model ({', '.join(MODELS)}) or task/model")
        named[name] = int(value)
    for key in (f"{task}/{model}", model, task):
        if key in named:
            return named[key]
    if plain is None:
        raise SystemExit(f"error: --train_steps={args.train_steps} gives no steps for {task} / {model}")
    return plain


def run_name(task, model, seed, args):
    """The run's folder name in `--work_dir`: runs with `--hparams` overrides are kept apart from the sets' own."""
    overrides = re.sub(r"[^\w.=+-]", "_", args.hparams)
    return f"{task}_{model}_s{seed}" + (f"_{overrides}" if overrides else "")


def _set_text(model, args):
    """The model's hparams set, with the `--hparams` overrides if any."""
    return MODELS[model] + (f", {args.hparams}" if args.hparams else "")


def _pair_text(key):
    task, model, seed = key
    return f"{task} / {model} seed {seed}"


def _samples(args):
    """The eval and test examples decoded (a split has the problem's `num_eval_examples`, 1000, at most)."""
    return min(args.num_samples, _problem("copy").num_eval_examples)


def setting_of(task, model, args):
    """What a saved result must have been made with to be reused."""
    return {"train_steps": steps_for(task, model, args), "num_samples": _samples(args),
            "train_samples": args.train_samples}


def _setting_dir(task, model, seed, args):
    setting = setting_of(task, model, args)
    return os.path.join(args.work_dir, run_name(task, model, seed, args), "results",
                        f"steps{setting['train_steps']}_samples{setting['num_samples']}_train{setting['train_samples']}")


def finished(task, model, seed, args):
    """The pair's saved figures at these steps and samples, or None."""
    saved = json.loads(_read(os.path.join(_setting_dir(task, model, seed, args), "result.json")) or "null")
    return saved if saved and saved["setting"] == setting_of(task, model, args) else None


def recorded(task, model, seed, args, rows):
    """The pair's figures as `finished` gives them, from its last row in `rows` (benchmarks/results'
    learning_to_execute.json) at these steps and samples, or None."""
    setting = setting_of(task, model, args)
    found = [row for row in rows if (row["task"], row["model"], row["seed"]) == (task, model, seed)
             and {key: row[key] for key in setting} == setting and row.get("hparams", "") == args.hparams]
    if not found:
        return None
    row = found[-1]
    return {"setting": setting, "train_seconds": row["minutes"] * 60,
            "train_batch_accuracy": row["train_batch_accuracy"], "trainer_eval": row["trainer_eval"],
            "splits": {split: row[split] for split in SPLITS}, "decode_seconds": row["decode_seconds"],
            "checkpoint_step": row["train_steps"], "row": row}


def checkpoint_step(task, model, seed, args):
    """The step of the run's latest checkpoint (0 if none)."""
    found = re.search(r'model_checkpoint_path: "ckpt-(\d+)"', _read(os.path.join(
        args.work_dir, run_name(task, model, seed, args), "checkpoint")))
    return int(found.group(1)) if found else 0


def refuse_a_run_past_its_steps(task, model, seed, args):
    """One `error:` line if the run has trained past its steps without figures kept at them: the decoder would
    read the later checkpoint and file its figures as these."""
    step, steps = checkpoint_step(task, model, seed, args), steps_for(task, model, args)
    if step > steps and finished(task, model, seed, args) is None:
        raise SystemExit(f"error: {_pair_text((task, model, seed))} has trained to step {step}, past its "
                         f"{steps} steps, and has no figures kept at those steps: leave it out, or give it {step} "
                         "steps or more")


_PROBLEMS = {}


def _problem(task):
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    if task not in _PROBLEMS:
        _PROBLEMS[task] = registry.problem(f"learning_to_execute_{task}")
    return _PROBLEMS[task]


def references(task, split, count):
    """The targets of the first `count` examples of the problem's `split`: what the decoder's
    `--decode_split=split` with `num_samples=count` decodes, in its order."""
    return [target for _, target in itertools.islice(_problem(task).examples(split), count)]


def score(hypotheses, refs):
    """{"char", "seq", "char_strict", "n"} of decoded `hypotheses` against `refs`, by the package's
    `scoring.sequence_accuracy`: "char" over the reference's length (the hypotheses cut to it: tensor2tensor's
    padded accuracy, weighted by the reference), "char_strict" the decoder's (extra symbols wrong too)."""
    from t2t_relpos.decoding import scoring  # pylint: disable=import-outside-toplevel

    if len(hypotheses) != len(refs):
        raise RuntimeError(f"{len(hypotheses)} hypotheses for {len(refs)} references")
    whole = scoring.sequence_accuracy(hypotheses, refs)
    cut = scoring.sequence_accuracy([h[:len(r)] for h, r in zip(hypotheses, refs)], refs)
    return {"char": cut["char_accuracy"], "seq": whole["seq_accuracy"], "char_strict": whole["char_accuracy"],
            "n": len(refs)}


def run_one(task, model, seed, args):
    """Trains (or resumes) and decodes one pair; its saved figures."""
    saved = finished(task, model, seed, args)
    if saved is not None:
        return saved
    run_dir = os.path.join(args.work_dir, run_name(task, model, seed, args))
    log = run_dir + ".log"
    setting_dir = _setting_dir(task, model, seed, args)
    threads = 1 if args.jobs > 1 else 0
    steps = steps_for(task, model, args)
    if checkpoint_step(task, model, seed, args) < steps:
        with common.RunClock(run_dir):
            common.run_cli(
                "trainer", f"--problem=learning_to_execute_{task}", f"--hparams_set={MODELS[model]}",
                *([f"--hparams={args.hparams}"] if args.hparams else []),
                f"--output_dir={run_dir}", f"--train_steps={steps}", "--eval_steps=4",
                f"--checkpoint_every={min(1000, steps)}", "--log_every=100", f"--seed={seed}", log=log,
                threads=threads)
    os.makedirs(setting_dir, exist_ok=True)
    splits, seconds = {}, {}
    sample = os.path.join(setting_dir, "train_sample")
    from t2t_relpos.cli import demo  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    demo.write_strings(_problem(task), args.train_samples, sample, seed=DEMO_SEED)
    for split in SPLITS:
        decoded = os.path.join(setting_dir, f"decoded_{split}.txt")
        if split == "train":
            where = [f"--decode_from_file={sample}.txt", f"--decode_reference={sample}.ref.txt"]
            search = "beam_size=1,batch_size=50"
            refs = _read(sample + ".ref.txt").split("\n")[:-1]
        else:
            where = [f"--decode_split={split}"]
            search = f"beam_size=1,batch_size=50,num_samples={_samples(args)}"
            refs = references(task, split, _samples(args))
        began = time.perf_counter()
        output = common.run_cli("decoder", f"--output_dir={run_dir}", *where, f"--decode_to_file={decoded}",
                                f"--decode_hparams={search}", log=log, threads=threads)
        seconds[split] = round(time.perf_counter() - began, 1)
        splits[split] = score(_read(decoded).split("\n")[:-1], refs)
        printed = ACCURACY.search(output)  # The decoder's own figures: the references must be the same.
        if printed is None or any(abs(float(value) - splits[split][key]) > 6e-5
                                  for value, key in zip(printed.groups(), ("char_strict", "seq"))):
            raise RuntimeError(f"{split}: the decoder's figures ({printed and printed.group(0)}) are not those of "
                               f"{decoded} against the references here ({splits[split]})")
    trainer_log = _read(log)
    found = TRAIN_ACCURACY.findall(trainer_log)
    evaluations = FINAL_EVALUATION.findall(trainer_log)
    saved = {"setting": setting_of(task, model, args), "train_seconds": round(common.run_seconds(run_dir), 1),
             "train_batch_accuracy": float(found[-1]) if found else None,
             "trainer_eval": ({name: float(value) for name, value in re.findall(r"(\S+) ([-0-9.]+)", evaluations[-1])}
                              if evaluations else {}),
             "splits": splits, "decode_seconds": seconds, "checkpoint_step": checkpoint_step(task, model, seed, args)}
    with files.atomic_write(os.path.join(setting_dir, "result.json"), what="the pair's result") as f:
        json.dump(saved, f)
    return saved


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except OSError:
        return ""


def learned(saved, args):
    """Whether a pair has learned the training distribution: greedy char accuracy >= `--learned_at` on the
    training-setting draws."""
    return saved["splits"]["train"]["char"] >= args.learned_at


def _spread(values):
    """"0.95 +- 0.03 (2 seeds): 0.93, 0.97": mean +- sample std over seeds, then each seed's."""
    text = common.spread(values)
    return text + (": " + ", ".join(f"{v:.2f}" for v in values) if len(values) > 1 else "")


def report(results, args, seconds, unfinished=(), failed=()):
    """The markdown section: a table per paper table, a row per (task, model), and what each model learned."""
    by_pair = {}
    for (task, model, seed), saved in sorted(results.items(), key=lambda item: item[0][2]):
        by_pair.setdefault((task, model), []).append((seed, saved))
    pairs = [(t, m) for t in tasks_of(args) for m in models_of(args) if (t, m) in by_pair]
    headers = ["task", "model (set)", "seeds", "steps", "minutes per seed", "training setting char / seq",
               "learned", "eval char acc", "eval seq acc", "test char acc", "test seq acc",
               "paper eval char / seq"]
    sections = []
    for table, tasks in TABLES.items():
        rows = []
        for task, model in (p for p in pairs if p[0] in tasks):
            runs = by_pair[(task, model)]
            values = {(split, kind): [saved["splits"][split][kind] for _, saved in runs]
                      for split in SPLITS for kind in ("char", "seq")}
            learners = sum(learned(saved, args) for _, saved in runs)
            paper = PAPER[paper_model(model)][task]
            rows.append([
                task, f"{model} ({_set_text(model, args)})", ",".join(str(seed) for seed, _ in runs),
                str(steps_for(task, model, args)),
                ", ".join(f"{saved['train_seconds'] / 60:.1f}" for _, saved in runs),
                " ; ".join(f"{s['splits']['train']['char']:.2f} / {s['splits']['train']['seq']:.2f}"
                           for _, s in runs),
                "yes" if learners == len(runs) else f"NO ({len(runs) - learners} of {len(runs)} seeds)",
                _spread(values[("eval", "char")]), _spread(values[("eval", "seq")]),
                _spread(values[("test", "char")]), _spread(values[("test", "seq")]),
                f"{paper[0]:.2f} / {paper[1]:.2f} ({'Transformer' if paper_model(model) == 'transformer' else 'UT'})"])
        if rows:
            table_text = common.markdown_table(headers, rows, align="llrrr" + "r" * 7)
            sections += [f"### {TABLE_TITLES[table]}", "", table_text, ""]
    lines = []
    for model in models_of(args):
        runs = [(key, saved) for key, saved in results.items() if key[1] == model]
        if not runs:
            continue
        missed = [f"{task} seed {seed} ({saved['splits']['train']['char']:.2f} / "
                  f"{saved['splits']['train']['seq']:.2f})" for (task, _, seed), saved in runs
                  if not learned(saved, args)]
        done = sorted({key[0] for key, saved in runs if learned(saved, args)}, key=list(TABLE_OF).index)
        lines.append(f"- {model}: " + (f"learned the training distribution of {', '.join(done)}" if done else
                                       "learned none of the training distributions")
                     + (f"; has NOT learned it at its budget: {', '.join(missed)} (training-setting char / seq)"
                        if missed else "") + ".")
    by_positions = {}
    for model in dict.fromkeys(p[1] for p in pairs):
        by_positions.setdefault(positions(model), []).append(model)
    positions_text = "; ".join(f"{kind} ({', '.join(models)})" for kind, models in by_positions.items())
    header = [
        "## Learning to Execute (UT paper, Tables 5 and 6)", "",
        f"`{common.command_line()}` — {common.today()}, " + (
            f"collected from `{common.shown_path(_record_path())}`" if args.from_record else
            "collected from the finished runs" if args.report_only else f"took {seconds / 60:.0f} min")
        + ("" if args.from_record else f"; runs kept in `{common.shown_path(args.work_dir)}`, {args.jobs} at a time"
           + (", each on one TensorFlow thread" if args.jobs > 1 else "")) + ".  ",
        f"Machine: {common.machine_description()}.", "",
        f"Trained on the train split (the paper's mix setting, no curriculum) for the steps given; decoded greedily "
        f"without targets: the first {_samples(args)} examples of the eval split (the paper's evaluation setting) "
        f"and of the test split (harder: nesting 3 with 6-digit numbers; strings of 56-70 digits), and "
        f"{args.train_samples} fresh draws at the training setting, on which a pair has learned the training "
        f"distribution when its greedy char accuracy is >= {args.learned_at} (`learned`). Char accuracy: the "
        "reference's symbols right at their position over the reference's length (tensor2tensor's); seq accuracy: "
        "exact outputs. Accuracy cells: mean +- sample std over seeds, then each seed's. Positions: "
        f"{positions_text or 'relative'}. The paper's rows are base-size models trained far longer: a reference, "
        "not a like-for-like comparison; both UTs are set beside its UT."
        + (f" Every set with the overrides `{args.hparams}`." if args.hparams else ""), ""]
    footer = ["Training distribution (greedy char accuracy on the training-setting draws >= "
              f"{args.learned_at}):", "", *lines] if lines else []
    if results:
        calls = {split: [saved["decode_seconds"][split] for saved in results.values()] for split in SPLITS}
        footer += ["", "Decoding, seconds per decoder call (its start and trace, then the examples): " + "; ".join(
            f"{SPLITS[split]} {min(values):.0f}-{max(values):.0f}" for split, values in calls.items()) + "."]
    if unfinished and args.from_record:
        footer += ["", "Not in the record at these steps and samples: " + ", ".join(map(_pair_text, unfinished))
                   + "."]
    elif unfinished:
        footer += ["", "Not finished (resumable; their latest checkpoints): " + ", ".join(
            f"{_pair_text(key)} at step {checkpoint_step(*key, args)} of {steps_for(key[0], key[1], args)}"
            + (" (failed in this invocation: its log says why)" if key in failed else "")
            for key in unfinished) + "."]
    return "\n".join(header + sections + footer)


def record_rows(results, args):
    """Rows of benchmarks/results/learning_to_execute.json, one per finished (task, model, seed)."""
    rows = []
    for (task, model, seed), saved in results.items():
        rows.append({
            "table": int(TABLE_OF[task]), "task": task, "model": model, "hparams_set": MODELS[model],
            "hparams": args.hparams,
            "positions": positions(model), "train_steps": saved["setting"]["train_steps"],
            "num_samples": saved["setting"]["num_samples"], "train_samples": saved["setting"]["train_samples"],
            "learned_at": args.learned_at, "learned": learned(saved, args),
            **{split: {k: round(v, 4) if isinstance(v, float) else v for k, v in saved["splits"][split].items()}
               for split in SPLITS},
            "train_batch_accuracy": saved["train_batch_accuracy"], "trainer_eval": saved["trainer_eval"],
            "paper": dict(zip(("char", "seq"), PAPER[paper_model(model)][task])),
            "minutes": round(saved["train_seconds"] / 60, 1), "decode_seconds": saved["decode_seconds"],
            **common.provenance(seed=seed)})
    return rows


def _record_path():
    return os.path.join(common.RESULTS, "learning_to_execute.json")


def plot(rows, path):
    """The eval split's seq accuracy per task and model (a bar at the mean over seeds, a dot per seed; faint and
    hatched where a seed did not learn the training distribution) beside the paper's (a black bar over each of
    ours: its Transformer's, or its UT's for both UTs), one panel per paper table. `rows`: record_rows' rows."""
    import plots  # pylint: disable=import-outside-toplevel  # matplotlib only when drawing.

    plt = plots._pyplot()  # pylint: disable=protected-access
    from matplotlib.patches import Patch  # pylint: disable=import-outside-toplevel
    tables = [t for t in TABLES if any(str(row["table"]) == t for row in rows)]
    fig, axes = plt.subplots(1, len(tables), figsize=(6.0 * len(tables), 4.8), squeeze=False, sharey=True)
    for ax, table in zip(axes[0], tables):
        tasks = [t for t in TABLES[table] if any(row["task"] == t for row in rows)]
        models = list(dict.fromkeys(row["model"] for row in rows if row["task"] in tasks))
        width = 0.8 / len(models)
        for i, task in enumerate(tasks):
            for j, model in enumerate(models):
                chosen = [row for row in rows if row["task"] == task and row["model"] == model]
                if not chosen:
                    continue
                centre = i + (j - (len(models) - 1) / 2) * width
                values = [row["eval"]["seq"] for row in chosen]
                faint = not all(row["learned"] for row in chosen)
                colour = plots.MODEL_COLOURS.get(model, "0.4")
                ax.bar(centre, sum(values) / len(values), width * 0.9, color=colour, alpha=0.35 if faint else 0.8,
                       hatch="//" if faint else None)
                ax.scatter([centre] * len(values), values, color=colour, edgecolors="black", s=22, zorder=3)
                paper = PAPER[paper_model(model)][task][1]
                ax.plot([centre - width * 0.45, centre + width * 0.45], [paper, paper], color="black", linewidth=2.2,
                        zorder=4, label="the paper's (its Transformer; its UT for both UTs)"
                        if i == 0 and j == 0 else "_nolegend_")
        handles, _ = ax.get_legend_handles_labels()  # The paper's line; then one entry a model, in its colour.
        handles += [Patch(color=plots.MODEL_COLOURS.get(model, "0.4"), alpha=0.8, label=plots.model_name(model))
                    for model in models]
        handles.append(Patch(facecolor="white", edgecolor="0.3", hatch="//",
                             label="a seed did not learn the training distribution"))
        ax.set_xticks(range(len(tasks)), tasks)
        ax.set_ylim(0, 1.05)
        ax.grid(axis="y", alpha=0.3)
        steps = sorted({row["train_steps"] for row in rows if row["task"] in tasks})
        ax.set_title(f"{TABLE_TITLES[table]}\n{', '.join(map(str, steps))} steps", fontsize=9)
        ax.legend(handles=handles, fontsize=7.5, loc="upper center", bbox_to_anchor=(0.5, -0.1), frameon=False,
                  ncol=2)
    axes[0][0].set_ylabel("seq accuracy, eval split (greedy)")
    fig.suptitle("Learning to Execute: our CPU-sized models (dots: seeds; faint, hatched: a seed did not learn the "
                 f"training distribution) beside the paper's\n(runs of {plots.date_range(rows)})", fontsize=10)
    fig.tight_layout()
    plots._save(fig, path)  # pylint: disable=protected-access


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--table", default="5,6", help="the paper's table(s): 5 (copy, double, reverse), 6 "
                        "(program, control, addition) or 5,6")
    parser.add_argument("--tasks", default="", help=f"comma-separated, of {', '.join(TABLE_OF)} (instead of --table)")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="comma-separated names of MODELS or "
                        "hparams sets (default: the three relative CPU sets; positions: relative, k = 16)")
    parser.add_argument("--seeds", default="1,2", help="comma-separated seeds: each pair trains once per seed")
    parser.add_argument("--train_steps", required=True, help="N, with task:N, model:N and task/model:N entries "
                        "for those that get others (the most specific wins), e.g. 3000,double:5000")
    parser.add_argument("--num_samples", type=int, default=200, help="examples decoded from the eval and from the "
                        "test split (the first N; at most 1000)")
    parser.add_argument("--train_samples", type=int, default=200, help="fresh draws at the training setting "
                        "decoded (has the model learned the training distribution?)")
    parser.add_argument("--learned_at", type=float, default=0.9, help="greedy char accuracy on the training-setting "
                        "draws from which a pair counts as having learned the training distribution")
    parser.add_argument("--hparams", default="", help="hparams overrides for every pair's trainer (its --hparams), "
                        "e.g. learning_rate=0.5: such runs are kept apart from the sets' own (the run folder's name "
                        "carries them), and the table and the record name them")
    parser.add_argument("--jobs", type=int, default=1, help="pairs run at once (each on one thread if > 1)")
    parser.add_argument("--work_dir", default=os.path.join("benchmarks", "runs", "learning_to_execute"))
    parser.add_argument("--report_only", action="store_true", help="train nothing: tabulate the pairs finished in "
                        "--work_dir at these steps and samples, and name the unfinished ones")
    parser.add_argument("--from_record", action="store_true", help="with --report_only: take the pairs' figures "
                        "from benchmarks/results/learning_to_execute.json (the last row of each at these steps and "
                        "samples) instead of --work_dir, e.g. to table and plot both tables from their runs")
    parser.add_argument("--record", action="store_true", help="append every finished (task, model, seed) to "
                        "benchmarks/results/learning_to_execute.json (committed code only)")
    parser.add_argument("--plot", metavar="PATH", help="draw the eval split's seq accuracy beside the paper's")
    parser.add_argument("--write", action="store_true", help="write the section into docs/studies/benchmark_runs.md")
    args = parser.parse_args(argv)
    if args.num_samples < 1 or args.train_samples < 1 or args.jobs < 1:
        parser.error("--num_samples, --train_samples and --jobs must be >= 1")
    if args.from_record and (not args.report_only or args.record):
        parser.error("--from_record goes with --report_only, and not with --record (its rows are there already)")
    runs = [(task, model, seed) for task in tasks_of(args) for model in models_of(args) for seed in seeds_of(args)]
    for task, model, _ in runs:
        steps_for(task, model, args)  # A bad --train_steps is refused before anything runs.
    common.refuse_uncommitted_writes(args)
    os.makedirs(args.work_dir, exist_ok=True)
    began = time.perf_counter()
    results, failed = {}, []
    if args.report_only:
        if args.from_record:
            try:
                rows = common.read_results("learning_to_execute")["rows"]
            except FileNotFoundError:
                raise SystemExit(f"error: --from_record: there is no {common.shown_path(_record_path())}") from None
            found = {run: recorded(*run, args, rows) for run in runs}
        else:
            found = {run: finished(*run, args) for run in runs}
        results = {run: saved for run, saved in found.items() if saved is not None}
        unfinished = [run for run in runs if found[run] is None]
    else:
        for run in runs:
            refuse_a_run_past_its_steps(*run, args)
        common.stop_tools_on_termination()
        with concurrent.futures.ThreadPoolExecutor(args.jobs) as pool:
            futures = {run: pool.submit(run_one, *run, args) for run in runs}
            for run in runs:
                try:
                    results[run] = futures[run].result()
                except Exception as error:  # pylint: disable=broad-except  # The other pairs' results still stand.
                    failed.append(run)
                    print(f"error: {_pair_text(run)} failed: {error}", file=sys.stderr, flush=True)
                    continue
                print(_pair_text(run), json.dumps(results[run]["splits"]), flush=True)
        unfinished = failed
    text = report(results, args, time.perf_counter() - began, unfinished, failed)
    print(text)
    if args.write:
        common.replace_section("learning_to_execute", text)
    if results and (args.record or args.plot):
        rows = ([saved["row"] for saved in results.values()] if args.from_record  # As recorded, with their dates.
                else record_rows(results, args))
        if args.record:
            common.record("learning_to_execute", rows, description=RESULTS_DESCRIPTION)
        if args.plot:
            plot(rows, args.plot)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
