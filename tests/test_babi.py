"""bAbI: parsing the task files, the two input layouts, the problems' splits, FactEmbedding against a numpy
reference, the encoder-only classifiers, and a tiny run end to end through the CLIs."""

import collections
import gzip
import json
import os
import types

import numpy as np
import pytest

from t2t_relpos import errors, registry
from t2t_relpos.problems import babi as babi_problems
from t2t_relpos.problems import babi_text
from t2t_relpos.problems.problem import EOS_ID
from test_cli import call_tool, run_tool
from test_quality_benchmarks import babi as babi_benchmark

PLACES = ("bathroom", "hallway", "garden", "office")
PEOPLE = ("Mary", "John", "Daniel", "Sandra")


def write_task_files(root, stories=10, subset="en", seed=0):
    """Small bAbI-format files for all 20 tasks: single-supporting-fact stories (several questions each);
    task 8's answers are comma lists, as in the real qa8. Returns the data_dir."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(root, subset), exist_ok=True)
    for task, name in babi_text.TASKS.items():
        for split in ("train", "test"):
            lines = []
            for _ in range(stories):
                where, line_id = {}, 1
                for _ in range(3):
                    for _ in range(2):
                        person, place = PEOPLE[rng.integers(4)], PLACES[rng.integers(4)]
                        where[person] = place
                        lines.append(f"{line_id} {person} went to the {place}.")
                        line_id += 1
                    person = list(where)[rng.integers(len(where))]
                    answer = where[person] + (",milk" if task == 8 else "")
                    lines.append(f"{line_id} Where is {person}? \t{answer}\t{line_id - 1}")
                    line_id += 1
            path = os.path.join(root, subset, f"qa{task}_{name}_{split}.txt")
            if task % 2:  # Half the files gzipped, as the shared copy is.
                with gzip.open(path + ".gz", "wt", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
            else:
                with open(path, "w", encoding="utf-8") as f:
                    f.write("\n".join(lines) + "\n")
    return root


STORY = """1 Mary moved to the bathroom.
2 John went to the hallway.
3 Where is Mary? \tbathroom\t1
4 Daniel went back to the hallway.
5 Where is Daniel? \thallway\t4
1 Sandra picked up the milk.
2 Sandra got the apple.
3 What is Sandra carrying? \tmilk,apple\t1 2
"""


def test_parse_restarts_stories_keeps_earlier_facts_and_ignores_supporting_facts():
    examples = babi_text.parse(STORY.splitlines(), task=8)
    assert len(examples) == 3
    first, second, third = examples
    assert first.story == (tuple("Mary moved to the bathroom .".split()), tuple("John went to the hallway .".split()))
    assert first.question == tuple("Where is Mary ?".split()) and first.answer == "bathroom"
    # The second question of the story sees every fact before it (questions are not facts).
    assert len(second.story) == 3 and second.story[-1][0] == "Daniel" and second.answer == "hallway"
    assert first.story_index == second.story_index == 0
    # Id 1 starts a new story: nothing of the first one is kept.
    assert third.story_index == 1 and len(third.story) == 2 and third.story[0][0] == "Sandra"
    assert third.answer == "milk,apple" and third.task == 8
    # Comma answers are one label.
    encoder = babi_text.answer_encoder(["bathroom", "hallway", "milk,apple"])
    assert encoder.encode("milk,apple") == [4] and encoder.decode([4, EOS_ID]) == "milk,apple"


def test_parse_rejects_broken_files():
    with pytest.raises(errors.DataError, match="line 2 has id 5, expected 1 or 2"):
        babi_text.parse(["1 Mary went home.", "5 Where is Mary? \thome\t1"], task=1, source="f.txt")
    with pytest.raises(errors.DataError, match="without an answer"):
        babi_text.parse(["1 Mary went home.", "2 Where is Mary? \t\t1"], task=1)
    with pytest.raises(errors.DataError, match="not '<id> <text>'"):
        babi_text.parse(["Mary went home."], task=1)


def test_layouts_encode_and_decode():
    words, _ = babi_text.vocabularies(babi_text.parse(STORY.splitlines(), task=1))
    text = "Mary moved to the bathroom . John went to the hallway . Where is Mary ?"
    facts = babi_text.BabiInputEncoder(words, "facts")
    ids = facts.encode(text)
    width = babi_text.FACT_WIDTH
    assert len(ids) == 3 * width  # Two facts and the question, each padded to the fact width.
    assert ids[6:width] == [0] * (width - 6) and ids[2 * width] == facts.encode("Where is Mary ?")[0]
    assert facts.decode(ids + [EOS_ID]) == text
    concat = babi_text.BabiInputEncoder(words, "concat")
    ids = concat.encode(text)
    assert ids[:5] == concat.encode("Where is Mary ?")[:4] + [2]  # Question, separator (id 2), story.
    assert concat.decode(ids) == text
    with pytest.raises(ValueError, match="then the question"):
        facts.encode("Mary moved to the bathroom .")
    with pytest.raises(ValueError, match="at most 12"):
        facts.encode(" ".join(["Mary"] * 13) + " . Where is Mary ?")


def test_the_facts_layout_keeps_the_last_facts_of_a_long_story():
    words, _ = babi_text.vocabularies(babi_text.parse(STORY.splitlines(), task=1))
    places = ["bathroom", "hallway"] * 50
    text = " ".join(f"Mary moved to the {place} ." for place in places) + " Where is Mary ?"
    width = babi_text.FACT_WIDTH
    kept = babi_text.BabiInputEncoder(words, "facts", max_facts=3)
    ids = kept.encode(text)
    assert len(ids) == 4 * width  # The last 3 facts and the question.
    assert kept.decode(ids) == "Mary moved to the hallway . Mary moved to the bathroom . " \
                               "Mary moved to the hallway . Where is Mary ?"
    assert len(babi_text.BabiInputEncoder(words, "facts").encode(text)) == 101 * width
    with pytest.raises(ValueError, match="max_facts"):
        babi_text.BabiInputEncoder(words, "facts", max_facts=0)
    # The registered facts problems keep the paper's 70; concat (tensor2tensor's) the whole story.
    assert registry.problem("babi_qa_facts_task3_1k").story_facts == babi_text.STORY_FACTS == 70
    assert registry.problem("babi_qa_concat_task3_1k").story_facts is None


def test_problem_splits_and_missing_files(tmp_path):
    data_dir = write_task_files(str(tmp_path), stories=20)
    joint = registry.problem("babi_qa_facts_all_tasks_1k")
    train, held_out, test = (joint._examples(data_dir, s) for s in ("train", "eval", "test"))
    assert {e.task for e in train} == {e.task for e in held_out} == set(range(1, 21))
    assert all(e.story_index % 10 == 9 for e in held_out) and not any(e.story_index % 10 == 9 for e in train)
    assert len(train) + len(held_out) == 20 * 20 * 3 and len(test) == 20 * 20 * 3
    task3 = registry.problem("babi_qa_concat_task3_1k")
    assert len(task3._examples(data_dir, "train")) == len(train)  # Joint training on every task ...
    assert {e.task for e in task3._examples(data_dir, "test")} == {3}  # ... evaluated on task 3.
    assert task3.example_groups("test", data_dir) == ["qa3"] * 60
    inputs, labels = task3.encoded("test", data_dir)
    assert all(ids[-1] == EOS_ID for ids in inputs) and all(len(label) == 1 for label in labels)
    alone = registry.problem("babi_qa_facts_single_task3_1k")  # Trained and evaluated on task 3 alone.
    assert {e.task for s in ("train", "eval", "test") for e in alone._examples(data_dir, s)} == {3}
    assert len(alone._examples(data_dir, "train")) == len([e for e in train if e.task == 3])
    assert alone.feature_encoders(data_dir)["inputs"].max_facts == 130
    assert registry.problem("babi_qa_facts_single_task2_1k").feature_encoders(data_dir)["inputs"].max_facts == 70
    assert joint.model_arguments() == {"fact_width": 12} and task3.model_arguments() == {}
    assert joint.feature_encoders(data_dir)["inputs"].max_facts == 70
    assert task3.feature_encoders(data_dir)["inputs"].max_facts is None
    examples = list(joint.dataset("eval", data_dir).as_numpy_iterator())
    assert len(examples) == len(held_out) and examples[0]["targets"].shape == (1,)
    # The trainer evaluates the first batches only: held-out questions take the tasks in turn, not qa1 first;
    # the dataset, the encoded examples and their tasks (the decoder's per-task report) share one order.
    groups = joint.example_groups("eval", data_dir)
    assert sorted(groups[:20]) == sorted(f"qa{t}" for t in range(1, 21))
    assert [list(e["inputs"]) for e in examples] == joint.encoded("eval", data_dir)[0]
    assert groups == [f"qa{e.task}" for e in held_out]
    test_groups = joint.example_groups("test", data_dir)
    assert test_groups == sorted(test_groups, key=lambda g: int(g[2:]))  # Test keeps the files' order.
    assert babi_problems._round_robin([1, 1, 2, 3, 3, 3]) == [0, 2, 3, 1, 4, 5]
    with pytest.raises(errors.DataError, match=r"en-10k/qa1_single-supporting-fact_train.txt\[.gz\] not found"):
        registry.problem("babi_qa_facts_task1_10k").feature_encoders(data_dir)


def test_task_repeats_show_a_tasks_examples_that_many_times_per_pass(tmp_path):
    from t2t_relpos.data import pipeline  # pylint: disable=import-outside-toplevel
    from t2t_relpos.hparams import defaults  # pylint: disable=import-outside-toplevel

    data_dir = write_task_files(str(tmp_path), stories=4)
    joint = registry.problem("babi_qa_facts_all_tasks_1k")
    inputs, _ = joint.encoded("train", data_dir)
    tasks = [e.task for e in joint._examples(data_dir, "train")]
    hparams = defaults.default_hparams()

    def one_pass(length, **kwargs):
        stream = joint.dataset("train", data_dir, seed=5, hparams=hparams, **kwargs).as_numpy_iterator()
        return [tuple(next(stream)["inputs"]) for _ in range(length)]

    # None asked: the stream is the one runs trained on before task_repeats existed (resumed runs keep it).
    before = np.random.default_rng([5, 0, 0]).permutation(len(inputs))
    assert one_pass(len(inputs)) == [tuple(inputs[i]) for i in before]
    # qa3 four times and qa20 twice per pass, every other task's examples once; the shards split the pass.
    hparams.parse("task_repeats=[3:4,20:2]")
    expected = collections.Counter(
        tuple(ids) for ids, task in zip(inputs, tasks) for _ in range({3: 4, 20: 2}.get(task, 1)))
    assert collections.Counter(one_pass(sum(expected.values()))) == expected
    halves = [one_pass(sum(expected.values()) // 2, num_shards=2, shard_index=k) for k in (0, 1)]
    assert collections.Counter(halves[0]) + collections.Counter(halves[1]) == expected
    # Evaluation and test are never repeated.
    assert len(list(joint.dataset("eval", data_dir, hparams=hparams))) == len(joint.encoded("eval", data_dir)[0])
    # What cannot be honoured is an error, not a silently different run.
    # Times 0 leaves a task out of training: a pass holds the other tasks' examples alone.
    hparams.parse("task_repeats=[3:0,20:2]")
    expected = collections.Counter(
        tuple(ids) for ids, task in zip(inputs, tasks) for _ in range({3: 0, 20: 2}.get(task, 1)))
    assert 3 in tasks and collections.Counter(one_pass(sum(expected.values()))) == expected
    for bad in ("[3]", "[21:2]", "[3:-1]", "[x:2]"):
        hparams.parse(f"task_repeats={bad}")
        with pytest.raises(errors.HParamsError, match="expected 'task:times'"):
            joint.dataset("train", data_dir, hparams=hparams)
    hparams.parse("task_repeats=[" + ",".join(f"{task}:0" for task in range(1, 21)) + "]")
    with pytest.raises(errors.HParamsError, match="every task is left out"):
        joint.dataset("train", data_dir, hparams=hparams)
    hparams.parse("task_repeats=[3:2]")
    with pytest.raises(errors.HParamsError, match="trains on one task alone"):
        registry.problem("babi_qa_facts_single_task3_1k").dataset("train", data_dir, hparams=hparams)
    with pytest.raises(errors.HParamsError, match="has no tasks to repeat"):
        pipeline.input_dataset("algorithmic_reverse_decimal40", hparams, "train", seed=1)
    assert next(iter(pipeline.input_dataset(joint, hparams, "train", data_dir=data_dir, seed=1)))["inputs"].shape[0]
    # The trainer refuses a bad value before it writes the run, so the corrected command is not met by it again.
    run = tmp_path / "run"
    refused = call_tool("t2t-relpos-trainer", "--problem=babi_qa_facts_single_task3_1k",
                        "--hparams_set=universal_transformer_babi_rel", f"--data_dir={data_dir}", f"--output_dir={run}",
                        "--hparams=task_repeats=[3:2]", "--train_steps=1")
    assert refused.returncode == 2 and "error: task_repeats=['3:2']" in refused.stderr
    assert not (run / "hparams.json").exists()


def fact_embedding_reference(ids, embeddings, mask, width):
    """Numpy: s_f = sum_k [w_k >= 2] E[w_k] sqrt(d) * m_k over each width-`width` chunk."""
    batch, length = ids.shape
    ids = np.pad(ids, [(0, 0), (0, -length % width)]).reshape(batch, -1, width)
    d = embeddings.shape[1]
    out = np.zeros(ids.shape[:2] + (d,))
    for b in range(ids.shape[0]):
        for f in range(ids.shape[1]):
            for k in range(width):
                if ids[b, f, k] >= 2:
                    out[b, f] += embeddings[ids[b, f, k]] * np.sqrt(d) * mask[k]
    return out, (ids >= 2).any(axis=2)


def test_fact_embedding_matches_numpy_reference():
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import FactEmbedding  # pylint: disable=import-outside-toplevel

    layer = FactEmbedding(vocab_size=11, hidden_size=6, fact_width=4)
    ids = np.array([[5, 6, 7, 0, 8, 0, 0, 0, 1], [3, 4, 5, 6, 9, 10, 2, 0, 0]])
    layer.build()
    layer.position_mask.assign(np.random.default_rng(0).normal(size=(4, 6)).astype("float32"))
    facts, mask = layer(ids)
    expected, expected_mask = fact_embedding_reference(ids, keras.ops.convert_to_numpy(layer.embeddings),
                                                       keras.ops.convert_to_numpy(layer.position_mask), 4)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(facts), expected, rtol=1e-5, atol=1e-5)
    assert keras.ops.convert_to_numpy(mask).tolist() == expected_mask.tolist() == [[True, True, False],
                                                                                  [True, True, False]]
    chunked, _ = layer(ids[:, :8].reshape(2, 2, 4))  # [B, F, W] input gives the same sentences.
    np.testing.assert_allclose(keras.ops.convert_to_numpy(chunked), expected[:, :2], rtol=1e-6)
    clone = FactEmbedding.from_config(layer.get_config())
    assert clone.get_config() == layer.get_config()


def test_fact_masks_can_start_from_the_memory_networks_position_encoding():
    """Sukhbaatar et al. (2015), §4.1: l_kj = (1 - j/J) - (k/d)(1 - 2j/J), j a word's position and k a dimension
    (both from 1), J the width and d the depth; the same words in another order then give another fact."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import FactEmbedding  # pylint: disable=import-outside-toplevel

    width, depth = 4, 6
    expected = np.array([[(1 - j / width) - (k / depth) * (1 - 2 * j / width) for k in range(1, depth + 1)]
                         for j in range(1, width + 1)])
    layer = FactEmbedding(vocab_size=11, hidden_size=depth, fact_width=width, mask_initializer="position_encoding")
    facts, _ = layer(np.array([[5, 6, 7, 0, 7, 6, 5, 0]]))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer.position_mask), expected, rtol=1e-6, atol=1e-7)
    facts = keras.ops.convert_to_numpy(facts)
    assert not np.allclose(facts[0, 0], facts[0, 1], atol=1e-3)  # "a b c" and "c b a" differ.
    bag, _ = FactEmbedding(vocab_size=11, hidden_size=depth, fact_width=width)(np.array([[5, 6, 7, 0, 7, 6, 5, 0]]))
    bag = keras.ops.convert_to_numpy(bag)
    np.testing.assert_allclose(bag[0, 0], bag[0, 1], rtol=1e-6)  # Ones: a bag of words at first.
    clone = FactEmbedding.from_config(layer.get_config())
    assert clone.mask_initializer == "position_encoding"
    with pytest.raises(ValueError, match="mask_initializer"):
        FactEmbedding(vocab_size=11, hidden_size=depth, fact_width=width, mask_initializer="zeros")


