"""LAMBADA and subject-verb agreement: their readers on small files in the published formats, the one-line
message for missing data, and the measures on models whose next-token distributions are known (a lookup table)
and on a real tiny decoder-only Transformer (batched and padded equal to one example at a time)."""

import csv
import gzip
import io
import random

import keras
import numpy as np
import pytest
from keras import ops

from t2t_relpos import errors, registry
from t2t_relpos.decoding import lm_tasks
from t2t_relpos.problems import agreement, lambada, word_vocab
from t2t_relpos.problems.problem import EOS_ID

# -- LAMBADA ----------------------------------------------------------------------------------------------

DEV = ["she opened the door and saw the cat . the cat", "he ran home ."]
TEST = ["the dog barked at the mailman . the zebra"]
CONTROL = ["a b c", "the cat"]
NOVELS = {"Adventure/a.txt": "the cat ran .\nthe dog sat .\n", "Fantasy/b.txt.gz": "he saw a dragon .\n"}


@pytest.fixture(name="lambada_dir")
def _lambada_dir(tmp_path):
    words = sorted({w for text in DEV + TEST + CONTROL + list(NOVELS.values()) for w in text.split()} - {"zebra"})
    (tmp_path / lambada.VOCAB_FILE).write_text("".join(f"{w}\t{i + 7}\n" for i, w in enumerate(words)))
    (tmp_path / lambada.DEV_FILE).write_text("\n".join(DEV) + "\n\n")
    with gzip.open(tmp_path / (lambada.TEST_FILE + ".gz"), "wt") as f:
        f.write("\n".join(TEST) + "\n")
    (tmp_path / lambada.CONTROL_FILE).write_text("\n".join(CONTROL) + "\n")
    for name, text in NOVELS.items():
        path = tmp_path / lambada.NOVELS_DIR / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".gz"):
            with gzip.open(path, "wt") as f:
                f.write(text)
        else:
            path.write_text(text)
    return str(tmp_path)


def test_lambada_reads_the_published_files(lambada_dir):
    problem = registry.problem("lambada_lm")
    encoder = problem.feature_encoders(lambada_dir)["targets"]
    assert problem.has_inputs is False and problem.vocab_sizes(lambada_dir) == (None, encoder.vocab_size)
    passages = problem.passages("eval", lambada_dir)  # The blank last line is no passage.
    assert [encoder.decode(p.context) + " | " + encoder.decode(p.target) for p in passages] == [
        "she opened the door and saw the cat . the | cat", "he ran home | ."]
    eval_ids = [x["targets"].tolist() for x in problem.dataset("eval", lambada_dir).as_numpy_iterator()]
    assert eval_ids == [p.context + p.target + [EOS_ID] for p in passages]
    assert problem.max_eval_length == max(len(ids) for ids in eval_ids)
    (test,) = problem.passages("test", lambada_dir)  # Gzipped; its target is outside the word list.
    assert test.target == [word_vocab.UNK_ID]
    control = registry.problem("lambada_lm_control").passages("test", lambada_dir)
    assert [encoder.decode(p.target) for p in control] == ["c", "cat"]


def test_lambada_training_windows_cover_the_novels(lambada_dir):
    problem = registry.problem("lambada_lm")
    encoder = problem.feature_encoders(lambada_dir)["targets"]
    novels = problem.novels(lambada_dir)
    assert [p.split("train-novels/")[1] for p in novels] == ["Adventure/a.txt", "Fantasy/b.txt.gz"]
    windows = lambada.novel_windows(novels, encoder, 3, seed=5)
    first = [next(windows)["targets"].tolist() for _ in range(12)]
    again = lambada.novel_windows(novels, encoder, 3, seed=5)
    assert first == [next(again)["targets"].tolist() for _ in range(12)]
    for path, text in zip(novels, NOVELS.values()):  # An epoch of one novel: its ids after an offset under 3.
        stream, epoch, windows = encoder.encode(text) + [EOS_ID], [], lambada.novel_windows([path], encoder, 3, 7)
        while not epoch or epoch[-1][-1] != EOS_ID:
            epoch.append(next(windows)["targets"].tolist())
        assert all(1 <= len(w) <= 3 for w in epoch) and all(len(w) == 3 for w in epoch[:-1])
        assert sum(epoch, []) in [stream[k:] for k in range(3)]
    shown = [x["targets"] for x in problem.dataset("train", lambada_dir, seed=3).take(4).as_numpy_iterator()]
    assert all(1 <= len(x) <= lambada.DEFAULT_WINDOW and x[-1] == EOS_ID for x in shown)


