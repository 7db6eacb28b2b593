"""Plain-numpy references of relation-aware attention, for the tests.

`reference_attention` is eq. 3-4 of Shaw et al. (2018) written as loops over heads, queries and keys.
`materialized_attention` is the original (inefficient) formulation in keras.ops: it gathers the
`[Tq, Tk, d]` tables a^K_ij and a^V_ij, so plain autodiff gives reference gradients.
"""

import numpy as np
from keras import ops


def layer_weights(layer):
    """The layer's weights as numpy arrays, reshaped per head."""
    heads, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim

    def kernel(weights, depth):
        k, b = weights
        k = ops.convert_to_numpy(k)
        b = np.zeros(k.shape[-1], k.dtype) if b is None else ops.convert_to_numpy(b)
        return k.reshape(k.shape[0], heads, depth), b.reshape(heads, depth)

    wo, bo = layer._output  # pylint: disable=protected-access
    weights = {
        "q": kernel(layer._query, dk),  # pylint: disable=protected-access
        "k": kernel(layer._key, dk),  # pylint: disable=protected-access
        "v": kernel(layer._value, dv),  # pylint: disable=protected-access
        "o": (ops.convert_to_numpy(wo).reshape(heads, dv, -1),
              np.zeros(wo.shape[-1]) if bo is None else ops.convert_to_numpy(bo)),
        "ak": None,
        "av": None,
    }
    for name, table in (("ak", layer.relative_key_embeddings), ("av", layer.relative_value_embeddings)):
        if table is not None:
            table = ops.convert_to_numpy(table)
            if layer.heads_share_relative_embeddings:
                table = np.broadcast_to(table, (heads,) + table.shape)
            weights[name] = table
    return weights


def relation_labels(num_queries, num_keys, k, first_position=0):
    """clip(j - i, k) + k for query positions first_position + i."""
    i = first_position + np.arange(num_queries)[:, None]
    j = np.arange(num_keys)[None, :]
    return np.clip(j - i, -k, k) + k


def masks(kind, batch, length):
    """(call kwargs, reference mask `[B, T, T]`) for `kind` in "none", "padding", "causal", "both".

    With padding the second sequence is two positions shorter.
    """
    full = np.ones((batch, length, length), bool)
    if kind == "none":
        return {}, full
    lengths = np.array([length, length - 2])[:batch]
    padding = np.arange(length)[None] < lengths[:, None]  # [B, T]
    causal = np.tril(np.ones((length, length), bool))[None]
    if kind == "padding":
        return {"query_mask": padding, "value_mask": padding}, padding[:, :, None] & padding[:, None, :]
    if kind == "causal":
        return {"use_causal_mask": True}, np.broadcast_to(causal, full.shape)
    both = padding[:, :, None] & padding[:, None, :] & causal
    return {"query_mask": padding, "value_mask": padding, "use_causal_mask": True}, both


def reference_attention(weights, query, value, mask, labels):
    """Eq. 3-4 with loops.

    Args:
        weights: from `layer_weights`.
        query: `[B, Tq, D]`; value: `[B, Tk, D]`.
        mask: bool `[B, Tq, Tk]` (True = may attend).
        labels: int `[B, Tq, Tk]` relation labels, or None for plain attention.
    """
    wq, bq = weights["q"]
    wk, bk = weights["k"]
    wv, bv = weights["v"]
    wo, bo = weights["o"]
    ak, av = weights["ak"], weights["av"]
    batch, num_queries, _ = query.shape
    num_keys = value.shape[1]
    heads, dk = bq.shape
    dv = bv.shape[1]
    out = np.zeros((batch, num_queries, wo.shape[-1]))
    for b in range(batch):
        for i in range(num_queries):
            z_all = np.zeros((heads, dv))
            for h in range(heads):
                q = query[b, i] @ wq[:, h] + bq[h]
                e = np.full(num_keys, -np.inf)
                for j in range(num_keys):
                    if not mask[b, i, j]:
                        continue
                    kj = value[b, j] @ wk[:, h] + bk[h]
                    if ak is not None and labels is not None:
                        kj = kj + ak[h, labels[b, i, j]]
                    e[j] = q @ kj / np.sqrt(dk)
                if not np.isfinite(e).any():
                    continue  # No key to attend to: z = 0.
                alpha = np.exp(e - e.max())
                alpha /= alpha.sum()
                for j in range(num_keys):
                    if alpha[j] == 0:
                        continue
                    vj = value[b, j] @ wv[:, h] + bv[h]
                    if av is not None and labels is not None:
                        vj = vj + av[h, labels[b, i, j]]
                    z_all[h] += alpha[j] * vj
            out[b, i] = np.einsum("hv,hvo->o", z_all, wo) + bo
    return out


def materialized_attention(layer, query, labels, mask):
    """The naive formulation (materialises `[Tq, Tk, d]` tables) in keras.ops, differentiable.

    Args:
        layer: a built `RelationAwareMultiHeadAttention` (self-attention, no bias, no dropout).
        query: `[B, T, D]` tensor.
        labels: int numpy `[B, T, T]`.
        mask: bool numpy `[B, T, T]` with at least one True per row.
    """
    heads, dk, dv = layer.num_heads, layer.key_dim, layer.value_dim
    batch, length, _ = query.shape

    def project(weights, depth):
        return ops.reshape(ops.matmul(query, weights[0]), (batch, length, heads, depth))

    q = project(layer._query, dk) / np.sqrt(dk)  # pylint: disable=protected-access
    k = project(layer._key, dk)  # pylint: disable=protected-access
    v = project(layer._value, dv)  # pylint: disable=protected-access

    def tables(table):
        if layer.heads_share_relative_embeddings:
            table = ops.broadcast_to(table[None], (heads,) + tuple(table.shape))
        return ops.take(ops.transpose(table, (1, 0, 2)), labels, axis=0)  # [B, Tq, Tk, H, d]

    logits = ops.einsum("bqhd,bkhd->bhqk", q, k)
    if layer.relative_key_embeddings is not None:
        logits = logits + ops.einsum("bqhd,bqkhd->bhqk", q, tables(layer.relative_key_embeddings))
    logits = ops.where(mask[:, None], logits, -1e9)
    alpha = ops.softmax(logits, axis=-1)
    z = ops.einsum("bhqk,bkhd->bqhd", alpha, v)
    if layer.relative_value_embeddings is not None:
        z = z + ops.einsum("bhqk,bqkhd->bqhd", alpha, tables(layer.relative_value_embeddings))
    return ops.matmul(ops.reshape(z, (batch, length, heads * dv)), layer._output[0])  # pylint: disable=protected-access
