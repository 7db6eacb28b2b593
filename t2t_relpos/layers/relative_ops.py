"""The two relative terms of Shaw et al. (2018), eq. 5, without an `[n, n, d]` tensor.

A *relation* assigns every (query i, key j) pair one of R labels: the clipped distance clip(j - i, k) + k
(R = 2k + 1) for sequences, or an arbitrary edge label for graphs. Two operations on relations carry the
whole relative computation:

* `relative_logits(x, rel)`: `x[b, h, i, r]` (queries against the R key embeddings) -> `[b, h, i, j]` by
  looking up `r = label(i, j)`. This is the key term `x_i W^Q (a^K_ij)^T`.
* `relative_weights(p, rel)`: attention weights `p[b, h, i, j]` -> `[b, h, i, r]`, the weight each query gives
  to each label (the sum of `p[i, j]` over keys j with `label(i, j) = r`). Multiplied by the R value embeddings
  this is the value term `sum_j p_ij a^V_ij`.

The two are adjoint linear maps, so each is the other's gradient; declaring that with a custom gradient
keeps the backward pass as cheap as the forward one (the generic gradient of a gather scatters element by
element). Extra memory beyond standard attention is one `[b, h, n, n]` lookup result and `[b, h, n, R]`
tensors; nothing scales with `n * n * d`.
"""

from keras import ops


class ClippedRelativePositions:
    """Relations of a sequence: label(i, j) = clip(pos_j - pos_i, -k, k) + k, so R = 2k + 1.

    Args:
        query_positions: int tensor `[Tq]`, absolute positions of the queries (e.g. `index + arange(Tq)`
            when decoding with a cache).
        key_length: int (or scalar tensor) `Tk`; keys sit at positions `0 .. Tk - 1`.
        max_distance: the clipping distance k >= 0. With k = 0 every pair shares one label.
    """

    def __init__(self, query_positions, key_length, max_distance):
        if max_distance < 0:
            raise ValueError(f"max_distance must be >= 0, got {max_distance}")
        self.k = int(max_distance)
        self.num_labels = 2 * self.k + 1
        query_positions = ops.cast(query_positions, "int32")
        num_queries = ops.shape(query_positions)[0]
        self.key_length = key_length
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
            self._edges = ops.stack([distance <= -self.k, distance >= self.k], axis=-1)  # [Tq, Tk, 2]

    def gather(self, x, lean=False):
        """`[B, H, Tq, R]` -> `[B, H, Tq, Tk]`: out[b, h, i, j] = x[b, h, i, label(i, j)].

        Gathering rows of B*H values and transposing is about twice as fast as gathering single elements,
        but briefly holds a second `[B, H, Tq, Tk]` tensor; `lean=True` gathers elements in place, for the
        backward pass, where memory peaks.
        """
        batch, heads, num_queries = ops.shape(x)[0], ops.shape(x)[1], ops.shape(x)[2]
        if lean:
            flat = ops.reshape(x, (batch, heads, num_queries * self.num_labels))
            return ops.take(flat, self._lookup, axis=2)
        rows = ops.reshape(ops.transpose(x, (2, 3, 0, 1)), (num_queries * self.num_labels, batch * heads))
        out = ops.take(rows, self._lookup, axis=0)  # [Tq, Tk, B*H]
        out = ops.reshape(out, (num_queries, self.key_length, batch, heads))
        return ops.transpose(out, (2, 3, 0, 1))

    def bucket_sums(self, p):
        """`[B, H, Tq, Tk]` -> `[B, H, Tq, R]`: out[b, h, i, r] = sum of p[b, h, i, j] with label(i, j) = r."""
        if self.k == 0:
            return ops.sum(p, axis=-1, keepdims=True)
        batch, heads, num_queries = ops.shape(p)[0], ops.shape(p)[1], ops.shape(p)[2]
        flat = ops.reshape(p, (batch, heads, num_queries * self.key_length))
        band = ops.take(flat, self._band_index, axis=2) * ops.cast(self._band_valid, p.dtype)
        edges = ops.einsum("bhqk,qke->bhqe", p, ops.cast(self._edges, p.dtype))
        return ops.concatenate([edges[..., :1], band, edges[..., 1:]], axis=-1)


class EdgeLabels:
    """Relations of a labelled, directed graph: label(i, j) = labels[b, i, j] in [0, num_labels).

    Args:
        labels: int tensor `[B, Tq, Tk]`.
        num_labels: the number of distinct labels R.
    """

    def __init__(self, labels, num_labels):
        self.num_labels = int(num_labels)
        self._labels = ops.cast(labels, "int32")

    def gather(self, x, lean=False):  # pylint: disable=unused-argument
        """`[B, H, Tq, R]` -> `[B, H, Tq, Tk]`."""
        return ops.take_along_axis(x, self._labels[:, None], axis=-1)

    def bucket_sums(self, p):
        """`[B, H, Tq, Tk]` -> `[B, H, Tq, R]`."""
        one_hot = ops.one_hot(self._labels, self.num_labels, dtype=p.dtype)  # [B, Tq, Tk, R]
        return ops.einsum("bhqk,bqkr->bhqr", p, one_hot)


def relative_logits(x, relations):
    """The key term: `[B, H, Tq, R]` -> `[B, H, Tq, Tk]` (gradient: `relations.bucket_sums`)."""

    @ops.custom_gradient
    def lookup(values):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return relations.bucket_sums(upstream)

        return relations.gather(values), grad

    return lookup(x)


# Above this many elements of `[B, H, Tq, Tk]` the backward pass gathers in place (`lean=True`): half the
# speed, but no second tensor of that size where memory peaks. 2^24 floats = 64 MiB.
LEAN_GATHER_ELEMENTS = 2 ** 24


def _gather_for_backward(relations, upstream):
    shape = upstream.shape
    if all(isinstance(d, int) for d in shape):  # Static: choose while tracing.
        size = shape[0] * shape[1] * shape[2] * shape[3]
        return relations.gather(upstream, lean=size > LEAN_GATHER_ELEMENTS)
    size = ops.prod(ops.cast(ops.shape(upstream), "float32"))
    return ops.cond(size > LEAN_GATHER_ELEMENTS, lambda: relations.gather(upstream, lean=True),
                    lambda: relations.gather(upstream))


def relative_weights(p, relations):
    """The value term's weights: `[B, H, Tq, Tk]` -> `[B, H, Tq, R]` (gradient: `relations.gather`)."""

    @ops.custom_gradient
    def buckets(weights):
        def grad(*args, upstream=None):
            if upstream is None:
                (upstream,) = args
            return _gather_for_backward(relations, upstream)

        return relations.bucket_sums(weights), grad

    return buckets(p)
