"""benchmarks/babi_accelerator.py: the prepared splits, its length buckets and batch streams, and a tiny run of
two seeds trained side by side on JAX whose answers the TensorFlow backend reproduces from the saved weights;
marked slow (`make test-all`): a seed beside another trains as it does alone, and a run resumes."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from t2t_relpos import registry
from test_babi import write_task_files

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PATH = os.path.join(_ROOT, "benchmarks", "babi_accelerator.py")
_spec = importlib.util.spec_from_file_location("benchmark_babi_accelerator", _PATH)
babi_accelerator = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(babi_accelerator)


@pytest.fixture(scope="module")
def prepared(tmp_path_factory):
    root = tmp_path_factory.mktemp("babi")
    data_dir = write_task_files(str(root / "data"), stories=10)
    out = str(root / "babi_1k.npz")
    babi_accelerator.main(["prepare", "--data_dir", data_dir, "--subset", "1k", "--out", out])
    return data_dir, out


def test_prepared_splits_are_the_problems_encoded_examples_in_buckets(prepared):
    data_dir, path = prepared
    problem = registry.problem("babi_qa_facts_all_tasks_1k")
    data = babi_accelerator.Data(path, "5,9")
    data.plan_training(batch_size=400)
    assert (data.input_vocab, data.target_vocab) == problem.vocab_sizes(data_dir)
    for split in babi_accelerator.SPLITS:
        inputs, labels = problem.encoded(split, data_dir)
        tasks = [int(g[2:]) for g in problem.example_groups(split, data_dir)]
        assert data.arrays[f"{split}_labels"].tolist() == [ids[0] for ids in labels]
        assert data.tasks(split).tolist() == tasks
        bucket_of = data.bucket_of(split)
        for b, end in enumerate(data.buckets):
            members = np.flatnonzero(bucket_of == b)
            padded = data.inputs(split, members, b)
            assert padded.shape == (len(members), end * data.fact_width)
            for row, i in zip(padded, members):
                assert row.tolist() == list(inputs[i]) + [0] * (len(row) - len(inputs[i]))
        assert sorted(set(bucket_of.tolist())) == [0, 1]  # Both buckets hold examples.
    # Each bucket's batches hold what 400 ids hold at its mean length (plus 5% padding).
    lengths = data.positions("train") * data.fact_width
    assert data.rows == [int(400 // (1.05 * lengths[data.bucket_of("train") == b].mean())) for b in (0, 1)]


def test_the_training_stream_shows_every_example_once_per_pass(prepared):
    data = babi_accelerator.Data(prepared[1], "5,9")
    data.plan_training(batch_size=400)
    count = len(data.tasks("train"))
    bucket_of = data.bucket_of("train")
    seen, beside = [], {0: [], 1: []}
    for epoch, b, (indices, other) in data.train_batches(seeds=[3, 4], epoch=0):
        if epoch > 0:
            break
        # Both seeds' batches at a step come from one bucket, so that the step has one shape.
        assert len(indices) == len(other) == data.rows[b]
        assert (bucket_of[indices] == b).all() and (bucket_of[other] == b).all()
        seen.extend(indices.tolist())
        beside[b].extend(other.tolist())
    # Within a pass no example comes twice; at most a bucket's last partial batch waits for the next pass.
    assert len(seen) == len(set(seen)) and count - len(seen) < sum(data.rows)
    # The second seed reads each bucket in passes of its own: no example twice before the bucket is used up.
    for b, taken in beside.items():
        size = int((bucket_of == b).sum())
        assert len(set(taken[:size])) == min(len(taken), size) and taken != seen[:len(taken)]


def test_a_training_pass_repeats_tasks_and_leaves_out_long_questions_as_the_trainers_does(prepared):
    data_dir, path = prepared
    data = babi_accelerator.Data(path, "5,9")
    hparams = registry.hparams("adaptive_universal_transformer_babi_rel").parse("task_repeats=[1:0,2:3]")
    repeats = babi_accelerator.task_repeats(data, hparams)
    data.plan_training(batch_size=400, max_length=6 * data.fact_width, repeats=repeats)
    tasks, ids = data.tasks("train"), np.diff(data.arrays["train_offsets"])
    counts = np.bincount(data.train_pass, minlength=len(tasks))
    assert (counts == np.where(ids > 6 * data.fact_width, 0, np.where(tasks == 1, 0, np.where(tasks == 2, 3, 1)))).all()
    assert counts.sum() > 0 and data.rows[1] > 0
    # The same pass as the trainer's problem makes from those repeats (before its length filter).
    problem = registry.problem("babi_qa_facts_all_tasks_1k")
    assert repeats == problem.task_repeats(["1:0", "2:3"])
    data.plan_training(batch_size=400, repeats=repeats)
    assert len(data.train_pass) == sum(repeats.get(int(t), 1) for t in tasks)
    with pytest.raises(SystemExit, match="error: task_repeats item"):
        babi_accelerator.task_repeats(data, registry.hparams("adaptive_universal_transformer_babi_rel").parse(
            "task_repeats=[21:2]"))


def test_a_longer_example_than_the_buckets_is_refused(prepared):
    with pytest.raises(SystemExit, match="--buckets ends at 5 positions"):
        babi_accelerator.Data(prepared[1], "3,5")


@pytest.mark.parametrize("flag", ["--log_every", "--eval_every", "--save_every"])
def test_a_negative_interval_is_refused(prepared, flag):
    with pytest.raises(SystemExit, match=f"error: {flag} must be >= 0 \\(0: only at the end\\), got -1"):
        babi_accelerator.main(["train", "--data", prepared[1], "--out", "unused", flag, "-1"])


_TINY = "hidden_size=16,filter_size=32,num_heads=2,act_max_steps=2,max_relative_position=2,batch_size=400"


def _train(path, *extra):
    """`babi_accelerator.py train` on the JAX backend (CPU), a tiny model, one bucket."""
    proc = subprocess.run([sys.executable, _PATH, "train", "--data", path, "--hparams", _TINY, "--buckets", "9",
                           "--log_every", "2", "--eval_every", "4", *extra], cwd=_ROOT,
                          env=dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu"), capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _read(run, name):
    with open(os.path.join(run, name), encoding="utf-8") as f:
        return json.load(f)


@pytest.fixture(scope="module")
def two_seeds(prepared, tmp_path_factory):
    """A tiny run of seeds 1 and 2 side by side, 4 steps, saved only at the end (`--save_every 0`), its compiled
    programs kept in `<run>_xla`."""
    pytest.importorskip("jax")
    run = str(tmp_path_factory.mktemp("runs") / "both")
    output = _train(prepared[1], "--seeds", "1,2", "--train_steps", "4", "--save_every", "0", "--out", run,
                    "--compilation_cache", run + "_xla")
    assert f"compilation cache {run}_xla: 0 entries" in output
    return run


# The GPU command's end-to-end checks on JAX at tiny sizes (60 s of a core with their fixture): `pytest -m slow`
# (or `make test-all`) before a session's device time (docs/guide/babi.md); the cheap ones above stay in `make test`.
@pytest.mark.slow
def test_two_seeds_trained_side_by_side_are_answered_alike_by_tensorflow(prepared, two_seeds, tmp_path, capsys,
                                                                         monkeypatch):
    path, both = prepared[1], two_seeds
    trained = _read(both, "results.json")
    assert trained["step"] == 4 and trained["device"].lower().startswith("cpu")
    assert set(trained["seeds"]) == {"1", "2"} and trained["seed"] in (1, 2)
    assert trained["test"] == trained["seeds"][str(trained["seed"])]["test"]  # The seed chosen on validation.
    assert set(trained["test"]["tasks"]) == {f"qa{t}" for t in range(1, 21)}
    assert trained["test"]["ponder_time"] >= 1.0  # ACT: at least one step per fact.
    (evaluated,) = [row for row in _read(both, "state.json")["log"] if "eval_error" in row]
    assert [tasks["qa1"] for tasks in evaluated["eval_tasks"]] == [trained["seeds"][s]["eval"]["tasks"]["qa1"]
                                                                   for s in ("1", "2")]
    with np.load(os.path.join(both, "seed1", "weights.npz")) as a, np.load(
            os.path.join(both, "seed2", "weights.npz")) as b:
        assert sorted(a.files) == sorted(b.files) and max(float(np.abs(a[k] - b[k]).max()) for k in a.files) > 1e-2

    # The seed not chosen, loaded on the TensorFlow backend: the same answers as the JAX loop's.
    other = 3 - trained["seed"]
    answered = str(tmp_path / "tf.json")
    proc = subprocess.run([sys.executable, _PATH, "evaluate", "--data", path, "--run", both, "--seed", str(other),
                           "--json", answered], cwd=_ROOT, env=dict(os.environ, KERAS_BACKEND="tensorflow"),
                          capture_output=True, text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    again = _read(tmp_path, "tf.json")
    assert again["backend"] == "tensorflow" and again["seed"] == other
    expected = trained["seeds"][str(other)]
    assert (again["eval"], again["test"]) == (expected["eval"], expected["test"])

    with pytest.raises(SystemExit, match=f"answered step 4 of seed {other}, the last run's chosen seed"):
        babi_accelerator.main(["report", "--runs", both, "--checked", answered])
    checked = tmp_path / "chosen.json"
    checked.write_text(json.dumps({"backend": "tensorflow", "step": 4, "seed": trained["seed"],
                                   "eval": trained["eval"], "test": trained["test"]}))
    results = tmp_path / "results"
    monkeypatch.setattr(babi_accelerator.babi.common, "RESULTS", str(results))
    babi_accelerator.main(["report", "--runs", both, "--checked", str(checked), "--record"])
    report = capsys.readouterr().out
    # --record: the chosen seed's test error per task, for benchmarks/plots.py.
    (row,) = json.loads((results / "babi.json").read_text())["rows"]
    assert (row["subset"], row["protocol"], row["seed"], row["train_steps"]) == ("1k", "joint", trained["seed"], 4)
    assert row["test_error"] == trained["test"]["tasks"] and abs(row["mean_error"] - trained["test"]["mean"]) <= 0.01
    assert row["command"] and row["date"] and row["code"] and row["machine"]
    assert "(`evaluate`) answer every validation and test question as the JAX loop did" in report
    # Per task by step: the in-loop evaluation at step 4 and the final one (the same weights).
    per_task = report.split("Validation error (%) per task", 1)[1]
    qa1 = f"{trained['eval']['tasks']['qa1']:.1f}"
    assert [c.strip() for c in per_task.split("\n| qa1 ", 1)[1].split("\n", 1)[0].split("|")[1:3]] == [qa1, qa1]


@pytest.mark.slow
def test_a_seed_beside_another_trains_as_alone_and_a_run_resumes(prepared, two_seeds, tmp_path, capsys):
    path, both = prepared[1], two_seeds
    alone, more = str(tmp_path / "alone"), str(tmp_path / "more")
    _train(path, "--seeds", "1", "--train_steps", "4", "--out", alone)
    # Seed 1 beside seed 2 is seed 1 alone: the same batches, initial weights and dropout, the same weights.
    with np.load(os.path.join(both, "seed1", "weights.npz")) as a, np.load(
            os.path.join(alone, "seed1", "weights.npz")) as b:
        assert sorted(a.files) == sorted(b.files)
        assert max(float(np.abs(a[k] - b[k]).max()) for k in a.files) < 1e-5

    # Resumed with the first call's compiled programs, as a second device call would be.
    cached = len(os.listdir(both + "_xla"))
    assert cached >= 2  # At least the training step and the prediction of the one bucket.
    output = _train(path, "--seeds", "1,2", "--train_steps", "6", "--resume", both, "--out", more,
                    "--compilation_cache", both + "_xla")
    assert f"compilation cache {both}_xla: {cached} entries" in output
    assert len(os.listdir(both + "_xla")) == cached  # Nothing compiled again.
    state = _read(more, "state.json")
    assert state["step"] == 6 and [row["step"] for row in state["log"]] == [2, 4, 6]
    assert all(len(row["loss"]) == 2 for row in state["log"])
    babi_accelerator.main(["report", "--runs", f"{both},{more}"])
    columns = capsys.readouterr().out.split("\n| task ", 1)[1].split("\n", 1)[0]
    assert [c.strip() for c in columns.split("|")[1:3]] == ["step 4", "step 6"]
