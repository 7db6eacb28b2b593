"""Training throughput against OpenNMT-tf 2.32: the same model, data and batches, one CPU core each.

    .venv/bin/python benchmarks/opennmt_tf.py [--shape tiny|base] [--positions relative,sinusoid] [--steps N]
        [--reps N] [--write]

What runs. For each position encoding, this package's `t2t-relpos-trainer` (hparams sets `transformer_cpu_rel` /
`transformer_cpu` at --shape tiny, 1500 steps: 2+2 layers, d_model 64, 4 heads, FFN 256; `transformer_base_rel` /
`transformer_base` at --shape base, 200 steps: 6+6 layers, d_model 512, 8 heads, FFN 1024, with the tiny shape's
2048-token batches instead of the sets' 4096) and OpenNMT-tf's `onmt-main
train` with a custom `--model` file written from the same hparams (layers, widths, dropouts, post-norm, shared
source/target/softmax embeddings, no attention or softmax biases, Shaw relative positions with the same clipping
distance or sinusoid positions, label smoothing, Adam(0.9, 0.98, 1e-9), the Noam schedule with the same scale and
warm-up), on Multi30k English->German training text in the same SentencePiece vocabulary. Each trainer is a
separate process pinned to one core (`sched_setaffinity`) with TensorFlow's intra- and inter-op pools at one
thread (`TF_NUM_INTRAOP_THREADS` / `TF_NUM_INTEROP_THREADS`, and OpenNMT-tf's own
`--intra_op_parallelism_threads 1 --inter_op_parallelism_threads 1`). The two run at the same time on two cores,
then again with the cores swapped (one after the other when the benchmark may use one core, e.g. under `taskset
-c 1`); --reps repeats both. --allocator picks TensorFlow's CPU allocator: by default
each toolkit's own (ours BFC, OpenNMT-tf TensorFlow's malloc-backed default), or the same one in both.

The data. `translate_small.prepare_data` (t2t-relpos-datagen, `translate_local`, a shared SentencePiece model of
--vocab_size pieces) prepares ours. OpenNMT-tf gets the same training pairs (those with both sides non-empty, as
our datagen keeps) encoded with the same SentencePiece model and our encoder's convention (one space prepended
to the text), written as space-separated pieces, and a vocabulary file listing the same pieces: `<blank> <s>
</s>` for PAD / BOS / EOS, every other piece once, minus one piece the corpus never uses, so that with OpenNMT-tf's
out-of-vocabulary bucket both sides have --vocab_size rows in the shared embedding. Sources end with EOS on both
sides (`source_sequence_controls: {end: true}`). OpenNMT-tf batches after shuffling and repeats the batched
dataset, which leaves a tail of small batches at every epoch end; the training files here are that many shuffled
copies of the corpus that no run reaches the end of them.

The batches. Both use a token budget of the set's `batch_size` (2048) per batch, padding included, with the rows of a
batch taken from one length bucket and `budget // bucket length` rows, where the length of a pair is that of its
longer side (EOS and the decoder's shifted start included). OpenNMT-tf's buckets are `length_bucket_width` wide
(1 here, its finest); ours are geometric (1.1x) above 20 tokens, so with --buckets same (the default) ours are set
to width 1 as well (`min_length_bucket=1,length_bucket_step=1.001`, hparams only): both then apply the identical
rule. Both drop pairs longer than `max_length` (256) and shuffle through a 1024-example buffer.

What is measured. Each trainer runs through a small wrapper (`python -c`) that calls its console entry point
unchanged and prints, every --log_every steps, the non-padding source and target tokens consumed so far (summed
from the per-step counts each trainer computes anyway: ours `source_tokens` + `tokens`, OpenNMT-tf's words
counters, i.e. the batches' `length` features) with the process's CPU time (all threads) and wall time. Tokens per
CPU-second is taken over the steps after --warmup_steps (graph tracing and the first batches left out) up to the
last step; "whole run" divides all tokens by the CPU seconds of the whole process (`os.wait4` rusage: start-up,
data loading, checkpoints and our one-batch final evaluation included). The ratio ours / OpenNMT-tf pairs the two
runs made at the same time. Medians and the range over runs.

It skips with one line (exit 0) when the Multi30k files are absent or when the OpenNMT-tf environment can neither
be found nor built (--opennmt_venv, default `benchmarks/runs/opennmt_venv`: `python3.11 -m venv` and `pip install
tensorflow==2.13.1 OpenNMT-tf==2.32.0`, which needs a package index). Work files go to --work_dir; --write records
the table in docs/studies/benchmark_runs.md.
"""

import argparse
import glob
import hashlib
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position
import translate_small  # noqa: E402  pylint: disable=wrong-import-position

_HERE = os.path.dirname(os.path.abspath(__file__))
OPENNMT_PACKAGES = ("tensorflow==2.13.1", "OpenNMT-tf==2.32.0")
SHAPES = {"tiny": {"relative": "transformer_cpu_rel", "sinusoid": "transformer_cpu"},
          "base": {"relative": "transformer_base_rel", "sinusoid": "transformer_base"}}
# Per shape: steps and pairs of runs by default, and overrides of our sets. The base sets' own batches are 4096
# tokens; the base shape keeps the tiny shape's 2048-token batches (the same batches, half the time per step).
SHAPE_DEFAULTS = {"tiny": {"steps": 1500, "reps": 2, "hparams": {}},
                  "base": {"steps": 200, "reps": 1, "hparams": {"batch_size": "2048"}}}
# Our buckets made those of OpenNMT-tf's `length_bucket_width: 1`: one per length, budget // length rows.
SAME_BUCKETS = "min_length_bucket=1,length_bucket_step=1.001"
SHUFFLE_BUFFER = 1024  # Our pipeline's training shuffle buffer (t2t_relpos.data.pipeline.DEFAULT_SHUFFLE_BUFFER).
_MARK = "TOKENS_SO_FAR "
ONE_THREAD = {"TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1", "OMP_NUM_THREADS": "1"}
# TensorFlow's CPU allocator per toolkit (TF_CPU_ALLOCATOR_USE_BFC; None leaves the variable unset). Our
# command-line tools choose BFC unless told otherwise; TensorFlow, and so OpenNMT-tf, default to malloc.
ALLOCATORS = {"shipped": {"ours": None, "theirs": "false"},
              "bfc": {"ours": "true", "theirs": "true"},
              "tensorflow": {"ours": "false", "theirs": "false"}}

