r"""t2t-relpos-trainer: train a registered model on a registered problem.

  t2t-relpos-trainer --registry_help        # the problems, models and hparams sets there are

  t2t-relpos-trainer --problem=algorithmic_reverse_decimal40 --hparams_set=transformer_tiny_rel \
      --output_dir=/tmp/reverse --train_steps=2000

  t2t-relpos-trainer --problem=wmt14_ende --hparams_set=transformer_big_rel \
      --data_dir=$HOME/t2t_data --tmp_dir=$HOME/t2t_tmp --output_dir=$HOME/runs/big_rel --generate_data

Rerunning the same command in the same --output_dir resumes from the last checkpoint (the stored hparams,
problem and model are reused; asking for different ones is an error). Ctrl-C saves a checkpoint and stops.
"""

import os
import sys

from absl import flags

from t2t_relpos.cli import common
from t2t_relpos.cli import export as export_cli

FLAGS = flags.FLAGS
# Held by the trainer writing a run: a second trainer on the same --output_dir stops at once.
LOCK_NAME = ".trainer.lock"


def define_flags():
    common.define_run_flags()
    flags.DEFINE_integer("train_steps", None, "Optimizer steps to train for in total (default: the "
                         "hparams set's train_steps).", lower_bound=0)
    flags.DEFINE_integer("eval_steps", None, "Evaluation batches (default: the whole evaluation split).",
                         lower_bound=1)
    flags.DEFINE_integer("eval_every", None, "Steps between evaluations (default: --checkpoint_every; 0: "
                         "only at the end).", lower_bound=0)
    flags.DEFINE_enum("schedule", "continuous_train_and_eval", ["continuous_train_and_eval", "train"],
                      "tensor2tensor's --schedule (the two of its values that train): evaluate every --eval_every "
                      "steps and at the end, or 'train': never evaluate.")
    flags.DEFINE_integer("checkpoint_every", 1000, "Steps between checkpoints.", lower_bound=1)
    flags.DEFINE_integer("keep_checkpoint_max", 20, "Checkpoints to keep.", lower_bound=1)
    flags.DEFINE_integer("log_every", 100, "Steps between progress lines when not on a terminal.",
                         lower_bound=1)
    flags.DEFINE_integer("seed", None, "Random seed for initialisation and data order (a resumed run skips the "
                         "batches it trained on, so it reads the stream an uninterrupted run reads; without a seed it "
                         "reads a new random one).", lower_bound=0,
                         upper_bound=2**32 - 1)
    flags.DEFINE_boolean("registry_help", False, "List the registered problems, models and hparams sets.")
    flags.DEFINE_enum("distribution", "auto", ["auto", "one_device", "mirrored", "multi_worker"],
                      "auto: MirroredStrategy over all GPUs if several, else one device; multi_worker reads "
                      "TF_CONFIG.")
    flags.DEFINE_integer("cpu_devices", 1, "Split the CPU into this many logical devices (to run "
                         "--distribution=mirrored without GPUs, e.g. for testing).", lower_bound=1)
    flags.DEFINE_enum("mixed_precision", "none", ["none", "mixed_float16", "mixed_bfloat16"],
                      "Compute in 16-bit floats with float32 weights.")
    flags.DEFINE_boolean("jit_compile", False, "Compile the training step with XLA.")
    flags.DEFINE_boolean("generate_data", False, "Prepare the problem's data (as t2t-relpos-datagen) first.")
    common.define_download_flag()
    flags.DEFINE_boolean("export", False, "After training, export the model in --export_format: a SavedModel that "
                         "maps text to text (tokenization in the graph, the set's beam_size/alpha/extra_length) to "
                         "<output_dir>/export/<step>, or a CTranslate2 model to "
                         "<output_dir>/export_ctranslate2/<step>.")
    export_cli.define_format_flag()


