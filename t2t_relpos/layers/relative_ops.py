"""The two relative terms of Shaw et al. (2018), eq. 5, without an `[n, n, d]` tensor.

A *relation* assigns every (query i, key j) pair one of R labels: the clipped distance clip(j - i, k) + k
(R = 2k + 1) for sequences, or an arbitrary edge label for graphs. Two operations on relations carry the
whole relative computation:

* `relative_logits(logits, x, rel)`: adds `x[b, h, i, r]` (queries against the R key embeddings) to the
  logits `[b, h, i, j]`, looking up `r = label(i, j)`. This is the key term `x_i W^Q (a^K_ij)^T`.
* `relative_values(p, v, a, rel)`: the attention output `sum_j p_ij (v_j + a^V_ij)`, where the value term is
  `bucket_sums(p) @ a^V`: the bucket sums give the weight each query puts on each label (the sum of `p[i, j]`
  over keys j with `label(i, j) = r`).

The lookup and the bucket sums are adjoint linear maps, so each is the other's gradient; declaring that with
a custom gradient keeps the backward pass as cheap as the forward one (the generic gradient of a gather
scatters element by element). The index tensors of a relation object enter each custom-gradient function as
inputs (with no gradient), never as closed-over values: JAX traces a custom gradient separately from the
function around it (e.g. under `jax.grad(jax.jit(f))`), and a tensor captured from the surrounding trace
would not exist there. Beyond standard attention nothing of size `[b, h, n, n]` is kept, only
`[b, h, n, R]` tensors; nothing scales with `n * n * d`.

Cost: every `[b, h, n, n]` pass is memory traffic, and at long lengths it is what relative attention adds to
a training step. So the lookup is fused with the addition it feeds (one read and one write of the logits or of
the weights' gradient; on the TensorFlow backend by XLA), and the bucket sums read their input once for the
row total and at most once more for one edge, gathering only the `2k - 1` band entries of each row. On JAX,
where XLA compiles the whole step, the row sums and the bucket sums are kept out of their consumers' fusions
(`fused.materialized`): on a GPU, fused into a concatenation, each edge sum was one thread's serial loop.
"""

import keras
from keras import ops

from t2t_relpos.layers.fused import fused as _fused
from t2t_relpos.layers.fused import materialized


def _read_flat(x, index):
    """`x[b, h, :, :]` flattened and read at `index` (any int shape): `[B, H] + index.shape`."""
    shape = ops.shape(x)
    return ops.take(ops.reshape(x, (shape[0], shape[1], -1)), index, axis=2)


_take_flat = _fused(_read_flat)


@_fused
def _add_take_flat(base, x, index):
    """`base + _read_flat(x, index)` in one pass."""
    return base + _read_flat(x, index)


@_fused
def _add_take_labels(base, x, labels):
    """`base [B, H, Tq, Tk]` plus `x [B, H, Tq, R]` read at `labels [B, Tq, Tk]` along the last axis."""
    return base + ops.take_along_axis(x, labels[:, None], axis=-1)


