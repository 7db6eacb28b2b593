"""bAbI joint training on an accelerator: the trainer's recipe in a JAX loop, for the paper's step counts and seeds.

    # here (no accelerator needed): the problem's examples, encoded exactly as the trainer reads them
    .venv/bin/python benchmarks/babi_accelerator.py prepare --data_dir ../shared/data/babi --subset 1k \
        --out .babi_accelerator/babi_1k.npz
    # where there is a GPU (JAX backend; TensorFlow not needed)
    KERAS_BACKEND=jax python benchmarks/babi_accelerator.py train --data .babi_accelerator/babi_1k.npz \
        --hparams_set adaptive_universal_transformer_babi_rel --hparams act_type=basic --seeds 1,2,3,4 \
        --train_steps 100000 --max_minutes 7 --out DIR [--resume DIR] [--compilation_cache DIR]
    # here again: the trained weights answered by the TensorFlow backend, per task
    .venv/bin/python benchmarks/babi_accelerator.py evaluate --data .babi_accelerator/babi_1k.npz --run DIR
    .venv/bin/python benchmarks/babi_accelerator.py report --runs DIR[,DIR of its continuation] [--write] [--record]

The Universal Transformer paper's bAbI runs took 100000 steps, and it reports the best of 10 seeds; the
package's trainer does 2.7-4.4 steps per second on this machine's CPU (6-10 hours a seed). `train` takes the
same model (the registry's, from the hparams set), loss (`losses.cross_entropy_and_accuracy` with the set's
label smoothing, plus the ACT ponder loss), optimizer (Adam on the set's schedule) and data (the problem's
encoded training split, every 10th story held out) as `t2t-relpos-trainer
--problem=babi_qa_facts_all_tasks_<subset>`, compiled by `jax.jit`. What differs is the batching: XLA compiles
one program per batch shape, so the examples go into five length buckets (`--buckets`, in facts) padded to the
bucket's end, where the trainer has a bucket every 10% of length (`min_length_bucket` and `length_bucket_step`
are not read). Each bucket's batches hold as many examples as the trainer's batches of `batch_size` input ids
hold at that bucket's mean length, so a step sees about as many questions as it does with the trainer; a
training pass shows each task's questions `task_repeats` times and leaves out those longer than `max_length`,
as the trainer's does.

`--seeds` trains one model per seed side by side: `jax.vmap` over their weights, Adam states and batches, so
a step of several seeds launches the kernels of one. That saves launches, not time: on an H100, ten seeds took
35 ms a step against one seed's 3.3 ms on an H200, and compiled for about 5 minutes instead of 1.3-2.5
(`benchmarks/README.md`, 2026-11-27). Each seed
has its own initial weights, dropout and data order, and trains as it would alone (the first seed exactly so;
the others take their batches from the bucket the first one's stream is at). The seed with the lowest mean
validation error is the run's result, as the paper chose among its seeds.

`train` stops at `--train_steps` or after `--max_minutes` of training, whichever comes first, then saves each
seed's weights and optimizer state (`seed<N>/weights.npz`, `seed<N>/optimizer.npz`, and `state.json`; also
every `--save_every` steps) and writes every seed's validation and test error per task (`results.json`).
`--resume DIR` continues from a saved run; `--compilation_cache DIR` keeps XLA's programs there, so that a call
that resumes with the cache the last call left (copied out of the device with the run) does not compile again.
`evaluate` loads a seed's saved weights into a model on the backend it runs on (TensorFlow here) and answers
the validation and test questions again, as a check that the figures do not depend on the loop that trained
them.
"""

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import babi  # noqa: E402  pylint: disable=wrong-import-position  (no TensorFlow: it runs on the device too)

SPLITS = ("train", "eval", "test")
DEFAULT_BUCKETS = "6,10,20,40,72"  # Input positions (facts, the question, and the EOS chunk), at most 72.


