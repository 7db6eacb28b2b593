"""The trainer: it learns, workers cooperate, runs resume (replicas and accumulation: test_training_replicas.py)."""

import contextlib
import inspect
import json
import os
import signal
import socket
import subprocess
import sys
import time

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_relpos import errors, registry
from t2t_relpos.problems import algorithmic
from t2t_relpos.training import checkpoints
from t2t_relpos.training import trainer as trainer_lib

ENV = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="2")
TRAINER = "import t2t_relpos.cli.trainer as m; m.run()"
# The trainer, held before its last act (`leave_together`) until the file named by $T2T_RELPOS_TEST_GATE exists:
# a worker that is late at the end of a run, with all its threads (its heartbeats too) alive.
HELD_TRAINER = """
import os, time
from t2t_relpos.training import strategy
leave_together = strategy.leave_together
def held(*args):
    while not os.path.exists(os.environ["T2T_RELPOS_TEST_GATE"]):
        time.sleep(0.1)
    leave_together(*args)
strategy.leave_together = held
import t2t_relpos.cli.trainer as m; m.run()
"""


def test_tiny_relative_transformer_learns_to_reverse(tmp_path):
    problem = algorithmic.AlgorithmicReverseDecimal40(train_length=8, eval_length=8, num_eval_examples=200)
    hparams = registry.hparams("transformer_cpu_rel")
    # 32 wide (transformer_cpu_rel's 2+2 layers, 4 heads): 0.94 after 250 steps; 64 wide took 400 steps.
    hparams.parse("batch_size=512,learning_rate=0.5,learning_rate_warmup_steps=100,max_relative_position=8,"
                  "hidden_size=32,filter_size=64")
    trainer = trainer_lib.Trainer(problem, hparams, str(tmp_path), seed=1, checkpoint_every=250, eval_every=0,
                                  verbose=False)
    metrics = trainer.train(250)  # eval_every=0: evaluated once, at the end.
    assert metrics["accuracy"] >= 0.9, metrics
    assert checkpoints.step_of(trainer.manager.latest_checkpoint) == 250
    assert os.listdir(tmp_path / "train") and os.listdir(tmp_path / "eval")  # TensorBoard event files.


def _free_ports(count):
    sockets = [socket.socket() for _ in range(count)]
    for s in sockets:
        s.bind(("127.0.0.1", 0))
    ports = [s.getsockname()[1] for s in sockets]
    for s in sockets:
        s.close()
    return ports


@contextlib.contextmanager
def killed_when_left(processes):
    """`processes`; whichever is still running when the block is left (a failed wait, a hang) is killed and
    reaped, so no trainer outlives its test."""
    try:
        yield processes
    finally:
        for process in processes:
            if process.poll() is None:
                process.kill()
                process.communicate()


SMALL = "hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1"  # Traces fast.


def _trainer_args(output_dir, steps, *extra, hparams=f"batch_size=256,max_length=16,{SMALL}", code=TRAINER):
    return [sys.executable, "-c", code, "--problem=algorithmic_reverse_binary40",
            "--hparams_set=transformer_cpu_rel", f"--hparams={hparams}",
            f"--output_dir={output_dir}", f"--train_steps={steps}", "--eval_steps=1", "--log_every=1", *extra]