def main(argv):  # pylint: disable=unused-argument
    if FLAGS.registry_help:  # At once: listing names imports neither Keras nor TensorFlow.
        from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

        common.import_usr_dir()
        print(registry.help_string(), end="")
        return 0
    common.import_tensorflow()
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors, files, locks, registry
    from t2t_relpos.hparams import stored
    from t2t_relpos.training import schedules
    from t2t_relpos.training import strategy as strategy_lib

    common.import_usr_dir()
    # The runtime is configured here, before anything creates a tensor (which would fix it).
    strategy_lib.split_cpu(FLAGS.cpu_devices)
    strategy = strategy_lib.make_strategy(FLAGS.distribution)
    if not FLAGS.output_dir:
        raise errors.T2TRelposError("--output_dir is required")
    if FLAGS.schedule == "train" and (FLAGS.eval_every is not None or FLAGS.eval_steps is not None):
        raise errors.T2TRelposError("--schedule=train never evaluates: drop --eval_every and --eval_steps, or "
                                    "evaluate with --schedule=continuous_train_and_eval")
    hparams, problem_name, model_name = stored.resolve_for_run(
        FLAGS.output_dir, FLAGS.hparams_set, FLAGS.hparams, FLAGS.gin_file, FLAGS.gin_param,
        problem=FLAGS.problem, model=FLAGS.model)
    if not problem_name:
        raise errors.T2TRelposError("--problem is required for a new run")
    problem = registry.problem(problem_name)
    problem.check_hparams(hparams)  # Before the run is written: a fixed command must not meet the bad value again.
    schedules.check(hparams, FLAGS.train_steps)  # E.g. a rate of 0 * inf: refused before the run is written.
    registry.model(model_name)  # Fails early, with close matches, on an unknown name.
    for line in unread_overrides(hparams, model_name, FLAGS.hparams):
        print(f"t2t-relpos-trainer: warning: {line}", file=sys.stderr, flush=True)
    if not strategy_lib.is_chief(strategy) or "://" in FLAGS.output_dir:
        # Only the chief writes the run (the others follow it); remote file systems have no advisory locks.
        return train(strategy, hparams, problem, model_name)
    common.make_output_dir(FLAGS.output_dir)
    files.check_writable_directory(FLAGS.output_dir, "--output_dir")  # A read-only run: one line, not the lock's.
    try:
        with locks.hold(os.path.join(FLAGS.output_dir, LOCK_NAME)):
            return train(strategy, hparams, problem, model_name)
    except locks.LockedError as e:
        raise errors.T2TRelposError(f"another trainer is writing to --output_dir={FLAGS.output_dir} ({e}); wait "
                                    "for it to end, or use another --output_dir") from None


_RELATIVE_ONLY = ("max_relative_position", "relative_keys", "relative_values", "heads_share_relative_embeddings")
_ACT_ONLY = ("act_max_steps", "act_epsilon", "act_halting_bias_init", "act_type", "act_loss_weight")


