"""LAMBADA (Paperno et al. 2016; the Universal Transformer paper's §3.3): predict a passage's last word.

A language model (no inputs) trained on the dataset's training novels and judged by whether it predicts the
last word of each evaluation passage from the words before it (`t2t_relpos.decoding.lm_tasks.lambada_accuracy`
on `LambadaLm.passages`). Registered names, tensor2tensor's (`problems/lambada.py`), meaning the same:

    lambada_lm          eval: the development passages (4,869), test: the test passages (5,153)
    lambada_lm_control  eval: the development passages, test: the control passages (5,000, of the same novels
                        and shape, not filtered for needing the broad context; tensor2tensor's class meant to
                        evaluate on them, but overrode a property it never read and so evaluated on dev)

The data cannot be downloaded here: the files of `lambada-dataset.tar.gz` (see `ARCHIVE_URL`) are read where
they are in --data_dir, each plain or gzipped (".gz"); nothing is prepared. As its README and tensor2tensor's
code give them: `lambada_development_plain_text.txt`, `lambada_test_plain_text.txt` and
`lambada_control_test_data_plain_text.txt` hold one passage a line, tokenized like the novels, the target
being its last word; `lambada-vocab-2.txt` is the list of 112,745 words "from which the one to be guessed must
be picked", one a line (a tab and a count may follow it: the first field is the word); the archive's
`train-novels.tar` holds `train-novels/<genre>/<book>.txt`, 2,662 novels (over 200M words).

Examples: eval and test are one passage each (its words' ids, then EOS). Train is the novels forever: each
epoch takes them in a seeded random order, each novel's ids (EOS at its end) cut into windows of
`hparams.max_length` tokens (`DEFAULT_WINDOW` without hparams) from a random first offset, the windows mixed
in a shuffle buffer. The vocabulary is the whole word list (every target word is in it; words of the novels
outside it are UNK). tensor2tensor kept the list's first 60,000 lines, which in this alphabetical list are the
words up to about "m", not the most frequent ones.
"""

import collections
import glob
import os
import sys

import numpy as np

from t2t_relpos import errors, registry
from t2t_relpos.problems import problem, word_vocab

ARCHIVE_URL = "http://clic.cimec.unitn.it/lambada/lambada-dataset.tar.gz"
VOCAB_FILE = "lambada-vocab-2.txt"
DEV_FILE = "lambada_development_plain_text.txt"
TEST_FILE = "lambada_test_plain_text.txt"
CONTROL_FILE = "lambada_control_test_data_plain_text.txt"
NOVELS_DIR = "train-novels"
# The training window in tokens when the problem is read without hparams (hparams give `max_length`).
DEFAULT_WINDOW = 256
# Training windows held in the shuffle buffer (a novel's windows come out together without it).
SHUFFLE_WINDOWS = 2048

Passage = collections.namedtuple("Passage", ["context", "target"])
Passage.__doc__ = """One evaluation passage as ids: `context` the words before the last one (a list of ints),
`target` the last word's ids (one id with this problem's word vocabulary)."""


