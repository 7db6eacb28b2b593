"""The training loop: distributed steps, gradient accumulation, evaluation, summaries, checkpoints, resume.

The loss of a step is the label-smoothed cross-entropy summed over every target token of the global batch
(all replicas, all accumulated micro-batches) divided by the number of those tokens, so one device, several
replicas and accumulation over micro-batches all compute the same update for the same examples.

    trainer = Trainer(registry.problem("algorithmic_reverse_decimal40"),
                      registry.hparams("transformer_tiny_rel"), output_dir="/tmp/rev")
    trainer.train(train_steps=2000)   # resumes from /tmp/rev if it holds checkpoints
"""

import collections
import inspect
import math
import signal
import sys
import time

import keras
import tensorflow as tf

from t2t_relpos import errors, registry
from t2t_relpos.data import batching, pipeline
from t2t_relpos.training import checkpoints, losses, optimizers
from t2t_relpos.training import strategy as strategy_lib

SUM = tf.distribute.ReduceOp.SUM
# tensor2tensor's `--schedule` values that train (its default first); "train" never evaluates.
CONTINUOUS_TRAIN_AND_EVAL = "continuous_train_and_eval"
SCHEDULES = (CONTINUOUS_TRAIN_AND_EVAL, "train")


class WorkerLost(Exception):
    """Raised on a worker of a multi-worker run when another worker stopped answering."""

    def __init__(self, step, error):
        super().__init__(f"lost contact with another worker after step {step} ({type(error).__name__}: it "
                         "stopped, or the network between them failed); start every worker again with the same "
                         "command: they resume from the last checkpoint")
        self.step = step


# What a collective raises on the survivors when a worker dies (or is cut off) mid-run.
_PEER_ERRORS = (tf.errors.UnavailableError, tf.errors.AbortedError, tf.errors.DeadlineExceededError)


class TrainingInterrupted(Exception):
    """Raised after a clean stop on SIGINT/SIGTERM, once the checkpoint is written."""

    def __init__(self, step, path):
        super().__init__(f"interrupted at step {step}; checkpoint saved to {path}; run the same command "
                         "again to resume")
        self.step = step
        self.path = path


class NoTrainingExamples(errors.HParamsError):
    """Raised when the training stream drops every example as longer than `max_length` (it would never yield)."""

    def __init__(self, max_length):
        super().__init__(f"no training example fits max_length={max_length}: {batching.STARVED_AFTER} in a row were "
                         "longer (an example's length counts its EOS); use a larger max_length in a new "
                         "--output_dir")


class TrainingDiverged(Exception):
    """Raised when the loss or the weights stop being finite; the step that made them so is not saved."""

    def __init__(self, step, what, latest):
        saved = f"the newest checkpoint, {latest}, is from before it" if latest else "no checkpoint was written"
        super().__init__(f"training diverged: {what} at step {step}, which was not saved ({saved}); a lower "
                         "learning_rate or a clip_grad_norm in a new --output_dir may train")
        self.step = step


def build_model(hparams, problem, data_dir=None, model_name=None, dtype=None):
    """The registered model `model_name` (default `hparams.model`) for `problem`'s vocabularies, built."""

    input_vocab, target_vocab = problem.vocab_sizes(data_dir)
    name = model_name or hparams.model
    model_class = registry.model(name)
    arguments = problem.model_arguments(data_dir)
    missing = sorted(a for a in arguments if not _accepts(model_class, a))
    if missing:
        raise errors.T2TRelposError(
            f"model {name} cannot read {problem.name}'s inputs (it needs {missing}); use a model that accepts "
            "them, e.g. transformer_encoder or universal_transformer_encoder")
    model = model_class.from_hparams(hparams, input_vocab, target_vocab, dtype=dtype, **arguments)
    model.build()
    return model


def freeze_layers(model, names):
    """Marks the model's top-level layers called `names` untrainable (`hparams.freeze_layers`).

    Raises:
        HParamsError: a name that is not one of the model's top-level layers (the message lists them).
    """
    layers = {layer.name: layer for layer in model.layers}
    for name in names:
        if name not in layers:
            raise errors.HParamsError(f"freeze_layers: {type(model).__name__} has no top-level layer {name!r}; "
                                      f"it has {', '.join(sorted(layers))}")
        layers[name].trainable = False


def _accepts(model_class, argument):
    """Whether a constructor in `model_class`'s hierarchy names `argument` (not merely `**kwargs`)."""
    return any(argument in inspect.signature(cls.__init__).parameters
               for cls in model_class.__mro__ if "__init__" in vars(cls))