class ClippedRelativePositions:
    """Relations of a sequence: label(i, j) = clip(pos_j - pos_i, -k, k) + k, so R = 2k + 1.

    Args:
        query_positions: int tensor `[Tq]`, absolute positions of the queries (e.g. `index + arange(Tq)`
            when decoding with a cache).
        key_length: int (or scalar tensor) `Tk`; keys sit at positions `0 .. Tk - 1`.
        max_distance: the clipping distance k >= 0. With k = 0 every pair shares one label.
        causal: the caller promises that whatever `bucket_sums` is given is zero at keys after the query
            (attention weights and logit gradients under a causal mask; rows whose keys are all masked are
            exempt when the caller zeroes their output). Then no key is right of the band and the bucket
            sums need one pass fewer over `[B, H, Tq, Tk]`.
    """

    def __init__(self, query_positions, key_length, max_distance, causal=False):
        if max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {max_distance}")
        self.k = int(max_distance)
        self.num_labels = 2 * self.k + 1
        self.causal = causal
        query_positions = ops.cast(query_positions, "int32")
        num_queries = ops.shape(query_positions)[0]
        key_positions = ops.arange(key_length, dtype="int32")
        distance = key_positions[None, :] - query_positions[:, None]  # [Tq, Tk]
        labels = ops.clip(distance, -self.k, self.k) + self.k
        # Row i of the lookup reads x[.., i, :] flattened: index i * R + label.
        query_rows = ops.arange(num_queries, dtype="int32")[:, None]
        self._lookup = query_rows * self.num_labels + labels  # [Tq, Tk]
        if self.k > 0:
            # Labels strictly inside (-k, k) are single keys j = pos_i + r: gather them (band) ...
            offsets = ops.arange(-self.k + 1, self.k, dtype="int32")[None, :]  # [1, 2k - 1]
            band_keys = query_positions[:, None] + offsets  # [Tq, 2k - 1]
            self._band_valid = ops.logical_and(band_keys >= 0, band_keys < key_length)
            self._band_index = query_rows * key_length + ops.clip(band_keys, 0, key_length - 1)
            # ... and the two clipped edges collect everything at distance <= -k or >= k.
            self._left = distance <= -self.k  # [Tq, Tk]
            self._right = distance >= self.k

    _TENSORS = ("_lookup", "_band_valid", "_band_index", "_left", "_right")

    def tensors(self):
        """The index tensors, to pass into a custom-gradient function (see `with_tensors`)."""
        return tuple(getattr(self, name) for name in self._TENSORS if hasattr(self, name))

    def with_tensors(self, tensors):
        """A copy reading `tensors` (as returned by `tensors()`, possibly re-traced) instead of its own."""
        return _rebound(self, [n for n in self._TENSORS if hasattr(self, n)], tensors)

    def add_gathered(self, base, x):
        """`base [B, H, Tq, Tk]` plus the lookup of `x [B, H, Tq, R]`: `base[b, h, i, j] + x[b, h, i, label(i, j)]`.

        The looked-up tensor is never in memory on its own.
        """
        return _add_take_flat(base, x, self._lookup)

    def bucket_sums(self, p):
        """`[B, H, Tq, Tk]` -> `[B, H, Tq, R]`: out[b, h, i, r] = sum of p[b, h, i, j] with label(i, j) = r.

        Each reduction over the keys, and the result, is `materialized`: left to XLA on a GPU, the edge sums
        were fused into the concatenation below (each output thread summing a row alone) and the whole
        result into the transposes and products that read it, which cost more than the rest of the relative
        terms together.
        """
        if self.k == 0:
            return ops.sum(p, axis=-1, keepdims=True)
        band = _take_flat(p, self._band_index) * ops.cast(self._band_valid, p.dtype)  # [B, H, Tq, 2k - 1]
        if keras.backend.standardize_dtype(p.dtype) not in ("float32", "float64"):
            # In 16 bits a difference of sums could cancel a small edge away: sum each edge on its own.
            left = materialized(_masked_sum(p, self._left))
            right = ops.zeros_like(left) if self.causal else materialized(_masked_sum(p, self._right))
        else:
            # The row total is a cheap reduction; less the band it is both edges, so one edge is a difference.
            edges = materialized(ops.sum(p, axis=-1, keepdims=True)) - ops.sum(band, axis=-1, keepdims=True)
            left = edges if self.causal else materialized(_masked_sum(p, self._left))
            right = ops.zeros_like(edges) if self.causal else edges - left
        return materialized(ops.concatenate([left, band, right], axis=-1))


def _masked_sum(p, mask):
    """`sum_j p[..., i, j]` over the keys where `mask[i, j]`: `[B, H, Tq, Tk]` -> `[B, H, Tq, 1]`."""
    return ops.sum(p * ops.cast(mask, p.dtype), axis=-1, keepdims=True)


class EdgeLabels:
    """Relations of a labelled, directed graph: label(i, j) = labels[b, i, j] in [0, num_labels).

    Args:
        labels: int tensor `[B, Tq, Tk]`.
        num_labels: the number of distinct labels R.
    """

    def __init__(self, labels, num_labels):
        self.num_labels = int(num_labels)
        self._labels = ops.cast(labels, "int32")

    def tensors(self):
        """The label tensor, to pass into a custom-gradient function (see `with_tensors`)."""
        return (self._labels,)

    def with_tensors(self, tensors):
        """A copy reading `tensors` (as returned by `tensors()`) instead of its own."""
        return _rebound(self, ["_labels"], tensors)

    def add_gathered(self, base, x):
        """`base [B, H, Tq, Tk]` plus the lookup of `x [B, H, Tq, R]` by label."""
        return _add_take_labels(base, x, self._labels)

    def bucket_sums(self, p):
        """`[B, H, Tq, Tk]` -> `[B, H, Tq, R]`."""
        one_hot = ops.one_hot(self._labels, self.num_labels, dtype=p.dtype)  # [B, Tq, Tk, R]
        return ops.einsum("bhqk,bqkr->bhqr", p, one_hot)