def test_fixed_fact_masks_stay_at_their_initial_value_while_the_model_trains():
    """`fact_mask_trainable=False` keeps the positional masks out of training, the word embeddings in it."""
    import keras  # pylint: disable=import-outside-toplevel
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.layers import FactEmbedding, fact_embedding  # pylint: disable=import-outside-toplevel

    cls = registry.model("universal_transformer_encoder")
    model = cls(13, 7, fact_width=4, hidden_size=8, filter_size=16, num_heads=2, num_encoder_layers=1,
                num_rec_steps=2, norm_position="pre", classifier_readout="last",
                fact_mask_initializer="position_encoding", fact_mask_trainable=False)
    ids = np.array([[5, 6, 7, 0, 8, 9, 0, 0, 1, 0, 0, 0]])
    model({"inputs": ids}, training=False)
    embedding = model.embedding
    assert any(w is embedding.position_mask for w in model.non_trainable_weights)
    assert not any(w is embedding.position_mask for w in model.trainable_weights)
    words = keras.ops.convert_to_numpy(embedding.embeddings).copy()
    optimizer = keras.optimizers.SGD(learning_rate=1.0)
    with tf.GradientTape() as tape:
        loss = keras.ops.sum(model({"inputs": ids}, training=True) ** 2)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_weights), model.trainable_weights))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(embedding.position_mask),
                               fact_embedding.position_encoding(4, 8), rtol=1e-6)
    assert not np.allclose(keras.ops.convert_to_numpy(embedding.embeddings), words)
    assert cls.from_config(model.get_config()).fact_mask_trainable is False
    assert FactEmbedding.from_config(embedding.get_config()).trainable_mask is False
    # The default trains them, as before.
    trained = cls(13, 7, fact_width=4, hidden_size=8, filter_size=16, num_heads=2, num_encoder_layers=1,
                  num_rec_steps=2)
    trained({"inputs": ids}, training=False)
    assert any(w is trained.embedding.position_mask for w in trained.trainable_weights)