class Trainer:
    """Trains a registered model on a problem and keeps its output directory resumable.

    Args:
        problem: A `Problem` instance.
        hparams: An `HParams` (e.g. `registry.hparams("transformer_tiny_rel")`).
        output_dir: Where checkpoints and TensorBoard summaries go.
        model_name: Registered model (default: `hparams.model`).
        data_dir: The problem's prepared data, if it needs any.
        strategy: A `tf.distribute.Strategy` (default: one device).
        seed: Makes initialisation and data order reproducible. A resumed run skips the batches its steps so
            far trained on, so it reads on in the stream an uninterrupted run reads. Without a seed a resumed
            run reads a new random stream.
        jit_compile: Compile the forward/backward pass with XLA (batches are padded to bucket lengths so
            only a few shapes are compiled).
        mixed_precision: None, "mixed_float16" (with dynamic loss scaling) or "mixed_bfloat16".
        checkpoint_every: Steps between checkpoints.
        keep_checkpoint_max: Checkpoints kept (older ones are deleted).
        eval_every: Steps between evaluations (default: `checkpoint_every`); 0: only at the end.
        eval_steps: Evaluation batches (None: the whole evaluation split).
        schedule: tensor2tensor's `--schedule`, of its values the two that train: "continuous_train_and_eval"
            (evaluations every `eval_every` steps and at the end) or "train" (none: `train` returns None).
        log_every: Steps between progress lines when stdout is not a terminal.
        verbose: Print progress.
    """

    def __init__(self, problem, hparams, output_dir, model_name=None, data_dir=None, strategy=None, seed=None,
                 jit_compile=False, mixed_precision=None, checkpoint_every=1000, keep_checkpoint_max=20,
                 eval_every=None, eval_steps=None, log_every=100, verbose=True, schedule=CONTINUOUS_TRAIN_AND_EVAL):
        self.problem = problem
        self.hparams = hparams
        self.output_dir = output_dir
        self.data_dir = data_dir
        self.strategy = strategy or tf.distribute.OneDeviceStrategy("/cpu:0" if not tf.config.list_logical_devices(
            "GPU") else tf.config.list_logical_devices("GPU")[0].name)
        self.seed = seed
        self.jit_compile = jit_compile
        self.mixed_precision = mixed_precision
        self.checkpoint_every = max(1, checkpoint_every)
        self.eval_every = self.checkpoint_every if eval_every is None else eval_every
        self.eval_steps = eval_steps
        if schedule not in SCHEDULES:
            raise ValueError(f"schedule must be one of {', '.join(SCHEDULES)}, got {schedule!r}")
        self.evaluates = schedule == CONTINUOUS_TRAIN_AND_EVAL
        self.log_every = max(1, log_every)
        self.verbose = verbose
        self.is_chief = strategy_lib.is_chief(self.strategy)
        self.accumulation_steps = max(1, hparams.accumulation_steps)
        if seed is not None:
            keras.utils.set_random_seed(seed)
        from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel

        self.vocabulary = problem.vocabulary(data_dir)
        stored.check_vocabulary(output_dir, self.vocabulary, data_dir)  # Before a checkpoint of it is read.
        stored.check_precision(output_dir, mixed_precision)
        with self.strategy.scope():
            self.model = build_model(hparams, problem, data_dir, model_name, dtype=mixed_precision)
            self.optimizer = optimizers.from_hparams(hparams, mixed_precision)
            self.optimizer.build(self.model.trainable_variables)  # Every variable, so checkpoints match.
            freeze_layers(self.model, hparams.get("freeze_layers") or [])
            self._accumulators = self._make_accumulators() if self.accumulation_steps > 1 else None
        checkpoint = tf.train.Checkpoint(model=self.model, optimizer=self.optimizer,
                                         random=checkpoints.random_states(self.model))
        self.restored_from = checkpoints.restore_latest(checkpoint, output_dir, self.is_chief)
        self.manager = checkpoints.make_manager(checkpoint, output_dir, keep_checkpoint_max, self.is_chief)
        self._train_step = None
        self._eval_step = None
        self._writers = {}
        self._stop_signal = None

    @property
    def step(self):
        return int(self.optimizer.iterations.numpy())

    # -- the step ----------------------------------------------------------------------------------------
    def _make_accumulators(self):
        local = {"synchronization": tf.VariableSynchronization.ON_READ,
                 "aggregation": tf.VariableAggregation.SUM, "trainable": False}
        grads = [tf.Variable(tf.zeros(v.shape, v.dtype), name=f"accumulated_{i}", **local)
                 for i, v in enumerate(self.model.trainable_variables)]
        return grads, tf.Variable(0.0, name="accumulated_tokens", **local)

    def _gradients(self, batch, denominator):
        """Gradients of (summed loss + auxiliary losses) / denominator, and the step's statistics."""
        variables = self.model.trainable_variables
        with tf.GradientTape() as tape:
            details = self.model(batch, training=True, return_details=True)
            loss_sum, correct, tokens = losses.cross_entropy_and_accuracy(
                details["logits"], batch["targets"], self.hparams.label_smoothing)
            auxiliary = tf.add_n(list(details["losses"].values())) if details["losses"] else 0.0
            objective = (loss_sum + auxiliary * tokens) / denominator
            if isinstance(self.optimizer, keras.optimizers.LossScaleOptimizer):
                objective = self.optimizer.scale_loss(objective)
        grads = tape.gradient(objective, variables)
        stats = {"loss_sum": loss_sum, "tokens": tokens, "correct": correct,
                 "source_tokens": (tf.reduce_sum(tf.cast(tf.not_equal(batch["inputs"], 0), tf.float32))
                                   if "inputs" in batch else tf.zeros([]))}  # A language model reads none.
        for name, value in {**details["losses"], **details["summaries"]}.items():
            stats[f"summary/{name}"] = tf.cast(value, tf.float32) * tokens  # Token-weighted, like the loss.
        return grads, stats

    def _build_train_step(self):
        strategy, optimizer = self.strategy, self.optimizer
        variables = self.model.trainable_variables
        gradients = (tf.function(self._gradients, jit_compile=True, autograph=False) if self.jit_compile
                     else self._gradients)

        def one_step(batch):
            context = tf.distribute.get_replica_context()
            tokens = tf.reduce_sum(tf.cast(tf.not_equal(batch["targets"], 0), tf.float32))
            denominator = tf.maximum(context.all_reduce(SUM, tokens), 1.0)
            grads, stats = gradients(batch, denominator)
            optimizer.apply_gradients(zip(grads, variables))
            return stats

        def accumulate(batch):
            grads, stats = gradients(batch, tf.constant(1.0))
            accumulated, counted = self._accumulators
            for total, grad in zip(accumulated, grads):
                total.assign_add(grad)
            counted.assign_add(stats["tokens"])
            return stats

        def apply_accumulated():
            context = tf.distribute.get_replica_context()
            accumulated, counted = self._accumulators
            denominator = tf.maximum(context.all_reduce(SUM, counted.read_value()), 1.0)
            optimizer.apply_gradients(zip([total / denominator for total in accumulated], variables))
            for total in accumulated:
                total.assign(tf.zeros_like(total))
            counted.assign(0.0)

        def reduce(stats):
            return {name: strategy.reduce(SUM, value, axis=None) for name, value in stats.items()}

        # Traced without AutoGraph (everything it calls is written with explicit graph control flow, as the
        # model's code must be to run under jax.jit): converting the model's code took a trainer ~5 s to start.
        @tf.function(reduce_retracing=True, autograph=False)
        def train_step(iterator):
            if self.accumulation_steps == 1:
                return reduce(strategy.run(one_step, args=(next(iterator),)))
            totals = reduce(strategy.run(accumulate, args=(next(iterator),)))

            def accumulate_more(i, totals):
                more = reduce(strategy.run(accumulate, args=(next(iterator),)))
                return i + 1, {name: totals[name] + more[name] for name in totals}

            _, totals = tf.while_loop(lambda i, _: i < self.accumulation_steps - 1, accumulate_more,
                                      (tf.constant(0), totals))
            strategy.run(apply_accumulated)
            return totals

        return train_step

    def _train_dataset(self):
        """The training batches from the current step on: with a seed, the seeded stream less the batches the
        steps so far took (a step takes `accumulation_steps` batches for each replica an input pipeline feeds),
        so that a resumed run reads the batches an uninterrupted one reads; without, a new random stream."""
        # What a run from step 0 was seeded with before resumed runs skipped, so that such a run reads as before.
        seed = None if self.seed is None else hash((self.seed, 0)) % (2 ** 31)
        steps_taken = self.step if seed is not None else 0

        def dataset_fn(context):
            dataset = pipeline.input_dataset(
                self.problem, self.hparams, "train", data_dir=self.data_dir, seed=seed,
                num_shards=context.num_input_pipelines, shard_index=context.input_pipeline_id,
                pad_to_bucket_boundary=self.jit_compile)
            replicas_fed = context.num_replicas_in_sync // context.num_input_pipelines
            taken = steps_taken * self.accumulation_steps * replicas_fed
            return dataset.skip(taken) if taken else dataset

        return self.strategy.distribute_datasets_from_function(dataset_fn)

    # -- training ----------------------------------------------------------------------------------------
    def train(self, train_steps):
        """Trains until the optimizer has taken `train_steps` steps; returns the last evaluation's metrics (None
        with the "train" schedule).

        Raises:
            TrainingInterrupted: after SIGINT/SIGTERM, once a checkpoint of the current step is saved.
        """
        from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel

        if self.is_chief:
            stored.save(self.output_dir, self.hparams, self.problem.name, self.model_name,
                        vocabulary=self.vocabulary, usr_dirs=registry.usr_dirs(),
                        mixed_precision=self.mixed_precision or "none")
        start = self.step
        if self.verbose and self.restored_from:
            print(f"Resuming from {self.restored_from} (step {start}).", flush=True)
        if start >= train_steps:
            if self.verbose:
                print(f"Already trained for {start} >= {train_steps} steps.", flush=True)
            return self.evaluate() if self.evaluates else None
        if self._train_step is None:
            self._train_step = self._build_train_step()
        if self.verbose and start and self.seed is not None:
            print(f"Skipping the {start * self.accumulation_steps} batch(es) per replica that steps 1-{start} "
                  "trained on, to read on where the interrupted run stopped (seeded data).", flush=True)
        iterator = iter(self._train_dataset())
        progress = _Progress(train_steps, start, self.verbose, self.log_every)
        metrics = None
        previous_handlers = self._catch_signals()
        try:
            window = _Window()
            while self.step < train_steps:
                began = time.perf_counter()
                stats = {k: float(v) for k, v in self._train_step(iterator).items()}
                window.add(stats, time.perf_counter() - began)
                step = self.step
                if not math.isfinite(stats["loss_sum"]):
                    raise TrainingDiverged(step, f"the loss became {stats['loss_sum']}",
                                           checkpoints.latest(self.manager))
                if self.is_chief and (step % self.log_every == 0 or step == train_steps):
                    self._write_summaries("train", window.latest(), step, learning_rate=self.learning_rate())
                progress.update(step, window, self.learning_rate())
                if self._stop_signal is not None:
                    path = self._save(step)
                    raise TrainingInterrupted(step, path)
                saved = None
                if step % self.checkpoint_every == 0 or step == train_steps:
                    saved = self._save(step)
                if self.evaluates and (step == train_steps or (self.eval_every and step % self.eval_every == 0)):
                    metrics = self.evaluate()
                    if self._stop_signal is not None:  # It stopped between batches, without metrics.
                        raise TrainingInterrupted(step, saved or self._save(step))
                    progress.note("eval " + _format(metrics))
        except _PEER_ERRORS as e:  # In a step or a (collective) save.
            if not strategy_lib.is_multi_worker(self.strategy):
                raise
            raise WorkerLost(self.step, e) from None
        except tf.errors.InvalidArgumentError as e:
            if batching.STARVED_MESSAGE not in e.message:
                raise
            raise NoTrainingExamples(self.hparams.max_length) from None
        finally:
            self._restore_signals(previous_handlers)
            progress.close()
        return metrics

    @property
    def model_name(self):
        for name in registry.list_models():
            if registry.model(name) is type(self.model):
                return name
        return self.hparams.model

    def learning_rate(self):
        """The rate the last update used: step N's, as logged beside it. Keras evaluates the schedule at the
        iteration count before the update, which then counts it, so `schedule(iterations)` is step N + 1's."""
        optimizer = getattr(self.optimizer, "inner_optimizer", self.optimizer)
        rate = optimizer._learning_rate  # pylint: disable=protected-access  # The schedule, not its value now.
        if not callable(rate):  # A fixed rate (a variable).
            return float(keras.ops.convert_to_numpy(rate))
        return float(rate(tf.maximum(optimizer.iterations - 1, 0)))

    # -- evaluation --------------------------------------------------------------------------------------
    def evaluate(self, split="eval", max_batches=None):
        """Teacher-forced metrics on a split: loss, accuracy, accuracy_per_sequence, neg_log_perplexity, ...
        and, from neg_log_perplexity, perplexity (and bits_per_character on a character-level problem).

        A stop asked for during training (SIGINT/SIGTERM) ends it between batches, with no metrics: a whole
        evaluation split may take longer than a scheduler waits after its SIGTERM.
        """
        max_batches = self.eval_steps if max_batches is None else max_batches
        if self._eval_step is None:
            self._eval_step = tf.function(self._evaluate_batch, reduce_retracing=True, autograph=False)
        dataset = pipeline.input_dataset(self.problem, self.hparams, split, data_dir=self.data_dir)
        if max_batches:
            dataset = dataset.take(max_batches)
        totals = {}
        first = None
        for batch in dataset:
            if self._stop_signal is not None:
                return {}
            first = batch if first is None else first
            for name, value in self._eval_step(batch).items():
                totals[name] = totals.get(name, 0.0) + value.numpy()
        if not totals or self._stop_signal is not None:
            return {}
        metrics = {name[:-4]: totals[name] / max(totals[name[:-4] + "_den"], 1.0)
                   for name in totals if name.endswith("_num")}
        metrics.update(perplexities(metrics, getattr(self.problem, "characters", False)))
        if self.is_chief:
            self._write_summaries("eval", metrics, self.step)
            if getattr(self.model, "adaptive", False):
                self._write_ponder_summaries(first)
        return metrics

    def _write_ponder_summaries(self, batch, rows=16):
        """ACT: histograms of the ponder time of every position of an eval batch, and a picture of it.

        The image has one row per example (the first `rows`) and one pixel column per position, brighter for
        longer pondering (white = the step limit + 1, black = padding).
        """
        details = self.model(batch, training=False, return_details=True)
        limit = float(getattr(self.model, "recurrence", {}).get("act_max_steps", 1)) + 1.0
        with self._writers["eval"].as_default(step=self.step):  # Created by the metrics' summaries.
            for name, times in details.get("ponder_times", {}).items():
                times = tf.cast(times, tf.float32)
                # Ponder times are 0 exactly at padding and at least 1 elsewhere.
                tf.summary.histogram(f"ponder_time/{name}", tf.boolean_mask(times, times > 0.0))
                picture = tf.clip_by_value(times[:rows] / limit, 0.0, 1.0)[None, :, :, None]
                tf.summary.image(f"ponder_time_picture/{name}", picture)

    def _evaluate_batch(self, batch):
        details = self.model(batch, training=False, return_details=True)
        logits, targets = details["logits"], batch["targets"]
        out = {}
        loss_sum, tokens = losses.smoothed_cross_entropy(logits, targets, self.hparams.label_smoothing)
        out["loss_num"], out["loss_den"] = loss_sum, tokens
        for name in self.problem.eval_metrics:
            out[f"{name}_num"], out[f"{name}_den"] = losses.METRICS[name](logits, targets)
        for name, value in {**details["losses"], **details["summaries"]}.items():
            out[f"{name}_num"], out[f"{name}_den"] = tf.cast(value, tf.float32) * tokens, tokens
        return out

    # -- summaries and signals ---------------------------------------------------------------------------
    def flush_summaries(self):
        """Writes out the TensorBoard summaries buffered so far (before a process ends without cleaning up); a
        storage that refuses them (a full disk) costs them, with a warning, not the message of why the run ends."""
        for kind, writer in self._writers.items():
            try:
                writer.flush()
            except (OSError,) + checkpoints.STORAGE_ERRORS as e:
                print(f"warning: {checkpoints.storage_error(e, 'the summaries', f'{self.output_dir}/{kind}')}",
                      file=sys.stderr, flush=True)

    def _write_summaries(self, kind, values, step, **extra):
        try:
            if kind not in self._writers:
                self._writers[kind] = tf.summary.create_file_writer(f"{self.output_dir}/{kind}")
            with self._writers[kind].as_default(step=step):
                for name, value in {**values, **extra}.items():
                    tf.summary.scalar(name, value)
        except (OSError,) + checkpoints.STORAGE_ERRORS as e:
            raise checkpoints.storage_error(e, "the TensorBoard summaries", f"{self.output_dir}/{kind}",
                                            self._unsaved()) from None

    def _unsaved(self):
        latest = checkpoints.latest(self.manager)
        if latest:
            return f"the newest checkpoint is {latest}; rerun the same command to resume from it once there is room"
        return "no checkpoint was written; rerun the same command once there is room"

    def _save(self, step):
        """Saves a checkpoint of `step`, unless the weights are no longer finite (a loss can still be finite
        after the update that broke them): a run must never resume from, decode or average such weights."""
        if not all(bool(tf.reduce_all(tf.math.is_finite(w))) for w in self.model.trainable_weights):
            raise TrainingDiverged(step, "the weights stopped being finite", checkpoints.latest(self.manager))
        return checkpoints.save(self.manager, step, self.is_chief)

    def _catch_signals(self):
        """The first SIGINT/SIGTERM asks for a clean stop after the current step; a second one aborts."""

        def handler(signum, frame):  # pylint: disable=unused-argument
            if self._stop_signal is not None:
                raise KeyboardInterrupt
            self._stop_signal = signum
            try:
                print("\nStopping after this step (signal again to abort without saving)...", file=sys.stderr,
                      flush=True)
            except OSError:  # A closed pipe (the `| tee` got the same Ctrl-C): the checkpoint matters more.
                pass

        try:
            return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
        except ValueError:  # Not the main thread: leave signals alone.
            return {}

    @staticmethod
    def _restore_signals(previous):
        for sig, old in previous.items():
            signal.signal(sig, old)