@registry.register_problem("lambada_lm")
class LambadaLm(problem.Problem):
    """LAMBADA as a language model of its training novels, tested on the test passages.

    Evaluated on the development passages; the test split's file is `test_file` (see the module docstring).
    """

    has_inputs = False
    eval_metrics = ("accuracy", "neg_log_perplexity")
    decode_metric = "perplexity"
    test_file = TEST_FILE

    def __init__(self):
        self._cache = {}

    def _cached(self, key, compute):
        if key not in self._cache:
            self._cache[key] = compute()
        return self._cache[key]

    # -- files -------------------------------------------------------------------------------------------
    def split_file(self, split):
        """The passage file of "eval" or "test"."""
        return {"eval": DEV_FILE, "test": self.test_file}[split]

    def missing_help(self, data_dir):
        """Where the files go, in one line."""
        return (f"put the files of lambada-dataset.tar.gz ({ARCHIVE_URL}) in --data_dir={data_dir or 'DIR'}: "
                f"{VOCAB_FILE}, {DEV_FILE}, {self.test_file} (each plain or .gz) and {NOVELS_DIR}/<genre>/<book>.txt "
                f"(extract the archive's train-novels.tar there too)")

    def _file(self, data_dir, name):
        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir: " + self.missing_help(data_dir))
        paths = [p for p in (os.path.join(data_dir, name + gz) for gz in ("", ".gz")) if os.path.isfile(p)]
        if not paths:
            raise errors.DataError(f"{self.name}: no {name} in {data_dir}; " + self.missing_help(data_dir))
        if len(paths) > 1:
            raise errors.DataError(f"both {paths[0]} and {paths[1]} exist; keep one")
        return paths[0]

    def novels(self, data_dir):
        """The training novels' paths, sorted (`<data_dir>/train-novels/<genre>/<book>.txt`, or `.txt.gz`)."""
        if not data_dir:
            raise errors.DataError(f"{self.name} needs --data_dir: " + self.missing_help(data_dir))
        found = sorted(glob.glob(os.path.join(data_dir, NOVELS_DIR, "*", "*.txt"))
                       + glob.glob(os.path.join(data_dir, NOVELS_DIR, "*", "*.txt.gz")))
        if not found:
            raise errors.DataError(f"{self.name}: no {NOVELS_DIR}/<genre>/<book>.txt in {data_dir} (the training "
                                   "novels); " + self.missing_help(data_dir))
        return found

    # -- vocabulary and passages -------------------------------------------------------------------------
    def feature_encoders(self, data_dir=None):
        def read():
            from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

            path = self._file(data_dir, VOCAB_FILE)
            words = list(dict.fromkeys(line.split()[0] for line in parallel_text.read_lines(path) if line.strip()))
            if not words:
                raise errors.DataError(f"{path} has no words; " + self.missing_help(data_dir))
            return word_vocab.WordEncoder(words)

        return {"targets": self._cached(("encoder", data_dir), read)}

    def passages(self, split, data_dir=None):
        """The passages of "eval" or "test", each a `Passage` of ids, in file order; blank lines are skipped."""
        if problem.check_split(split) == "train":
            raise ValueError("the training split is novels, not passages: passages are of 'eval' and 'test'")

        def read():
            from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

            path = self._file(data_dir, self.split_file(split))
            encoder = self.feature_encoders(data_dir)["targets"]
            out = []
            for line in parallel_text.read_lines(path):
                words = line.split()
                if words:
                    out.append(Passage(encoder.encode(" ".join(words[:-1])), encoder.encode(words[-1])))
            if not out:
                raise errors.DataError(f"{path} has no passages; " + self.missing_help(data_dir))
            return out

        return self._cached(("passages", data_dir, split), read)

    @property
    def max_eval_length(self):
        lengths = [len(p.context) + len(p.target) + 1 for key, value in self._cache.items()
                   if key[0] == "passages" for p in value]
        return max(lengths) if lengths else None

    def generate_data(self, data_dir, tmp_dir):
        """Nothing to write: checks that the files are in `data_dir` (a missing one is the one-line error)."""
        del tmp_dir
        size = self.feature_encoders(data_dir)["targets"].vocab_size
        counts = {split: len(self.passages(split, data_dir)) for split in ("eval", "test")}
        print(f"{self.name}: the LAMBADA files in {data_dir} are readable ({len(self.novels(data_dir))} novels, "
              f"{counts['eval']} eval and {counts['test']} test passages, {size} ids); nothing to prepare",
              file=sys.stderr, flush=True)

    # -- examples ----------------------------------------------------------------------------------------
    def dataset_options(self, split, hparams):
        """The training window is `hparams.max_length` (`DEFAULT_WINDOW` without hparams)."""
        del split
        return {"window": hparams.get("max_length") if hparams is not None else None}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index, window=None):
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        spec = {"targets": tf.TensorSpec([None], tf.int32)}
        if split != "train":
            sequences = [p.context + p.target + [problem.EOS_ID] for p in self.passages(split, data_dir)]
            mine = sequences[shard_index::num_shards]
            return tf.data.Dataset.from_generator(
                lambda: ({"targets": np.asarray(s, np.int32)} for s in mine), output_signature=spec)
        window = DEFAULT_WINDOW if window is None else window
        if not isinstance(window, int) or isinstance(window, bool) or window < 1:
            raise errors.HParamsError(f"max_length={window!r}: {self.name} cuts the novels into windows of "
                                      "max_length tokens, so it must be at least 1")
        novels = self.novels(data_dir)[shard_index::num_shards]
        if not novels:
            raise errors.DataError(f"{self.name}: {len(self.novels(data_dir))} training novels are fewer than the "
                                   f"{num_shards} input workers")
        encoder = self.feature_encoders(data_dir)["targets"]
        seed = np.random.randint(2 ** 31) if seed is None else seed
        windows = tf.data.Dataset.from_generator(
            lambda: novel_windows(novels, encoder, window, seed, shard_index), output_signature=spec)
        return windows.shuffle(SHUFFLE_WINDOWS, seed=seed)


def novel_windows(paths, encoder, window, seed, shard_index=0):
    """Training windows of the novels, forever (see the module docstring).

    Args:
        paths: The novels' files.
        encoder: The `WordEncoder`.
        window: Tokens per window.
        seed: Fixes the order of the novels and the offsets, with `shard_index`.

    Yields:
        `{"targets": int32 [length]}`, 1 <= length <= window.
    """
    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

    for epoch in range(sys.maxsize):
        rng = np.random.default_rng([seed, epoch, shard_index])
        for index in rng.permutation(len(paths)):
            ids = [i for line in parallel_text.read_lines(paths[index]) for i in encoder.encode(line)]
            ids = np.asarray(ids + [problem.EOS_ID], np.int32)
            for start in range(int(rng.integers(min(window, len(ids)))), len(ids), window):
                yield {"targets": ids[start:start + window]}


@registry.register_problem("lambada_lm_control")
class LambadaLmControl(LambadaLm):
    """LAMBADA as a language model of its training novels, tested on the control passages.

    Evaluated on the development passages, as `lambada_lm`.
    """

    test_file = CONTROL_FILE
