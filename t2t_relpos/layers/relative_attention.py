"""Relation-aware multi-head attention (Shaw, Uszkoreit and Vaswani 2018)."""

import warnings

import keras
import numpy as np
from keras import ops

from t2t_relpos.layers import cache_ops, relative_ops
from t2t_relpos.layers.checks import check_features, check_int, check_shape, static_shape
from t2t_relpos.layers.checks import concrete as _concrete
from t2t_relpos.layers.checks import keras_mask as _keras_mask
from t2t_relpos.layers.positionwise import flatten_positions

_MASKED_LOGIT = -1e9

# A single key (the first decoding step) is a legitimate softmax over one element.
warnings.filterwarnings("ignore", message="You are using a softmax over axis -1 of a tensor of shape")


@keras.saving.register_keras_serializable(package="t2t_relpos")
class RelationAwareMultiHeadAttention(keras.layers.Layer):
    """Multi-head attention whose keys and values also see the relation between positions.

    Keras 3 and KerasHub have no relation-aware (Shaw et al.) attention; this layer is it, on the TensorFlow,
    JAX and PyTorch backends alike (tests/test_backends.py checks the last two against the same references).

    For head h, query i and key j (eq. 3-4 of the paper):

        e_ij = x_i W^Q (x_j W^K + a^K_ij)^T / sqrt(d_z)
        z_i  = sum_j softmax_j(e_ij) (x_j W^V + a^V_ij)

    The relation of (i, j) is the clipped distance `clip(j - i, k) + k` (2k + 1 learned vectors a^K, a^V),
    or, for graphs, an explicit integer edge label. The terms are computed in the paper's efficient form
    (eq. 5): queries meet the 2k + 1 relation vectors once, and attention weights are summed per relation;
    no `[n, n, d]` tensor is ever built, so extra memory grows like n * (2k + 1), not n^2 * d.

    With `max_relative_position=None` and no `num_edge_labels` it is plain multi-head attention, as used for
    encoder-decoder (cross) attention, where query and key positions are unrelated.

    Incremental decoding: pass `cache` (from `init_cache`) and `cache_index`; new keys and values are written
    into the fixed-size buffer at `cache_index` (static shapes, XLA-friendly) and queries sit at positions
    `cache_index + arange(new_tokens)`, so feeding several tokens at once is as exact as feeding one. A cache
    passed without `cache_index` holds precomputed keys and values (`compute_key_value`), e.g. of an
    encoder output.

    Args:
        num_heads: Number of heads H.
        key_dim: Per-head query/key depth d_z.
        value_dim: Per-head value depth (default `key_dim`).
        output_dim: Output depth (default: the query's last dimension).
        max_relative_position: Clipping distance k >= 0 (k = 0 is valid: one shared relation vector), or
            None for no relative positions.
        num_edge_labels: Number of edge labels R when relations come from the `edge_labels` input instead of
            distances. Exclusive with `max_relative_position`.
        use_relative_keys: Add the a^K term (the paper's Table 3 shows it carries the gain).
        use_relative_values: Add the a^V term.
        heads_share_relative_embeddings: One table shared by all heads (the paper's big model) instead of one
            per head (base model).
        dropout: Dropout rate on the attention weights.
        use_bias: Biases in the four projections (tensor2tensor uses none).
        kernel_initializer, bias_initializer, relative_initializer: Initializers of the projection kernels,
            their biases, and the relation tables.
        seed: Seed of the attention dropout.

    Call arguments:
        query: `[B, Tq, Dq]`.
        value: `[B, Tk, Dv]`; None for self-attention (value = key = query).
        key: `[B, Tk, Dk]`; default `value`.
        query_mask: bool `[B, Tq]`, False at padding (default: the query's Keras mask).
        value_mask: bool `[B, Tk]`, False at padded keys (default: the value's Keras mask).
        key_mask: bool `[B, Tk]`, like `value_mask`.
        attention_mask: bool `[B, Tq, Tk]`, True where query i may attend to key j (any dimension may be 1, to
            broadcast). Masks of another rank or size are refused: a key padding mask `[B, Tk]` is
            `value_mask`.
        use_causal_mask: Mask keys at positions after the query's.
        edge_labels: int `[B, Tq, Tk]` relation labels in `[0, num_edge_labels)`, required with
            `num_edge_labels` and refused without it. Float labels are refused; labels out of range are an
            error in eager calls, but are not checked inside `tf.function` / `jax.jit` (checking there would
            cost a reduction and a host round trip per call), where they read meaningless relations.
        cache: dict with `"key"` `[B, H, S, d_z]` and `"value"` `[B, H, S, d_v]` (heads first: a decoding
            step reads them as they are, without a transpose of the whole buffer).
        cache_index: int scalar, where the new keys/values go in `cache` (None: `cache` is precomputed).
            Writing past the cache's end is an error in eager calls; inside `tf.function` / `jax.jit` it is
            not checked, and XLA clamps the write (size the cache for the longest output).
        return_attention_scores: Also return the attention weights `[B, H, Tq, Tk]`.
        training: Enables dropout.

    Returns:
        `[B, Tq, output_dim]`; then the scores if `return_attention_scores`; then the updated cache if one was
        passed. A query whose keys are all masked gets zeros.

    Example:

    >>> import numpy as np
    >>> layer = RelationAwareMultiHeadAttention(num_heads=2, key_dim=8, max_relative_position=4)
    >>> x = np.random.rand(3, 7, 16).astype("float32")
    >>> tuple(layer(x, use_causal_mask=True).shape)
    (3, 7, 16)

    Attending over a labelled graph (say a dependency tree: 0 = no arc, 1 = head->dependent,
    2 = dependent->head, 3 = self):

    >>> graph = RelationAwareMultiHeadAttention(num_heads=2, key_dim=8, num_edge_labels=4)
    >>> labels = np.zeros((3, 7, 7), "int32")
    >>> labels[:, 0, 1], labels[:, 1, 0] = 1, 2
    >>> labels[:, range(7), range(7)] = 3
    >>> tuple(graph(x, edge_labels=labels).shape)
    (3, 7, 16)
    """

    def __init__(self, num_heads, key_dim, value_dim=None, output_dim=None, max_relative_position=None,
                 num_edge_labels=None, use_relative_keys=True, use_relative_values=True,
                 heads_share_relative_embeddings=False, dropout=0.0, use_bias=False,
                 kernel_initializer="glorot_uniform", bias_initializer="zeros",
                 relative_initializer="glorot_uniform", seed=None, **kwargs):
        super().__init__(**kwargs)
        num_heads = check_int("num_heads", num_heads, 1)
        key_dim = check_int("key_dim", key_dim, 1)
        value_dim = check_int("value_dim", value_dim, 1, allow_none=True)
        output_dim = check_int("output_dim", output_dim, 1, allow_none=True)
        max_relative_position = check_int("max_relative_position", max_relative_position, 0, allow_none=True)
        num_edge_labels = check_int("num_edge_labels", num_edge_labels, 1, allow_none=True)
        if num_edge_labels is not None and max_relative_position is not None:
            raise ValueError("max_relative_position and num_edge_labels are exclusive: relations are "
                             "either clipped distances or explicit edge labels")
        self.num_heads = num_heads
        self.key_dim = key_dim
        self.value_dim = value_dim or key_dim
        self.output_dim = output_dim
        self.max_relative_position = max_relative_position
        self.num_edge_labels = num_edge_labels
        self.use_relative_keys = use_relative_keys
        self.use_relative_values = use_relative_values
        self.heads_share_relative_embeddings = heads_share_relative_embeddings
        self.dropout = dropout
        self.use_bias = use_bias
        self.kernel_initializer = keras.initializers.get(kernel_initializer)
        self.bias_initializer = keras.initializers.get(bias_initializer)
        self.relative_initializer = keras.initializers.get(relative_initializer)
        self.seed = seed
        self.dropout_layer = keras.layers.Dropout(dropout, seed=seed, dtype=self.dtype_policy)
        self.supports_masking = True

    @property
    def _softmax_dtype(self):
        """Masking and softmax in float32 at least: no overflow in 16 bits, full precision in float64."""
        return "float64" if self.compute_dtype == "float64" else "float32"

    @property
    def num_relations(self):
        """R, the number of relations (2k + 1 clipped distances, the number of edge labels, or 0 without any)."""
        if self.num_edge_labels is not None:
            return self.num_edge_labels
        if self.max_relative_position is not None:
            return 2 * self.max_relative_position + 1
        return 0

    def build(self, query_shape, value_shape=None, key_shape=None):
        value_shape = value_shape or query_shape
        key_shape = key_shape or value_shape
        for name, shape in (("query", query_shape), ("value", value_shape), ("key", key_shape)):
            check_features(name, None, shape=shape)
        for name, shape in (("value", value_shape), ("key", key_shape)):
            if shape[-1] is None:  # The projections' fan-in, hence the kernels' shapes.
                raise ValueError(f"{name} must have a known depth to build the layer, got shape {list(shape)}")
        heads = self.num_heads
        out_dim = self.output_dim or query_shape[-1]
        self._out_dim = out_dim

        def dense(name, fan_in, fan_out):
            kernel = self.add_weight(name=f"{name}_kernel", shape=(fan_in, fan_out),
                                     initializer=self.kernel_initializer)
            bias = (self.add_weight(name=f"{name}_bias", shape=(fan_out,), initializer=self.bias_initializer)
                    if self.use_bias else None)
            return kernel, bias

        # Kernels are stored 2-D ([in, heads * depth]) so initializers see the true fan-in and fan-out.
        self._query = dense("query", query_shape[-1], heads * self.key_dim)
        self._key = dense("key", key_shape[-1], heads * self.key_dim)
        self._value = dense("value", value_shape[-1], heads * self.value_dim)
        self._output = dense("output", heads * self.value_dim, out_dim)

        def table(name, depth):
            shape = (self.num_relations, depth)
            if not self.heads_share_relative_embeddings:
                shape = (heads,) + shape
            return self.add_weight(name=name, shape=shape, initializer=self.relative_initializer)

        self.relative_key_embeddings = None
        self.relative_value_embeddings = None
        if self.num_relations:
            if self.use_relative_keys:
                self.relative_key_embeddings = table("relative_key_embeddings", self.key_dim)
            if self.use_relative_values:
                self.relative_value_embeddings = table("relative_value_embeddings", self.value_dim)
        self.dropout_layer.build(None)

    # -- projections -------------------------------------------------------------------------------------
    def _project(self, x, weights, depth, batch_and_length=None):
        """`[B, T, D]` -> `[B, H, T, depth]`: heads first, so every attention product is a batched matmul.

        One 2-D matmul over the flattened positions (`positionwise`); `batch_and_length`: x's `[B, T]`, when
        the caller has read them already.
        """
        kernel, bias = weights
        y = ops.matmul(flatten_positions(x), kernel)
        if bias is not None:
            y = y + bias
        batch, length = ops.shape(x)[:2] if batch_and_length is None else batch_and_length
        y = ops.reshape(y, (batch, length, self.num_heads, depth))
        return ops.transpose(y, (0, 2, 1, 3))

    def compute_key_value(self, value, key=None):
        """Projected keys and values of `value` (and `key`), to reuse across calls as a static `cache`."""
        if not self.built:
            raise ValueError(f"{self.name} has no weights yet: call it once, or build it with "
                             "`build(query_shape, value_shape)`, before compute_key_value")
        key = value if key is None else key
        return {"key": self._project(key, self._key, self.key_dim),
                "value": self._project(value, self._value, self.value_dim)}

    def init_cache(self, batch_size, max_length, dtype=None):
        """An empty self-attention cache of `max_length` positions."""
        dtype = dtype or self.compute_dtype
        return {"key": ops.zeros((batch_size, self.num_heads, max_length, self.key_dim), dtype),
                "value": ops.zeros((batch_size, self.num_heads, max_length, self.value_dim), dtype)}

    # -- attention ---------------------------------------------------------------------------------------
    def call(self, query, value=None, key=None, query_mask=None, value_mask=None, key_mask=None,
             attention_mask=None, use_causal_mask=False, edge_labels=None, cache=None, cache_index=None,
             return_attention_scores=False, training=None):
        if value is None:
            value = query
        if key is None:
            key = value
        if query_mask is None:
            query_mask = _keras_mask(query)
        if value_mask is None and cache is None:
            value_mask = _keras_mask(value)
        if self.num_edge_labels is not None and edge_labels is None:
            raise ValueError("this layer was built with num_edge_labels; pass edge_labels [B, Tq, Tk]")
        if edge_labels is not None:
            edge_labels = self._checked_edge_labels(edge_labels)
        self._check_inputs(query, value, key, projected=cache is None or cache_index is not None)
        self._check_shapes(query, value, cache, query_mask, value_mask, key_mask, attention_mask, edge_labels)

        # The dynamic dimensions, each read once (a read is a few graph ops); keys and values have one length.
        batch, num_queries = ops.shape(query)[:2]
        q = self._project(query, self._query, self.key_dim, (batch, num_queries))
        if cache is not None and cache_index is None:
            k, v = cache["key"], cache["value"]
        else:
            memory = (batch, num_queries) if value is query else ops.shape(value)[:2]
            k = self._project(key, self._key, self.key_dim, memory)
            v = self._project(value, self._value, self.value_dim, memory)
            if cache is not None:
                k = cache_ops.write(cache["key"], ops.cast(k, cache["key"].dtype), cache_index, axis=2)
                v = cache_ops.write(cache["value"], ops.cast(v, cache["value"].dtype), cache_index, axis=2)
                cache = {"key": k, "value": v}
        num_keys = ops.shape(k)[2] if cache is not None else memory[1]
        first = 0 if cache_index is None else cache_index
        query_positions = first + ops.arange(num_queries, dtype="int32")
        relations = self._relations(query_positions, num_keys, edge_labels, use_causal_mask)

        q = q * ops.cast(self.key_dim ** -0.5, q.dtype)
        logits = ops.matmul(q, ops.swapaxes(k, -1, -2))  # [B, H, Tq, Tk]
        if relations is not None and self.relative_key_embeddings is not None:
            table = ops.cast(self.relative_key_embeddings, q.dtype)  # [(H,) R, d_z]
            query_relations = ops.matmul(q, ops.swapaxes(table, -1, -2))  # [B, H, Tq, R]
            logits = relative_ops.relative_logits(logits, query_relations, relations)

        mask = self._combined_mask(query_mask, value_mask, key_mask, attention_mask, use_causal_mask,
                                   query_positions, num_keys, written=cache_index is not None)
        logits = ops.cast(logits, self._softmax_dtype)
        if mask is not None:
            logits = ops.where(mask[:, None], logits, _MASKED_LOGIT)
        scores = ops.cast(ops.softmax(logits, axis=-1), self.compute_dtype)
        weights = self.dropout_layer(scores, training=training)

        if relations is not None and self.relative_value_embeddings is not None:
            table = ops.cast(self.relative_value_embeddings, weights.dtype)  # [(H,) R, d_v]
            out = relative_ops.relative_values(weights, v, table, relations)  # [B, H, Tq, d_v]
        else:
            out = ops.matmul(weights, v)
        if mask is not None:
            # Softmax over all-masked keys is uniform, not zero: zero those rows explicitly.
            has_keys = ops.cast(ops.any(mask, axis=-1), out.dtype)  # [B, Tq]
            out = out * has_keys[:, None, :, None]
            scores = scores * has_keys[:, None, :, None]

        kernel, bias = self._output
        out = ops.reshape(ops.transpose(out, (0, 2, 1, 3)), (-1, self.num_heads * self.value_dim))
        out = ops.reshape(ops.matmul(out, kernel), (batch, num_queries, kernel.shape[1]))
        if bias is not None:
            out = out + bias

        results = [out]
        if return_attention_scores:
            results.append(scores)
        if cache is not None:
            results.append(cache)
        return results[0] if len(results) == 1 else tuple(results)

    def _check_inputs(self, query, value, key, projected):
        """Refuses a query, value or key that is not `[batch, length, depth]` of the depth the layer was built
        for (a query of rank 2 ended in a reshape's traceback); value and key only where they are projected."""
        inputs = [("query", query, self._query)]
        if projected:
            inputs += [("value", value, self._value), ("key", key, self._key)]
        for name, x, (kernel, _) in inputs:
            check_features(name, x, kernel.shape[0],
                           hint=f"this layer was built for a {name} of depth {kernel.shape[0]}")

    @staticmethod
    def _check_shapes(query, value, cache, query_mask, value_mask, key_mask, attention_mask, edge_labels):
        """Refuses masks and labels of another shape than the call's, where shapes are static.

        An `attention_mask` of another rank could broadcast into a valid but different mask (a `[B, Tk]`
        padding mask over a batch of Tq examples would give query i the padding of example i).
        """
        batch, num_queries = static_shape(query)[:2]
        num_keys = static_shape(cache["key"])[2] if cache is not None else static_shape(value)[1]
        for name, mask, length in (("query_mask", query_mask, ("Tq", num_queries)),
                                   ("value_mask", value_mask, ("Tk", num_keys)),
                                   ("key_mask", key_mask, ("Tk", num_keys))):
            if mask is not None:
                check_shape(name, mask, [("B", batch), length], broadcast=True)
        if attention_mask is not None:
            check_shape("attention_mask", attention_mask, [("B", batch), ("Tq", num_queries), ("Tk", num_keys)],
                        broadcast=True, hint="a padding mask of the keys [B, Tk] is `value_mask`")
        if edge_labels is not None:
            check_shape("edge_labels", edge_labels, [("B", batch), ("Tq", num_queries), ("Tk", num_keys)])

    def _checked_edge_labels(self, labels):
        """Refuses labels this layer cannot read; their range only where that costs nothing (eager calls).

        Inside a compiled function an out-of-range label is not detected: it reads a meaningless relation.
        """
        if self.num_edge_labels is None:
            kind = (f"relative positions (max_relative_position={self.max_relative_position})"
                    if self.max_relative_position is not None else "no relations")
            raise ValueError(f"edge_labels given to a layer with {kind}, which would ignore them; build it with "
                             "num_edge_labels=R to attend over labelled edges")
        if not hasattr(labels, "dtype"):
            labels = np.asarray(labels)
        dtype = keras.backend.standardize_dtype(labels.dtype)
        if "int" not in dtype:
            raise ValueError(f"edge_labels must be integers in [0, {self.num_edge_labels}), got {dtype} (casting "
                             "would silently truncate them)")
        values = _concrete(labels)
        if values is not None and values.size and not 0 <= values.min() <= values.max() < self.num_edge_labels:
            bad = values.min() if values.min() < 0 else values.max()
            raise ValueError(f"edge_labels must be in [0, num_edge_labels={self.num_edge_labels}), got {bad}")
        return labels

    def _relations(self, query_positions, num_keys, edge_labels, use_causal_mask):
        if self.relative_key_embeddings is None and self.relative_value_embeddings is None:
            return None
        if self.num_edge_labels is not None:
            return relative_ops.EdgeLabels(edge_labels, self.num_edge_labels)
        return relative_ops.ClippedRelativePositions(query_positions, num_keys, self.max_relative_position,
                                                     causal=use_causal_mask)

    @staticmethod
    def _combined_mask(query_mask, value_mask, key_mask, attention_mask, use_causal_mask, query_positions,
                       num_keys, written):
        """AND of all masks, broadcastable to `[B, Tq, Tk]`, or None.

        `written`: keys live in a cache buffer, of which only positions before the last query are filled.
        """
        parts = []
        key_positions = ops.arange(num_keys, dtype="int32")
        if query_mask is not None:
            parts.append(ops.cast(query_mask, "bool")[:, :, None])
        for key_side in (value_mask, key_mask):
            if key_side is not None:
                parts.append(ops.cast(key_side, "bool")[:, None, :])
        if attention_mask is not None:
            parts.append(ops.cast(attention_mask, "bool"))
        if use_causal_mask:
            parts.append((query_positions[:, None] >= key_positions[None, :])[None])
        elif written:
            parts.append((key_positions <= query_positions[-1])[None, None, :])
        if not parts:
            return None
        mask = parts[0]
        for part in parts[1:]:
            mask = ops.logical_and(mask, part)
        return mask

    def compute_output_shape(self, query_shape, value_shape=None, key_shape=None):
        return tuple(query_shape[:-1]) + (self.output_dim or query_shape[-1],)

    def compute_output_spec(self, query, value=None, key=None, return_attention_scores=False, cache=None,
                            **kwargs):
        out = keras.KerasTensor(self.compute_output_shape(query.shape), dtype=self.compute_dtype)
        results = [out]
        if return_attention_scores:
            num_keys = cache["key"].shape[2] if cache is not None else (value if value is not None
                                                                        else query).shape[1]
            shape = (query.shape[0], self.num_heads, query.shape[1], num_keys)
            results.append(keras.KerasTensor(shape, dtype=self.compute_dtype))
        if cache is not None:
            results.append({name: keras.KerasTensor(t.shape, dtype=t.dtype) for name, t in cache.items()})
        return results[0] if len(results) == 1 else tuple(results)

    def get_config(self):
        config = super().get_config()
        config.update({
            "num_heads": self.num_heads,
            "key_dim": self.key_dim,
            "value_dim": self.value_dim,
            "output_dim": self.output_dim,
            "max_relative_position": self.max_relative_position,
            "num_edge_labels": self.num_edge_labels,
            "use_relative_keys": self.use_relative_keys,
            "use_relative_values": self.use_relative_values,
            "heads_share_relative_embeddings": self.heads_share_relative_embeddings,
            "dropout": self.dropout,
            "use_bias": self.use_bias,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "bias_initializer": keras.initializers.serialize(self.bias_initializer),
            "relative_initializer": keras.initializers.serialize(self.relative_initializer),
            "seed": self.seed,
        })
        return config
