"""bAbI joint training on an accelerator: the trainer's recipe in a JAX loop, for the paper's step counts.

    # here (no accelerator needed): the problem's examples, encoded exactly as the trainer reads them
    .venv/bin/python benchmarks/babi_accelerator.py prepare --data_dir ../shared/data/babi --subset 1k \
        --out .babi_accelerator/babi_1k.npz
    # where there is a GPU (JAX backend; TensorFlow not needed)
    KERAS_BACKEND=jax python benchmarks/babi_accelerator.py train --data .babi_accelerator/babi_1k.npz \
        --hparams_set adaptive_universal_transformer_babi_rel --hparams act_type=basic --train_steps 100000 \
        --max_minutes 7 --out DIR [--resume DIR]
    # here again: the trained weights answered by the TensorFlow backend, per task
    .venv/bin/python benchmarks/babi_accelerator.py evaluate --data .babi_accelerator/babi_1k.npz --run DIR

The Universal Transformer paper's bAbI runs took 100000 steps; the package's trainer does 2.7-4.4 steps per
second on this machine's CPU (6-10 hours a seed). `train` takes the same model (the registry's, from the hparams
set), loss (`losses.cross_entropy_and_accuracy` with the set's label smoothing, plus the ACT ponder loss),
optimizer (Adam on the set's schedule) and data (the problem's encoded training split, every 10th story held
out) as `t2t-relpos-trainer --problem=babi_qa_facts_all_tasks_<subset>`, compiled by `jax.jit`. What differs is
the batching: XLA compiles one program per batch shape, so the examples go into five length buckets
(`--buckets`, in facts) padded to the bucket's end, where the trainer has a bucket every 10% of length. Each
bucket's batches hold as many examples as the trainer's batches of 16384 input ids hold at that bucket's
mean length, so a step sees about as many questions as it does with the trainer.

`train` stops at `--train_steps` or after `--max_minutes` of training, whichever comes first, then saves the
weights and the optimizer's state (`weights.npz`, `optimizer.npz`, `state.json`; also every `--save_every`
steps) and writes the validation and test error of every task (`results.json`). `--resume DIR` continues
from a saved run. `evaluate` loads the saved weights into a model on the backend it runs on (TensorFlow here)
and answers the validation and test questions again, as a check that the figures do not depend on the loop
that trained them.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SPLITS = ("train", "eval", "test")
DEFAULT_BUCKETS = "6,10,20,40,72"  # Input positions (facts, the question, and the EOS chunk), at most 72.
FAILED_ERROR = 5.0  # The paper's "failed task": more than 5% error.


# -- prepare (any backend) -------------------------------------------------------------------------------
def prepare(args):
    """Writes the problem's encoded splits: ids (int16, concatenated), offsets, labels, tasks, vocab sizes."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    import t2t_relpos.problems  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

    problem = registry.problem(f"babi_qa_facts_all_tasks_{args.subset}")
    arrays = {}
    for split in SPLITS:
        inputs, labels = problem.encoded(split, args.data_dir)
        tasks = [int(group[2:]) for group in problem.example_groups(split, args.data_dir)]
        lengths = np.array([len(ids) for ids in inputs], np.int64)
        arrays[f"{split}_ids"] = np.concatenate([np.asarray(ids, np.int16) for ids in inputs])
        arrays[f"{split}_offsets"] = np.concatenate([[0], np.cumsum(lengths)])
        arrays[f"{split}_labels"] = np.array([ids[0] for ids in labels], np.int32)
        arrays[f"{split}_tasks"] = np.array(tasks, np.int32)
    input_vocab, target_vocab = problem.vocab_sizes(args.data_dir)
    arrays["vocab_sizes"] = np.array([input_vocab, target_vocab], np.int64)
    arrays["fact_width"] = np.array(problem.model_arguments(args.data_dir)["fact_width"], np.int64)
    arrays["problem"] = np.array(problem.name)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    np.savez_compressed(args.out, **arrays)
    sizes = {split: len(arrays[f"{split}_labels"]) for split in SPLITS}
    print(f"{args.out}: {problem.name}, examples {sizes}, vocabularies {input_vocab} / {target_vocab}")