@pytest.mark.parametrize("model_name,extra", [
    ("transformer_encoder", {"position_encoding": "relative", "fact_width": 4}),
    ("universal_transformer_encoder", {"recurrence_type": "act", "act_max_steps": 3, "fact_width": 4}),
    ("universal_transformer_encoder", {"position_encoding": "sinusoid"}),
    ("universal_transformer_encoder", {"recurrence_type": "act", "act_max_steps": 3, "fact_width": 4,
                                       "position_encoding": "relative", "classifier_readout": "last"}),
    ("transformer_encoder", {"classifier_readout": "first"}),
    ("universal_transformer_encoder", {"fact_width": 4, "fact_mask_initializer": "position_encoding",
                                       "classifier_readout": "last"}),
])
def test_encoder_classifiers_are_padding_invariant(model_name, extra):
    import keras  # pylint: disable=import-outside-toplevel

    cls = registry.model(model_name)
    if model_name.startswith("universal"):
        extra = dict(extra, num_rec_steps=2)
    model = cls(13, 7, hidden_size=16, filter_size=32, num_heads=2, num_encoder_layers=2,
                layer_prepostprocess_dropout=0.0, norm_position="pre", **extra)
    ids = np.array([[5, 6, 7, 0, 8, 9, 0, 0, 1, 0, 0, 0], [3, 4, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0]])
    padded = np.pad(ids, [(0, 0), (0, 8)])
    details = model({"inputs": ids}, training=False, return_details=True)
    logits = keras.ops.convert_to_numpy(details["logits"])
    assert logits.shape == (2, 1, 7) and np.isfinite(logits).all()
    np.testing.assert_allclose(keras.ops.convert_to_numpy(model({"inputs": padded}, training=False)), logits,
                               rtol=1e-5, atol=1e-5)
    # A row's answer does not depend on its batch-mate's length.
    alone = keras.ops.convert_to_numpy(model({"inputs": ids[1:, :5]}, training=False))
    np.testing.assert_allclose(alone, logits[1:], rtol=1e-5, atol=1e-5)
    if extra.get("recurrence_type") == "act":
        times = keras.ops.convert_to_numpy(details["ponder_times"]["encoder"])
        assert times.shape == (2, 3) and (times[:, :2][[0, 1], [1, 0]] > 0).all() and times[1, 1:].sum() == 0
        assert "act_loss" in details["losses"]