# The wrappers: each runs its toolkit's console entry point as it is, after wrapping the method that receives
# the per-step token counts so that the running totals are printed with the process's CPU and wall time.
# With OPENNMT_TF_BENCHMARK_PROFILE = "<dir>,<first>,<last>" in the environment, a wrapper also traces steps
# first+1 .. last with TensorFlow's profiler into <dir> (host tracer level 3: the small kernels too; `--profile`).
_PROFILE = "OPENNMT_TF_BENCHMARK_PROFILE"
PROFILE_HOOK = f"""
import os
import tensorflow as tf
_trace = os.environ.get("{_PROFILE}", "").split(",")
def trace_at(step):
    if len(_trace) == 3 and step == int(_trace[1]):
        tf.profiler.experimental.start(_trace[0], options=tf.profiler.experimental.ProfilerOptions(
            host_tracer_level=3, python_tracer_level=0, device_tracer_level=0))
    elif len(_trace) == 3 and step == int(_trace[2]):
        tf.profiler.experimental.stop()
"""

OURS_WRAPPER = PROFILE_HOOK + f"""
import json, sys, time
from t2t_relpos.training import trainer
EVERY = int(sys.argv.pop(1))
totals = {{"step": 0, "source": 0, "target": 0}}
_add = trainer._Window.add
def add(self, stats, seconds):
    _add(self, stats, seconds)
    totals["step"] += 1
    trace_at(totals["step"])
    totals["source"] += int(stats["source_tokens"])
    totals["target"] += int(stats["tokens"])
    if totals["step"] % EVERY == 0:
        print("{_MARK}" + json.dumps(dict(totals, cpu=time.process_time(), wall=time.perf_counter())), flush=True)
trainer._Window.add = add
from t2t_relpos.cli import trainer as cli
cli.run()
"""

THEIRS_WRAPPER = PROFILE_HOOK + f"""
import collections, json, sys, time
from opennmt import training
totals = collections.Counter()
def counters(stats):
    return {{name: int(value) for name, value in stats._get_words_counters().items()}}
_reset = training.TrainingStats.reset_throughput
def reset_throughput(self):  # Called after logs, checkpoints and in the first steps: keep what it clears.
    totals.update(counters(self))
    _reset(self)
_log = training.TrainingStats.log
def log(self, is_master=True):  # Called every save_summary_steps steps.
    trace_at(int(self._last_step))
    now = totals + collections.Counter(counters(self))
    print("{_MARK}" + json.dumps({{"step": int(self._last_step), "source": now["source"], "target": now["target"],
                                   "cpu": time.process_time(), "wall": time.perf_counter()}}), flush=True)
    _log(self, is_master)
training.TrainingStats.reset_throughput = reset_throughput
training.TrainingStats.log = log
from opennmt.bin import main
sys.exit(main.main())
"""

MODEL_FILE = '''"""OpenNMT-tf twin of t2t-relpos's `{name}` for benchmarks/opennmt_tf.py (written by it)."""

import opennmt


def model():
    return opennmt.models.Transformer(
        source_inputter=opennmt.inputters.WordEmbedder(embedding_size={hidden}),
        target_inputter=opennmt.inputters.WordEmbedder(embedding_size={hidden}),
        num_layers=({encoder_layers}, {decoder_layers}),
        num_units={hidden},
        num_heads={heads},
        ffn_inner_dim={filter},
        dropout={dropout},
        attention_dropout={attention_dropout},
        ffn_dropout={relu_dropout},
        position_encoder_class={position_encoder},
        maximum_relative_position={max_relative_position},
        share_embeddings=opennmt.models.EmbeddingsSharingLevel.{sharing},
        mha_bias=False,
        pre_norm={pre_norm},
        output_layer_bias=False,
    )
'''