class Data:
    """The prepared splits, padded into length buckets of fixed shapes."""

    def __init__(self, path, buckets, batch_ids):
        with np.load(path) as f:
            self.arrays = {name: f[name] for name in f.files}
        self.problem = str(self.arrays["problem"])
        self.input_vocab, self.target_vocab = (int(v) for v in self.arrays["vocab_sizes"])
        self.fact_width = int(self.arrays["fact_width"])
        self.buckets = [int(b) for b in buckets.split(",")]
        self._padded = {}
        longest = max(self.positions(split).max() for split in SPLITS)
        if longest > self.buckets[-1]:
            raise SystemExit(f"error: --buckets ends at {self.buckets[-1]} positions, the data has {longest}")
        train = self.positions("train")
        bucket_of = self.bucket_of("train")
        # Rows per batch: as many as the trainer's batches of `batch_ids` ids hold at the bucket's mean length
        # (its buckets are 10% apart, so a batch is padded by about 5%).
        self.rows = []
        for b in range(len(self.buckets)):
            lengths = train[bucket_of == b] * self.fact_width
            self.rows.append(max(1, int(batch_ids // (1.05 * lengths.mean()))) if len(lengths) else 1)

    def positions(self, split):
        """Positions each example's ids make (`FactEmbedding`'s chunks, the EOS chunk included)."""
        lengths = np.diff(self.arrays[f"{split}_offsets"])
        return -(-lengths // self.fact_width)

    def bucket_of(self, split):
        return np.searchsorted(self.buckets, self.positions(split), side="left")

    def inputs(self, split, indices, bucket):
        """int32 `[len(indices), bucket positions * fact_width]` ids, zero-padded (examples of that bucket)."""
        if (split, bucket) not in self._padded:
            ids, offsets = self.arrays[f"{split}_ids"], self.arrays[f"{split}_offsets"]
            members = np.flatnonzero(self.bucket_of(split) == bucket)
            padded = np.zeros((len(members), self.buckets[bucket] * self.fact_width), np.int32)
            for row, i in enumerate(members):
                padded[row, :offsets[i + 1] - offsets[i]] = ids[offsets[i]:offsets[i + 1]]
            row_of = np.full(len(offsets) - 1, -1)
            row_of[members] = np.arange(len(members))
            self._padded[(split, bucket)] = padded, row_of
        padded, row_of = self._padded[(split, bucket)]
        rows = row_of[indices]
        if (rows < 0).any():
            raise ValueError(f"examples outside bucket {bucket}")
        return padded[rows]

    def labels(self, split, indices):
        return self.arrays[f"{split}_labels"][indices][:, None]

    def tasks(self, split):
        return self.arrays[f"{split}_tasks"]

    def train_batches(self, seed, epoch):
        """Batches of one or more passes over the training examples from pass `epoch` on, endlessly.

        The examples stream in a fresh random order every pass; each joins its bucket, which yields a batch when
        it holds the bucket's rows (what tf.data's bucketing does with an endless stream).
        """
        bucket_of = self.bucket_of("train")
        pending = [[] for _ in self.buckets]
        while True:
            order = np.random.default_rng([seed, epoch]).permutation(len(bucket_of))
            for i in order:
                b = int(bucket_of[i])
                pending[b].append(i)
                if len(pending[b]) == self.rows[b]:
                    yield epoch, b, np.array(pending[b])
                    pending[b] = []
            epoch += 1


# -- the model ---------------------------------------------------------------------------------------------
def make_model(data, hparams_set, overrides, seed):
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    hparams = registry.hparams(hparams_set).parse(overrides)
    keras.utils.set_random_seed(seed)
    model = registry.model(hparams.model).from_hparams(hparams, data.input_vocab, data.target_vocab,
                                                       fact_width=data.fact_width)
    model.build()
    return model, hparams


def save_variables(path, variables, values=None):
    """`{variable path: value}` to an npz file (written beside and renamed, so a kill leaves the last one)."""
    values = values if values is not None else [v.value for v in variables]
    arrays = {v.path: np.asarray(value) for v, value in zip(variables, values, strict=True)}
    if len(arrays) != len(variables):
        raise ValueError("variable paths are not unique")
    np.savez(path + ".tmp.npz", **arrays)
    os.replace(path + ".tmp.npz", path)


def load_variables(path, variables):
    with np.load(path) as f:
        missing = [v.path for v in variables if v.path not in f.files]
        if missing:
            raise SystemExit(f"error: {path} lacks {missing[:3]}")
        for v in variables:
            v.assign(f[v.path])


def answer(model, data, split, predict):
    """Error (%) per task and overall, and mean ponder time, of `predict(inputs) -> (labels, ponder)` on `split`."""
    bucket_of, tasks, labels = data.bucket_of(split), data.tasks(split), data.arrays[f"{split}_labels"]
    predicted = np.zeros(len(labels), np.int64)
    ponder = np.full(len(labels), np.nan)
    for b in range(len(data.buckets)):
        members = np.flatnonzero(bucket_of == b)
        rows = data.rows[b]
        for start in range(0, len(members), rows):
            chunk = members[start:start + rows]
            padded = np.concatenate([chunk, np.repeat(chunk[:1], rows - len(chunk))])  # Fixed shapes.
            out, ponder_time = predict(data.inputs(split, padded, b))
            predicted[chunk] = np.asarray(out)[:len(chunk)]
            if ponder_time is not None:
                ponder[chunk] = np.asarray(ponder_time)[:len(chunk)]
    wrong = predicted != labels
    per_task = {f"qa{t}": round(100.0 * float(wrong[tasks == t].mean()), 2) for t in sorted(set(tasks.tolist()))}
    return {"tasks": per_task, "mean": round(float(np.mean(list(per_task.values()))), 2),
            "failed": sum(e > FAILED_ERROR for e in per_task.values()),
            "overall": round(100.0 * float(wrong.mean()), 2),
            "ponder_time": None if np.isnan(ponder).all() else round(float(np.nanmean(ponder)), 3)}


def _predictions(details):
    from keras import ops  # pylint: disable=import-outside-toplevel

    labels = ops.argmax(details["logits"][:, 0, :], axis=-1)
    ponder = details.get("ponder_times", {}).get("encoder")
    if ponder is None:
        return labels, None
    # Mean ponder time of an example's real positions (facts and question).
    mask = ops.cast(ponder > 0, "float32")
    return labels, ops.sum(ponder * mask, axis=1) / ops.maximum(ops.sum(mask, axis=1), 1.0)


# -- train (JAX) -------------------------------------------------------------------------------------------
def train(args):
    import jax  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.training import losses, schedules  # pylint: disable=import-outside-toplevel

    began = time.perf_counter()
    data = Data(args.data, args.buckets, args.batch_ids)
    model, hparams = make_model(data, args.hparams_set, args.hparams, args.seed)
    optimizer = keras.optimizers.Adam(
        learning_rate=schedules.from_hparams(hparams), beta_1=hparams.optimizer_adam_beta1,
        beta_2=hparams.optimizer_adam_beta2, epsilon=hparams.optimizer_adam_epsilon,
        global_clipnorm=hparams.clip_grad_norm or None)
    optimizer.build(model.trainable_variables)
    os.makedirs(args.out, exist_ok=True)
    state_file = os.path.join(args.out, "state.json")
    log = []
    step, epoch, minutes_before = 0, 0, 0.0
    if args.resume:
        load_variables(os.path.join(args.resume, "weights.npz"), model.variables)
        load_variables(os.path.join(args.resume, "optimizer.npz"), optimizer.variables)
        with open(os.path.join(args.resume, "state.json"), encoding="utf-8") as f:
            resumed = json.load(f)
        step, epoch, log = resumed["step"], resumed["epoch"] + 1, resumed["log"]
        minutes_before = resumed["training_minutes"]
        if int(optimizer.iterations.numpy() if hasattr(optimizer.iterations, "numpy") else
               np.asarray(optimizer.iterations.value)) != step:
            raise SystemExit(f"error: {args.resume}: optimizer at another step than state.json's {step}")

    def loss_fn(trainable, non_trainable, inputs, targets):
        details, non_trainable = model.stateless_call(trainable, non_trainable, {"inputs": inputs},
                                                      training=True, return_details=True)
        loss_sum, correct, tokens = losses.cross_entropy_and_accuracy(details["logits"], targets,
                                                                      hparams.label_smoothing)
        auxiliary = sum(details["losses"].values()) if details["losses"] else 0.0
        # The trainer's objective on one replica: (summed loss + auxiliary losses x tokens) / tokens.
        objective = (loss_sum + auxiliary * tokens) / tokens
        return objective, (non_trainable, loss_sum / tokens, correct / tokens)

    grad_fn = jax.value_and_grad(loss_fn, has_aux=True)

    def step_fn(state, inputs, targets):
        trainable, non_trainable, optimizer_vars = state
        (_, (non_trainable, loss, accuracy)), grads = grad_fn(trainable, non_trainable, inputs, targets)
        trainable, optimizer_vars = optimizer.stateless_apply(optimizer_vars, grads, trainable)
        return (trainable, non_trainable, optimizer_vars), (loss, accuracy)

    train_step = jax.jit(step_fn, donate_argnums=0)

    @jax.jit
    def predict_fn(trainable, non_trainable, inputs):
        details, _ = model.stateless_call(trainable, non_trainable, {"inputs": inputs}, training=False,
                                          return_details=True)
        return _predictions(details)

    state = ([v.value for v in model.trainable_variables], [v.value for v in model.non_trainable_variables],
             [v.value for v in optimizer.variables])

    def save(state, epoch):
        save_variables(os.path.join(args.out, "weights.npz"), model.trainable_variables + model.non_trainable_variables,
                       list(state[0]) + list(state[1]))
        save_variables(os.path.join(args.out, "optimizer.npz"), optimizer.variables, state[2])
        with open(state_file + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"step": step, "epoch": epoch, "log": log, "training_minutes": minutes(),
                       "hparams_set": args.hparams_set,
                       "hparams": args.hparams, "seed": args.seed, "buckets": data.buckets, "rows": data.rows,
                       "problem": data.problem}, f)
        os.replace(state_file + ".tmp", state_file)

    def evaluate(state, split):
        return answer(model, data, split, lambda inputs: predict_fn(state[0], state[1], inputs))

    print(f"{jax.devices()[0]}: {data.problem}, buckets {data.buckets} positions, rows {data.rows}; "
          f"from step {step}", flush=True)
    train_began = time.perf_counter()

    def minutes():
        """Minutes of training (compiles included), over every run this one resumes."""
        return round(minutes_before + (time.perf_counter() - train_began) / 60, 2)

    window = []
    batches = data.train_batches(args.seed, epoch)
    while step < args.train_steps:
        epoch, b, indices = next(batches)
        state, stats = train_step(state, data.inputs("train", indices, b), data.labels("train", indices))
        window.append(stats)
        step += 1
        out_of_time = time.perf_counter() - train_began > 60 * args.max_minutes
        if step % args.log_every == 0 or step == args.train_steps or out_of_time:
            loss, accuracy = (float(np.mean([np.asarray(s[k]) for s in window])) for k in (0, 1))
            window = []
            row = {"step": step, "loss": round(loss, 4), "accuracy": round(accuracy, 4),
                   "minutes": minutes()}
            if step % args.eval_every == 0:
                row["eval_error"] = evaluate(state, "eval")["mean"]
            log.append(row)
            print(json.dumps(row), flush=True)
        if step % args.save_every == 0:
            save(state, epoch)
        if out_of_time:
            break
    save(state, epoch)
    device = jax.devices()[0]
    results = {"step": step, "training_minutes": minutes(),
               "device": f"{device} ({getattr(device, 'device_kind', device.platform)})",
               "jax": jax.__version__, "keras": keras.__version__, "hparams_set": args.hparams_set,
               "hparams": args.hparams, "seed": args.seed, "problem": data.problem, "buckets": data.buckets,
               "rows": data.rows, "eval": evaluate(state, "eval"), "test": evaluate(state, "test"),
               "minutes_in_all": round((time.perf_counter() - began) / 60, 2)}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(json.dumps({k: results[k] for k in ("step", "training_minutes", "minutes_in_all")}))
    for split in ("eval", "test"):
        print(split, json.dumps(results[split]))


# -- evaluate (any backend) --------------------------------------------------------------------------------
def evaluate_saved(args):
    import keras  # pylint: disable=import-outside-toplevel

    with open(os.path.join(args.run, "state.json"), encoding="utf-8") as f:
        state = json.load(f)
    data = Data(args.data, ",".join(map(str, state["buckets"])), args.batch_ids)
    data.rows = state["rows"]
    model, _ = make_model(data, state["hparams_set"], state["hparams"], state["seed"])
    load_variables(os.path.join(args.run, "weights.npz"), model.trainable_variables + model.non_trainable_variables)

    def predict(inputs):
        return tuple(None if x is None else keras.ops.convert_to_numpy(x) for x in
                     _predictions(model({"inputs": inputs}, training=False, return_details=True)))

    results = {"backend": keras.backend.backend(), "step": state["step"],
               "eval": answer(model, data, "eval", predict), "test": answer(model, data, "test", predict)}
    print(json.dumps(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


# -- report ----------------------------------------------------------------------------------------------
def _read_run(directory):
    with open(os.path.join(directory, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(directory, "state.json"), encoding="utf-8") as f:
        results["log"] = json.load(f)["log"]
    return results


def report(args):
    """A README section: test error per task of each saved run (a run and its continuations), the validation
    curve of the last, and whether `evaluate`'s answers on another backend were the same."""
    import common  # pylint: disable=import-outside-toplevel
    import babi  # pylint: disable=import-outside-toplevel

    runs = [_read_run(d) for d in args.runs.split(",")]
    last = runs[-1]
    subset = last["problem"].rsplit("_", 1)[-1]
    tasks = list(last["test"]["tasks"])
    headers = ["task"] + [f"step {r['step']}" for r in runs]
    rows = [[t] + [f"{r['test']['tasks'][t]:.1f}" for r in runs] for t in tasks]
    rows += [["**mean error**"] + [f"**{r['test']['mean']:.2f}**" for r in runs],
             ["failed (> 5%)"] + [str(r["test"]["failed"]) for r in runs],
             ["validation mean error"] + [f"{r['eval']['mean']:.2f}" for r in runs],
             ["mean ponder time (test)"] + [f"{r['test']['ponder_time']:.2f}" for r in runs],
             ["training minutes (compiles included)"] + [f"{r['training_minutes']:.1f}" for r in runs]]
    curve = [row for row in last["log"] if "eval_error" in row] + [
        {"step": last["step"], "eval_error": last["eval"]["mean"], "accuracy": last["log"][-1]["accuracy"]}]
    checked = ""
    if args.checked:
        with open(args.checked, encoding="utf-8") as f:
            other = json.load(f)
        if other["step"] != last["step"]:
            raise SystemExit(f"error: --checked answered step {other['step']}, the last run is at {last['step']}")
        same = all(other[split]["tasks"] == last[split]["tasks"] for split in ("eval", "test"))
        checked = (f"The weights of step {last['step']} loaded into the model on the {other['backend']} backend "
                   f"(`evaluate`) answer {'every validation and test question as the JAX loop did' if same else 'differently: ' + json.dumps(other['test'])}.")
    paper = babi.PAPER[subset]
    text = "\n".join([
        f"## {args.title}", "",
        f"`{common.command_line()}` — {common.today()}; the runs were trained by `babi_accelerator.py train` on "
        f"{last['device']} (jax {last['jax']}, Keras {last['keras']}): `{last['hparams_set']}`"
        f"{' (' + last['hparams'] + ')' if last['hparams'] else ''}, seed {last['seed']}, `{last['problem']}`, "
        f"buckets ending at {last['buckets']} positions with {last['rows']} questions per batch.", "",
        f"Test error (%) per task of joint training on all 20 tasks, after each run:", "",
        common.markdown_table(headers, rows), "",
        "Validation error (%) and training accuracy of the last run by step:", "",
        common.markdown_table(["step"] + [str(r["step"]) for r in curve],
                              [["validation mean error"] + [f"{r['eval_error']:.2f}" for r in curve],
                               ["training accuracy (mean of the log window)"] + [f"{r['accuracy']:.3f}" for r in curve]]),
        "", checked, "",
        f"The paper (Table 1, {subset} joint, best of 10 seeds): " + "; ".join(
            f"{name} {error} ({failed} failed)" for name, (error, failed) in paper.items()) + "."])
    print(text)
    if args.write:
        common.replace_section(args.section, text)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    p = commands.add_parser("prepare")
    p.add_argument("--data_dir", required=True)
    p.add_argument("--subset", default="1k", choices=("1k", "10k"))
    p.add_argument("--out", required=True)
    for name in ("train", "evaluate"):
        p = commands.add_parser(name)
        p.add_argument("--data", required=True, help="the file `prepare` wrote")
        p.add_argument("--batch_ids", type=int, default=16384, help="the hparams set's batch_size")
        if name == "train":
            p.add_argument("--hparams_set", default="adaptive_universal_transformer_babi_rel")
            p.add_argument("--hparams", default="")
            p.add_argument("--seed", type=int, default=1)
            p.add_argument("--buckets", default=DEFAULT_BUCKETS)
            p.add_argument("--train_steps", type=int, default=100000)
            p.add_argument("--max_minutes", type=float, default=float("inf"))
            p.add_argument("--log_every", type=int, default=1000)
            p.add_argument("--eval_every", type=int, default=5000)
            p.add_argument("--save_every", type=int, default=10000)
            p.add_argument("--out", required=True)
            p.add_argument("--resume", default=None, help="a run directory to continue")
        else:
            p.add_argument("--run", required=True, help="a directory `train` wrote")
            p.add_argument("--json", default=None)
    p = commands.add_parser("report")
    p.add_argument("--runs", required=True, help="comma-separated run directories, a run before its continuations")
    p.add_argument("--checked", default=None, help="`evaluate --json` of the last run on another backend")
    p.add_argument("--title", default="bAbI on an accelerator")
    p.add_argument("--section", default="babi_accelerator")
    p.add_argument("--write", action="store_true", help="put the section into benchmarks/README.md")
    args = parser.parse_args(argv)
    for path in [getattr(args, "data", None), getattr(args, "data_dir", None)]:
        if path and not os.path.exists(path):
            raise SystemExit(f"error: {path} does not exist" + (
                " (bAbI v1.2: see ../shared/data/README)" if path == getattr(args, "data_dir", None) else
                " (write it with `prepare`)"))
    if args.command == "train":
        os.environ.setdefault("KERAS_BACKEND", "jax")
    {"prepare": prepare, "train": train, "evaluate": evaluate_saved, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