def test_multi_worker_mirrored_with_two_processes(tmp_path):
    """Both workers train and end cleanly, also when one of them stalls in a step for longer than TensorFlow's
    default heartbeat timeout (as on a busy machine), and when it is late at the end of the run, so that the
    chief must wait for it before exiting; the non-chief's scratch checkpoints do not outlive the run. With
    clipping, which sums the gradient across the workers before it clips (the same step as one device:
    `distributed_check.py`)."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    scratch = tmp_path / "tmp"  # The workers' temporary directory.
    scratch.mkdir()
    gate = tmp_path / "gate"
    processes = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        env = dict(ENV, TF_CONFIG=json.dumps(config), TMPDIR=str(scratch), T2T_RELPOS_TEST_GATE=str(gate))
        processes.append(subprocess.Popen(
            _trainer_args(tmp_path / "run", 4, "--distribution=multi_worker", "--checkpoint_every=4",
                          hparams=f"batch_size=256,max_length=16,clip_grad_norm=1.0,{SMALL}",
                          code=HELD_TRAINER if index == 1 else TRAINER),
            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True))
    with killed_when_left(processes):
        # The second worker (not the one hosting the coordination service) stops answering for 15 s.
        seen = _wait_for_step(processes[1], 2)
        processes[1].send_signal(signal.SIGSTOP)
        time.sleep(15)
        processes[1].send_signal(signal.SIGCONT)
        # Then it is held before the end of the run: the chief, which hosts the coordination service, must not
        # exit before it (without `leave_together` it did, and the other worker's next heartbeat logged
        # StartAbort: seen once in a full test run). Held, not stopped: a stop as long as the chief's end of
        # the run (its input pipeline's teardown took 2-36 s on a busy machine) outlasted the heartbeat timeout.
        chief_seen = _wait_for_line(processes[0], "Final evaluation")
        time.sleep(5)
        chief_waited = processes[0].poll() is None
        gate.touch()
        outputs = [p.communicate(timeout=150)[0] for p in processes]  # About 30 s; with a 10 s timeout, a hang.
    outputs = [chief_seen + outputs[0], seen + outputs[1]]
    for process, output in zip(processes, outputs):
        assert process.returncode == 0, output
        assert "StartAbort" not in output and "Traceback" not in output, output
    assert chief_waited, outputs[0]
    assert "with 2 replica(s)" in outputs[0]
    assert not list(scratch.iterdir())
    assert checkpoints.step_of(_latest(tmp_path / "run")) == 4  # The chief wrote it.


def _latest(directory):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    return tf.train.latest_checkpoint(str(directory))


def _start(output_dir, steps, *extra):
    return subprocess.Popen(_trainer_args(output_dir, steps, *extra), env=ENV, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _wait_for_step(process, step, timeout=300):
    """Reads the process's output until it reports `step`; returns what it printed."""
    return _wait_for_line(process, f"step {step}/", timeout)


def _wait_for_line(process, prefix, timeout=300):
    """Reads the process's output until a line starts with `prefix`; returns what it printed."""
    seen = []
    deadline = time.time() + timeout
    for line in process.stdout:
        seen.append(line)
        if line.startswith(prefix):
            return "".join(seen)
        assert time.time() < deadline, "".join(seen)
    raise AssertionError("the trainer ended early:\n" + "".join(seen))


