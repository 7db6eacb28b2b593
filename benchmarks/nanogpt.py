"""Character-level Tiny Shakespeare against nanoGPT: the same text, split, model size, context, batch and steps.

    .venv/bin/python benchmarks/nanogpt.py NANOGPT_DIR NANOGPT_PYTHON [--steps 2000] [--core 1]
        [--models transformer_lm_cpu_rel,universal_transformer_lm_cpu_rel] [--work_dir DIR]

NANOGPT_DIR is a checkout of github.com/karpathy/nanoGPT (its train.py, model.py, configurator.py and
data/shakespeare_char/prepare.py are run as they are); NANOGPT_PYTHON an interpreter that imports torch and numpy
(and requests, which prepare.py imports), e.g. a venv of its own. Nothing of nanoGPT is copied here.

What runs. nanoGPT's CPU recipe from its README, `train.py config/train_shakespeare_char.py --device=cpu
--compile=False --eval_iters=20 --log_interval=1 --block_size=64 --batch_size=12 --n_layer=4 --n_head=4
--n_embd=128 --max_iters=N --lr_decay_iters=N --dropout=0.0`, with `--out_dir` in --work_dir and
`--always_save_checkpoint=True` (the config saves only when its estimated validation loss improved; this makes
the checkpoint the one after N steps). Then, for each of --models, this package's `t2t-relpos-trainer` on
`languagemodel_shakespeare_characters` with `--hparams=max_length=64,batch_size=768` (nanoGPT's 64-character
context and 12 windows: our batch_size counts tokens), N steps, seed 1, one evaluation at the end on the whole
eval split, one checkpoint at the end. The trainings run back to back, each pinned to --core (`taskset -c`) with
one compute thread (`OMP_NUM_THREADS=1` for torch; `TF_NUM_INTRAOP_THREADS=1`, `TF_NUM_INTEROP_THREADS=1` for
TensorFlow), and the load average (/proc/loadavg) is read before and after each. Wall seconds are those of the
training process, start to exit (imports, its evaluations and checkpoints included; data preparation not);
CPU seconds its user + system time; the median step is each toolkit's own per-step time (nanoGPT's `iter` lines;
ours the trainer's per-step seconds) after the first 10 steps.

The data. The Tiny Shakespeare text (--text, gzipped) is written as nanoGPT's `data/shakespeare_char/input.txt`
(so that its prepare.py, run unchanged, reads it instead of downloading it) and prepare.py writes train.bin /
val.bin, the first 90% of the characters and the last 10%. Our datagen reads the same file and splits it at the
same character. Before training, the script checks the two token by token: our streams, less the EOS that ends
each, are nanoGPT's ids through the two vocabularies (ours has PAD, EOS and UNK before the 65 characters).

The losses, after the trainings (not timed). nanoGPT's own figure is `estimate_loss`: the mean over --eval_iters
(20) random batches of 12 windows. For the whole validation split its checkpoint is scored by a small script
written here (run with NANOGPT_PYTHON, importing nanoGPT's model.py): val.bin in consecutive disjoint blocks of
block_size inputs, each predicting the next character at every position, so every character but the first is
scored once (111,539 of them), the first of a block with one character of context. Ours: the trainer's final
evaluation of the whole eval split, disjoint 64-token windows each starting from the start symbol (so the first
character of each window has no context), 111,541 tokens with the EOS that ends the split; then its checkpoint
scored on the eval split's ids by `t2t_relpos.decoding.lm_scoring` in disjoint windows of 64 (which must give the
trainer's figure) and in windows of 65 every 64, which scores every token in the context nanoGPT's blocks give it
(the first token and the EOS aside).

It skips with one line (exit 0) when the text, the nanoGPT checkout or an interpreter that imports torch is
missing. Work files (both toolkits' runs, our data) go to --work_dir; nanoGPT's prepared data stays in its checkout.
"""

import argparse
import gzip
import inspect
import json
import os
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position

PROBLEM = "languagemodel_shakespeare_characters"
DEFAULT_TEXT = os.path.normpath(os.path.join(common.REPO, "..", "shared", "data", "lm", "tinyshakespeare.txt.gz"))
DEFAULT_MODELS = ("transformer_lm_cpu_rel", "universal_transformer_lm_cpu_rel")
# nanoGPT's CPU recipe (its README), less the step counts, which --steps sets.
NANOGPT_RECIPE = ("config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=20",
                  "--log_interval=1", "--block_size=64", "--batch_size=12", "--n_layer=4", "--n_head=4",
                  "--n_embd=128", "--dropout=0.0")