@pytest.mark.parametrize("readout", ["mean", "first", "last"])
def test_the_classifier_reads_the_mean_or_the_first_or_last_non_padding_position(readout):
    import keras  # pylint: disable=import-outside-toplevel

    model = registry.model("transformer_encoder")(13, 7, hidden_size=16, filter_size=32, num_heads=2,
                                                  num_encoder_layers=1, fact_width=4, classifier_readout=readout)
    ids = np.array([[5, 6, 7, 0, 8, 9, 0, 0, 10, 0, 0, 0, 1, 0, 0, 0], [3, 4, 0, 0, 1] + [0] * 11])
    logits = keras.ops.convert_to_numpy(model({"inputs": ids}))[:, 0]  # Builds the classifier too.
    encoded, mask, _ = model.encode_with_ponder_times(ids)
    encoded, mask = keras.ops.convert_to_numpy(encoded), keras.ops.convert_to_numpy(mask)
    assert mask.tolist() == [[True, True, True, False], [True, False, False, False]]
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in model.classifier.weights)
    pooled = {"mean": np.stack([encoded[0, :3].mean(0), encoded[1, :1].mean(0)]),
              "first": encoded[:, 0], "last": np.stack([encoded[0, 2], encoded[1, 0]])}[readout]
    np.testing.assert_allclose(logits, pooled @ kernel + bias, rtol=1e-5, atol=1e-5)
    assert registry.model("transformer_encoder").from_config(model.get_config()).classifier_readout == readout
    with pytest.raises(ValueError, match="classifier_readout"):
        registry.model("transformer_encoder")(13, 7, classifier_readout="max")


