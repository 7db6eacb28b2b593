"""The problem base class: what a user's `_dataset` may yield."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.problems import problem


class _Yields(problem.Problem):
    def __init__(self, dtype):
        self.dtype = dtype

    def feature_encoders(self, data_dir=None):
        encoder = problem.SymbolEncoder("ab")
        return {"inputs": encoder, "targets": encoder}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        ids = np.array([2, 3, 1], self.dtype)
        return tf.data.Dataset.from_tensors({"inputs": ids, "targets": ids[::-1].copy()})


def test_integer_ids_of_any_width_become_int32():
    example = next(iter(_Yields(np.int64).dataset("eval")))
    assert example["inputs"].dtype == tf.int32 and example["inputs"].numpy().tolist() == [2, 3, 1]


def test_non_integer_features_are_a_clear_error():
    with pytest.raises(errors.DataError, match="_Yields._dataset must yield"):
        _Yields(np.float32).dataset("eval")
