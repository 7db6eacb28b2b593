"""Argument checks shared by the layers: Keras masks, the shapes of masks and labels, integer arguments.

Shapes are checked where they are static (always in eager calls, and for the known dimensions of a traced
call), so the checks cost nothing at run time. A wrong shape would otherwise either end in a backend traceback
far from the argument, or, worse, broadcast into a valid but different mask.
"""

import numbers

import numpy as np
from keras import ops

try:  # Keras keeps masks beside tensors that cannot carry attributes (JAX arrays, also under jax.jit).
    from keras.src.backend import get_keras_mask as keras_mask
except ImportError:  # pragma: no cover
    def keras_mask(x):
        return getattr(x, "_keras_mask", None)


def concrete(x):
    """`x` as a numpy array when it holds values (eager execution), None inside a trace or compilation."""
    if isinstance(x, (np.ndarray, numbers.Number)):
        return np.asarray(x)
    try:
        return ops.convert_to_numpy(x)
    except (TypeError, RuntimeError):  # Symbolic: TensorFlow raises NotImplementedError (a RuntimeError),
        # JAX a TypeError.
        return None


def static_shape(x):
    """The shape of `x` as a tuple of ints or None (unknown), for tensors, arrays and nested lists; None when
    even its rank is unknown (a traced tensor of unknown rank)."""
    shape = getattr(x, "shape", None)
    return shape_tuple(np.shape(x) if shape is None else shape)


def check_shape(name, x, expected, broadcast=False, hint=""):
    """Refuses `x` unless its shape is `expected` (names and sizes; a size None is not checked).

    `expected`: a sequence of (dimension name, size or None). With `broadcast`, a dimension of 1 also fits.
    """
    check_known_shape(name, static_shape(x), expected, broadcast, hint)


def shape_tuple(shape):
    """A shape as `build` receives it (tuple, list, TensorShape) as a tuple of ints or None; None when its
    rank is unknown."""
    if shape is None or getattr(shape, "rank", 0) is None:
        return None
    return tuple(None if d is None else int(d) for d in shape)


def check_known_shape(name, shape, expected, broadcast=False, hint=""):
    """`check_shape` for a shape already read (a tuple of ints or None; None: nothing known, not checked)."""
    if shape is None:
        return
    names = ", ".join(dim for dim, _ in expected)
    known = [size for _, size in expected]
    fits = len(shape) == len(expected) and all(
        got is None or size is None or got == size or (broadcast and got == 1)
        for got, size in zip(shape, known))
    if not fits:
        sizes = ", ".join("?" if size is None else str(size) for size in known)
        sizes = "" if all(size is None for size in known) else f" = [{sizes}]"
        also = " (a dimension may be 1, to broadcast)" if broadcast else ""
        raise ValueError(f"{name} must be [{names}]{sizes}{also}, got shape {list(shape)}"
                         + (f"; {hint}" if hint else ""))


def check_features(name, x, depth=None, hint="", shape=None):
    """Refuses anything but a rank-3 `[batch, length, depth]` input `x` (of depth `depth` where given).

    `shape`: the shape as `build` receives it (tuple, list, TensorShape), instead of `x`. A query of rank 1 or
    2, or embeddings narrower than the layer, would otherwise end in a reshape or a broadcast deep inside it.
    """
    shape = shape_tuple(shape) if x is None else static_shape(x)
    check_known_shape(name, shape, [("batch", None), ("length", None), ("depth", depth)], hint=hint)


def check_int(name, value, minimum, allow_none=False):
    """Refuses anything but an int >= `minimum` (floats and bools included), or None if `allow_none`."""
    if value is None and allow_none:
        return None
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < minimum:
        extra = " or None" if allow_none else ""
        raise ValueError(f"{name} must be an integer >= {minimum}{extra}, got {value!r}")
    return int(value)


def check_positive(name, value):
    """Refuses anything but a finite number > 0 (NaN included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < float(value) < float("inf"):
        raise ValueError(f"{name} must be a finite number > 0, got {value!r}")
    return value