# -- the OpenNMT-tf environment ---------------------------------------------------------------------------------
def opennmt_versions(venv):
    """(OpenNMT-tf version, TensorFlow version) importable from `venv`, or None."""
    python = os.path.join(venv, "bin", "python")
    if not os.path.isfile(python):
        return None
    code = "import opennmt, tensorflow as tf; print(opennmt.__version__, tf.__version__)"
    proc = subprocess.run([python, "-c", code], capture_output=True, text=True, check=False,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    words = proc.stdout.split()
    return tuple(words[-2:]) if proc.returncode == 0 and len(words) >= 2 else None


def find_or_build_venv(venv, build, python311):
    """(versions, None) for a usable OpenNMT-tf environment at `venv` (built there if allowed), else (None, why)."""
    versions = opennmt_versions(venv)
    if versions:
        return versions, None
    if not build:
        return None, f"no OpenNMT-tf environment at {venv} (and --no_build)"
    interpreter = shutil.which(python311)
    if interpreter is None:
        return None, f"{python311} is not on PATH, so no OpenNMT-tf environment can be built at {venv}"
    print(f"Building the OpenNMT-tf environment in {venv} ({' '.join(OPENNMT_PACKAGES)}) ...", flush=True)
    for command in ([interpreter, "-m", "venv", venv],
                    [os.path.join(venv, "bin", "pip"), "install", "--quiet", *OPENNMT_PACKAGES]):
        proc = subprocess.run(command, capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            last = (proc.stderr.strip().splitlines() or ["no message"])[-1]
            return None, f"building {venv} failed at `{' '.join(command[-3:])}`: {last}"
    versions = opennmt_versions(venv)
    return (versions, None) if versions else (None, f"{venv} was built but does not import opennmt")


# -- hparams and data ---------------------------------------------------------------------------------------------
def hparams_values(name, overrides):
    """Our hparams set `name` with `overrides`, as a dict (read in a child process: the registry imports TF)."""
    code = ("import json, sys; from t2t_relpos import registry; "
            "print(json.dumps(registry.hparams(sys.argv[1]).parse(sys.argv[2]).values()))")
    proc = subprocess.run([sys.executable, "-c", code, name, overrides], capture_output=True, text=True, check=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    return json.loads(proc.stdout.strip().splitlines()[-1])


def check_mappable(hp):
    """Stops with a message where `hp` asks for something the OpenNMT-tf twin could not reproduce."""
    needed = {"model": "transformer", "attention_key_channels": 0, "attention_value_channels": 0,
              "relative_keys": True, "relative_values": True, "optimizer": "adam",
              "learning_rate_schedule": "noam", "clip_grad_norm": 0.0, "weight_decay": 0.0, "accumulation_steps": 1}
    wrong = {k: hp[k] for k, v in needed.items() if hp[k] != v}
    if hp["position_encoding"] not in ("relative", "sinusoid"):
        wrong["position_encoding"] = hp["position_encoding"]
    if wrong:
        raise SystemExit(f"opennmt_tf: no OpenNMT-tf twin for {hp['hparams_set']} with {wrong}")


def model_file_text(hp):
    relative = hp["position_encoding"] == "relative"
    return MODEL_FILE.format(
        name=hp["hparams_set"], hidden=hp["hidden_size"], encoder_layers=hp["num_encoder_layers"],
        decoder_layers=hp["num_decoder_layers"], heads=hp["num_heads"], filter=hp["filter_size"],
        dropout=hp["layer_prepostprocess_dropout"], attention_dropout=hp["attention_dropout"],
        relu_dropout=hp["relu_dropout"],
        position_encoder="None" if relative else "opennmt.layers.SinusoidalPositionEncoder",
        max_relative_position=hp["max_relative_position"] if relative else "None",
        # Ours ties the source embedding too when the vocabulary is shared (it is, for translate_local).
        sharing="ALL" if hp["shared_embedding_and_softmax_weights"] else "NONE",
        pre_norm=hp["norm_position"] == "pre")


def opennmt_config(hp, files, model_dir, steps, log_every):
    """OpenNMT-tf's run configuration, every training setting written out (no --auto_config)."""
    return {
        "model_dir": model_dir,
        "data": {"train_features_file": files["source"], "train_labels_file": files["target"],
                 "source_vocabulary": files["vocab"], "target_vocabulary": files["vocab"],
                 "source_sequence_controls": {"start": False, "end": True}},
        "params": {"optimizer": "Adam",
                   "optimizer_params": {"beta_1": hp["optimizer_adam_beta1"], "beta_2": hp["optimizer_adam_beta2"],
                                        "epsilon": hp["optimizer_adam_epsilon"]},
                   "learning_rate": hp["learning_rate"], "decay_type": "NoamDecay",
                   "decay_params": {"model_dim": hp["hidden_size"], "warmup_steps": hp["learning_rate_warmup_steps"]},
                   "label_smoothing": hp["label_smoothing"], "average_loss_in_time": True},
        "train": {"batch_type": "tokens", "batch_size": hp["batch_size"], "length_bucket_width": 1,
                  "sample_buffer_size": SHUFFLE_BUFFER, "maximum_features_length": hp["max_length"],
                  "maximum_labels_length": hp["max_length"], "max_step": steps, "save_checkpoints_steps": steps,
                  "keep_checkpoint_max": 1, "save_summary_steps": log_every},
    }


def to_yaml(mapping, indent=0):
    """`mapping` (nested dicts of str, bool, int, float) as YAML that PyYAML's loader reads back exactly.

    (JSON would be YAML too, but PyYAML reads a float such as 1e-09, without a dot, as a string.)
    """
    lines = []
    for key, value in mapping.items():
        if isinstance(value, dict):
            lines.append(f"{' ' * indent}{key}:")
            lines.append(to_yaml(value, indent + 2))
        elif isinstance(value, bool):
            lines.append(f"{' ' * indent}{key}: {str(value).lower()}")
        elif isinstance(value, float):
            lines.append(f"{' ' * indent}{key}: {value:.10e}")
        else:
            lines.append(f"{' ' * indent}{key}: {json.dumps(value)}")
    return "\n".join(lines)


def training_pairs(multi30k):
    """Multi30k's training pairs as our datagen keeps them (both sides non-empty), in file order."""
    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel  # No TensorFlow.

    pairs = parallel_text.aligned_pairs(os.path.join(multi30k, "train.en.gz"), os.path.join(multi30k, "train.de.gz"))
    return [(s, t) for s, t in pairs if s.strip() and t.strip()]


def read_json(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def batches_per_epoch(lengths, budget):
    """Full batches one pass of `lengths` (pair lengths) gives under the width-1 rule (budget // length rows)."""
    counts = {}
    for length in lengths:
        counts[length] = counts.get(length, 0) + 1
    return sum(count // max(1, budget // length) for length, count in counts.items())


def prepare_opennmt_data(data_dir, multi30k, out_dir, steps, budget, seed=1):
    """Writes OpenNMT-tf's training files from the SentencePiece model in `data_dir`; returns their paths and stats.

    `source` / `target`: space-separated pieces, as many shuffled copies of the corpus as `steps` batches of
    `budget` tokens need, plus one. `vocab`: `<blank>`, `<s>`, `</s>`, then the model's other pieces.
    """
    import sentencepiece as spm  # pylint: disable=import-outside-toplevel

    model_path = os.path.join(data_dir, "translate_local.sentencepiece.model")
    processor = spm.SentencePieceProcessor(model_file=model_path)
    pad, eos, unk = processor.pad_id(), processor.eos_id(), processor.unk_id()
    pieces = [processor.id_to_piece(i) for i in range(processor.get_piece_size())]
    # OpenNMT-tf splits lines on ASCII whitespace; a piece holding any whitespace (e.g. U+00A0) gets a name.
    names = [f"<piece{i}>" if any(c.isspace() for c in p) else p for i, p in enumerate(pieces)]
    if len(set(names)) != len(names):
        raise SystemExit("opennmt_tf: renamed pieces collide with existing ones")
    encoded = []  # (source ids, target ids) per pair, our encoder's convention: " " + text.
    for source, target in training_pairs(multi30k):
        encoded.append((processor.encode(" " + source), processor.encode(" " + target)))
    lengths = [max(len(s), len(t)) + 1 for s, t in encoded]  # + EOS (and the decoder's shifted start).
    per_epoch = batches_per_epoch(lengths, budget)
    copies = -(-steps // max(1, per_epoch)) + 1
    used = {i for pair in encoded for side in pair for i in side}
    if unk in used:
        raise SystemExit("opennmt_tf: the corpus encodes to <unk>, which the vocabulary file cannot hold")
    spare = [i for i in range(len(pieces)) if i not in used and i not in (pad, eos, unk)]
    # <blank> <s> </s> + the pieces but PAD, EOS, UNK and one unused piece + OpenNMT-tf's OOV bucket = the size.
    vocab = ["<blank>", "<s>", "</s>"] + [names[i] for i in range(len(pieces))
                                          if i not in (pad, eos, unk) and i != spare[-1]]
    files = {"source": os.path.join(out_dir, f"train.x{copies}.src"),
             "target": os.path.join(out_dir, f"train.x{copies}.tgt"), "vocab": os.path.join(out_dir, "vocab.txt")}
    stamp = os.path.join(out_dir, f"train.x{copies}.json")
    with open(model_path, "rb") as f:
        fingerprint = {"model": hashlib.sha256(f.read()).hexdigest(), "pairs": len(encoded), "copies": copies,
                       "seed": seed}
    if not os.path.isfile(stamp) or read_json(stamp) != fingerprint:
        os.makedirs(out_dir, exist_ok=True)
        with open(files["vocab"], "w", encoding="utf-8") as f:
            f.write("\n".join(vocab) + "\n")
        lines = [(" ".join(names[i] for i in s), " ".join(names[i] for i in t)) for s, t in encoded]
        for (s, t), (source_ids, target_ids) in zip(lines, encoded):
            if len(s.split(" ")) != len(source_ids) or len(t.split(" ")) != len(target_ids):
                raise SystemExit(f"opennmt_tf: a line does not split back into its pieces: {s!r} / {t!r}")
        order = list(range(len(lines)))
        rng = random.Random(seed)
        with open(files["source"], "w", encoding="utf-8") as fs, open(files["target"], "w", encoding="utf-8") as ft:
            for _ in range(copies):
                rng.shuffle(order)
                fs.writelines(lines[i][0] + "\n" for i in order)
                ft.writelines(lines[i][1] + "\n" for i in order)
        with open(stamp, "w", encoding="utf-8") as f:
            json.dump(fingerprint, f)
    stats = {"pairs": len(encoded), "copies": copies, "batches_per_epoch": per_epoch,
             "tokens_per_epoch": sum(len(s) + len(t) + 2 for s, t in encoded), "vocab_rows": len(vocab) + 1,
             "renamed": sum(1 for i, p in enumerate(pieces) if names[i] != p)}
    return files, stats


# -- runs ---------------------------------------------------------------------------------------------------------
def toolkit_environment(name, allocator):
    """The environment of toolkit `name`'s runs: one thread, quiet, no GPU, the --allocator's CPU allocator."""
    env = dict(os.environ, **ONE_THREAD, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2", CUDA_VISIBLE_DEVICES="")
    env.pop("TF_CPU_ALLOCATOR_USE_BFC", None)
    if ALLOCATORS[allocator][name] is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = ALLOCATORS[allocator][name]
    return env


def launch(command, log_path, core, env):
    """Starts `command` pinned to `core` in environment `env`, output to `log_path`; returns (Popen, start)."""
    log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with  # Closed by finish().
    pin = (lambda: os.sched_setaffinity(0, {core})) if core is not None else None
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, text=True, preexec_fn=pin, env=env)
    process.log_file = log
    return process, time.perf_counter()


def finish(process, started, log_path):
    """Waits for a launched run; its whole-process CPU seconds (rusage), wall seconds and token lines."""
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.perf_counter() - started
    process.returncode = os.waitstatus_to_exitcode(status)
    process.log_file.close()
    with open(log_path, encoding="utf-8") as f:
        text = f.read()
    if process.returncode != 0:
        tail = "\n".join(text.strip().splitlines()[-15:])
        raise SystemExit(f"opennmt_tf: {log_path} failed with status {process.returncode}:\n{tail}")
    marks = [json.loads(line[len(_MARK):]) for line in text.splitlines() if line.startswith(_MARK)]
    return {"cpu_total": usage.ru_utime + usage.ru_stime, "wall_total": wall, "marks": marks}


def measure(run, steps, warmup_steps):
    """Tokens per CPU-second and per wall second after `warmup_steps`, and over the whole process."""
    marks = run["marks"]
    if not marks or marks[-1]["step"] != steps:
        raise SystemExit(f"opennmt_tf: a run logged no token count at its last step ({marks[-1:] or 'none'})")
    first = next(m for m in marks if m["step"] >= min(warmup_steps, steps))
    last = marks[-1]
    if last is first:
        first = {"step": 0, "source": 0, "target": 0, "cpu": 0.0, "wall": last["wall"] - run["wall_total"]}

    def tokens(m):
        return m["source"] + m["target"]

    return {"steady_cpu": (tokens(last) - tokens(first)) / max(last["cpu"] - first["cpu"], 1e-9),
            "steady_wall": (tokens(last) - tokens(first)) / max(last["wall"] - first["wall"], 1e-9),
            "whole_cpu": tokens(last) / run["cpu_total"], "tokens_per_step": tokens(last) / steps,
            "source_share": last["source"] / max(tokens(last), 1), "cpu_total": run["cpu_total"],
            "wall_total": run["wall_total"], "window": (first["step"], last["step"])}


def our_overrides(args):
    """The hparams overrides of our runs: the shape's, exact-length buckets (--buckets same), then --hparams."""
    given = dict(item.split("=", 1) for item in args.hparams.split(",") if item)
    overrides = dict(SHAPE_DEFAULTS[args.shape]["hparams"])
    if args.buckets == "same":
        overrides.update(item.split("=", 1) for item in SAME_BUCKETS.split(","))
    overrides.update(given)
    return ",".join(f"{name}={value}" for name, value in overrides.items())


def commands(args, hp, positions, data_dir, files, run_dir, venv):
    """{toolkit: (command, environment, model file text)} for one pair of runs into `run_dir`."""
    overrides = our_overrides(args)
    ours = [sys.executable, "-c", OURS_WRAPPER, str(args.log_every), "--problem=translate_local",
            f"--hparams_set={hp['hparams_set']}", f"--data_dir={data_dir}",
            f"--output_dir={os.path.join(run_dir, 'ours')}", f"--train_steps={args.steps}",
            f"--checkpoint_every={args.steps}", "--eval_every=0", "--eval_steps=1", "--keep_checkpoint_max=1",
            f"--log_every={args.log_every}", "--seed=1"] + ([f"--hparams={overrides}"] if overrides else [])
    model_path = os.path.join(run_dir, f"opennmt_model_{positions}.py")
    config_path = os.path.join(run_dir, f"opennmt_config_{positions}.yml")
    theirs = [os.path.join(venv, "bin", "python"), "-c", THEIRS_WRAPPER, "--model", model_path,
              "--config", config_path, "--seed", "1", "--intra_op_parallelism_threads", "1",
              "--inter_op_parallelism_threads", "1", "train"]
    config = opennmt_config(hp, files, os.path.join(run_dir, "theirs"), args.steps, args.log_every)
    shown = {"ours": ["t2t-relpos-trainer"] + ours[4:], "theirs": ["onmt-main"] + theirs[3:]}
    return {"ours": ours, "theirs": theirs, "shown": shown, "model_path": model_path, "config_path": config_path,
            "config": config, "model_text": model_file_text(hp)}


def free_cores():
    """The (at most two) cores the benchmark may use: one per trainer, or one for both in turn."""
    return sorted(os.sched_getaffinity(0))[:2]


def run_pair(plan, run_dir, cores, allocator, extra_env=None):
    """Runs ours on cores[0] and theirs on cores[1] at the same time (one after the other on a single core).

    `extra_env`: {toolkit: {variable: value}} added to that toolkit's environment."""
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir)
    with open(plan["model_path"], "w", encoding="utf-8") as f:
        f.write(plan["model_text"])
    with open(plan["config_path"], "w", encoding="utf-8") as f:
        f.write(to_yaml(plan["config"]) + "\n")
    env = {name: dict(toolkit_environment(name, allocator), **(extra_env or {}).get(name, {}))
           for name in ("ours", "theirs")}
    logs = {name: os.path.join(run_dir, f"{name}.log") for name in ("ours", "theirs")}
    results = {}
    if len(cores) > 1:
        started = {name: launch(plan[name], logs[name], core, env[name])
                   for name, core in zip(("ours", "theirs"), cores)}
        for name, (process, began) in started.items():
            results[name] = finish(process, began, logs[name])
    else:
        for name in ("ours", "theirs"):
            process, began = launch(plan[name], logs[name], cores[0] if cores else None, env[name])
            results[name] = finish(process, began, logs[name])
    return results


def prepare(args, log):
    """Both toolkits' data and our hparams per encoding: (data_dir, {positions: hparams}, files, stats)."""
    data_dir = translate_small.prepare_data(args, log)
    hps = {}
    for positions in args.positions:
        name = SHAPES[args.shape][positions]
        hps[positions] = dict(hparams_values(name, our_overrides(args)), hparams_set=name)
        check_mappable(hps[positions])
    budget = hps[args.positions[-1]]["batch_size"]
    files, stats = prepare_opennmt_data(data_dir, args.multi30k, os.path.join(args.work_dir, "opennmt_data"),
                                        args.steps, budget)
    return data_dir, hps, files, stats


def benchmark(args, venv):
    log = []
    data_dir, hps, files, stats = prepare(args, log)
    runs = {positions: {"hp": hp, "results": []} for positions, hp in hps.items()}
    print(f"OpenNMT-tf data: {stats['pairs']:,} pairs x {stats['copies']} shuffled copies "
          f"(~{stats['batches_per_epoch']} full batches per copy); vocabulary of {stats['vocab_rows']} rows",
          flush=True)
    cores = free_cores()
    for rep in range(args.reps):
        order = args.positions if rep % 2 == 0 else args.positions[::-1]
        for positions in order:
            for swap in (False, True):
                pair_cores = cores[::-1] if swap else cores
                run_dir = os.path.join(args.work_dir, f"{args.shape}_{positions}")
                plan = commands(args, runs[positions]["hp"], positions, data_dir, files, run_dir, venv)
                if rep == 0 and not swap:
                    log += [" ".join(plan["shown"][name]).replace(common.REPO + os.sep, "")
                            for name in ("ours", "theirs")]
                    runs[positions]["plan"] = plan
                print(f"[rep {rep + 1}/{args.reps}] {positions}: ours on core {pair_cores[0]}, OpenNMT-tf on core "
                      f"{pair_cores[-1]}", flush=True)
                result = run_pair(plan, run_dir, pair_cores, args.allocator)
                measured = {k: measure(v, args.steps, args.warmup_steps) for k, v in result.items()}
                runs[positions]["results"].append(measured)
                print("    " + "; ".join(f"{k} {v['steady_cpu']:,.0f} tok/CPU-s ({v['tokens_per_step']:,.0f} "
                                         f"tok/step, whole run {v['whole_cpu']:,.0f})" for k, v in measured.items()),
                      flush=True)
    return runs, stats, log


def profile(args, venv):
    """--profile: one run per toolkit and encoding (on one core after the other, or two at once), steps
    first+1 .. last traced. Returns ({positions: {toolkit: (traced ms per step, {op type: ms per step},
    (CPU ms per step, tokens per CPU-second))}}, the log)."""
    import profile_step  # pylint: disable=import-outside-toplevel  # Its op table; needs xprof.

    log = []
    data_dir, hps, files, _ = prepare(args, log)
    first, last = args.profile
    tables = {}
    for positions, hp in hps.items():
        run_dir = os.path.join(args.work_dir, f"{args.shape}_{positions}_profile")
        plan = commands(args, hp, positions, data_dir, files, run_dir, venv)
        log += [" ".join(plan["shown"][toolkit]).replace(common.REPO + os.sep, "") for toolkit in ("ours", "theirs")]
        traces = {toolkit: os.path.join(args.work_dir, f"{args.shape}_{positions}_trace_{toolkit}")
                  for toolkit in ("ours", "theirs")}
        for trace in traces.values():
            shutil.rmtree(trace, ignore_errors=True)
        print(f"{positions}: tracing steps {first + 1}-{last} of each toolkit", flush=True)
        runs = run_pair(plan, run_dir, free_cores(), args.allocator,
                 {toolkit: {_PROFILE: f"{trace},{first},{last}"} for toolkit, trace in traces.items()})
        tables[positions] = {}
        for toolkit, trace in traces.items():
            table = profile_step.op_table(trace, last - first, 10 ** 6)
            if table is None:
                raise SystemExit("opennmt_tf: --profile needs the xprof package (pip install xprof)")
            busy, _, by_type = table
            xla = xla_times(trace, last - first)
            marks = {m["step"]: m for m in runs[toolkit]["marks"]}
            cpu = (marks[last]["cpu"] - marks[first]["cpu"]) / (last - first)
            tokens = sum(marks[last][side] - marks[first][side] for side in ("source", "target"))
            tables[positions][toolkit] = (busy + sum(xla.values()), dict(by_type, **xla),
                                          (cpu * 1000, tokens / (cpu * (last - first))))
    return tables, log


XLA_RUN, XLA_COMPILE = "XLA clusters, running", "XLA clusters, compiling"
_COMPILER_EVENTS = ("CpuCompiler::RunBackend", "HLO passes through layout assignment",
                    "HLO passes after layout assignment")


def xla_times(trace_dir, steps):
    """{XLA_RUN: ms per step, XLA_COMPILE: ms per step} of a trace's XLA-compiled clusters.

    The op statistics leave them out. A launch that compiles (the cluster meets new shapes) is an asynchronous
    kernel, whose trace event (`ExecutorState::ProcessAsync::Start`) holds the compilation and the run of the
    compiled code (`CpuExecutable::ExecuteAsyncOnStream`); a launch of code compiled before shows the run alone.
    Running is every run event; compiling is the rest of the outermost asynchronous launch events, and the
    compiler's own events (`_COMPILER_EVENTS`) where a compilation runs outside such a launch.
    """
    from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel

    launches = runs = runs_in_launches = 0
    for path in glob.glob(os.path.join(trace_dir, "plugins", "profile", "*", "*.xplane.pb")):
        space = xplane_pb2.XSpace()
        with open(path, "rb") as f:
            space.ParseFromString(f.read())
        for plane in space.planes:
            names = {key: meta.name for key, meta in plane.event_metadata.items()}
            for line in plane.lines:
                open_until = -1  # The end of the outermost launch event being inside of.
                for event in sorted(line.events, key=lambda e: (e.offset_ps, -e.duration_ps)):
                    name = names.get(event.metadata_id, "")
                    if name == "CpuExecutable::ExecuteAsyncOnStream":
                        runs += event.duration_ps
                        runs_in_launches += event.duration_ps if event.offset_ps < open_until else 0
                    elif name == "ExecutorState::ProcessAsync::Start" and event.offset_ps >= open_until:
                        launches += event.duration_ps
                        open_until = event.offset_ps + event.duration_ps
                    elif name in _COMPILER_EVENTS and event.offset_ps >= open_until:
                        launches += event.duration_ps
    to_ms = 1e-9 / steps
    if not runs:
        return {}
    return {XLA_RUN: runs * to_ms, XLA_COMPILE: max(launches - runs_in_launches, 0) * to_ms}


def format_profile(args, tables, log, seconds, top=25):
    """The markdown report of --profile: per encoding, op types by self time per step in each toolkit."""
    first, last = args.profile
    lines = [f"## Where the training step goes: the package and OpenNMT-tf profiled ({args.shape} shape)", "",
             f"`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min.  ",
             f"Machine: {common.machine_description()}; OpenNMT-tf on TensorFlow {args.versions[1]}.", "",
             f"Steps {first + 1}-{last} of one run per toolkit and encoding, traced with TensorFlow's profiler (host "
             "tracer level 3); self time per step of each TensorFlow op type on the host, summed over the ops of "
             "that type, input pipeline ops included (`Dataset` ops excepted), and the time of XLA-compiled clusters "
             f"from the trace's events (`{XLA_RUN}`; `{XLA_COMPILE}` when new batch shapes reach them). Tracing "
             "slows both toolkits, so compare the rows, not the totals with the throughput tables. Commands (the "
             "trainers as in the throughput benchmark):", ""]
    lines += [f"    {command}" for command in log[1:] if command] + [""]
    for positions, by_toolkit in tables.items():
        ours, theirs = (by_toolkit[toolkit][1] for toolkit in ("ours", "theirs"))
        kinds = sorted(set(ours) | set(theirs), key=lambda k: -max(ours.get(k, 0.0), theirs.get(k, 0.0)))
        rows = [[f"`{kind}`", f"{ours.get(kind, 0.0):,.1f}", f"{theirs.get(kind, 0.0):,.1f}",
                 f"{ours.get(kind, 0.0) - theirs.get(kind, 0.0):+,.1f}"] for kind in kinds[:top]]
        if len(kinds) > top:
            rest = [sum(table.get(kind, 0.0) for kind in kinds[top:]) for table in (ours, theirs)]
            rows.append([f"other {len(kinds) - top} types", f"{rest[0]:,.1f}", f"{rest[1]:,.1f}",
                         f"{rest[0] - rest[1]:+,.1f}"])
        busy = [by_toolkit[toolkit][0] for toolkit in ("ours", "theirs")]
        rows.append(["**all traced ops**", f"**{busy[0]:,.1f}**", f"**{busy[1]:,.1f}**", f"{busy[0] - busy[1]:+,.1f}"])
        cpu, rate = zip(*(by_toolkit[toolkit][2] for toolkit in ("ours", "theirs")))
        rows.append(["whole step, CPU time of the process", f"{cpu[0]:,.1f}", f"{cpu[1]:,.1f}",
                     f"{cpu[0] - cpu[1]:+,.1f}"])
        rows.append(["tokens per CPU-second (ours / OpenNMT-tf)", f"{rate[0]:,.0f}", f"{rate[1]:,.0f}",
                     f"{rate[0] / rate[1]:.2f}x"])
        lines += [f"{positions} positions (`{SHAPES[args.shape][positions]}`), ms per step:", "",
                  common.markdown_table(["op type", "ours", "OpenNMT-tf", "ours - OpenNMT-tf"], rows), ""]
    return "\n".join(lines).rstrip()


# -- report -------------------------------------------------------------------------------------------------------
def spread(values, fmt="{:,.0f}"):
    """"median (low-high)" of `values`."""
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))}-{fmt.format(max(values))})"


def format_table(runs):
    rows = []
    for positions, entry in runs.items():
        results = entry["results"]
        ratios = [r["ours"]["steady_cpu"] / r["theirs"]["steady_cpu"] for r in results]
        whole = [r["ours"]["whole_cpu"] / r["theirs"]["whole_cpu"] for r in results]
        for toolkit, label in (("ours", f"ours, `{entry['hp']['hparams_set']}`"), ("theirs", "OpenNMT-tf 2.32")):
            values = [r[toolkit] for r in results]
            rows.append([positions, label, spread([v["steady_cpu"] for v in values]),
                         spread([v["whole_cpu"] for v in values]), spread([v["steady_wall"] for v in values]),
                         f"{statistics.median(v['tokens_per_step'] for v in values):,.0f}",
                         f"{statistics.median(v['cpu_total'] for v in values):,.0f}",
                         spread(ratios, "{:.2f}x") if toolkit == "ours" else "",
                         spread(whole, "{:.2f}x") if toolkit == "ours" else ""])
    headers = ["positions", "trainer", "tokens / CPU-s, training steps", "tokens / CPU-s, whole run", "tokens / wall s",
               "tokens / step", "CPU s", "ours / OpenNMT-tf", "ours / OpenNMT-tf, whole run"]
    return common.markdown_table(headers, rows, align="ll" + "r" * 7)


def schedule_text(cores, runs_each):
    """How `run_pair` ran the trainers, given the cores the benchmark could use."""
    if cores > 1:
        return (f"the two run at the same time, then with the cores swapped: {runs_each} runs per trainer and "
                "encoding")
    return (f"only one core was free to the benchmark (`taskset`), so the two ran one after the other on it, "
            f"twice per pair: {runs_each} runs per trainer and encoding")


def report(args, runs, stats, versions, log, seconds):
    hp = next(iter(runs.values()))["hp"]
    runs_each = len(next(iter(runs.values()))["results"])
    window = next(iter(runs.values()))["results"][0]["ours"]["window"]
    commands_text = "\n".join(f"    {line}" for line in log)
    plan = next(iter(runs.values()))["plan"]
    model_text = "\n".join("    " + line for line in plan["model_text"].splitlines())
    embeddings = ("source, target and softmax embeddings shared" if hp["shared_embedding_and_softmax_weights"]
                  else "no shared embeddings")
    buckets = ("width 1 on both sides (ours with `" + SAME_BUCKETS + "`)" if args.buckets == "same" else
               "ours geometric (the set's), OpenNMT-tf width 1")
    # "\x20\x20" at a line's end: Markdown's line break (two spaces, which editors strip).
    return f"""## Training throughput: the package against OpenNMT-tf {versions[0]}

`{common.command_line()}` — {common.today()}, took {seconds / 60:.0f} min.\x20\x20
Machine: {common.machine_description()}; OpenNMT-tf {versions[0]} on TensorFlow {versions[1]}.

Multi30k English->German training pairs ({stats['pairs']:,}), shared SentencePiece vocabulary of {args.vocab_size}
pieces; {hp['num_encoder_layers']}+{hp['num_decoder_layers']} layers, d_model {hp['hidden_size']},
{hp['num_heads']} heads, FFN {hp['filter_size']}, {hp['norm_position']}-norm, {embeddings}, {hp['batch_size']}-token
batches (buckets: {buckets}), {args.steps} steps, seed 1. Each trainer runs in its own process on one core
with one TensorFlow thread; {schedule_text(len(free_cores()), runs_each)}. Tokens are the non-padding
source + target tokens the trainers consumed (EOS included on both sides), counted from the batches'
per-step counts. "Training steps" covers steps {window[0]}-{window[1]} (CPU time of the process, all
threads); "whole run" divides all tokens by the process's CPU seconds, start-up, data loading and
checkpoints included; tokens / wall s is over the same steps as the first column. Median (range) over the
runs; the ratios pair runs made together.
TensorFlow's CPU allocator (`--allocator {args.allocator}`): {ALLOCATOR_TEXT[args.allocator]}.

{format_table(runs)}

OpenNMT-tf reads {stats['copies']} shuffled copies of the corpus (about {stats['batches_per_epoch']} full batches
each), so no run reaches the end of its data and its small end-of-epoch batches. Its model (`--model`), here
for {hp['hparams_set']}:

{model_text}

What still differs between the two runs:

{differences(args, runs)}

Commands (the first pair of each encoding; each trainer runs through a wrapper that calls its console entry
point and prints the token counts, see the script):

{commands_text}
"""


ALLOCATOR_TEXT = {
    "shipped": "each toolkit's own default, BFC for ours (the command-line tools set "
               "`TF_CPU_ALLOCATOR_USE_BFC=true`), TensorFlow's malloc-backed one for OpenNMT-tf",
    "bfc": "BFC in both (`TF_CPU_ALLOCATOR_USE_BFC=true`)",
    "tensorflow": "TensorFlow's default, malloc-backed, in both (`TF_CPU_ALLOCATOR_USE_BFC=false`)"}


def differences(args, runs):
    """The settings that are not the same on both sides, as a markdown list."""
    items = []
    relative = [entry["hp"] for entry in runs.values() if entry["hp"]["position_encoding"] == "relative"]
    if relative and not relative[0]["heads_share_relative_embeddings"]:
        items.append("Relation tables: ours one `[heads, 2k+1, d/heads]` pair (keys, values) per layer, as "
                     f"`{relative[0]['hparams_set']}` has; OpenNMT-tf one `[2k+1, d/heads]` pair per layer shared "
                     "by the heads (it has no per-head option). The arithmetic is the same; ours has heads-1 more "
                     "tables' parameters (`--hparams heads_share_relative_embeddings=true` removes the difference).")
    if relative:
        items.append("The relative terms are each toolkit's own: OpenNMT-tf gathers an `[n, n, d/heads]` table of "
                     "relation vectors per batch and multiplies with it; ours looks up 2k+1 logits per query.")
    if args.buckets == "same":
        items.append(f"Ours run with `{SAME_BUCKETS}` (hparams only) so that both bucket by exact length; "
                     "the sets' own buckets are geometric above 20 tokens (`--buckets ours`).")
    else:
        items.append("Buckets: ours the set's geometric ones (1.1x above 20 tokens), OpenNMT-tf one per length "
                     "(`length_bucket_width: 1`), so its batches are slightly fuller.")
    items += [
        f"Shuffling: OpenNMT-tf's `sample_buffer_size` is {SHUFFLE_BUFFER} like our pipeline's buffer (its default "
        "is 500000) and its files are shuffled copies of the corpus, as our shards are shuffled by the datagen.",
        "Optimizer: Adam with the same betas, epsilon and Noam schedule (both evaluated at step + 1); OpenNMT-tf "
        "2.32 on TensorFlow 2.13 uses Keras 2's legacy `Adam`, ours Keras 3's.",
        "Loss: the same smoothed targets (label smoothing 0.1: 1 - eps on the true class, eps / (V-1) on the "
        "others), averaged over target tokens; ours subtracts their constant entropy (tensor2tensor's form) and "
        "works from the log-softmax without a `[rows, length, V]` target tensor, OpenNMT-tf builds the smoothed "
        "one-hot tensor for `softmax_cross_entropy_with_logits`.",
        "Vocabulary: the same pieces and ids' count (PAD, EOS, UNK and the pieces for ours; `<blank>`, `<s>`, "
        "`</s>`, the pieces less one the corpus never uses, and OpenNMT-tf's out-of-vocabulary bucket for it). "
        "OpenNMT-tf starts the decoder with `<s>`, ours with PAD: the same lengths.",
        "Per-step work each toolkit does by default and keeps here: OpenNMT-tf records out-of-vocabulary tokens "
        "(a `numpy_function` per step); ours computes token accuracy for its progress line.",
        "Outside the training steps (whole-run figure only): OpenNMT-tf saves a checkpoint after step 1 and at "
        "the end and counts its training file's lines at start-up; ours saves at the end and evaluates one "
        "validation batch.",
        "TensorFlow 2.21 / Keras 3 for ours, TensorFlow 2.13 / Keras 2 for OpenNMT-tf (2.32 needs TensorFlow "
        "< 2.14); oneDNN is on in both. tf.data's own threads are not limited on either side; each process is "
        "pinned to its core, and CPU time counts all its threads.",
    ]
    return "\n".join(f"- {item}" for item in items)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", choices=sorted(SHAPES), default="tiny")
    parser.add_argument("--positions", default="relative,sinusoid", help="Comma-separated: relative, sinusoid.")
    parser.add_argument("--steps", type=int, default=None, help="Training steps per run (default: 1500 tiny, "
                        "200 base).")
    parser.add_argument("--log_every", type=int, default=None, help="Steps between token counts (divides --steps; "
                        "default: the largest divisor of --steps up to --steps / 30).")
    parser.add_argument("--warmup_steps", type=int, default=None, help="Steps left out of the training-steps "
                        "figure (default: a tenth of --steps).")
    parser.add_argument("--reps", type=int, default=None, help="Pairs of runs (cores swapped) per encoding "
                        "(default: 2 tiny, 1 base).")
    parser.add_argument("--buckets", choices=("same", "ours"), default="same",
                        help="same: ours use OpenNMT-tf's width-1 buckets; ours: keep the set's geometric buckets.")
    parser.add_argument("--hparams", default="", help="Extra overrides for our sets (the OpenNMT-tf twin is "
                        "written from the result), e.g. heads_share_relative_embeddings=true or batch_size=4096.")
    parser.add_argument("--opennmt_venv", default=os.path.join(_HERE, "runs", "opennmt_venv"))
    parser.add_argument("--no_build", action="store_true", help="Do not build the OpenNMT-tf environment if absent.")
    parser.add_argument("--python311", default="python3.11", help="Interpreter to build the environment with.")
    parser.add_argument("--multi30k", default=translate_small.DEFAULT_MULTI30K)
    parser.add_argument("--work_dir", default=os.path.join(_HERE, "runs", "opennmt_tf"))
    parser.add_argument("--vocab_size", type=int, default=4000)
    parser.add_argument("--allocator", choices=sorted(ALLOCATORS), default="shipped",
                        help="TensorFlow's CPU allocator: shipped: each toolkit's default (ours BFC, OpenNMT-tf "
                        "malloc); bfc: BFC in both; tensorflow: malloc in both.")
    parser.add_argument("--profile", metavar="FIRST:LAST", help="Instead of timing: one run per toolkit and "
                        "encoding, steps FIRST+1 .. LAST traced with TensorFlow's profiler, and a table of the op "
                        "types' self time per step side by side (needs xprof; --steps defaults to LAST + 5).")
    parser.add_argument("--write", action="store_true", help="Write the section into docs/studies/benchmark_runs.md.")
    args = parser.parse_args()
    common.refuse_uncommitted_writes(args)
    if args.profile:
        try:
            args.profile = tuple(int(x) for x in args.profile.split(":"))
            if len(args.profile) != 2 or not 0 < args.profile[0] < args.profile[1]:
                raise ValueError
        except ValueError:
            parser.error("--profile takes FIRST:LAST, two step numbers with 0 < FIRST < LAST")
        args.steps = args.steps or args.profile[1] + 5
        args.log_every = 1  # OpenNMT-tf's hook runs at its logging steps.
    args.positions = [p for p in args.positions.split(",") if p]
    if set(args.positions) - {"relative", "sinusoid"}:
        parser.error("--positions takes relative and/or sinusoid")
    args.steps = args.steps or SHAPE_DEFAULTS[args.shape]["steps"]
    args.reps = args.reps or SHAPE_DEFAULTS[args.shape]["reps"]
    # By default about 30 token counts per run, every k steps for the largest k <= steps / 30 that divides steps.
    args.log_every = args.log_every or max(k for k in range(1, max(1, args.steps // 30) + 1) if args.steps % k == 0)
    if args.steps % args.log_every:
        parser.error("--log_every must divide --steps")
    args.warmup_steps = args.steps // 10 if args.warmup_steps is None else args.warmup_steps
    absent = translate_small.missing_files(args.multi30k)
    if absent:
        print(f"opennmt_tf: skipped, the Multi30k data is not there (missing {', '.join(absent)})")
        return 0
    versions, why = find_or_build_venv(os.path.abspath(args.opennmt_venv), not args.no_build, args.python311)
    if versions is None:
        print(f"opennmt_tf: skipped, {why}")
        return 0
    began = time.perf_counter()
    args.versions = versions
    if args.profile:
        tables, log = profile(args, os.path.abspath(args.opennmt_venv))
        text = format_profile(args, tables, log, time.perf_counter() - began)
        print(text)
        if args.write:
            common.replace_section(f"opennmt_tf_{args.shape}_profile", text)
        return 0
    runs, stats, log = benchmark(args, os.path.abspath(args.opennmt_venv))
    text = report(args, runs, stats, versions, log, time.perf_counter() - began)
    print(text)
    if args.write:
        section = "opennmt_tf" + (f"_{args.shape}" if args.shape != "tiny" else "") + (
            f"_{args.allocator}" if args.allocator != "shipped" else "")
        common.replace_section(section, text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
