"""Subject-verb agreement (Linzen, Dupoux, Goldberg 2016; the Universal Transformer paper's §3.2) as a language
model: `sva_language_modeling`, tensor2tensor's name (`problems/subject_verb_agreement.py`), meaning the same.

The model learns from sentences cut after their verb and is judged by whether it gives the verb's right form
(the subject's number) more probability than the wrong one, by the number of attractors, the nouns of the
other number between subject and verb (`t2t_relpos.decoding.lm_tasks.agreement_accuracy` on
`SvaLanguageModeling.agreement_examples`).

Data: Linzen et al.'s `agr_50_mostcommon_10K.tsv.gz` (see `DATA_URL`), or it unzipped (`.tsv`), in
--data_dir; nothing is prepared. It is tab-separated with a header (Linzen's `rnnagr/utils.py` writes and
reads it with `csv`); the columns read (`COLUMNS`): `sentence` (the lowercased tokens, a word outside the
10,000 most common written as its part-of-speech tag, e.g. "NNS"), `orig_sentence` and `pos_sentence` (every
word and its tag), `verb_pos` ("VBZ" singular or "VBP" plural present), `verb_index` (the verb's 1-based
position), `n_intervening` (nouns between subject and verb) and `n_diff_intervening` (those of the other
number: the attractors).

Splits, as tensor2tensor's `load_examples`: the rows shuffled by Python's `random.Random(1)`; train the first
9%, eval the next 1%, test the rest where every intervening noun is an attractor (`n_intervening ==
n_diff_intervening`). An example is the `sentence`'s tokens up to and including the verb, then EOS; the
vocabulary is every `sentence` token, most frequent first (ties alphabetical), as tensor2tensor built it.

The wrong form is not in the file (Linzen's code made it with the `inflect` package and a word list of the
parsed corpus). Our rule (`other_form`): a verb written as its tag ("VBZ") has the other tag ("VBP"); "is",
"has", "does", "'s" pair with "are", "have", "do", "'re"; otherwise the candidates of English spelling
(VBZ -> VBP: drop "ies" for "y", drop "es", drop "s"; VBP -> VBZ: "y" to "ies", add "es", add "s") and the one
the file's `orig_sentence`/`pos_sentence` show most often with the other tag wins. A verb with no such form,
or whose form is outside the vocabulary, is left out of the measure and counted (Linzen's code skipped those).
"""

import collections
import csv
import io
import os
import random
import sys
import zlib

import numpy as np

from t2t_relpos import errors, registry
from t2t_relpos.problems import problem, word_vocab

DATA_FILE = "agr_50_mostcommon_10K.tsv"
DATA_URL = "http://tallinzen.net/media/rnn_agreement/agr_50_mostcommon_10K.tsv.gz"
COLUMNS = ("sentence", "orig_sentence", "pos_sentence", "verb_pos", "verb_index", "n_intervening",
           "n_diff_intervening")
TRAIN_SHARE, EVAL_SHARE, SPLIT_SEED = 0.09, 0.01, 1
OTHER_TAG = {"VBZ": "VBP", "VBP": "VBZ"}
IRREGULAR_PLURAL = {"is": "are", "has": "have", "does": "do", "'s": "'re"}
IRREGULAR = {**IRREGULAR_PLURAL, **{plural: singular for singular, plural in IRREGULAR_PLURAL.items()}}

Row = collections.namedtuple("Row", ["prefix", "verb", "verb_pos", "attractors", "all_attractors"])
Row.__doc__ = """One dependency: `prefix` the `sentence` tokens before the verb (one str), `verb` its token,
`verb_pos` "VBZ" or "VBP", `attractors` (`n_diff_intervening`), `all_attractors` whether every intervening
noun is one."""

AgreementExample = collections.namedtuple("AgreementExample", ["prefix", "verb", "other", "attractors"])
AgreementExample.__doc__ = """One sentence as ids: `prefix` the tokens before the verb (a list of ints), `verb`
the right form's id, `other` the wrong form's id (None: it has none in the vocabulary, and the measure leaves
the example out), `attractors` the number of attractors."""