def test_lambada_missing_files_say_what_to_put_where(tmp_path, lambada_dir):
    problem = registry.problem("lambada_lm")
    with pytest.raises(errors.DataError) as caught:
        problem.feature_encoders(str(tmp_path / "nowhere"))
    message = str(caught.value)
    assert "\n" not in message and "no lambada-vocab-2.txt" in message and "lambada-dataset.tar.gz" in message
    assert "train-novels/<genre>/<book>.txt" in message and "--data_dir=" in message
    with pytest.raises(errors.DataError, match="needs --data_dir"):
        problem.passages("eval", None)
    empty = tmp_path / "vocab_only"
    empty.mkdir()
    (empty / lambada.VOCAB_FILE).write_text("cat\t3\n")
    with pytest.raises(errors.DataError, match=r"no lambada_test_plain_text\.txt in .*put the files"):
        problem.passages("test", str(empty))
    with pytest.raises(errors.DataError, match=r"no train-novels/<genre>/<book>\.txt in"):
        problem.dataset("train", str(empty), seed=1)


# -- Subject-verb agreement -------------------------------------------------------------------------------

HEADER = ["sentence", "orig_sentence", "pos_sentence", "subj", "verb", "subj_pos", "has_rel", "has_nsubj",
          "verb_pos", "subj_index", "verb_index", "n_intervening", "last_intervening", "n_diff_intervening",
          "distance", "max_depth", "all_nouns", "nouns_up_to_verb"]  # Linzen's rnnagr/utils.py, in order.
VERBS = [("is", "are"), ("uses", "use"), ("tries", "try"), ("glimmers", "glimmer")]  # Singular, plural.