# config/train_shakespeare_char.py evaluates (and so may write a checkpoint) every 250 steps: --steps is a multiple.
NANOGPT_EVAL_INTERVAL = 250
CONTEXT, WINDOWS = 64, 12  # The recipe's block_size and batch_size: ours get max_length and batch_size in tokens.
OUR_OVERRIDES = f"max_length={CONTEXT},batch_size={CONTEXT * WINDOWS}"
ONE_THREAD = {"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1",
              "TF_NUM_INTEROP_THREADS": "1"}
SETTLE_STEPS = 10  # Steps left out of the median step time (graph tracing, first batches).
_MARK = "NANOGPT_BENCHMARK "

# Our trainer through its console entry point, unchanged; the wrapper keeps each step's seconds and target tokens
# (the figures the trainer's progress line is made of) and prints them when the process ends.
OURS_WRAPPER = f"""
import atexit, json, sys
from t2t_relpos.training import trainer
steps = []
_add = trainer._Window.add
def add(self, stats, seconds):
    _add(self, stats, seconds)
    steps.append((float(seconds), int(stats["tokens"])))
trainer._Window.add = add
atexit.register(lambda: print("{_MARK}" + json.dumps({{"steps": steps}}), flush=True))
from t2t_relpos.cli import trainer as cli
cli.run()
"""


# -- the pure parts (tested without torch or TensorFlow) -----------------------------------------------------
def blocks(length, size):
    """nanoGPT's validation ids `[0, length)` cut into consecutive disjoint blocks: a list of (start, end), the
    inputs ids[start:end] predicting ids[start + 1:end + 1]. Every id but the first is a target exactly once;
    the last block may be shorter.

    >>> blocks(10, 4)
    [(0, 4), (4, 8), (8, 9)]
    """
    return [(start, min(start + size, length - 1)) for start in range(0, length - 1, size)]


def nanogpt_command(python, steps, out_dir):
    """nanoGPT's training command (run in its checkout): the README's CPU recipe for `steps` steps."""
    return [python, "train.py", *NANOGPT_RECIPE, f"--max_iters={steps}", f"--lr_decay_iters={steps}",
            f"--out_dir={out_dir}", "--always_save_checkpoint=True"]


def ours_command(hparams_set, data_dir, out_dir, steps, seed=1):
    """Our trainer's arguments (after the interpreter and wrapper): whole-split evaluation at the end only."""
    return [f"--problem={PROBLEM}", f"--hparams_set={hparams_set}", f"--hparams={OUR_OVERRIDES}",
            f"--data_dir={data_dir}", f"--output_dir={out_dir}", f"--train_steps={steps}", f"--seed={seed}",
            "--eval_every=0", f"--checkpoint_every={steps}", "--keep_checkpoint_max=1", "--log_every=100"]


def pinned(command, core):
    """`command` pinned to `core` with taskset."""
    return ["taskset", "-c", str(core), *command]


_ITER = re.compile(r"^iter (\d+): loss ([-\d.naninf]+), time ([\d.]+)ms")
_ESTIMATE = re.compile(r"^step (\d+): train loss ([-\d.naninf]+), val loss ([-\d.naninf]+)")


def parse_nanogpt_log(text):
    """nanoGPT's training log: {"iters": [(iter, loss, ms)], "estimates": [(step, train loss, val loss)]}."""
    iters, estimates = [], []
    for line in text.splitlines():
        if (match := _ITER.match(line)):
            iters.append((int(match[1]), float(match[2]), float(match[3])))
        elif (match := _ESTIMATE.match(line)):
            estimates.append((int(match[1]), float(match[2]), float(match[3])))
    return {"iters": iters, "estimates": estimates}


def parse_final_evaluation(text):
    """The metrics of our trainer's `Final evaluation: name value ...` line, as floats.

    Raises:
        ValueError: the text has no such line.
    """
    lines = [line for line in text.splitlines() if line.startswith("Final evaluation:")]
    if not lines:
        raise ValueError("no 'Final evaluation:' line")
    words = lines[-1][len("Final evaluation:"):].split()
    return {name: float(value) for name, value in zip(words[0::2], words[1::2])}