def test_stopped_and_killed_runs_resume_where_they_stopped(tmp_path):
    run_dir = tmp_path / "run"
    # SIGKILL, possibly in the middle of a save: the next run resumes from the last complete checkpoint.
    first = _start(run_dir, 10000, "--checkpoint_every=2", "--eval_every=0")  # No evaluation to trace.
    with killed_when_left([first]):
        _wait_for_step(first, 5)
        first.kill()
        first.communicate(timeout=60)
    killed_at = checkpoints.step_of(_latest(run_dir))
    assert killed_at >= 2

    # That next run, resumed, then stopped by a signal: a clean stop with a checkpoint of the current step and
    # exit status 130 (SIGINT and its "checkpoint saved" line: the input-pipeline test below), even when nobody
    # reads the output any more: `t2t-relpos-trainer ... | tee log` and Ctrl-C, where tee dies with the
    # trainer's first signal, so every later write of the trainer (its "stopping" note, progress lines, the
    # final error line) meets a closed pipe. That must not cost the checkpoint of the current step. (Two runs
    # for the three acts: each trainer process is 10-20 s of a core.)
    second = subprocess.Popen(_trainer_args(run_dir, 10000, "--checkpoint_every=10000"), env=ENV,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    with killed_when_left([second]):
        seen = _wait_for_step(second, killed_at + 3)
        second.stdout.close()
        second.stderr.close()
        second.send_signal(signal.SIGTERM)
        assert second.wait(timeout=120) == 130
    assert "Resuming from" in seen and f"(step {killed_at})" in seen, seen
    stopped_at = checkpoints.step_of(_latest(run_dir))
    assert stopped_at >= killed_at + 3
    assert not [name for name in os.listdir(run_dir) if "_temp" in name]

    # The stopped run resumes where it stopped. (Restored in this process: a resume in a process of its own is
    # the second run's, above.)
    hparams = registry.hparams("transformer_cpu_rel")
    hparams.parse(f"batch_size=256,max_length=16,{SMALL}")
    resumed = trainer_lib.Trainer(registry.problem("algorithmic_reverse_binary40"), hparams, str(run_dir),
                                  verbose=False)
    assert checkpoints.step_of(resumed.restored_from) == stopped_at and resumed.step == stopped_at


SLOW_PROBLEM = '''
import itertools
import time
import numpy as np
import tensorflow as tf
from t2t_relpos import registry
from t2t_relpos.problems import problem


@registry.register_problem
class SlowCopy(problem.Problem):
    """Copying digits, from a generator that turns slow once the first batches are made (the pipeline reads
    4096 examples before it makes any), so that the input pipeline is then always busy calling it."""

    def feature_encoders(self, data_dir=None):
        encoder = problem.SymbolEncoder("0123456789")
        return {"inputs": encoder, "targets": encoder}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        def examples():
            rng = np.random.default_rng(0)
            for count in itertools.count() if split == "train" else range(8):
                if count > 5000:
                    time.sleep(0.05)
                ids = np.append(rng.integers(2, 12, size=4), 1)
                yield {"inputs": ids, "targets": ids}

        spec = tf.TensorSpec([None], tf.int64)
        return tf.data.Dataset.from_generator(examples, output_signature={"inputs": spec, "targets": spec})
'''


def test_a_stop_signal_ends_the_trainer_while_its_input_is_still_being_generated(tmp_path):
    # Destroying a tf.data iterator waits for its in-flight elements, and an element of a Python generator
    # waits for the GIL held by the thread destroying it: a clean interpreter exit deadlocked whenever a stop
    # found a generator call in flight (one time in 20 with the algorithmic problems, always here).
    usr_dir = tmp_path / "slow_problem.py"
    usr_dir.write_text(SLOW_PROBLEM)
    args = [sys.executable, "-c", TRAINER, f"--usr_dir={usr_dir}", "--problem=slow_copy",
            "--hparams_set=transformer_cpu", f"--hparams=batch_size=64,{SMALL}", f"--output_dir={tmp_path / 'run'}",
            "--train_steps=10000", "--log_every=1", "--checkpoint_every=10000"]
    process = subprocess.Popen(args, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for_step(process, 2)
    process.send_signal(signal.SIGINT)
    try:
        output = process.communicate(timeout=90)[0]
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("the interrupted trainer did not end: " + process.communicate()[0][-2000:]) from None
    assert process.returncode == 130, output
    assert checkpoints.step_of(_latest(tmp_path / "run")) >= 2 and "checkpoint saved" in output


def test_resuming_skips_a_damaged_checkpoint_and_unlists_it(tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel

    variable = tf.Variable(0.0)
    step = tf.Variable(0, dtype=tf.int64)
    checkpoint = tf.train.Checkpoint(v=variable, optimizer=tf.train.Checkpoint(iterations=step))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=5, checkpoint_name="ckpt")
    for value in (1.0, 2.0, 3.0):
        variable.assign(value)
        manager.save(checkpoint_number=int(value))
    for path in tmp_path.glob("ckpt-3.data-*"):
        os.truncate(path, 3)
    variable.assign(0.0)
    assert checkpoints.restore_latest(checkpoint, str(tmp_path)) == str(tmp_path / "ckpt-2")
    assert float(variable.numpy()) == 2.0
    state = tf.train.get_checkpoint_state(str(tmp_path))
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-1", "ckpt-2"]

    for name in ("ckpt-1", "ckpt-2"):
        for path in tmp_path.glob(f"{name}.data-*"):
            os.truncate(path, 3)
    with pytest.raises(errors.T2TRelposError, match="no checkpoint of .* is readable"):
        checkpoints.restore_latest(checkpoint, str(tmp_path))


def _tiny_transformer(**overrides):
    from t2t_relpos.models import Transformer  # pylint: disable=import-outside-toplevel

    config = dict(input_vocab_size=13, target_vocab_size=13, hidden_size=16, filter_size=32, num_heads=2,
                  num_encoder_layers=2, num_decoder_layers=2, position_encoding="relative", max_relative_position=3)
    model = Transformer(**{**config, **overrides})
    model.build()
    return model


def test_a_checkpoint_of_another_model_is_never_loaded_in_part(tmp_path, capfd):
    # A larger model's checkpoint used to decode without a word (its extra layer dropped); one of other shapes
    # ended in a traceback followed by hundreds of TensorFlow warnings, one per value the restore did not reach.
    model = _tiny_transformer()
    larger = tf.train.Checkpoint(model=_tiny_transformer(num_encoder_layers=3)).save(str(tmp_path / "larger"))
    narrower = tf.train.Checkpoint(model=_tiny_transformer(hidden_size=8)).save(str(tmp_path / "narrower"))
    with pytest.raises(errors.T2TRelposError, match=r"larger-1 does not fit this run's model: it holds \d+ model "
                       r"weights, the model has \d+; was it written by a larger model\?"):
        checkpoints.restore_model(model, larger)
    with pytest.raises(errors.T2TRelposError, match=r"narrower-1 does not fit this run's model \(Received "
                       r"incompatible tensor with shape"):
        checkpoints.restore_model(model, narrower)
    assert "could not be found" not in capfd.readouterr().err

    # A model's weights alone (what averaging writes) are not a training checkpoint to resume from: that
    # was a 134-line AssertionError.
    tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(tmp_path / "averaged"), 1).save(20)
    optimizer = keras.optimizers.Adam()
    optimizer.build(model.trainable_variables)
    with pytest.raises(errors.T2TRelposError, match="holds a model's weights only .* not a training checkpoint"):
        checkpoints.restore_latest(tf.train.Checkpoint(model=model, optimizer=optimizer), str(tmp_path / "averaged"))


def test_the_progress_rate_is_tokens_over_time_not_a_median_of_step_rates():
    window = trainer_lib._Window(steps=3)  # pylint: disable=protected-access
    stats = {"loss_sum": 1.0, "tokens": 600.0, "correct": 1.0, "source_tokens": 400.0}
    for seconds in (5.0, 1.0, 0.1, 0.1):  # The first step falls out of the window.
        window.add(stats, seconds)
    # 3000 tokens in 1.2 s; the median of the per-step rates would say 10,000 tokens/s.
    assert window.latest()["tokens_per_second"] == pytest.approx(2500.0)


def test_the_step_compiled_with_xla_and_in_mixed_precision_matches_the_graph(tmp_path):
    """The fused loss (a custom gradient around XLA kernels) inside `--jit_compile`'s compiled step and under
    `--mixed_precision=mixed_bfloat16` (bfloat16 logits): one step, then the same evaluation as the graph's."""
    metrics = {}
    for way, options in [("graph", {}), ("xla", {"jit_compile": True}),
                         ("bf16", {"mixed_precision": "mixed_bfloat16"})]:
        problem = algorithmic.AlgorithmicReverseDecimal40(train_length=8, eval_length=8, num_eval_examples=32)
        hparams = registry.hparams("transformer_cpu_rel")
        hparams.parse("batch_size=256,hidden_size=16,filter_size=32,num_heads=2,layer_prepostprocess_dropout=0.0,"
                      "attention_dropout=0.0,relu_dropout=0.0,num_encoder_layers=1,num_decoder_layers=1")
        trainer = trainer_lib.Trainer(problem, hparams, str(tmp_path / way), seed=1, checkpoint_every=100,
                                      eval_every=0, eval_steps=1, verbose=False, **options)
        metrics[way] = trainer.train(1)
    assert metrics["xla"]["loss"] == pytest.approx(metrics["graph"]["loss"], abs=1e-4)
    assert metrics["bf16"]["loss"] == pytest.approx(metrics["graph"]["loss"], abs=0.05)
    assert metrics["xla"]["accuracy"] == metrics["graph"]["accuracy"]


def _small_trainer(tmp_path, overrides, hparams_set="transformer_cpu_rel", **kwargs):
    """A trainer of 4-digit reversal (`transformer_cpu_rel` unless told), seed 1, that never evaluates unless
    told (`schedule`; then once, at the end, on one batch)."""
    problem = algorithmic.AlgorithmicReverseDecimal40(train_length=4, eval_length=4, num_eval_examples=16)
    hparams = registry.hparams(hparams_set)
    hparams.parse(overrides)
    return trainer_lib.Trainer(problem, hparams, str(tmp_path), seed=1, eval_every=0, eval_steps=1, verbose=False,
                               **{"schedule": "train", **kwargs})


def test_the_train_schedule_never_evaluates(tmp_path):
    trainer = _small_trainer(tmp_path, "batch_size=128,num_encoder_layers=1,num_decoder_layers=1")
    evaluations = []
    trainer.evaluate = lambda *args, **kwargs: evaluations.append(args)  # Counts calls; never runs one.
    assert trainer.train(2) is None and trainer.step == 2
    assert trainer.train(2) is None  # Already trained: still no evaluation.
    assert not evaluations and not (tmp_path / "eval").exists() and os.listdir(tmp_path / "train")
    with pytest.raises(ValueError, match="schedule must be one of continuous_train_and_eval, train, got 'evaluate'"):
        _small_trainer(tmp_path / "other", "", schedule="evaluate")


def test_a_resumed_run_reads_on_in_the_stream_an_uninterrupted_run_reads(tmp_path):
    # Before, a run resumed at step N read a new stream seeded by (seed, N): the same seed trained with an
    # interruption saw other batches than without one, and learned otherwise (docs/studies/addition.md, addition with
    # offsets in [0, 40), run again). A step takes `accumulation_steps` batches.
    trainer = _small_trainer(tmp_path, "batch_size=128,accumulation_steps=2")

    def inputs(count):
        batches = iter(trainer._train_dataset())  # pylint: disable=protected-access
        return [next(batches)["inputs"].numpy().tolist() for _ in range(count)]

    stream = inputs(10)
    trainer.optimizer.iterations.assign(3)  # As a run resumed at step 3: 3 steps of 2 batches taken.
    assert inputs(4) == stream[6:10]
    assert inputs(4) != stream[:4]


def test_a_seeded_run_resumed_draws_what_the_uninterrupted_run_draws_and_old_checkpoints_resume(tmp_path):
    # The random states (dropout, position offsets) are in the checkpoint: 2 + 2 steps give the weights of 4.
    # Before, a resumed run restarted them from the seed (weights 3e-4 apart after 2 + 2 steps with dropout).
    overrides = "batch_size=128,num_encoder_layers=1,num_decoder_layers=1,position_start_index=random"
    whole = _small_trainer(tmp_path / "whole", overrides, "transformer_cpu")
    whole.train(4)
    _small_trainer(tmp_path / "parts", overrides, "transformer_cpu").train(2)
    resumed = _small_trainer(tmp_path / "parts", overrides, "transformer_cpu")
    assert checkpoints.step_of(resumed.restored_from) == 2
    assert len(checkpoints.random_states(resumed.model)) >= 2  # Dropout's and the offsets'.
    resumed.train(4)
    for a, b in zip(whole.model.weights, resumed.model.weights):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
    # A checkpoint saved before the random states were kept (model and optimizer only) still resumes.
    tf.train.CheckpointManager(tf.train.Checkpoint(model=whole.model, optimizer=whole.optimizer),
                               str(tmp_path / "old"), 1).save(checkpoint_number=4)
    old = _small_trainer(tmp_path / "old", overrides, "transformer_cpu")
    assert checkpoints.step_of(old.restored_from) == 4 and old.step == 4
    np.testing.assert_array_equal(old.model.weights[0].numpy(), whole.model.weights[0].numpy())


def test_the_steps_are_traced_as_written_not_converted_by_autograph(tmp_path, monkeypatch):
    # AutoGraph re-reads a function's source file when it first traces it: a trainer whose package was edited
    # while it ran (a checkout updated under a long run) converted the wrong lines at its first evaluation
    # after a resume and died with a KeyError. Converting the model's code also cost ~5 s of every start.
    from t2t_relpos.training import losses  # pylint: disable=import-outside-toplevel

    converted = []

    def watched(fn):
        def call(*args, **kwargs):
            converted.append(any("__autograph_generated" in frame.filename for frame in inspect.stack()))
            return fn(*args, **kwargs)
        return call

    monkeypatch.setattr(losses, "cross_entropy_and_accuracy", watched(losses.cross_entropy_and_accuracy))
    monkeypatch.setattr(losses, "smoothed_cross_entropy", watched(losses.smoothed_cross_entropy))
    trainer = _small_trainer(tmp_path, "batch_size=128,accumulation_steps=2,num_encoder_layers=1,"
                                       "num_decoder_layers=1", schedule="continuous_train_and_eval")
    trainer.train(1)  # Traces the step (its accumulation loop too) and, at its end, the evaluation.
    assert len(converted) >= 3 and not any(converted), converted


def test_frozen_layers_keep_their_weights_while_the_rest_trains(tmp_path):
    problem = algorithmic.AlgorithmicReverseDecimal40(train_length=4, eval_length=4, num_eval_examples=16)
    trainer = _small_trainer(tmp_path, "batch_size=128,learning_rate_warmup_steps=10,freeze_layers=[encoder]",
                             checkpoint_every=5)
    names = {layer.name for layer in trainer.model.layers}
    assert "encoder" in names and "decoder" in names, names
    before = {v.path: v.numpy().copy() for v in trainer.model.weights}
    trainer.train(5)
    moved = {path for path, value in before.items()
             if not np.array_equal(value, next(v for v in trainer.model.weights if v.path == path).numpy())}
    assert any("/encoder/" in path for path in before) and any("/decoder/" in path for path in moved), sorted(moved)
    assert not any("/encoder/" in path for path in moved), sorted(moved)

    # The frozen run's checkpoint holds every variable, so it resumes with the layers trained again.
    hparams_all = registry.hparams("transformer_cpu_rel")
    hparams_all.parse("batch_size=128,learning_rate_warmup_steps=10")
    resumed = trainer_lib.Trainer(problem, hparams_all, str(tmp_path / "resumed"), seed=1, verbose=False)
    resumed_checkpoint = tf.train.Checkpoint(model=resumed.model, optimizer=resumed.optimizer)
    resumed_checkpoint.restore(trainer.manager.latest_checkpoint).assert_existing_objects_matched()


def test_freezing_a_layer_the_model_lacks_names_the_ones_it_has(tmp_path):
    problem = algorithmic.AlgorithmicReverseDecimal40(train_length=4, eval_length=4, num_eval_examples=16)
    hparams = registry.hparams("transformer_cpu_rel")
    hparams.parse("freeze_layers=[encoders]")
    with pytest.raises(errors.HParamsError, match=r"no top-level layer 'encoders'; it has .*encoder"):
        trainer_lib.Trainer(problem, hparams, str(tmp_path), verbose=False)


def test_a_diverged_step_is_not_saved(tmp_path):
    # Before, the step whose loss was NaN was saved first (a checkpoint of NaNs, the run's newest) and then
    # ended in a FloatingPointError traceback.
    trainer = _small_trainer(tmp_path, "batch_size=128", checkpoint_every=1)
    trainer.train(2)
    weight = trainer.model.trainable_weights[0]
    weight.assign(np.full(weight.shape, np.nan, weight.dtype))
    with pytest.raises(trainer_lib.TrainingDiverged, match=r"the loss became nan at step 3, which was not saved "
                       r"\(the newest checkpoint, .*ckpt-2, is from before it\)"):
        trainer.train(4)
    assert checkpoints.step_of(tf.train.latest_checkpoint(str(tmp_path))) == 2

    # Weights broken by an update whose loss was still finite are not saved either.
    with pytest.raises(trainer_lib.TrainingDiverged, match="the weights stopped being finite at step 3"):
        trainer._save(3)  # pylint: disable=protected-access
    assert checkpoints.step_of(tf.train.latest_checkpoint(str(tmp_path))) == 2


def test_max_length_shorter_than_every_example_is_an_error_not_a_hang(tmp_path, monkeypatch):
    from t2t_relpos.data import batching  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(batching, "STARVED_AFTER", 20000)  # Of 100000: the same error, sooner.
    trainer = _small_trainer(tmp_path, "batch_size=128,max_length=1")
    with pytest.raises(errors.HParamsError, match=r"no training example fits max_length=1: 20000 in a row"):
        trainer.train(2)


def test_the_logged_learning_rate_is_the_one_the_step_used(tmp_path):
    # It was the next step's: during a linear warm-up, twice the rate at step 1.
    trainer = _small_trainer(tmp_path, "batch_size=128,learning_rate_warmup_steps=10")
    used = []
    for step in (1, 2):
        used.append(float(trainer.optimizer.learning_rate))  # What the next update reads.
        trainer.train(step)
        assert trainer.learning_rate() == pytest.approx(used[-1], rel=1e-6)
    assert used[0] < used[1]


def test_resuming_with_another_loss_scaling_is_refused_not_taken_for_damage(tmp_path):
    # Before, every checkpoint of the run was called "truncated, corrupt or missing", with the advice to move
    # them away.
    _small_trainer(tmp_path, "batch_size=128", mixed_precision="mixed_float16").train(1)
    with pytest.raises(errors.HParamsError, match=r"trained with --mixed_precision=mixed_float16, not none .* "
                                                  r"resume with --mixed_precision=mixed_float16"):
        _small_trainer(tmp_path, "batch_size=128")
    _small_trainer(tmp_path, "batch_size=128", mixed_precision="mixed_float16")  # As trained: resumes.

    # A run stored before the precision was recorded: its checkpoint says what does not fit, and stays listed.
    record_path = tmp_path / "hparams.json"
    record = json.loads(record_path.read_text())
    del record["mixed_precision"]
    record_path.write_text(json.dumps(record))
    with pytest.raises(errors.T2TRelposError, match=r"ckpt-1 does not fit this run: it was saved with the loss "
                                                    r"scaling of --mixed_precision=mixed_float16, and this run is "
                                                    r"without it") as caught:
        _small_trainer(tmp_path, "batch_size=128")
    assert not isinstance(caught.value, checkpoints.UnreadableCheckpointError)
    assert checkpoints.step_of(tf.train.latest_checkpoint(str(tmp_path))) == 1


def test_a_checkpoint_the_storage_will_not_give_back_is_not_skipped(tmp_path, monkeypatch):
    # Before, an unavailable network file system made the newest checkpoint "truncated, corrupt or missing": it
    # was dropped from the index and the run went back to an older one, to overwrite the newer later.
    variable = tf.Variable(0.0)
    checkpoint = tf.train.Checkpoint(v=variable, optimizer=tf.train.Checkpoint(iterations=tf.Variable(0, tf.int64)))
    manager = tf.train.CheckpointManager(checkpoint, str(tmp_path), max_to_keep=5, checkpoint_name="ckpt")
    for value in (1, 2):
        manager.save(checkpoint_number=value)
    index = (tmp_path / "checkpoint").read_text()

    def unavailable(self, path, options=None):
        raise tf.errors.UnavailableError(None, None, f"{path}: the file system is unavailable")

    monkeypatch.setattr(tf.train.Checkpoint, "restore", unavailable)
    with pytest.raises(checkpoints.CheckpointAccessError, match=r"ckpt-2 could not be read \(.*unavailable\); "
                                                                r"nothing was changed"):
        checkpoints.restore_latest(checkpoint, str(tmp_path))
    assert (tmp_path / "checkpoint").read_text() == index