def test_wrong_model_for_the_facts_layout_is_a_clear_error(tmp_path):
    from t2t_relpos.training import trainer  # pylint: disable=import-outside-toplevel

    data_dir = write_task_files(str(tmp_path), stories=2)
    with pytest.raises(errors.T2TRelposError, match="cannot read babi_qa_facts_all_tasks_1k's inputs"):
        trainer.build_model(registry.hparams("transformer_cpu"), registry.problem("babi_qa_facts_all_tasks_1k"),
                            data_dir)


def test_ponder_pictures_stay_readable_at_any_length(tmp_path):
    pytest.importorskip("matplotlib")
    from t2t_relpos.decoding import ponder_plot  # pylint: disable=import-outside-toplevel

    times = np.random.default_rng(0).uniform(1, 4, size=(16, 400))
    path = ponder_plot.write_ponder_heatmap([[str(i) for i in range(400)]] * 16, times, str(tmp_path / "a.png"))
    bars = ponder_plot.write_ponder_bars([f"fact {i} is rather long " * 3 for i in range(224)], times[0, :224],
                                         str(tmp_path / "b.png"))
    for picture in (path, bars):
        with open(picture, "rb") as f:
            header = f.read(24)
        width, height = int.from_bytes(header[16:20], "big"), int.from_bytes(header[20:24], "big")
        assert width <= ponder_plot.MAX_WIDTH_INCHES * 120 and height <= ponder_plot.MAX_HEIGHT_INCHES * 120