def check_same_stream(ours, theirs, our_characters, their_itos, reserved):
    """Stops with a message unless our split's ids (`ours`, ending in EOS) are nanoGPT's (`theirs`) through the
    two vocabularies: our id of a character is `reserved` + its index in `our_characters`, nanoGPT's is given by
    `their_itos` ({id: character}). Returns the number of characters compared."""
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.problems import problem  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    ours, theirs = np.asarray(ours), np.asarray(theirs)
    if len(ours) != len(theirs) + 1 or int(ours[-1]) != problem.EOS_ID:
        raise SystemExit(f"nanogpt: the streams differ in length ({len(ours):,} ids with EOS against "
                         f"{len(theirs):,}) or ours does not end in EOS")
    ours_of = {character: reserved + index for index, character in enumerate(our_characters)}
    missing = sorted(set(their_itos.values()) - set(ours_of))
    if missing:
        raise SystemExit(f"nanogpt: characters {missing!r} are in nanoGPT's vocabulary and not in ours")
    table = np.full(max(their_itos) + 1, -1, np.int64)
    for their_id, character in their_itos.items():
        table[their_id] = ours_of[character]
    differ = np.flatnonzero(table[theirs] != ours[:-1])
    if len(differ):
        raise SystemExit(f"nanogpt: the streams differ at {len(differ):,} characters, first at {int(differ[0]):,}")
    return len(theirs)


def median_step_ms(seconds):
    """Median of per-step seconds after the first `SETTLE_STEPS`, in ms (None where none are left)."""
    kept = list(seconds)[SETTLE_STEPS:]
    return statistics.median(kept) * 1000 if kept else None


def format_table(rows):
    """The results table. `rows`: dicts with toolkit, model, params, steps, tokens_per_step, nats (the toolkit's
    whole-split evaluation), nats_blocks (in nanoGPT's blocks' contexts), wall, cpu, median_ms."""
    import math  # pylint: disable=import-outside-toplevel

    headers = ["toolkit", "model", "params", "steps", "tokens / step", "val nats / char, whole split",
               "bits / char", "val nats / char, nanoGPT's blocks", "wall s", "s / step", "CPU s",
               "median step ms"]
    cells = []
    for row in rows:
        cells.append([row["toolkit"], row["model"], f"{row['params']:,}", f"{row['steps']:,}",
                      f"{row['tokens_per_step']:,.0f}", f"**{row['nats']:.4f}**", f"{row['nats'] / math.log(2):.4f}",
                      f"{row['nats_blocks']:.4f}", f"{row['wall']:.0f}", f"{row['wall'] / row['steps']:.3f}",
                      f"{row['cpu']:.0f}", f"{row['median_ms']:.1f}"])
    return common.markdown_table(headers, cells, align="ll" + "r" * 10)


# -- the evaluation of nanoGPT's checkpoint (run with NANOGPT_PYTHON) -----------------------------------------
NANOGPT_EVAL = inspect.getsource(blocks) + '''
import json, sys
import numpy as np
import torch
from torch.nn import functional as F

checkout, checkpoint_path, val_path = sys.argv[1:4]
sys.path.insert(0, checkout)
from model import GPT, GPTConfig  # nanoGPT's model.py

torch.set_num_threads(1)
checkpoint = torch.load(checkpoint_path, map_location="cpu", weights_only=False)
model = GPT(GPTConfig(**checkpoint["model_args"]))
model.load_state_dict({k.removeprefix("_orig_mod."): v for k, v in checkpoint["model"].items()})
model.eval()
size = checkpoint["model_args"]["block_size"]
val = np.fromfile(val_path, dtype=np.uint16).astype(np.int64)
total, count, first, firsts = 0.0, 0, 0.0, 0
spans = blocks(len(val), size)
groups = [spans[i:i + 64] for i in range(0, len(spans), 64)]
with torch.no_grad():
    for group in groups:
        for length in sorted({end - start for start, end in group}):
            same = [(start, end) for start, end in group if end - start == length]
            x = torch.from_numpy(np.stack([val[start:end] for start, end in same]))
            y = torch.from_numpy(np.stack([val[start + 1:end + 1] for start, end in same]))
            logits, _ = model(x, y)  # With targets nanoGPT's forward returns every position's logits.
            nll = F.cross_entropy(logits.reshape(-1, logits.size(-1)), y.reshape(-1), reduction="none")
            nll = nll.view(len(same), length).double()
            total += float(nll.sum()); count += nll.numel()
            first += float(nll[:, 0].sum()); firsts += len(same)
config = checkpoint["config"]
print("NANOGPT_EVAL " + json.dumps({
    "tokens": count, "nats": total / count, "first_of_block_nats": first / firsts, "blocks": len(spans),
    "iter_num": checkpoint["iter_num"], "params": sum(p.numel() for p in model.parameters()),
    "params_without_positions": model.get_num_params(), "torch": torch.__version__,
    "config": {k: config[k] for k in ("learning_rate", "min_lr", "warmup_iters", "lr_decay_iters", "max_iters",
                                       "beta1", "beta2", "weight_decay", "grad_clip", "batch_size", "block_size",
                                       "bias", "eval_iters", "eval_interval", "dropout")}}))
'''