def unread_overrides(hparams, model_name, overrides):
    """What to say of the `overrides` this run will not read, as tensor2tensor ignored them without a word:
    another model's fields (`num_rec_steps` on a Transformer), relative-position fields with other positions,
    ACT's fields with a fixed number of steps."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import registry
    from t2t_relpos.hparams import hparams_lib

    named = hparams_lib.override_names(overrides)
    read = set(registry.model(model_name).hparams_names())
    models = set().union(*(registry.model(name).hparams_names() for name in registry.list_models()))
    lines = [f"hparam {name!r} is not read by the {model_name} model: it has no effect"
             for name in sorted(named & models - read)]
    if hparams.get("position_encoding") != "relative":
        lines += [f"hparam {name!r} has no effect with position_encoding={hparams.position_encoding!r} (relative "
                  "positions: position_encoding=relative, as the *_rel sets have)"
                  for name in sorted(named & read & set(_RELATIVE_ONLY))]
    if "recurrence_type" in read and hparams.get("recurrence_type") != "act":
        lines += [f"hparam {name!r} has no effect with recurrence_type={hparams.recurrence_type!r} (ACT: "
                  "recurrence_type=act, as the adaptive_* sets have)" for name in sorted(named & read & set(_ACT_ONLY))]
    return lines


def train(strategy, hparams, problem, model_name):
    """Trains (or resumes) the run in --output_dir, then exports it if asked; returns the exit status."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors
    from t2t_relpos.data import preparation
    from t2t_relpos.training import strategy as strategy_lib
    from t2t_relpos.training import trainer as trainer_lib

    if FLAGS.generate_data:
        problem.allow_download = FLAGS.download
        preparation.prepare(problem, FLAGS.data_dir, FLAGS.tmp_dir)
    mixed_precision = None if FLAGS.mixed_precision == "none" else FLAGS.mixed_precision
    train_steps = hparams.train_steps if FLAGS.train_steps is None else FLAGS.train_steps
    print(f"Training {model_name} ({hparams.hparams_set}) on {problem.name} for {train_steps} steps with "
          f"{strategy.num_replicas_in_sync} replica(s); output in {FLAGS.output_dir}", flush=True)
    trainer = trainer_lib.Trainer(
        problem, hparams, FLAGS.output_dir, model_name=model_name, data_dir=FLAGS.data_dir, strategy=strategy,
        seed=FLAGS.seed, jit_compile=FLAGS.jit_compile, mixed_precision=mixed_precision,
        checkpoint_every=FLAGS.checkpoint_every, keep_checkpoint_max=FLAGS.keep_checkpoint_max,
        eval_every=FLAGS.eval_every, eval_steps=FLAGS.eval_steps, log_every=FLAGS.log_every, schedule=FLAGS.schedule)
    if FLAGS.export and trainer.is_chief:
        export_cli.check_export(trainer.model, problem, FLAGS.data_dir, FLAGS.export_format)
    try:
        metrics = trainer.train(train_steps)
    except trainer_lib.TrainingInterrupted as e:
        # The checkpoint is written. What is left is the input pipeline, stopped in mid-stream: destroying a
        # tf.data iterator waits for its in-flight elements, and one of a `Dataset.from_generator` waits for the
        # GIL that the destroying thread holds, so a clean interpreter exit hung about one time in 20 (stopped
        # a few steps in, while the pipeline was still filling its buffers). End without that clean-up: the
        # kernel releases the run's lock, and the summaries are flushed first.
        trainer.flush_summaries()
        common.fail("t2t-relpos-trainer", str(e), status=common.INTERRUPTED,
                    immediately=not strategy_lib.is_multi_worker(strategy))
    except (trainer_lib.TrainingDiverged, errors.T2TRelposError) as e:  # E.g. no example fits, a full disk.
        trainer.flush_summaries()  # The pipeline is stopped mid-stream, as above.
        status = common.USAGE_ERROR if isinstance(e, errors.T2TRelposError) else common.FAILED
        common.fail("t2t-relpos-trainer", str(e), status=status, immediately=not strategy_lib.is_multi_worker(strategy))
    except trainer_lib.WorkerLost as e:
        # The same input pipeline is left behind, and the shutdown barrier would wait for the lost worker.
        trainer.flush_summaries()
        common.fail("t2t-relpos-trainer", str(e), status=common.FAILED, immediately=True)
    if metrics:
        print("Final evaluation: " + "  ".join(f"{k} {v:.4f}" for k, v in sorted(metrics.items())), flush=True)
    if FLAGS.export and trainer.is_chief:
        model = trainer.model
        if mixed_precision:
            # Exported in float32 from the checkpoint just saved, as t2t-relpos-export would: the search's loop
            # state must keep one type, which float16 or bfloat16 activations do not.
            from t2t_relpos.training import checkpoints, runs

            model = runs.load(FLAGS.output_dir, checkpoints.latest(trainer.manager), FLAGS.data_dir)[0]
        export(model, problem, hparams, FLAGS.output_dir, trainer.step, FLAGS.data_dir, FLAGS.export_format)
    try:
        strategy_lib.leave_together(strategy)
    except errors.T2TRelposError as e:
        common.fail("t2t-relpos-trainer", f"the run is trained and saved, but {e}", status=common.FAILED,
                    immediately=True)
    return 0


def export(model, problem, hparams, output_dir, step, data_dir, export_format):
    """`--export`: writes the trained run's export to <output_dir>/export/<step> (or export_ctranslate2/).

    The trainer has no --export_dir: where that directory is taken (e.g. the same step exported by an earlier run
    of the same command), the message offers t2t-relpos-export's (which exports the newest checkpoint, this one),
    with the run's --output_dir filled in.
    """
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel

    other = (f"export it elsewhere with t2t-relpos-export --output_dir={output_dir} --export_dir=DIR"
             + ("" if export_format == "saved_model" else f" --export_format={export_format}"))
    try:
        path = export_cli.write_export(model, problem, hparams, output_dir, step, data_dir, export_format,
                                       elsewhere=other)
    except export_cli.TargetTaken as e:
        raise errors.T2TRelposError(f"the run is trained and saved, but {e}") from None
    except errors.T2TRelposError as e:  # E.g. a full disk: what is done is kept, and says so.
        raise errors.T2TRelposError(f"the run is trained and saved, but {e}; export it with t2t-relpos-export "
                                    "once that is fixed") from None
    kind = "a SavedModel" if export_format == "saved_model" else "a CTranslate2 model"
    print(f"Exported {kind} to {path}", flush=True)
    return path


def run(argv=None):
    define_flags()
    common.run(main, "t2t-relpos-trainer", __doc__, [__name__, common.__name__, export_cli.__name__], argv)


if __name__ == "__main__":
    run()