def _record(index):
    """A row in Linzen's format: a subject, attractors (and a same-number noun on every 5th row), the verb."""
    plural, attractors, same = (index // 4) % 2 == 1, index % 8, index % 5 == 0
    singular_verb, plural_verb = VERBS[index % len(VERBS)]
    noun, other = ("keys", "cabinet") if plural else ("key", "cabinets")
    words, tags = ["the", noun], ["DT", "NNS" if plural else "NN"]
    for _ in range(attractors):
        words, tags = words + ["near", "the", other], tags + ["IN", "DT", "NN" if plural else "NNS"]
    if same:
        words, tags = words + ["by", "the", noun], tags + ["IN", "DT", tags[1]]
    verb, verb_pos = (plural_verb, "VBP") if plural else (singular_verb, "VBZ")
    words, tags = words + [verb, "us", "."], tags + [verb_pos, "PRP", "."]
    sentence = [verb_pos if w == verb and verb.startswith("glimmer") else w for w in words]  # A rare word.
    return {"sentence": " ".join(sentence), "orig_sentence": " ".join(words), "pos_sentence": " ".join(tags),
            "subj": noun, "verb": verb, "subj_pos": tags[1], "has_rel": "False", "has_nsubj": "False",
            "verb_pos": verb_pos, "subj_index": 2, "verb_index": words.index(verb) + 1,
            "n_intervening": attractors + same, "last_intervening": "na", "n_diff_intervening": attractors,
            "distance": words.index(verb) - 1, "max_depth": 0, "all_nouns": noun, "nouns_up_to_verb": noun}


RECORDS = [_record(i) for i in range(120)]


def _write_tsv(path, records, header=HEADER):
    text = io.StringIO()
    writer = csv.DictWriter(text, header, delimiter="\t", extrasaction="ignore")
    writer.writeheader()
    writer.writerows(records)
    with gzip.open(path, "wt", encoding="utf-8") as f:
        f.write(text.getvalue())


@pytest.fixture(name="agreement_dir")
def _agreement_dir(tmp_path):
    _write_tsv(tmp_path / (agreement.DATA_FILE + ".gz"), RECORDS)
    return str(tmp_path)


def test_other_form_rule():
    attested = {("use", "VBP"): 3, ("pass", "VBP"): 1, ("try", "VBP"): 2, ("flies", "VBZ"): 1,
                ("watches", "VBZ"): 4}
    cases = {("uses", "VBZ"): "use", ("passes", "VBZ"): "pass", ("tries", "VBZ"): "try", ("fly", "VBP"): "flies",
             ("watch", "VBP"): "watches", ("is", "VBZ"): "are", ("have", "VBP"): "has", ("VBZ", "VBZ"): "VBP",
             ("VBP", "VBP"): "VBZ", ("sings", "VBZ"): None}  # "us" is no plural verb: "use" is attested.
    assert {case: agreement.other_form(*case, attested) for case in cases} == cases


def test_agreement_reads_the_published_tsv_with_tensor2tensors_splits(agreement_dir):
    problem = registry.problem("sva_language_modeling")
    encoder = problem.feature_encoders(agreement_dir)["targets"]
    assert problem.has_inputs is False and problem.vocab_sizes(agreement_dir) == (None, encoder.vocab_size)
    # tensor2tensor's load_examples: random.seed(1), shuffle, 9% train, 1% eval, the rest where every
    # intervening noun is an attractor.
    state = random.getstate()
    try:
        random.seed(1)
        shuffled = list(RECORDS)
        random.shuffle(shuffled)
    finally:
        random.setstate(state)
    expected = {"train": shuffled[:10], "eval": shuffled[10:11],
                "test": [r for r in shuffled[11:] if r["n_intervening"] == r["n_diff_intervening"]]}
    for split, records in expected.items():
        examples = problem.agreement_examples(split, agreement_dir)
        prefixes = [" ".join(r["sentence"].split()[:r["verb_index"] - 1]) for r in records]
        assert [encoder.decode(e.prefix) for e in examples] == prefixes
        assert [encoder.decode([e.verb]) for e in examples] == [r["sentence"].split()[r["verb_index"] - 1]
                                                                for r in records]
        assert [e.attractors for e in examples] == [r["n_diff_intervening"] for r in records]
        ids = [x["targets"].tolist() for x in problem.dataset(split, agreement_dir, seed=2).take(len(records))
               .as_numpy_iterator()]
        wanted = [e.prefix + [e.verb, EOS_ID] for e in examples]
        if split == "train":  # The first epoch, shuffled.
            ids, wanted = sorted(ids), sorted(wanted)
        assert ids == wanted
    forms = {encoder.decode([e.verb]): encoder.decode([e.other]) for e in problem.agreement_examples(
        "test", agreement_dir)}
    assert forms == {"is": "are", "are": "is", "uses": "use", "use": "uses", "tries": "try", "try": "tries",
                     "VBZ": "VBP", "VBP": "VBZ"}
    counts = {}
    for word in (w for r in RECORDS for w in r["sentence"].split()):
        counts[word] = counts.get(word, 0) + 1
    assert encoder.words == tuple(sorted(counts, key=lambda w: (-counts[w], w)))  # Most frequent first.


def test_agreement_data_errors_are_one_line(tmp_path):
    problem = registry.problem("sva_language_modeling")
    with pytest.raises(errors.DataError) as caught:
        problem.feature_encoders(str(tmp_path))
    assert "\n" not in str(caught.value) and "agr_50_mostcommon_10K.tsv.gz" in str(caught.value)
    assert "tallinzen.net" in str(caught.value) and f"--data_dir={tmp_path}" in str(caught.value)
    _write_tsv(tmp_path / (agreement.DATA_FILE + ".gz"), RECORDS, [h for h in HEADER if h != "verb_index"])
    with pytest.raises(errors.DataError, match="no column verb_index"):
        registry.problem("sva_language_modeling").feature_encoders(str(tmp_path))
    bad = dict(RECORDS[0], verb_index=99)
    _write_tsv(tmp_path / (agreement.DATA_FILE + ".gz"), [RECORDS[1], bad])
    with pytest.raises(errors.DataError, match=r"line 3: .*verb_index 99 a position"):
        registry.problem("sva_language_modeling").feature_encoders(str(tmp_path))


# -- The measures -----------------------------------------------------------------------------------------

class TableModel(keras.Model):
    """A decoder-only model with known next-token logits: `logits[:, i] = table[targets[:, i - 1]]` (the start
    symbol PAD before the first), the package's call contract."""

    def __init__(self, table):
        super().__init__()
        self.table = np.asarray(table, np.float32)

    def call(self, features, training=None):
        previous = ops.pad(features["targets"], [[0, 0], [1, 0]])[:, :-1]
        return ops.take(ops.convert_to_tensor(self.table), previous, axis=0)


SUCCESSOR = {0: 3, 1: 3, 2: 3, 3: 4, 4: 5, 5: 6, 6: 7, 7: 8, 8: 3}


def _successor_table():
    """Logits over 9 ids: after r the model prefers SUCCESSOR[r] (2.0), then its successor (1.0), others 0."""
    table = np.zeros((9, 9), np.float32)
    for r, s in SUCCESSOR.items():
        table[r, s], table[r, SUCCESSOR[s]] = 2.0, 1.0
    return table


def test_lambada_accuracy_on_a_known_distribution():
    model = TableModel(_successor_table())
    passages = [([3, 4], [5]),  # After 4 the model says 5: right.
                ([3], [5]),  # After 3 it says 4: wrong.
                ([3], [4, 5]),  # Two ids, both the argmax given what precedes them: right.
                ([3], [4, 6]),  # The second is not: wrong.
                ([], [3]),  # No context: after the start symbol (row 0) the model says 3: right.
                ([7, 8], [2])]  # The unknown id is never right (the table does not reach 2 anyway).
    for batch_tokens in (1, 5, 4096):
        assert lm_tasks.lambada_accuracy(model, passages, batch_tokens) == {
            "accuracy": 3 / 6, "correct": 3, "total": 6}
    unk_table = np.zeros((9, 9), np.float32)
    unk_table[:, word_vocab.UNK_ID] = 1.0
    assert lm_tasks.lambada_accuracy(TableModel(unk_table), [([3], [2])])["correct"] == 0
    with pytest.raises(ValueError, match="target"):
        lm_tasks.lambada_accuracy(model, [([3], [])])


def test_agreement_accuracy_by_attractors_on_a_known_distribution():
    model = TableModel(_successor_table())
    examples = [agreement.AgreementExample([3, 4], 5, 6, 0),  # 5 (2.0) over 6 (1.0): right.
                agreement.AgreementExample([4], 6, 5, 0),  # Wrong.
                agreement.AgreementExample([5], 7, 8, 1),  # Right.
                agreement.AgreementExample([5], 8, 3, 1),  # 0 against 0, a tie: wrong.
                agreement.AgreementExample([6], 8, 7, 2),  # Wrong.
                agreement.AgreementExample([6], 7, None, 2),  # No wrong form: skipped.
                agreement.AgreementExample([3, 3, 7], 8, 3, 6),  # Right, in "6+".
                agreement.AgreementExample([8], 3, 4, 9)]  # Right, in "6+".
    report = lm_tasks.agreement_accuracy(model, examples, batch_tokens=3)
    assert report == lm_tasks.agreement_accuracy(model, examples)
    assert {k: report[k] for k in ("correct", "total", "skipped")} == {"correct": 4, "total": 7, "skipped": 1}
    assert {group: (v["correct"], v["total"], v["skipped"]) for group, v in report["by_attractors"].items()} == {
        "0": (1, 2, 0), "1": (1, 2, 0), "2": (0, 1, 1), "6+": (2, 2, 0)}
    assert list(report["by_attractors"]) == ["0", "1", "2", "6+"] and report["by_attractors"]["6+"]["accuracy"] == 1
    assert [lm_tasks.attractor_group(n, 4) for n in (0, 3, 4, 11)] == ["0", "3", "4+", "4+"]


def test_measures_end_to_end_with_a_tiny_decoder_only_transformer(lambada_dir, agreement_dir):
    """Problem -> examples -> a real 16-wide 1-layer decoder-only Transformer -> the measures, batched and
    padded, equal to the same decisions taken one example at a time without padding."""
    from t2t_relpos.models.transformer import Transformer  # pylint: disable=import-outside-toplevel

    for problem, data_dir in ((registry.problem("lambada_lm"), lambada_dir),
                              (registry.problem("sva_language_modeling"), agreement_dir)):
        size = problem.vocab_sizes(data_dir)[1]
        model = Transformer(input_vocab_size=None, target_vocab_size=size, hidden_size=16, filter_size=32,
                            num_heads=2, num_decoder_layers=1, position_encoding="relative",
                            max_relative_position=4)
        one = lambda ids, model=model: ops.convert_to_numpy(model({"targets": np.asarray([ids], np.int32)}))[0]
        if problem.name == "lambada_lm":
            passages = problem.passages("eval", data_dir) + problem.passages("test", data_dir)
            report = lm_tasks.lambada_accuracy(model, passages, batch_tokens=16)
            greedy = []
            for context, target in passages:  # Greedy decoding of len(target) ids, one call per id.
                decoded = list(context)
                for _ in target:
                    decoded.append(int(one(decoded + [0])[len(decoded)].argmax()))
                greedy.append(decoded[len(context):] == target and word_vocab.UNK_ID not in target)
        else:
            examples = problem.agreement_examples("test", data_dir)[:6]
            report = lm_tasks.agreement_accuracy(model, examples, batch_tokens=40)
            greedy = []
            for e in examples:
                logits = one(e.prefix + [e.verb])[len(e.prefix)]
                greedy.append(logits[e.verb] > logits[e.other])
        assert report["correct"] == sum(greedy) and report["total"] == len(greedy) > 1