# -- ours scored in nanoGPT's block contexts (run with this interpreter; imports TensorFlow) ---------------------
OURS_SCORE = f"""
import json, sys
import numpy as np
from t2t_relpos.decoding import lm_scoring
from t2t_relpos.training import runs
model, _, _, path = runs.load(sys.argv[1], data_dir=sys.argv[2])
ids = np.load(sys.argv[3])
scorer = lm_scoring.model_scorer(model)
result = {{"checkpoint": path}}
for name, window, stride in (("windows", {CONTEXT}, {CONTEXT}), ("blocks", {CONTEXT + 1}, {CONTEXT})):
    result[name] = lm_scoring.score_ids(scorer, ids, window, stride, batch_size=64)
print("{_MARK}" + json.dumps(result), flush=True)
"""


def score_ours(out_dir, data_dir, log):
    """Our run's checkpoint scored on the eval split's ids: "windows", disjoint windows of 64 (what the trainer's
    evaluation reads), and "blocks", windows of 65 every 64 (the contexts of nanoGPT's blocks)."""
    ids = os.path.join(data_dir, f"{PROBLEM}-eval.ids.npy")
    output = common.run_python("-c", OURS_SCORE, out_dir, data_dir, ids, log=log, threads=1, name="scoring")
    marks = [line for line in output.splitlines() if line.startswith(_MARK)]
    if not marks:
        raise SystemExit(f"nanogpt: scoring {out_dir} printed no result; see {log}")
    return json.loads(marks[-1][len(_MARK):])


# -- preparation ----------------------------------------------------------------------------------------------
def read_text(path):
    with gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb") as f:
        return f.read().decode("utf-8")


def torch_version(python):
    """The torch version `python` imports, or None."""
    if not python or not os.path.isfile(python):
        return None
    proc = subprocess.run([python, "-c", "import numpy, torch; print(torch.__version__)"], capture_output=True,
                          text=True, check=False)
    return proc.stdout.strip().splitlines()[-1] if proc.returncode == 0 and proc.stdout.strip() else None


def prepare_nanogpt(checkout, python, text, log):
    """Writes input.txt into nanoGPT's data/shakespeare_char/ (unless it holds `text` already) and runs its
    prepare.py there; returns that folder."""
    folder = os.path.join(checkout, "data", "shakespeare_char")
    path = os.path.join(folder, "input.txt")
    current = None
    if os.path.isfile(path):
        with open(path, encoding="utf-8") as f:
            current = f.read()
    if current != text:
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
    proc = subprocess.run([python, "prepare.py"], cwd=folder, capture_output=True, text=True, check=False)
    with open(log, "a", encoding="utf-8") as f:
        f.write(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"nanogpt: its prepare.py failed ({proc.returncode}); see {log}")
    return folder


def prepare_ours(text_path, work_dir, log):
    """Our datagen of the problem into <work_dir>/data from a copy of the text in <work_dir>/raw."""
    raw, data = os.path.join(work_dir, "raw"), os.path.join(work_dir, "data")
    os.makedirs(raw, exist_ok=True)
    shutil.copyfile(text_path, os.path.join(raw, "tinyshakespeare.txt.gz" if text_path.endswith(".gz")
                                            else "tinyshakespeare.txt"))
    common.run_cli("datagen", f"--problem={PROBLEM}", f"--data_dir={data}", f"--tmp_dir={raw}", log=log)
    return data


