"""benchmarks/babi_accelerator.py: the prepared splits, its length buckets, and a tiny run trained on JAX whose
answers the TensorFlow backend reproduces from the saved weights."""

import importlib.util
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from test_babi import write_task_files
from t2t_relpos import registry

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
    data = babi_accelerator.Data(path, "5,9", batch_ids=400)
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
    data = babi_accelerator.Data(prepared[1], "5,9", batch_ids=400)
    count = len(data.tasks("train"))
    seen, bucket_of = [], data.bucket_of("train")
    for epoch, b, indices in data.train_batches(seed=3, epoch=0):
        if epoch > 0:
            break
        assert len(indices) == data.rows[b] and (bucket_of[indices] == b).all()
        seen.extend(indices.tolist())
    # Within a pass no example comes twice; at most a bucket's last partial batch waits for the next pass.
    assert len(seen) == len(set(seen)) and count - len(seen) < sum(data.rows)


def test_a_longer_example_than_the_buckets_is_refused(prepared):
    with pytest.raises(SystemExit, match="--buckets ends at 5 positions"):
        babi_accelerator.Data(prepared[1], "3,5", batch_ids=400)


def test_a_tiny_run_trained_on_jax_is_answered_alike_by_tensorflow_and_resumes(prepared, tmp_path, capsys):
    pytest.importorskip("jax")
    path = prepared[1]
    tiny = "hidden_size=16,filter_size=32,num_heads=2,act_max_steps=2,max_relative_position=2"
    run, more = str(tmp_path / "run"), str(tmp_path / "more")
    env = dict(os.environ, KERAS_BACKEND="jax", JAX_PLATFORMS="cpu")

    def train(*extra):
        proc = subprocess.run([sys.executable, _PATH, "train", "--data", path, "--hparams", tiny, "--buckets", "9",
                               "--batch_ids", "400", "--log_every", "2", "--eval_every", "4", *extra],
                              cwd=_ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert proc.returncode == 0, proc.stderr[-3000:]

    train("--train_steps", "4", "--out", run)
    with open(os.path.join(run, "results.json"), encoding="utf-8") as f:
        trained = json.load(f)
    assert trained["step"] == 4 and trained["device"].lower().startswith("cpu")
    assert set(trained["test"]["tasks"]) == {f"qa{t}" for t in range(1, 21)}
    assert trained["test"]["ponder_time"] >= 1.0  # ACT: at least one step per fact.

    answered = str(tmp_path / "tf.json")
    proc = subprocess.run([sys.executable, _PATH, "evaluate", "--data", path, "--run", run, "--json", answered],
                          cwd=_ROOT, env=dict(os.environ, KERAS_BACKEND="tensorflow"), capture_output=True,
                          text=True, timeout=600, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(answered, encoding="utf-8") as f:
        again = json.load(f)
    assert again["backend"] == "tensorflow"
    assert again["eval"]["tasks"] == trained["eval"]["tasks"] and again["test"]["tasks"] == trained["test"]["tasks"]

    train("--train_steps", "6", "--resume", run, "--out", more)
    with open(os.path.join(more, "state.json"), encoding="utf-8") as f:
        state = json.load(f)
    assert state["step"] == 6 and [row["step"] for row in state["log"]] == [2, 4, 6]

    babi_accelerator.main(["report", "--runs", f"{run},{more}"])
    columns = capsys.readouterr().out.split("\n| task ", 1)[1].split("\n", 1)[0]
    assert [c.strip() for c in columns.split("|")[1:3]] == ["step 4", "step 6"]
    babi_accelerator.main(["report", "--runs", run, "--checked", answered])
    assert "(`evaluate`) answer every validation and test question as the JAX loop did" in capsys.readouterr().out
    with pytest.raises(SystemExit, match="answered step 4, the last run is at 6"):
        babi_accelerator.main(["report", "--runs", f"{run},{more}", "--checked", answered])