def other_form(verb, verb_pos, attested):
    """The verb's form of the other number, or None (see the module docstring for the rule).

    Args:
        verb: The verb's token (lowercased, or its tag for a rare verb).
        verb_pos: "VBZ" or "VBP".
        attested: `{(word, tag): count}` of the words the data shows with each tag.
    """
    other = OTHER_TAG[verb_pos]
    if verb == verb_pos:
        return other
    if verb in IRREGULAR:
        return IRREGULAR[verb]
    if verb_pos == "VBZ":
        candidates = [verb[:-3] + "y"] * verb.endswith("ies") + [verb[:-2]] * verb.endswith("es") + [verb[:-1]]
    else:
        candidates = [verb[:-1] + "ies"] * (verb.endswith("y") and verb[-2:-1] not in "aeiou") + [
            verb + "es", verb + "s"]
    best = max(candidates, key=lambda c: attested.get((c, other), 0))
    return best if attested.get((best, other), 0) else None


@registry.register_problem("sva_language_modeling")
class SvaLanguageModeling(problem.Problem):
    """Subject-verb agreement as a language model (see the module docstring)."""

    has_inputs = False
    eval_metrics = ("accuracy", "neg_log_perplexity")
    decode_metric = "perplexity"

    def __init__(self):
        self._cache = {}

    def _cached(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    def missing_help(self, data_dir):
        return (f"put Linzen et al.'s {DATA_FILE}.gz ({DATA_URL}), or it unzipped, in --data_dir="
                f"{data_dir or 'DIR'}")

    def data_path(self, data_dir):
        """The data file in `data_dir` (`.tsv.gz` or `.tsv`)."""
        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir: " + self.missing_help(data_dir))
        paths = [p for p in (os.path.join(data_dir, DATA_FILE + gz) for gz in (".gz", "")) if os.path.isfile(p)]
        if not paths:
            raise errors.DataError(f"{self.name}: no {DATA_FILE}.gz in {data_dir}; " + self.missing_help(data_dir))
        if len(paths) > 1:
            raise errors.DataError(f"both {paths[0]} and {paths[1]} exist; keep one")
        return paths[0]

    def _data(self, data_dir):
        """(rows, token counts, attested `{(word, tag): count}`) of the whole file, read once."""
        return self._cached(("data", data_dir), lambda: read_rows(self.data_path(data_dir)))

    def _split_rows(self, split, data_dir):
        def split_rows():
            rows = self._data(data_dir)[0]
            order = list(range(len(rows)))
            random.Random(SPLIT_SEED).shuffle(order)
            n_train = int(len(rows) * TRAIN_SHARE)
            n_eval = n_train + int(len(rows) * EVAL_SHARE)
            chosen = {"train": order[:n_train], "eval": order[n_train:n_eval],
                      "test": [i for i in order[n_eval:] if rows[i].all_attractors]}[split]
            if not chosen:
                raise errors.DataError(f"{self.data_path(data_dir)}: its {len(rows)} rows leave the {split} split "
                                       "empty (train is 9% of them, eval 1%)")
            return [rows[i] for i in chosen]

        return self._cached(("rows", data_dir, problem.check_split(split)), split_rows)

    def feature_encoders(self, data_dir=None):
        def make():
            counts = self._data(data_dir)[1]
            return word_vocab.WordEncoder(sorted(counts, key=lambda w: (-counts[w], w)))

        return {"targets": self._cached(("encoder", data_dir), make)}

    def agreement_examples(self, split, data_dir=None):
        """The split's sentences, each an `AgreementExample`, in the split's order."""

        def make():
            encoder = self.feature_encoders(data_dir)["targets"]
            attested = self._data(data_dir)[2]
            out = []
            for row in self._split_rows(split, data_dir):
                other = other_form(row.verb, row.verb_pos, attested)
                other_id = encoder.id_of(other) if other else word_vocab.UNK_ID
                out.append(AgreementExample(encoder.encode(row.prefix), encoder.id_of(row.verb),
                                            None if other_id == word_vocab.UNK_ID else other_id, row.attractors))
            return out

        return self._cached(("examples", data_dir, split), make)

    @property
    def max_eval_length(self):
        lengths = [len(e.prefix) + 2 for key, value in self._cache.items() if key[0] == "examples"
                   and key[2] != "train" for e in value]
        return max(lengths) if lengths else None

    def generate_data(self, data_dir, tmp_dir):
        """Nothing to write: checks that the file is in `data_dir` and readable, and says what it holds."""
        del tmp_dir
        sizes = {split: len(self._split_rows(split, data_dir)) for split in problem.SPLITS}
        print(f"{self.name}: {self.data_path(data_dir)} is readable ({sizes['train']} train, {sizes['eval']} eval, "
              f"{sizes['test']} test sentences; {self.feature_encoders(data_dir)['targets'].vocab_size} ids); "
              "nothing to prepare", file=sys.stderr, flush=True)

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        sequences = [e.prefix + [e.verb, problem.EOS_ID] for e in self.agreement_examples(split, data_dir)]
        mine = sequences[shard_index::num_shards]
        training = split == "train"

        def examples():
            epoch = 0
            while True:
                order = (np.random.default_rng([seed if seed is not None else np.random.randint(2 ** 31), epoch,
                                                shard_index]).permutation(len(mine)) if training
                         else range(len(mine)))
                for i in order:
                    yield {"targets": np.asarray(mine[i], np.int32)}
                if not training:
                    return
                epoch += 1

        return tf.data.Dataset.from_generator(examples, output_signature={"targets": tf.TensorSpec([None], tf.int32)})


def read_rows(path):
    """Reads the agreement file (see the module docstring).

    Returns:
        (list of `Row`, `collections.Counter` of every `sentence` token, `{(word, tag): count}` of the "VBZ"
        and "VBP" words of `orig_sentence`/`pos_sentence`).

    Raises:
        errors.DataError: unreadable, no header with `COLUMNS`, or a row whose values do not fit, naming the
            file and line.
    """
    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

    rows, counts, attested = [], collections.Counter(), collections.Counter()
    reader = None
    try:
        with parallel_text.open_binary(path) as raw, io.TextIOWrapper(raw, encoding="utf-8", newline="") as text:
            reader = csv.reader(text, delimiter="\t")
            header = next(reader, [])
            missing = [c for c in COLUMNS if c not in header]
            if missing:
                raise errors.DataError(f"{path}: its header has no column {', '.join(missing)}; expected Linzen et "
                                       f"al.'s tab-separated header with {', '.join(COLUMNS)}")
            index = [header.index(c) for c in COLUMNS]
            for values in reader:
                if len(values) != len(header):
                    raise errors.DataError(f"{path}: line {reader.line_num} has {len(values)} fields, the header "
                                           f"{len(header)}")
                record = dict(zip(COLUMNS, (values[i] for i in index)))
                rows.append(_row(record, path, reader.line_num))
                counts.update(record["sentence"].split())
                for word, tag in zip(record["orig_sentence"].split(), record["pos_sentence"].split()):
                    if tag in OTHER_TAG:
                        attested[word, tag] += 1
    except (EOFError, zlib.error, OSError, UnicodeDecodeError, csv.Error) as e:
        where = f"line {reader.line_num}" if reader is not None else "its start"
        raise errors.DataError(f"{path}: cannot be read at {where} ({type(e).__name__}: {e})") from None
    if not rows:
        raise errors.DataError(f"{path} has a header and no rows")
    return rows, counts, dict(attested)


def _row(record, path, line):
    tokens = (record["sentence"] or "").split()
    try:
        verb_index = int(record["verb_index"])
        n_intervening, attractors = int(record["n_intervening"]), int(record["n_diff_intervening"])
    except (TypeError, ValueError):
        raise errors.DataError(f"{path}: line {line}: verb_index, n_intervening and n_diff_intervening must be "
                               "integers") from None
    if record["verb_pos"] not in OTHER_TAG or not 1 <= verb_index <= len(tokens):
        raise errors.DataError(f"{path}: line {line}: verb_pos {record['verb_pos']!r} must be VBZ or VBP and "
                               f"verb_index {verb_index} a position of the sentence's {len(tokens)} tokens")
    return Row(" ".join(tokens[:verb_index - 1]), tokens[verb_index - 1], record["verb_pos"], attractors,
               n_intervening == attractors)