# -- prepare (any backend) -------------------------------------------------------------------------------
def prepare(args):
    """Writes the problem's encoded splits: ids (int16, concatenated), offsets, labels, tasks, vocab sizes."""
    if babi.data_missing(args):
        return
    # As benchmarks/babi.py reads the data: a 10k training file missing from the shared copy is the 1k one
    # (linked from a temporary folder while the files are read).
    with tempfile.TemporaryDirectory() as links:
        args.work_dir = links
        data_dir, stand_ins = babi.complete_data_dir(args)
        arrays, name = _encoded_splits(args.subset, data_dir)
    np.savez_compressed(args.out, **arrays)
    sizes = {split: len(arrays[f"{split}_labels"]) for split in SPLITS}
    print(f"{args.out}: {name}, examples {sizes}, vocabularies {arrays['vocab_sizes'].tolist()}"
          + (f"; 1k training files stand in for tasks {stand_ins}" if stand_ins else ""))


def _encoded_splits(subset, data_dir):
    import t2t_relpos.problems  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from t2t_relpos import errors, registry  # pylint: disable=import-outside-toplevel

    problem = registry.problem(f"babi_qa_facts_all_tasks_{subset}")
    arrays = {}
    for split in SPLITS:
        try:
            inputs, labels = problem.encoded(split, data_dir)
        except errors.T2TRelposError as error:
            raise SystemExit(f"error: {error}") from None
        tasks = [int(group[2:]) for group in problem.example_groups(split, data_dir)]
        lengths = np.array([len(ids) for ids in inputs], np.int64)
        arrays[f"{split}_ids"] = np.concatenate([np.asarray(ids, np.int16) for ids in inputs])
        arrays[f"{split}_offsets"] = np.concatenate([[0], np.cumsum(lengths)])
        arrays[f"{split}_labels"] = np.array([ids[0] for ids in labels], np.int32)
        arrays[f"{split}_tasks"] = np.array(tasks, np.int32)
    arrays["vocab_sizes"] = np.array(problem.vocab_sizes(data_dir), np.int64)
    arrays["fact_width"] = np.array(problem.model_arguments(data_dir)["fact_width"], np.int64)
    arrays["problem"] = np.array(problem.name)
    return arrays, problem.name


