"""What the models check of their hparams and features, and how they build once whatever is called first."""

import collections.abc

import keras
import numpy as np

from t2t_relpos import errors
from t2t_relpos.layers.checks import check_shape


def architecture_arguments(hparams, names):
    """The constructor arguments `names`, read from `hparams`, where every one of them must be.

    A missing field would otherwise reach the constructor as None: `relative_keys=None` is a model without
    relative keys, which nobody asked for.
    """
    missing = [name for name in names if name not in hparams]
    if missing:
        raise errors.HParamsError(f"hparams lack {', '.join(missing)}: start from a registered set "
                                  "(`registry.hparams(name)`) and override what differs")
    return {name: hparams.get(name) for name in names}


def check_features(features, names):
    """Refuses features that are not a dict holding integer ids `[B, T]` under `names`, with one batch."""
    if not isinstance(features, collections.abc.Mapping):
        raise ValueError(f"features must be a dict with {', '.join(repr(n) for n in names)}, "
                         f"got a {type(features).__name__}")
    batches = {}
    for name in names:
        if name not in features:
            raise ValueError(f"features lack {name!r} (they hold {sorted(features)})")
        batches[name] = check_ids(f"features[{name!r}]", features[name]).shape[0]
    if len({batch for batch in batches.values() if batch is not None}) > 1:
        raise ValueError("features of different batch sizes: "
                         + ", ".join(f"{name} {batch}" for name, batch in batches.items()))


def check_ids(name, ids):
    """Refuses ids that are not integers of rank 2 (`[B, T]`): float ids would be truncated, silently."""
    if not hasattr(ids, "dtype"):
        ids = np.asarray(ids)
    dtype = keras.backend.standardize_dtype(ids.dtype)
    if "int" not in dtype:
        raise ValueError(f"{name} must be integer ids, got {dtype}")
    check_shape(name, ids, [("B", None), ("T", None)])
    return ids


def build_once(layer, *shapes):
    """Builds `layer` unless it is built: sub-layers first used on their own are built already."""
    if not layer.built:
        layer.build(*shapes)


def ensure_built(model):
    """Builds `model` before one of its methods other than `__call__` (`encode`, `decode_step` ...) runs.

    Otherwise those methods build the sub-layers they touch, the model stays unbuilt, and a `.keras` file
    saved from it holds no weights.
    """
    if not model.built:
        model.build()