def check_data(nanogpt_data, data_dir):
    """Both splits compared token by token (`check_same_stream`); {split: characters}."""
    import pickle  # pylint: disable=import-outside-toplevel

    import numpy as np  # pylint: disable=import-outside-toplevel

    with open(os.path.join(nanogpt_data, "meta.pkl"), "rb") as f:
        itos = pickle.load(f)["itos"]
    with open(os.path.join(data_dir, f"{PROBLEM}.characters.json"), encoding="utf-8") as f:
        characters = json.load(f)
    reserved = 3  # PAD, EOS, UNK (character_vocab): the characters' ids start after them.
    counts = {}
    for ours, theirs in (("train", "train"), ("eval", "val")):
        counts[ours] = check_same_stream(np.load(os.path.join(data_dir, f"{PROBLEM}-{ours}.ids.npy")),
                                         np.fromfile(os.path.join(nanogpt_data, f"{theirs}.bin"), dtype=np.uint16),
                                         characters, itos, reserved)
    return counts


def our_parameters(hparams_set, data_dir):
    """Parameters of the set's model for the problem's vocabulary (a child process: it imports TensorFlow)."""
    code = ("import sys; from t2t_relpos import registry; from t2t_relpos.training import trainer; "
            "hp = registry.hparams(sys.argv[1]).parse(sys.argv[2]); "
            "print(trainer.build_model(hp, registry.problem(sys.argv[3]), sys.argv[4]).count_params())")
    proc = subprocess.run([sys.executable, "-c", code, hparams_set, OUR_OVERRIDES, PROBLEM, data_dir],
                          capture_output=True, text=True, check=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return int(proc.stdout.strip().splitlines()[-1])


# -- runs -----------------------------------------------------------------------------------------------------
def load_average():
    with open("/proc/loadavg", encoding="utf-8") as f:
        return " ".join(f.read().split()[:3])


def timed_run(command, log_path, cwd=None):
    """Runs `command` (output to `log_path`) in the one-thread environment; its wall and CPU seconds, the load
    average before and after, and its output."""
    env = dict(os.environ, **ONE_THREAD, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    before = load_average()
    with open(log_path, "w", encoding="utf-8") as log:
        began = time.perf_counter()
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, cwd=cwd, env=env)
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - began
    with open(log_path, encoding="utf-8") as f:
        output = f.read()
    if os.waitstatus_to_exitcode(status) != 0:
        tail = "\n".join(output.strip().splitlines()[-15:])
        raise SystemExit(f"nanogpt: {log_path} failed with status {os.waitstatus_to_exitcode(status)}:\n{tail}")
    return {"wall": wall, "cpu": usage.ru_utime + usage.ru_stime, "load_before": before,
            "load_after": load_average(), "output": output}


def shown(command):
    return shlex.join(command).replace(common.REPO + os.sep, "")


def run_all(args, data_dir, log):
    """The trainings back to back, then their evaluations. Returns (rows, details)."""
    runs, details, commands = {}, {}, []
    nano_dir = os.path.join(args.work_dir, "nanogpt")
    shutil.rmtree(nano_dir, ignore_errors=True)
    os.makedirs(nano_dir)
    command = pinned(nanogpt_command(args.nanogpt_python, args.steps, nano_dir), args.core)
    commands.append(f"(cd {args.nanogpt_dir} && {shown(command)})")
    print(f"nanoGPT: {args.steps} steps on core {args.core} ...", flush=True)
    runs["nanogpt"] = timed_run(command, os.path.join(nano_dir, "train.log"), cwd=args.nanogpt_dir)
    print(f"    {runs['nanogpt']['wall']:.0f} s wall, load {runs['nanogpt']['load_before']} -> "
          f"{runs['nanogpt']['load_after']}", flush=True)
    for name in args.models:
        out_dir = os.path.join(args.work_dir, name)
        shutil.rmtree(out_dir, ignore_errors=True)
        command = pinned([sys.executable, "-c", OURS_WRAPPER, *ours_command(name, data_dir, out_dir, args.steps)],
                         args.core)
        commands.append(shown(pinned(["t2t-relpos-trainer", *command[6:]], args.core)))
        print(f"ours, {name}: {args.steps} steps on core {args.core} ...", flush=True)
        os.makedirs(out_dir)
        runs[name] = timed_run(command, os.path.join(out_dir, "train.log"))
        print(f"    {runs[name]['wall']:.0f} s wall, load {runs[name]['load_before']} -> {runs[name]['load_after']}",
              flush=True)

    # The evaluations, after all the trainings.
    script = os.path.join(nano_dir, "whole_val.py")
    with open(script, "w", encoding="utf-8") as f:
        f.write(NANOGPT_EVAL)
    proc = subprocess.run([args.nanogpt_python, script, args.nanogpt_dir, os.path.join(nano_dir, "ckpt.pt"),
                           os.path.join(args.nanogpt_dir, "data", "shakespeare_char", "val.bin")],
                          capture_output=True, text=True, check=False, env=dict(os.environ, OMP_NUM_THREADS="1"))
    lines = [line for line in proc.stdout.splitlines() if line.startswith("NANOGPT_EVAL ")]
    if proc.returncode != 0 or not lines:
        raise SystemExit(f"nanogpt: scoring nanoGPT's checkpoint failed:\n{proc.stderr[-2000:]}")
    evaluation = json.loads(lines[-1][len("NANOGPT_EVAL "):])
    if evaluation["iter_num"] != args.steps:
        raise SystemExit(f"nanogpt: its checkpoint is from iteration {evaluation['iter_num']}, not {args.steps}")
    parsed = parse_nanogpt_log(runs["nanogpt"]["output"])
    estimate = parsed["estimates"][-1]
    details["nanogpt"] = dict(evaluation, estimate=estimate, estimates=parsed["estimates"],
                              trained_iters=len(parsed["iters"]))
    rows = [{"toolkit": "nanoGPT", "model": f"GPT, learned positions (torch {evaluation['torch']})",
             "params": evaluation["params"], "steps": args.steps, "tokens_per_step": CONTEXT * WINDOWS,
             "nats": evaluation["nats"], "nats_blocks": evaluation["nats"], "wall": runs["nanogpt"]["wall"],
             "cpu": runs["nanogpt"]["cpu"], "median_ms": median_step_ms([ms / 1000 for _, _, ms in parsed["iters"]])}]
    for name in args.models:
        out_dir = os.path.join(args.work_dir, name)
        output = runs[name]["output"]
        final = parse_final_evaluation(output)
        marks = [json.loads(line[len(_MARK):]) for line in output.splitlines() if line.startswith(_MARK)]
        steps = marks[-1]["steps"] if marks else []
        score = score_ours(out_dir, data_dir, log)
        details[name] = {"final": final, "scores": score, "steps_seen": len(steps)}
        rows.append({"toolkit": "ours", "model": f"`{name}`", "params": our_parameters(name, data_dir),
                     "steps": args.steps, "tokens_per_step": statistics.mean(t for _, t in steps) if steps else 0,
                     "nats": -final["neg_log_perplexity"], "nats_blocks": score["blocks"]["log_perplexity"],
                     "wall": runs[name]["wall"], "cpu": runs[name]["cpu"],
                     "median_ms": median_step_ms([s for s, _ in steps])})
    loads = {name: (run["load_before"], run["load_after"]) for name, run in runs.items()}
    return rows, details, commands, loads


def report(args, rows, details, commands, loads, counts, seconds):
    nano = details["nanogpt"]
    config = nano["config"]
    load_lines = "\n".join(f"- {name}: {before} before, {after} after" for name, (before, after) in loads.items())
    command_lines = "\n".join(f"    {command}" for command in commands)
    ours = "\n".join(
        f"- `{name}`: the trainer's final evaluation {details[name]['final']}; its checkpoint scored in disjoint "
        f"windows of 64: {details[name]['scores']['windows']['log_perplexity']:.6f} nats "
        f"({details[name]['scores']['windows']['tokens']:,} tokens), in windows of 65 every 64 (nanoGPT's "
        f"blocks): {details[name]['scores']['blocks']['log_perplexity']:.6f}" for name in args.models)
    return f"""## Tiny Shakespeare, characters: the package against nanoGPT

`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min, ran on {common.code_version()}.\x20\x20
Machine: {common.machine_description()}; each training pinned to core {args.core} with one thread, back to back.

Same text and split, checked token by token ({counts['train']:,} training and {counts['eval']:,} validation
characters), 64-character context, {WINDOWS} windows a step, {args.steps} steps, one run each.

{format_table(rows)}

Val loss, whole split: nanoGPT's checkpoint (iteration {nano['iter_num']}) on all of val.bin in {nano['blocks']:,}
disjoint blocks ({nano['tokens']:,} characters scored, the first of a block with one character of context: mean
{nano['first_of_block_nats']:.4f}); ours the trainer's final evaluation (disjoint windows of 64 from the start
symbol, 111,541 tokens with the closing EOS). "nanoGPT's blocks": ours scored (`lm_scoring.score_ids`) in windows of 65
every 64, every token in the context nanoGPT's blocks give it.
nanoGPT's own estimate at step {nano['estimate'][0]} (estimate_loss, {config['eval_iters']} random batches): train
{nano['estimate'][1]:.4f}, val {nano['estimate'][2]:.4f}. nanoGPT trained {nano['trained_iters']} iterations (its
loop makes one more step after the last evaluation and checkpoint).

nanoGPT's optimizer: AdamW, lr {config['learning_rate']} cosine to {config['min_lr']} over {config['lr_decay_iters']}
steps after {config['warmup_iters']} warm-up, betas {config['beta1']}/{config['beta2']}, weight decay
{config['weight_decay']}, gradient clipping {config['grad_clip']}, bias {config['bias']}.

Load average (1, 5, 15 min) around each training:

{load_lines}

Ours in detail:

{ours}

Commands:

{command_lines}
"""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("nanogpt_dir", help="A checkout of nanoGPT (its train.py is run there).")
    parser.add_argument("nanogpt_python", help="An interpreter that imports torch and numpy (nanoGPT's venv).")
    parser.add_argument("--steps", type=int, default=2000)
    parser.add_argument("--core", type=int, default=1, help="The core every training is pinned to (taskset -c).")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS), help="Our hparams sets, comma-separated.")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="Tiny Shakespeare (gzipped or not).")
    parser.add_argument("--work_dir", default="/tmp/nanogpt_benchmark", help="Both toolkits' runs and our data.")
    parser.add_argument("--json", help="Also write the rows and details to this file.")
    args = parser.parse_args()
    if args.steps < 1 or args.steps % NANOGPT_EVAL_INTERVAL:
        parser.error(f"--steps must be a positive multiple of {NANOGPT_EVAL_INTERVAL}: nanoGPT's config evaluates, "
                     "and writes its checkpoint, every 250 steps")
    args.models = [m for m in args.models.split(",") if m]
    if not os.path.isfile(args.text):
        print(f"nanogpt: skipped, the text is not there ({args.text})")
        return 0
    args.nanogpt_dir = os.path.abspath(args.nanogpt_dir)
    if not os.path.isfile(os.path.join(args.nanogpt_dir, "train.py")) or not os.path.isfile(
            os.path.join(args.nanogpt_dir, "data", "shakespeare_char", "prepare.py")):
        print(f"nanogpt: skipped, {args.nanogpt_dir} is not a nanoGPT checkout (no train.py or "
              "data/shakespeare_char/prepare.py)")
        return 0
    if torch_version(args.nanogpt_python) is None:
        print(f"nanogpt: skipped, {args.nanogpt_python} does not import torch and numpy")
        return 0
    args.work_dir = os.path.abspath(args.work_dir)
    if args.work_dir.startswith(common.REPO + os.sep):
        parser.error("--work_dir must lie outside the repository")
    began = time.perf_counter()
    os.makedirs(args.work_dir, exist_ok=True)
    log = os.path.join(args.work_dir, "prepare.log")
    nanogpt_data = prepare_nanogpt(args.nanogpt_dir, args.nanogpt_python, read_text(args.text), log)
    data_dir = prepare_ours(args.text, args.work_dir, log)
    counts = check_data(nanogpt_data, data_dir)
    print(f"Data: the same {counts['train']:,} training and {counts['eval']:,} validation characters on both sides",
          flush=True)
    rows, details, commands, loads = run_all(args, data_dir, log)
    text = report(args, rows, details, commands, loads, counts, time.perf_counter() - began)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"rows": rows, "details": details, "loads": loads, "commands": commands,
                       "code": common.code_version(), "date": common.today()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