class Data:
    """The prepared splits, padded into length buckets of fixed shapes."""

    def __init__(self, path, buckets):
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
        self.plan_training(batch_size=None)

    def plan_training(self, batch_size, max_length=0, repeats=None):
        """Sets `train_pass` and `rows` as the hparams set's trainer would have them.

        Args:
            batch_size: input ids per batch (None: `rows` stays unset, e.g. to be read from a saved run).
            max_length: longest training example in ids (0 or less: no limit).
            repeats: {task: times} a training pass shows a task's questions (the problem's `task_repeats`).
        """
        # One training pass: each question `repeats` times, those longer than max_length left out.
        ids = np.diff(self.arrays["train_offsets"])
        times = np.array([(repeats or {}).get(int(t), 1) for t in self.tasks("train")])
        kept = times if max_length <= 0 else times * (ids <= max_length)
        self.train_pass = np.repeat(np.arange(len(ids)), kept)
        self.rows = None
        if batch_size:
            # Rows per batch: as many as the trainer's batches of `batch_size` ids hold at the bucket's mean
            # length (its buckets are 10% apart, so a batch is padded by about 5%).
            bucket_of = self.bucket_of("train")[self.train_pass]
            lengths = self.positions("train")[self.train_pass] * self.fact_width
            self.rows = [max(1, int(batch_size // (1.05 * lengths[bucket_of == b].mean())))
                         if (bucket_of == b).any() else 1 for b in range(len(self.buckets))]

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

    def train_batches(self, seeds, epoch):
        """Batches from pass `epoch` on, endlessly: `(pass, bucket, [row indices for each of seeds])`.

        The first seed's examples stream in a fresh random order every pass; each joins its bucket, which yields
        a batch when it holds the bucket's rows (what tf.data's bucketing does with an endless stream). The
        other seeds (trained beside it, `train --seeds`) take a batch of the same bucket at the same step, from
        shuffled passes over that bucket of their own, so that every seed's step has the same shape.
        """
        bucket_of = self.bucket_of("train")
        members = [self.train_pass[bucket_of[self.train_pass] == b] for b in range(len(self.buckets))]
        others = [_BucketPasses(members, seed, epoch) for seed in seeds[1:]]
        pending = [[] for _ in self.buckets]
        while True:
            order = self.train_pass[np.random.default_rng([seeds[0], epoch]).permutation(len(self.train_pass))]
            for i in order:
                b = int(bucket_of[i])
                pending[b].append(i)
                if len(pending[b]) == self.rows[b]:
                    yield epoch, b, [np.array(pending[b])] + [o.take(b, self.rows[b]) for o in others]
                    pending[b] = []
            epoch += 1


class _BucketPasses:
    """Each bucket's examples in a fresh random order per pass over the bucket, read `take` rows at a time."""

    def __init__(self, members, seed, epoch):
        self.members, self.seed, self.epoch = members, seed, epoch
        self.passes = [0] * len(members)
        self.queues = [np.empty(0, np.int64) for _ in members]

    def take(self, bucket, rows):
        while len(self.queues[bucket]) < rows:
            rng = np.random.default_rng([self.seed, self.epoch, bucket, self.passes[bucket]])
            self.queues[bucket] = np.concatenate([self.queues[bucket], rng.permutation(self.members[bucket])])
            self.passes[bucket] += 1
        taken, self.queues[bucket] = self.queues[bucket][:rows], self.queues[bucket][rows:]
        return taken


# -- the model ---------------------------------------------------------------------------------------------
def read_hparams(hparams_set, overrides):
    """The set with its overrides; a bad name or value is one `error:` line."""
    from t2t_relpos import errors, registry  # pylint: disable=import-outside-toplevel

    try:
        return registry.hparams(hparams_set).parse(overrides)
    except errors.T2TRelposError as error:
        raise SystemExit(f"error: {error}") from None


def task_repeats(data, hparams):
    """{task: times} of the hparams' `task_repeats`, checked as the trainer's problem checks them."""
    import t2t_relpos.problems  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from t2t_relpos import errors, registry  # pylint: disable=import-outside-toplevel

    try:
        return registry.problem(data.problem).task_repeats(hparams.get("task_repeats"))
    except errors.T2TRelposError as error:
        raise SystemExit(f"error: {error}") from None


def make_model(data, hparams, seed):
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    keras.utils.set_random_seed(seed)
    model = registry.model(hparams.model).from_hparams(hparams, data.input_vocab, data.target_vocab,
                                                       fact_width=data.fact_width)
    model.build()
    return model


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


def answer(data, split, predict, models=1):
    """Per model: error (%) per task and overall, and mean ponder time, on `split`.

    `predict(inputs)` gives `(labels [models, rows], ponder times [models, rows] or None)`.
    """
    bucket_of, tasks, labels = data.bucket_of(split), data.tasks(split), data.arrays[f"{split}_labels"]
    predicted = np.zeros((models, len(labels)), np.int64)
    ponder = np.full((models, len(labels)), np.nan)
    for b in range(len(data.buckets)):
        members = np.flatnonzero(bucket_of == b)
        rows = data.rows[b]
        for start in range(0, len(members), rows):
            chunk = members[start:start + rows]
            padded = np.concatenate([chunk, np.repeat(chunk[:1], rows - len(chunk))])  # Fixed shapes.
            out, ponder_time = predict(data.inputs(split, padded, b))
            predicted[:, chunk] = np.asarray(out)[:, :len(chunk)]
            if ponder_time is not None:
                ponder[:, chunk] = np.asarray(ponder_time)[:, :len(chunk)]
    results = []
    for m in range(models):
        wrong = predicted[m] != labels
        per_task = {f"qa{t}": round(100.0 * float(wrong[tasks == t].mean()), 2) for t in sorted(set(tasks.tolist()))}
        results.append({"tasks": per_task, "mean": round(float(np.mean(list(per_task.values()))), 2),
                        "failed": sum(e > babi.FAILED_ERROR for e in per_task.values()),
                        "overall": round(100.0 * float(wrong.mean()), 2),
                        "ponder_time": None if np.isnan(ponder[m]).all() else round(float(np.nanmean(ponder[m])), 3)})
    return results


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
def _due(step, every):
    """Whether a `--*_every` action falls on `step` (every 0: never; the end of a run is handled apart)."""
    return every > 0 and step % every == 0


def seed_dir(run, seed):
    """Where a run keeps one seed's weights and Adam state."""
    return os.path.join(run, f"seed{seed}")


def use_compilation_cache(jax, directory):
    """Keeps XLA's compiled programs in `directory` (JAX's persistent cache) and reads them back from there.

    Each bucket shape compiles a training step and a prediction: 1.3-2.5 minutes on a GPU for one seed, about
    5 for ten, out of a lent device's 15. A call that resumes a run, given the cache the call before it left,
    skips them. Every program is kept (JAX's default keeps only those that took a second or more to compile).
    """
    os.makedirs(directory, exist_ok=True)
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    print(f"compilation cache {directory}: {len(os.listdir(directory))} entries", flush=True)


def train(args):
    """Trains one model per seed side by side: `jax.vmap` over their parameters and batches, so that a step
    of N seeds launches the kernels of one (it costs about N times one seed's step on a GPU all the same)."""
    import jax  # pylint: disable=import-outside-toplevel
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.training import losses, schedules  # pylint: disable=import-outside-toplevel

    began = time.perf_counter()
    if args.compilation_cache:
        use_compilation_cache(jax, args.compilation_cache)
    seeds = [int(s) for s in args.seeds.split(",")]
    if len(set(seeds)) != len(seeds):
        raise SystemExit(f"error: --seeds {args.seeds} names a seed twice")
    hparams = read_hparams(args.hparams_set, args.hparams)
    if hparams.optimizer != "adam":
        raise SystemExit(f"error: optimizer={hparams.optimizer}: this loop trains with the sets' Adam only")
    data = Data(args.data, args.buckets)
    data.plan_training(hparams.batch_size, hparams.max_length, task_repeats(data, hparams))
    models = [make_model(data, hparams, seed) for seed in seeds]
    model = models[0]
    optimizer = keras.optimizers.Adam(
        learning_rate=schedules.from_hparams(hparams), beta_1=hparams.optimizer_adam_beta1,
        beta_2=hparams.optimizer_adam_beta2, epsilon=hparams.optimizer_adam_epsilon,
        global_clipnorm=hparams.clip_grad_norm or None)
    optimizer.build(model.trainable_variables)
    os.makedirs(args.out, exist_ok=True)
    state_file = os.path.join(args.out, "state.json")
    log, step, epoch, minutes_before = [], 0, 0, 0.0
    def values_of(each):
        """(trainable, non-trainable, Adam) values of a model, in the first model's variable order."""
        return ([v.value for v in each.trainable_variables], [v.value for v in each.non_trainable_variables],
                [v.value for v in optimizer.variables])

    # Every seed's values; the saved files use the first model's variable names.
    values = [values_of(m) for m in models]
    if args.resume:
        with open(os.path.join(args.resume, "state.json"), encoding="utf-8") as f:
            resumed = json.load(f)
        if resumed.get("seeds") != seeds:
            raise SystemExit(f"error: {args.resume} trained seeds {resumed.get('seeds')}, not {seeds}")
        step, epoch, log = resumed["step"], resumed["epoch"] + 1, resumed["log"]
        minutes_before = resumed["training_minutes"]
        for i, seed in enumerate(seeds):
            load_variables(os.path.join(seed_dir(args.resume, seed), "weights.npz"), model.variables)
            load_variables(os.path.join(seed_dir(args.resume, seed), "optimizer.npz"), optimizer.variables)
            if int(np.asarray(optimizer.iterations.value)) != step:
                raise SystemExit(f"error: {args.resume}: seed {seed}'s Adam is at another step than {step}")
            values[i] = values_of(model)

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

    train_step = jax.jit(jax.vmap(step_fn), donate_argnums=0)

    def predict_fn(trainable, non_trainable, inputs):
        details, _ = model.stateless_call(trainable, non_trainable, {"inputs": inputs}, training=False,
                                          return_details=True)
        return _predictions(details)

    predict_all = jax.jit(jax.vmap(predict_fn, in_axes=(0, 0, None)))

    def stacked(per_seed):
        return [jax.numpy.stack(values) for values in zip(*per_seed)]

    state = tuple(stacked([each[part] for each in values]) for part in range(3))

    def save(state, epoch):
        for i, seed in enumerate(seeds):
            os.makedirs(seed_dir(args.out, seed), exist_ok=True)
            save_variables(os.path.join(seed_dir(args.out, seed), "weights.npz"),
                           model.trainable_variables + model.non_trainable_variables,
                           [x[i] for x in list(state[0]) + list(state[1])])
            save_variables(os.path.join(seed_dir(args.out, seed), "optimizer.npz"), optimizer.variables,
                           [x[i] for x in state[2]])
        with open(state_file + ".tmp", "w", encoding="utf-8") as f:
            json.dump({"step": step, "epoch": epoch, "log": log, "training_minutes": minutes(),
                       "hparams_set": args.hparams_set, "hparams": args.hparams, "seeds": seeds,
                       "buckets": data.buckets, "rows": data.rows, "problem": data.problem}, f)
        os.replace(state_file + ".tmp", state_file)

    def evaluate(state, split):
        return answer(data, split, lambda inputs: predict_all(state[0], state[1], inputs), models=len(seeds))

    print(f"{jax.devices()[0]}: {data.problem}, seeds {seeds}, buckets {data.buckets} positions, rows "
          f"{data.rows}; from step {step}", flush=True)
    train_began = time.perf_counter()

    def minutes():
        """Minutes of training (compiles included), over every run this one resumes."""
        return round(minutes_before + (time.perf_counter() - train_began) / 60, 2)

    window = []
    batches = data.train_batches(seeds, epoch)
    while step < args.train_steps:
        epoch, b, indices = next(batches)
        inputs = np.stack([data.inputs("train", rows, b) for rows in indices])
        targets = np.stack([data.labels("train", rows) for rows in indices])
        state, stats = train_step(state, inputs, targets)
        window.append(stats)
        step += 1
        out_of_time = time.perf_counter() - train_began > 60 * args.max_minutes
        if _due(step, args.log_every) or step == args.train_steps or out_of_time:
            # Per seed: mean training loss and accuracy over the steps since the last line.
            loss, accuracy = (np.mean([np.asarray(s[k]) for s in window], axis=0) for k in (0, 1))
            window = []
            row = {"step": step, "loss": [round(float(x), 4) for x in loss],
                   "accuracy": [round(float(x), 4) for x in accuracy], "minutes": minutes()}
            if _due(step, args.eval_every):
                answered = evaluate(state, "eval")
                row["eval_error"] = [r["mean"] for r in answered]
                row["eval_tasks"] = [r["tasks"] for r in answered]  # Per seed: when each task is learned.
            log.append(row)
            print(json.dumps(row), flush=True)
        if _due(step, args.save_every):
            save(state, epoch)
        if out_of_time:
            break
    save(state, epoch)
    device = jax.devices()[0]
    per_seed = {str(seed): {"eval": e, "test": t}
                for seed, e, t in zip(seeds, evaluate(state, "eval"), evaluate(state, "test"))}
    # As the paper chose among its seeds: the lowest mean validation error.
    best = min(per_seed, key=lambda seed: per_seed[seed]["eval"]["mean"])
    results = {"step": step, "training_minutes": minutes(),
               "device": f"{device} ({getattr(device, 'device_kind', device.platform)})",
               "jax": jax.__version__, "keras": keras.__version__, "hparams_set": args.hparams_set,
               "hparams": args.hparams, "seeds": per_seed, "best_seed": int(best), "seed": int(best),
               "problem": data.problem, "buckets": data.buckets, "rows": data.rows,
               "eval": per_seed[best]["eval"], "test": per_seed[best]["test"],
               "minutes_in_all": round((time.perf_counter() - began) / 60, 2)}
    with open(os.path.join(args.out, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    print(json.dumps({k: results[k] for k in ("step", "training_minutes", "minutes_in_all", "best_seed")}))
    for seed, result in per_seed.items():
        print(f"seed {seed}: validation {result['eval']['mean']}%, test {result['test']['mean']}% "
              f"({result['test']['failed']} failed)")
    for split in ("eval", "test"):
        print(f"best seed {best}, {split}", json.dumps(results[split]))


# -- evaluate (any backend) --------------------------------------------------------------------------------
def evaluate_saved(args):
    import keras  # pylint: disable=import-outside-toplevel

    with open(os.path.join(args.run, "state.json"), encoding="utf-8") as f:
        state = json.load(f)
    seed = args.seed if args.seed is not None else _best_seed(args.run, state)
    weights = os.path.join(seed_dir(args.run, seed), "weights.npz")
    if not os.path.exists(weights):  # A run of one seed, saved before `--seeds`.
        weights = os.path.join(args.run, "weights.npz")
    data = Data(args.data, ",".join(map(str, state["buckets"])))
    data.rows = state["rows"]
    model = make_model(data, read_hparams(state["hparams_set"], state["hparams"]), seed)
    load_variables(weights, model.trainable_variables + model.non_trainable_variables)

    def predict(inputs):
        return tuple(None if x is None else keras.ops.convert_to_numpy(x)[None] for x in
                     _predictions(model({"inputs": inputs}, training=False, return_details=True)))

    results = {"backend": keras.backend.backend(), "step": state["step"], "seed": seed,
               "eval": answer(data, "eval", predict)[0], "test": answer(data, "test", predict)[0]}
    print(json.dumps(results))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(results, f, indent=1)


def _best_seed(run, state):
    """The seed `train` chose by validation error (results.json), else the run's only one."""
    results = os.path.join(run, "results.json")
    if os.path.exists(results):
        with open(results, encoding="utf-8") as f:
            return int(json.load(f)["seed"])
    return int(state["seeds"][0] if "seeds" in state else state["seed"])


# -- report ----------------------------------------------------------------------------------------------
def _read_run(directory):
    """A run's results.json, with its log's rows reduced to the chosen seed (runs before `--seeds` had one)."""
    with open(os.path.join(directory, "results.json"), encoding="utf-8") as f:
        results = json.load(f)
    with open(os.path.join(directory, "state.json"), encoding="utf-8") as f:
        state = json.load(f)
    seeds = state.get("seeds", [state.get("seed")])
    results.setdefault("seeds", {str(results["seed"]): {"eval": results["eval"], "test": results["test"]}})
    chosen = seeds.index(results["seed"])
    results["log"] = [{k: (v[chosen] if isinstance(v, list) else v) for k, v in row.items()} for row in state["log"]]
    return results


def _spread(run):
    means = sorted(result["test"]["mean"] for result in run["seeds"].values())
    median = float(np.median(means))
    return f"{median:.2f}" if len(means) == 1 else f"{median:.2f} ({means[0]:.2f}-{means[-1]:.2f})"


def report(args):
    """A run log section: test error per task of each saved run (a run and its continuations), the validation
    curve of the last, and whether `evaluate`'s answers on another backend were the same."""
    import common  # pylint: disable=import-outside-toplevel

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
             ["seeds trained (chosen on validation)"] + [f"{len(r['seeds'])} (seed {r['seed']})" for r in runs],
             ["test mean error over the seeds, median (min-max)"] + [_spread(r) for r in runs],
             ["training minutes (compiles included)"] + [f"{r['training_minutes']:.1f}" for r in runs]]
    curve = [row for row in last["log"] if "eval_error" in row] + [
        {"step": last["step"], "eval_error": last["eval"]["mean"], "accuracy": last["log"][-1]["accuracy"],
         "eval_tasks": last["eval"]["tasks"]}]
    # When each task is learned: its validation error at each evaluation (runs of 4510680 kept the mean only).
    task_curve = [["step"] + [str(r["step"]) for r in curve if "eval_tasks" in r]]
    task_curve += [[t] + [f"{r['eval_tasks'][t]:.1f}" for r in curve if "eval_tasks" in r] for t in tasks]
    checked = ""
    if args.checked:
        with open(args.checked, encoding="utf-8") as f:
            other = json.load(f)
        if other["step"] != last["step"] or other.get("seed", last["seed"]) != last["seed"]:
            raise SystemExit(f"error: --checked answered step {other['step']} of seed {other.get('seed')}, the last "
                             f"run's chosen seed {last['seed']} is at step {last['step']}")
        same = all(other[split]["tasks"] == last[split]["tasks"] for split in ("eval", "test"))
        verdict = ("every validation and test question as the JAX loop did" if same else
                   "differently: " + json.dumps(other["test"]))
        checked = (f"The weights of step {last['step']} loaded into the model on the {other['backend']} backend "
                   f"(`evaluate`) answer {verdict}.")
    text = "\n".join([
        f"## {args.title}", "",
        f"`{common.command_line()}` — {common.today()}; the runs were trained by `babi_accelerator.py train` on "
        f"{last['device']} (jax {last['jax']}, Keras {last['keras']}): `{last['hparams_set']}`"
        f"{' (' + last['hparams'] + ')' if last['hparams'] else ''}, seeds {', '.join(last['seeds'])}, "
        f"`{last['problem']}`, buckets ending at {last['buckets']} positions with {last['rows']} questions per "
        "batch.", "",
        "Test error (%) per task of joint training on all 20 tasks after each run, of the seed with the lowest "
        "mean validation error (as the paper chose among its seeds):", "",
        common.markdown_table(headers, rows), "",
        "Validation error (%) and training accuracy of the last run's chosen seed by step:", "",
        common.markdown_table(
            ["step"] + [str(r["step"]) for r in curve],
            [["validation mean error"] + [f"{r['eval_error']:.2f}" for r in curve],
             ["training accuracy (mean of the log window)"] + [f"{r['accuracy']:.3f}" for r in curve]]),
        *(["", "Validation error (%) per task of the last run's chosen seed by step:", "",
           common.markdown_table(task_curve[0], task_curve[1:])] if len(task_curve[0]) > 2 else []),
        "", checked, "",
        babi.paper_line(subset)])
    print(text)
    if args.write:
        common.replace_section(args.section, text)
    if args.record:
        babi.record([babi.result_row(
            subset, "joint", last["hparams_set"], last["hparams"], last["test"]["tasks"], layout="facts",
            train_steps=last["step"], seed=last["seed"], seeds_tried=len(last["seeds"]),
            validation_mean_error=last["eval"]["mean"], training_minutes=last["training_minutes"],
            device=last["device"])])


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
        if name == "train":
            p.add_argument("--hparams_set", default="adaptive_universal_transformer_babi_rel")
            p.add_argument("--hparams", default="")
            p.add_argument("--seeds", default="1", help="comma-separated: one model per seed, trained side by side")
            p.add_argument("--buckets", default=DEFAULT_BUCKETS)
            p.add_argument("--train_steps", type=int, default=100000)
            p.add_argument("--max_minutes", type=float, default=float("inf"))
            # 0: never, but at the end (the last step is always logged, saved and evaluated).
            p.add_argument("--log_every", type=int, default=1000)
            p.add_argument("--eval_every", type=int, default=5000, help="in-loop evaluations (on logged steps)")
            p.add_argument("--save_every", type=int, default=10000)
            p.add_argument("--out", required=True)
            p.add_argument("--resume", default=None, help="a run directory to continue")
            p.add_argument("--compilation_cache", default=None,
                           help="a directory for XLA's compiled programs, reused by later calls (JAX's cache)")
        else:
            p.add_argument("--run", required=True, help="a directory `train` wrote")
            p.add_argument("--seed", type=int, default=None, help="default: the seed with the best validation error")
            p.add_argument("--json", default=None)
    p = commands.add_parser("report")
    p.add_argument("--runs", required=True, help="comma-separated run directories, a run before its continuations")
    p.add_argument("--checked", default=None, help="`evaluate --json` of the last run on another backend")
    p.add_argument("--title", default="bAbI on an accelerator")
    p.add_argument("--section", default="babi_accelerator")
    p.add_argument("--write", action="store_true", help="put the section into docs/studies/benchmark_runs.md")
    p.add_argument("--record", action="store_true", help="append the last run's chosen seed's test error per task "
                   "to benchmarks/results/babi.json (drawn by benchmarks/plots.py)")
    args = parser.parse_args(argv)
    babi.common.refuse_uncommitted_writes(args)
    for name in ("log_every", "eval_every", "save_every"):
        if getattr(args, name, 0) < 0:
            raise SystemExit(f"error: --{name} must be >= 0 (0: only at the end), got {getattr(args, name)}")
    if getattr(args, "data", None) and not os.path.exists(args.data):
        raise SystemExit(f"error: {args.data} does not exist (write it with `prepare`)")
    if args.command == "prepare":
        os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    if args.command == "train":
        os.environ.setdefault("KERAS_BACKEND", "jax")
    {"prepare": prepare, "train": train, "evaluate": evaluate_saved, "report": report}[args.command](args)


if __name__ == "__main__":
    main()
