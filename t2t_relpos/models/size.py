"""A model's size from its architecture, counted before any weight exists: one too large to allocate is refused
in one line saying how much memory it would need, instead of an out-of-memory traceback from deep inside
TensorFlow (or a machine that swaps for minutes first).

The count is that of `count_params()` once built (tests/test_model_api.py compares them), except a
separable-convolution transition, left out: then it is a lower bound.
"""

import os

from t2t_relpos import errors

BYTES_PER_WEIGHT = 4  # float32: the variables' type, also with --mixed_precision.
FALLBACK_MEMORY = 2 ** 40  # Where the machine's memory cannot be read: 1 TiB, more than any model here needs.


def block_parameters(architecture, decoder=False, cross_attention=True):
    """Parameters of one encoder (or decoder) block, by part (names as the refusal says them)."""
    a = architecture
    hidden, heads = a["hidden_size"], a["num_heads"]
    key_dim = a.get("attention_key_channels") or hidden // heads
    value_dim = a.get("attention_value_channels") or key_dim
    attention = hidden * heads * (2 * key_dim + value_dim) + heads * value_dim * hidden  # q, k, v and output.
    tables = 0
    if a.get("position_encoding") in ("relative", "both") and a.get("max_relative_position") is not None:
        relations = 2 * a["max_relative_position"] + 1
        per_depth = relations * (1 if a.get("heads_share_relative_embeddings") else heads)
        tables = per_depth * (key_dim * bool(a.get("relative_keys", True))
                              + value_dim * bool(a.get("relative_values", True)))
    feed_forward = 0 if a.get("transition_type", "ffn") != "ffn" else 2 * hidden * a["filter_size"] + \
        a["filter_size"] + hidden
    norms = 2 * hidden * 2
    if decoder and cross_attention:  # Cross-attention (no relations) and its normalization.
        attention *= 2
        norms += 2 * hidden
    return {"the attention projections": attention, "the relative-position tables": tables,
            "the feed-forward layers": feed_forward, "the layer normalizations": norms}


def parameters(architecture, input_vocab_size, target_vocab_size, encoder_blocks, decoder_blocks,
               shared_embeddings=False, softmax=False, classifier=False):
    """The model's parameters by part (see `block_parameters`, and the embeddings and the softmax).

    Args:
        architecture: the model's architecture hparams (hidden_size, filter_size, num_heads, ...).
        encoder_blocks, decoder_blocks: how many distinct blocks (a Universal Transformer's is shared: 1).
        shared_embeddings: one embedding table for inputs and targets.
        softmax: a softmax matrix of its own (not shared with the target embedding).
        classifier: a class-label output of `target_vocab_size` labels instead of target embeddings.

    A decoder-only model (a language model) has `input_vocab_size` None, no encoder blocks and no
    cross-attention.
    """
    hidden = architecture["hidden_size"]
    embeddings, output = "the embeddings", "the softmax"
    decoder_only = input_vocab_size is None
    if decoder_only:
        input_vocab_size, shared_embeddings, encoder_blocks = target_vocab_size, True, 0
    parts = {embeddings: input_vocab_size * hidden, output: 0}
    if classifier:
        parts[output] = (hidden + 1) * target_vocab_size
    else:
        if not shared_embeddings:
            parts[embeddings] += target_vocab_size * hidden
        if softmax:
            parts[output] = hidden * target_vocab_size
    stacks = ([(encoder_blocks, False)] if encoder_blocks else []) + ([(decoder_blocks, True)] if decoder_blocks
                                                                         else [])
    for blocks, decoder in stacks:
        for name, count in block_parameters(architecture, decoder, cross_attention=not decoder_only).items():
            parts[name] = parts.get(name, 0) + blocks * count
        # A pre-norm stack's final normalization; ACT's halting unit (a Dense of one output).
        parts["the layer normalizations"] += 2 * hidden * (architecture.get("norm_position") == "pre")
        parts["the attention projections"] += (hidden + 1) * (architecture.get("recurrence_type") == "act")
    return parts


def machine_memory():
    """The machine's physical memory in bytes (`FALLBACK_MEMORY` where it cannot be read)."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return FALLBACK_MEMORY


def human_bytes(count):
    for unit in ("bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB", "ZiB", "YiB"):
        if count < 1024 or unit == "YiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.3g} {unit}"
        count /= 1024
    return None  # pragma: no cover


def check_fits(parts, memory=None):
    """Raises `HParamsError` when the weights alone would not fit in `memory` bytes (default: the machine's).

    Training needs about four times as much (gradients and Adam's two moments beside the weights), and the
    activations on top: a model that passes may still not train, but one refused here cannot even be made.
    """
    memory = machine_memory() if memory is None else memory
    total = sum(parts.values())
    needed = total * BYTES_PER_WEIGHT
    if needed <= memory:
        return total
    largest = max(parts, key=parts.get)
    share = parts[largest] / total
    raise errors.HParamsError(
        f"the model is too large to make: {total:.3g} parameters, whose float32 weights alone need "
        f"{human_bytes(needed)} (about {human_bytes(4 * needed)} to train), more than this machine's "
        f"{human_bytes(memory)} of memory ({largest} are {share:.0%} of it): check hidden_size, filter_size, "
        "num_heads, the number of layers and max_relative_position")