class _Window:
    """The statistics of the last step, and the training rate over the last `steps` steps.

    The rate (`tok/s`) is tokens over time: the non-padding source and target tokens of the last steps
    divided by the seconds those steps took (input pipeline included; checkpoints, evaluation and logging
    between steps excluded).
    """

    def __init__(self, steps=20):
        self._last = None
        self._recent = collections.deque(maxlen=steps)  # (tokens, seconds) per step

    def add(self, stats, seconds):
        self._last = stats
        self._recent.append((stats["tokens"] + stats["source_tokens"], seconds))

    def tokens_per_second(self):
        tokens, seconds = (sum(column) for column in zip(*self._recent))
        return tokens / max(seconds, 1e-9)

    def latest(self):
        stats = self._last
        tokens = max(stats["tokens"], 1.0)
        values = {"loss": stats["loss_sum"] / tokens, "accuracy": stats["correct"] / tokens,
                  "tokens_per_second": self.tokens_per_second()}
        for name, value in stats.items():
            if name.startswith("summary/"):
                values[name[len("summary/"):]] = value / tokens
        return values


class _Progress:
    """A Keras progress bar on a terminal; a line every `log_every` steps otherwise."""

    def __init__(self, total, start, verbose, log_every):
        self.verbose = verbose
        self.log_every = log_every
        self.interactive = verbose and sys.stdout.isatty()
        self.bar = keras.utils.Progbar(total, stateful_metrics=["loss", "accuracy", "lr", "tok/s"],
                                       unit_name="step") if self.interactive else None
        self.total = total
        if self.bar is not None and start:
            self.bar.update(start)

    def update(self, step, window, learning_rate):
        if not self.verbose:
            return
        values = window.latest()
        shown = [("loss", values["loss"]), ("accuracy", values["accuracy"]), ("lr", learning_rate),
                 ("tok/s", values["tokens_per_second"])]
        if self.bar is not None:
            self._show(lambda: self.bar.update(step, values=shown))
        elif step % self.log_every == 0 or step == self.total:
            text = "  ".join(f"{name} {value:.4g}" for name, value in shown)
            self._show(lambda: print(f"step {step}/{self.total}  {text}", flush=True))

    def note(self, text):
        if self.verbose:
            self._show(lambda: print(("\n" if self.interactive else "") + text, flush=True))

    def close(self):
        if self.interactive:
            self._show(lambda: print(flush=True))

    def _show(self, write):
        """Runs `write`; if nobody reads the output any more (a closed pipe), training goes on silently."""
        try:
            write()
        except OSError:
            self.verbose = self.interactive = False
            self.bar = None


def perplexities(metrics, characters=False):
    """What the mean per-token log-likelihood `neg_log_perplexity` (nats) says: `perplexity`, its exp of minus,
    and, for a character-level problem, `bits_per_character` (minus it in bits). Empty without it."""
    if "neg_log_perplexity" not in metrics:
        return {}
    nats = -float(metrics["neg_log_perplexity"])
    out = {"perplexity": math.exp(min(nats, 700.0))}  # exp(700) is near float64's largest.
    if characters:
        out["bits_per_character"] = nats / math.log(2.0)
    return out


def _format(metrics):
    return "  ".join(f"{name} {value:.4f}" for name, value in sorted(metrics.items()))