def _rebound(relations, names, tensors):
    """A shallow copy of `relations` with the attributes `names` set to `tensors`."""
    copy = object.__new__(type(relations))
    copy.__dict__.update(relations.__dict__)
    for name, tensor in zip(names, tensors, strict=True):
        setattr(copy, name, tensor)
    return copy


def _table_gradient(per_relation, upstream, shared):
    """`sum over b, q of per_relation[b, h, q, :]^T upstream[b, h, q, :]`: `[H, R, d_v]`, or `[R, d_v]` if `shared`.

    On JAX one product sums over examples and queries at once: written as a batched product per example,
    like d_v's beside it, XLA merges the two into one product over the concatenation of the weights and the
    bucket sums, copying the weights. TensorFlow's CPU einsum transposes its operands first and took 4x as
    long as the products per example and their sum (1.96 against 7.57 ms at 16 x 8 heads x 256 queries).
    """
    if keras.backend.backend() == "jax":
        return ops.einsum("bhqr,bhqd->rd" if shared else "bhqr,bhqd->hrd", per_relation, upstream)
    per_example = ops.matmul(ops.swapaxes(per_relation, -1, -2), upstream)  # [B, H, R, d_v]
    return ops.sum(per_example, axis=(0, 1) if shared else 0)


def _upstream(args, upstream):
    """The incoming gradient, however the backend passes it to a custom gradient."""
    return args[0] if upstream is None else upstream


def relative_logits(logits, x, relations):
    """The key term added to the logits: `logits [B, H, Tq, Tk] + x [B, H, Tq, R]` looked up by relation.

    Gradients: the logits' passes through; x's is `relations.bucket_sums` of it.
    """

    @ops.custom_gradient
    def add_lookup(base, values, *index):
        bound = relations.with_tensors(index)

        def grad(*args, upstream=None):
            upstream = _upstream(args, upstream)
            return (upstream, bound.bucket_sums(upstream)) + (None,) * len(index)

        return bound.add_gathered(base, values), grad

    return add_lookup(logits, x, *relations.tensors())


def relative_values(weights, values, table, relations):
    """Attention output with the value term: `weights @ values + bucket_sums(weights) @ table`.

    `z_i = sum_j p_ij (v_j + a^V_ij)` of eq. 3, in the efficient form. Written as one function so that the
    weights' gradient, `upstream @ values^T` plus the lookup of `upstream @ table^T`, is summed in the same
    pass as the lookup.

    Args:
        weights: `[B, H, Tq, Tk]` attention weights.
        values: `[B, H, Tk, d_v]`.
        table: `[H, R, d_v]` value embeddings per head, or `[R, d_v]` shared by all heads.
        relations: `ClippedRelativePositions` or `EdgeLabels` of the `[Tq, Tk]` pairs.

    Returns:
        `[B, H, Tq, d_v]`.
    """

    @ops.custom_gradient
    def attend(p, v, a, *index):
        bound = relations.with_tensors(index)
        per_relation = bound.bucket_sums(p)  # [B, H, Tq, R]
        out = ops.matmul(p, v) + ops.matmul(per_relation, a)

        def grad(*args, upstream=None):
            upstream = _upstream(args, upstream)
            d_p = bound.add_gathered(ops.matmul(upstream, ops.swapaxes(v, -1, -2)),
                                     ops.matmul(upstream, ops.swapaxes(a, -1, -2)))
            d_v = ops.matmul(ops.swapaxes(p, -1, -2), upstream)
            d_a = _table_gradient(per_relation, upstream, shared=len(a.shape) == 2)
            return (d_p, d_v, d_a) + (None,) * len(index)

        return out, grad

    return attend(weights, values, table, *relations.tensors())