def summary_tags(directory):
    """The tags written to the TensorBoard event files of `directory`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    tags = set()
    for name in os.listdir(directory):
        for event in tf.compat.v1.train.summary_iterator(os.path.join(directory, name)):
            tags.update(value.tag for value in event.summary.value)
    return tags


def test_tiny_babi_run_through_the_clis(tmp_path, monkeypatch):
    data_dir = write_task_files(str(tmp_path / "babi"), stories=10)
    run = str(tmp_path / "run")
    trained = run_tool("t2t-relpos-trainer", "--problem=babi_qa_facts_all_tasks_1k",
                       "--hparams_set=adaptive_universal_transformer_babi_rel", f"--data_dir={data_dir}",
                       f"--output_dir={run}", "--train_steps=6", "--checkpoint_every=3", "--eval_steps=2",
                       "--hparams=hidden_size=16,filter_size=32,num_heads=2,batch_size=1024,act_max_steps=3",
                       "--seed=1",
                       timeout=300)
    assert trained.returncode == 0, trained.stderr[-2000:]
    assert "encoder_ponder_time" in trained.stdout
    assert {"ponder_time/encoder", "ponder_time_picture/encoder"} <= summary_tags(os.path.join(run, "eval"))
    # Decoding in this process (`call_tool`: no second import of TensorFlow; the decoder as a process is
    # tests/test_decoder_cli.py's and test_faults.py's).
    decoded = call_tool("t2t-relpos-decoder", f"--output_dir={run}", f"--data_dir={data_dir}",
                        "--decode_split=test", f"--decode_to_file={tmp_path / 'answers.txt'}",
                        f"--decode_ponder_plot={tmp_path / 'ponder.png'}")
    assert decoded.returncode == 0, decoded.stderr[-2000:]
    assert "answer_accuracy = " in decoded.stderr and "  qa20  accuracy = " in decoded.stderr  # Scores: stderr.
    assert "failed (error > 5%) = " in decoded.stderr and not decoded.stdout
    with open(tmp_path / "answers.txt", encoding="utf-8") as f:
        answers = f.read().split("\n")[:-1]
    assert len(answers) == 20 * 10 * 3 and set(answers) <= set(PLACES) | {p + ",milk" for p in PLACES}
    assert os.path.getsize(tmp_path / "ponder.png") > 0
    one = call_tool("t2t-relpos-decoder", f"--output_dir={run}", f"--data_dir={data_dir}", "--decode_from_file=-",
                    stdin="Mary went to the garden . Where is Mary ?\n")
    assert one.returncode == 0 and one.stdout.strip() in answers
    # The benchmark's per-task curve decodes the held-out questions at each kept checkpoint, once. Its decoder
    # runs (`common.run_cli`: a process each, 10 s of a core apiece) are in this process too; its run_python's
    # processes are tests/test_benchmarks_smoke.py's.
    decoder_runs = []

    def run_cli(module, *args, log, threads=0):  # pylint: disable=unused-argument
        decoder_runs.append(args)
        result = call_tool(f"t2t-relpos-{module}", *args)
        assert result.returncode == 0, result.stderr[-2000:]
        return result.stdout + result.stderr  # As run_python returns them.

    monkeypatch.setattr(babi_benchmark.common, "run_cli", run_cli)
    args = types.SimpleNamespace(train_steps=6, data_dir=data_dir, single_task=0)
    curve = babi_benchmark.task_curve(run, args)
    assert list(curve) == [3, 6] and all(sorted(errors) == list(range(1, 21)) for errors in curve.values())
    assert all(0.0 <= error <= 100.0 for errors in curve.values() for error in errors.values())
    with open(os.path.join(run, "task_curve.json"), encoding="utf-8") as f:
        saved = json.load(f)
    saved["3"]["1"] = 123.0  # Marks the saved curve: a second call reads it instead of decoding again.
    with open(os.path.join(run, "task_curve.json"), "w", encoding="utf-8") as f:
        json.dump(saved, f)
    assert babi_benchmark.task_curve(run, args)[3][1] == 123.0
    assert list(babi_benchmark.task_curve(run, types.SimpleNamespace(**{**vars(args), "train_steps": 3}))) == [3]
    assert len(decoder_runs) == 2  # Once per checkpoint, in the first call.


@pytest.mark.parametrize("export_format, reason", [
    ("saved_model", "no in-graph tokenizer"),
    ("ctranslate2", "only the package's Transformer exports to CTranslate2"),
])
def test_an_export_the_model_cannot_have_is_refused_before_training(tmp_path, export_format, reason):
    """`--export` is checked when the run starts: the refusal once came after the whole training run."""
    data_dir = write_task_files(str(tmp_path / "babi"), stories=2)
    run = tmp_path / "run"
    refused = call_tool("t2t-relpos-trainer", "--problem=babi_qa_facts_all_tasks_1k",
                        "--hparams_set=adaptive_universal_transformer_babi_rel", f"--data_dir={data_dir}",
                        f"--output_dir={run}", "--train_steps=2", "--hparams=hidden_size=16,filter_size=32,num_heads=2",
                        "--export", f"--export_format={export_format}")
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert reason in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    assert "step " not in refused.stdout and not list(run.glob("ckpt-*"))


@pytest.mark.slow  # Three trainer runs: 60 s of a core (the trainer's frozen layers: tests/test_training.py).
def test_a_run_continued_on_other_tasks_keeps_its_frozen_layers_and_reports_both_ends(tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.hparams import stored as stored_hparams  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel

    data_dir = write_task_files(str(tmp_path / "babi"), stories=10)  # Story 10 of each task is held out.
    run = str(tmp_path / "run")
    first = run_tool("t2t-relpos-trainer", "--problem=babi_qa_facts_all_tasks_1k",
                     "--hparams_set=universal_transformer_babi_rel", f"--data_dir={data_dir}", f"--output_dir={run}",
                     "--train_steps=2", "--checkpoint_every=2", "--eval_steps=1", "--seed=1",
                     "--hparams=hidden_size=16,filter_size=32,num_heads=2,num_rec_steps=2,batch_size=1024,"
                     "task_repeats=[" + ",".join(f"{t}:0" for t in range(2, 21)) + "]", timeout=300)
    assert first.returncode == 0, first.stderr[-2000:]
    work = str(tmp_path / "continued")
    common = ["continue", "--from_run", run, "--data_dir", data_dir, "--subset", "1k", "--work_dir", work]
    with pytest.raises(SystemExit, match="error: .* has no checkpoint of step 7"):
        babi_benchmark.main(common + ["--from_step", "7", "--name", "nothing"])
    assert babi_benchmark.main(common + ["--from_step", "2", "--name", "qa2_frozen", "--tasks", "1,2",
                                         "--task_repeats", "2:3", "--freeze", "encoder", "--steps", "2"]) == 0
    out = os.path.join(work, "qa2_frozen")
    with open(os.path.join(out, "hparams.json"), encoding="utf-8") as f:
        stored = json.load(f)["hparams"]
    assert stored["task_repeats"] == [f"{t}:0" for t in range(3, 21)] + ["2:3"]
    assert stored["freeze_layers"] == ["encoder"]
    hparams, problem_name, _ = stored_hparams.load(out)
    weights = {}  # {step: {layer: [arrays]}}
    for step in (2, 4):
        model = trainer_lib.build_model(hparams, registry.problem(problem_name), data_dir)
        tf.train.Checkpoint(model=model).restore(os.path.join(out, f"ckpt-{step}")).expect_partial()
        weights[step] = {layer.name: [w.numpy() for w in layer.weights] for layer in model.layers}
    assert weights[2]["encoder"] and all(np.array_equal(a, b) for a, b in zip(weights[2]["encoder"],
                                                                               weights[4]["encoder"]))
    assert not all(np.array_equal(a, b) for a, b in zip(weights[2]["classifier"], weights[4]["classifier"]))
    with open(os.path.join(out, "continue.json"), encoding="utf-8") as f:
        result = json.load(f)
    assert sorted(map(int, result["start"])) == sorted(map(int, result["end"])) == list(range(1, 21))
    assert sorted(map(int, result["test_end"])) == list(range(1, 21))
    assert all(0.0 <= error <= 100.0 for errors in (result["start"], result["end"], result["test_end"])
               for error in errors.values())
    # A continuation saved without test errors (before they were kept) gets them on a rerun, untrained.
    del result["test_end"]
    with open(os.path.join(out, "continue.json"), "w", encoding="utf-8") as f:
        json.dump(result, f)
    assert babi_benchmark.main(common + ["--from_step", "2", "--name", "qa2_frozen"]) == 0
    with open(os.path.join(out, "continue.json"), encoding="utf-8") as f:
        again = json.load(f)
    assert sorted(map(int, again["test_end"])) == list(range(1, 21)) and again["end"] == result["end"]
    assert not os.path.exists(os.path.join(out, "ckpt-6.index"))
    table = babi_benchmark.continue_report([result])
    assert "| qa2_frozen " in table and "| encoder " in table and "| 2 -> 4 " in table


def write_qa16_stories(data_dir, subsets, stories=1):
    """Replaces qa16's files with `stories` real-looking ones (one question each), as `benchmarks/babi.py hops`
    rewrites them."""
    qa16 = ("1 Lily is a frog.\n2 Bernhard is a frog.\n3 Bernhard is green.\n4 Greg is a frog.\n"
            "5 What color is Greg?\tgreen\t4 2 3\n") * stories
    for subset in subsets:
        for split in ("train", "test"):
            for name in os.listdir(os.path.join(data_dir, subset)):
                if name.startswith(f"qa16_basic-induction_{split}"):
                    os.remove(os.path.join(data_dir, subset, name))
            with open(os.path.join(data_dir, subset, f"qa16_basic-induction_{split}.txt"), "w",
                      encoding="utf-8") as f:
                f.write(qa16)


def test_a_continuation_can_ask_qa16_with_two_lookups_of_the_same_stories(tmp_path):
    data_dir = write_task_files(str(tmp_path / "babi"), stories=2, subset="en-10k")
    write_task_files(data_dir, stories=2, subset="en")
    write_qa16_stories(data_dir, ("en", "en-10k"))
    os.remove(os.path.join(data_dir, "en-10k", "qa4_two-arg-relations_train.txt"))  # As 10k qa3 is missing.
    args = types.SimpleNamespace(data_dir=data_dir, subset="10k", work_dir=str(tmp_path / "work"), qa16_hops=2)
    linked, missing = babi_benchmark._hops_data_dir(args)  # pylint: disable=protected-access
    assert missing == [4]
    questions = [e.question for e in babi_text.read_task(linked, "10k", 16, "train")]
    assert questions == [("What", "color", "is", "frog", "?")]
    assert babi_text.read_task(linked, "10k", 4, "train") == babi_text.read_task(data_dir, "1k", 4, "train")
    assert babi_text.read_task(linked, "10k", 1, "test") == babi_text.read_task(data_dir, "10k", 1, "test")
    result = {"name": "hops2", "tasks": "all", "task_repeats": "", "freeze": "", "qa16_hops": 2, "from_step": 4,
              "steps": 2, "start": {"16": 50.0, "1": 0.0, "2": 1.0, "3": 2.0, "4": 3.0},
              "end": {"16": 1.0, "1": 0.0, "2": 9.0, "3": 2.0, "4": 3.0}, "test_end": {"16": 2.0, "2": 10.0},
              "training_minutes": 1.0}
    row = [c.strip() for c in babi_benchmark.continue_report([result]).splitlines()[-1].split("|")[1:-1]]
    assert row == ["hops2", "all; qa16 asked with 2 lookups", "nothing", "4 -> 6", "4 tasks; qa2 1.0 -> 9.0",
                   "qa2 9.0", "11.2 -> 3.0", "6.00 (1)", "1"]


def _short_curriculum(tmp_path, monkeypatch):
    """`benchmarks/babi.py curriculum` with a chain of 3 of its stages, tiny data and model: (module, argv, stages)."""
    curriculum = babi_benchmark
    assert [(s[1], s[2], s[3]) for s in curriculum.STAGES] == [  # The recipe benchmarks/README.md reports.
        (4000, "", 3), (8000, "16:4,17:8,19:8", 3), (4000, "16:4,17:8,19:8", 3), (3000, "16:8,17:8,19:8", 2),
        (4000, "16:24,17:8,19:8", 2), (4000, "16:8,17:8,19:8", 3)]
    # A shorter chain of the same kinds of stage (from scratch, two lookups, qa16 as it is) keeps the test short.
    stages = (curriculum.STAGES[0], curriculum.STAGES[3], curriculum.STAGES[5])
    monkeypatch.setattr(curriculum, "STAGES", stages)
    data_dir = write_task_files(str(tmp_path / "babi"), stories=10)
    write_qa16_stories(data_dir, ("en",), stories=10)
    argv = ["curriculum", "--data_dir", data_dir, "--subset", "1k", "--work_dir", str(tmp_path / "work"),
            "--stage_steps", "2,1,1",
            "--hparams", "hidden_size=16,filter_size=32,num_heads=2,num_rec_steps=2,batch_size=1024"]
    return curriculum, argv, stages


def test_the_curriculum_refuses_a_chain_it_does_not_have(tmp_path, monkeypatch):
    curriculum, argv, _ = _short_curriculum(tmp_path, monkeypatch)
    with pytest.raises(SystemExit, match="--stage_steps needs 3 numbers"):
        curriculum.main(argv[:-2] + ["--stage_steps", "2,1"])
    with pytest.raises(SystemExit, match="--stages must be 1 to 3"):
        curriculum.main(argv + ["--stages", "4"])


@pytest.mark.slow  # Four trainer processes: 100 s of a core.
def test_the_curriculum_runs_its_stages_in_a_chain_and_resumes(tmp_path, monkeypatch):
    curriculum, argv, stages = _short_curriculum(tmp_path, monkeypatch)
    work = str(tmp_path / "work")
    prefix = ("universal_transformer_babi_rel_hidden_size_16_filter_size_32_num_heads_2_num_rec_steps_2"
              "_batch_size_1024_s1")
    names = [f"{prefix}_{k}_{stage[0]}" for k, stage in enumerate(stages)]
    # A chain cut short (what fits a session) runs and reports its first stages, and the full command goes on.
    partial = curriculum.curriculum_run(curriculum.parse_args(argv + ["--stages", "2"]))
    assert [r["name"] for r in partial] == names[:2] and not os.path.exists(os.path.join(work, names[2]))
    assert ", the first 2 of 3 stages" in curriculum.curriculum_report(
        curriculum.parse_args(argv + ["--stages", "2"]), partial, 1.0).splitlines()[0]
    assert curriculum.main(argv) == 0
    runs = [n for n in os.listdir(work) if os.path.isdir(os.path.join(work, n)) and n != "qa16_hops2"]
    assert sorted(runs) == sorted(names)
    results = []
    for name in names:
        with open(os.path.join(work, name, "continue.json"), encoding="utf-8") as f:
            results.append(json.load(f))
    assert [r["from_step"] + r["steps"] for r in results] == [2, 3, 4]
    assert [r["qa16_hops"] for r in results] == [3, 2, 3]
    assert results[2]["task_repeats"] == "16:8,17:8,19:8"
    assert sorted(map(int, results[2]["test_end"])) == list(range(1, 21))
    with open(os.path.join(work, names[0], "hparams.json"), encoding="utf-8") as f:
        first = json.load(f)["hparams"]
    assert first["task_repeats"] == [f"{t}:0" for t in range(1, 21) if t != 17] and first["hidden_size"] == 16
    logs = {name: os.path.getsize(os.path.join(work, name + ".log")) for name in names}
    table = curriculum.curriculum_report(curriculum.parse_args(argv),
                                         curriculum.curriculum_run(curriculum.parse_args(argv)), 1.0)
    assert logs == {name: os.path.getsize(os.path.join(work, name + ".log")) for name in names}  # Nothing rerun.
    assert table.count("\n| ") == 1 + 3 and "| 2     | 3 -> 4 " in table and "Adaptive UT 7.85 (5 failed)" in table


def test_datagen_checks_the_files_instead_of_succeeding_on_nothing(tmp_path, capsys):
    # It exited 0 on an empty --data_dir: the missing files surfaced only when training began.
    result = run_tool("t2t-relpos-datagen", "--problem=babi_qa_facts_all_tasks_1k", f"--data_dir={tmp_path / 'none'}")
    assert result.returncode == 2 and "qa1_single-supporting-fact_train.txt" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    data_dir = write_task_files(str(tmp_path / "data"))
    registry.problem("babi_qa_facts_all_tasks_1k").generate_data(data_dir, None)
    assert "are readable" in capsys.readouterr().out
