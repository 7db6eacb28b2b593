"""Export a trained Transformer to CTranslate2, the inference engine of OpenNMT, for fast CPU and GPU decoding.

    t2t-relpos-export --output_dir=runs/ende --data_dir=data --export_format=ctranslate2
    # -> runs/ende/export_ctranslate2/<step>: model.bin, config.json, shared_vocabulary.json, sentencepiece.model

    import ctranslate2, sentencepiece
    translator = ctranslate2.Translator("runs/ende/export_ctranslate2/1500", compute_type="int8")
    sp = sentencepiece.SentencePieceProcessor("runs/ende/export_ctranslate2/1500/sentencepiece.model")
    tokens = [sp.encode(" " + text, out_type=str) for text in texts]     # the package's leading space
    results = translator.translate_batch(tokens, beam_size=4, min_decoding_length=0)
    texts = [sp.decode(r.hypotheses[0])[1:] for r in results]           # and the space removed again

How the package's Transformer maps onto CTranslate2's `TransformerSpec` (facts from its spec and C++ source):

- Relative positions: CTranslate2 keeps one key and one value table `[2k + 1, d_head]` per self-attention layer,
  shared by the heads, read at `clip(j - i, k) + k` with the queries at the last positions of the keys (the
  package's layout and its cached decoding), and scales the key term with the logits, as eq. 5. Relation
  tables per head have no equivalent and are refused; a model without a^K or a^V gets a zero table, which adds
  nothing. Absolute and relative positions together ("both") are refused: CTranslate2 drops the absolute
  signal of a model with relative positions.
- Sinusoids are written as a weight table (sines then cosines, tensor2tensor's timescales), so CTranslate2's own
  sinusoid layout does not matter; "none" is a table of zeros. Positions beyond `max_positions` are an error.
- Embeddings are multiplied by sqrt(d_model), as here. The decoder starts from a zero embedding (the package's
  start symbol, padding, embeds to zeros), and the output projection gets a bias of -65504 at the padding id
  (the package never emits padding; -65504 still fits in float16).
- Post-norm stacks have no final norm, pre-norm stacks one; the layer-norm epsilon is the model's.
- Sources get EOS appended (`add_source_eos`); ids 0 (padding, also the decoder start) and 1 (EOS) keep their
  tokens.

Search: CTranslate2 forbids an empty output unless given `min_decoding_length=0` (the package allows one). It
divides a finished hypothesis' log-probability by `length ** alpha`
(EOS not counted), not by GNMT's `((5 + length) / 6) ** alpha`, and stops once it holds enough finished
hypotheses; and when the length limit cuts a search short, it ranks the unfinished hypotheses together with the
finished ones, where the package puts finished ones first. Greedy search, and beam search with
`length_penalty=0` (alpha 0) that ends by EOS, give the package's outputs; with alpha > 0 beam search may rank
some hypotheses differently.

Universal Transformers (one block shared over recurrent steps, ACT) have no CTranslate2 counterpart and are
refused.
"""

import json
import os

import numpy as np
from keras import ops

from t2t_relpos import errors
from t2t_relpos.layers.position import timing_signal
from t2t_relpos.models import Transformer, UniversalTransformer

_PAD_TOKEN, _EOS_TOKEN = "<pad>", "</s>"
# Excludes padding from the softmax: the most negative float16, so a float16 model keeps it finite.
_NEVER = -65504.0


class UnsupportedModelError(errors.T2TRelposError):
    """The model has a feature CTranslate2 cannot express; the message says which."""


def check_supported(model):
    """Raises `UnsupportedModelError` (one line) unless `model` maps faithfully onto CTranslate2."""
    if isinstance(model, UniversalTransformer):
        raise UnsupportedModelError("CTranslate2 has no Universal Transformer (one block shared over recurrent "
                                    "steps, adaptive halting); export a Transformer")
    if not isinstance(model, Transformer):
        raise UnsupportedModelError(f"only the package's Transformer exports to CTranslate2, not "
                                    f"{type(model).__name__}")
    a = model.architecture
    if a["position_encoding"] == "both":
        raise UnsupportedModelError("position_encoding 'both': CTranslate2 drops the absolute position signal "
                                    "of a model with relative positions")
    if a["position_encoding"] == "relative" and not a["heads_share_relative_embeddings"]:
        raise UnsupportedModelError("relation tables per head: CTranslate2 has one key and one value table per "
                                    "layer, shared by the heads (train with heads_share_relative_embeddings=true, "
                                    "as transformer_big_rel does)")
    head = a["hidden_size"] // a["num_heads"]
    if (a["attention_key_channels"] or head) != head or (a["attention_value_channels"] or head) != head:
        raise UnsupportedModelError("attention_key_channels / attention_value_channels other than "
                                    "hidden_size / num_heads")


def _numpy(variable):
    return np.asarray(ops.convert_to_numpy(variable), dtype=np.float32)


def _linear(spec, weights, bias=None):
    """A Keras kernel `[in, out]` (and bias) into a CTranslate2 linear `[out, in]`."""
    spec.weight = np.ascontiguousarray(weights.T)
    if bias is not None:
        spec.bias = bias


def _norm(spec, layer):
    spec.gamma = _numpy(layer.gamma)
    spec.beta = _numpy(layer.beta)


def _kernel_and_bias(projection):
    """A `RelationAwareMultiHeadAttention` projection `(kernel, bias or None)` as numpy arrays."""
    kernel, bias = projection
    return _numpy(kernel), None if bias is None else _numpy(bias)


def _joined(projections):
    """Several projections side by side (one fused CTranslate2 linear): (kernel `[in, sum out]`, bias)."""
    pairs = [_kernel_and_bias(p) for p in projections]
    biases = [b for _, b in pairs]
    return (np.concatenate([k for k, _ in pairs], axis=1),
            None if biases[0] is None else np.concatenate(biases))


def _self_attention(spec, layer):
    """Fused query/key/value projection, output projection and relation tables of self-attention."""
    _linear(spec.linear[0], *_joined([layer._query, layer._key, layer._value]))  # pylint: disable=protected-access
    _linear(spec.linear[1], *_kernel_and_bias(layer._output))  # pylint: disable=protected-access
    if hasattr(spec, "relative_position_keys"):
        shape = (layer.num_relations, layer.key_dim)
        for name, table in (("relative_position_keys", layer.relative_key_embeddings),
                            ("relative_position_values", layer.relative_value_embeddings)):
            setattr(spec, name, np.zeros(shape, np.float32) if table is None else _numpy(table))


def _cross_attention(spec, layer):
    """Query projection, fused key/value projection and output projection of the attention to the encoder."""
    _linear(spec.linear[0], *_kernel_and_bias(layer._query))  # pylint: disable=protected-access
    _linear(spec.linear[1], *_joined([layer._key, layer._value]))  # pylint: disable=protected-access
    _linear(spec.linear[2], *_kernel_and_bias(layer._output))  # pylint: disable=protected-access


def _feed_forward(spec, layer, norm):
    _norm(spec.layer_norm, norm)
    _linear(spec.linear_0, _numpy(layer.inner.kernel), _numpy(layer.inner.bias))
    _linear(spec.linear_1, _numpy(layer.outer.kernel), _numpy(layer.outer.bias))


def _positions(spec, architecture, max_positions):
    if hasattr(spec, "position_encodings"):
        width = architecture["hidden_size"]
        table = (timing_signal(np.arange(max_positions), width) if architecture["position_encoding"] == "sinusoid"
                 else np.zeros((max_positions, width), np.float32))
        spec.position_encodings.encodings = np.asarray(ops.convert_to_numpy(table), np.float32)


def model_spec(model, max_positions=1024):
    """The `ctranslate2.specs.TransformerSpec` of `model`, weights filled in (vocabularies not yet)."""
    from ctranslate2.specs import transformer_spec  # pylint: disable=import-outside-toplevel

    check_supported(model)
    a = model.architecture
    pre_norm = a["norm_position"] == "pre"
    relative = a["position_encoding"] == "relative"
    spec = transformer_spec.TransformerSpec.from_config(
        (a["num_encoder_layers"], a["num_decoder_layers"]), a["num_heads"], with_relative_position=relative,
        pre_norm=pre_norm)
    spec.config.layer_norm_epsilon = float(a["norm_epsilon"])
    encoder, decoder = spec.encoder, spec.decoder

    encoder.embeddings[0].weight = _numpy(model.input_embedding.embeddings)
    _positions(encoder, a, max_positions)
    for block, layer in zip(model.encoder.blocks, encoder.layer):
        _norm(layer.self_attention.layer_norm, block.attention_norm)
        _self_attention(layer.self_attention, block.self_attention)
        _feed_forward(layer.ffn, block.feed_forward, block.feed_forward_norm)
    if pre_norm:
        _norm(encoder.layer_norm, model.encoder.final_norm)

    target = _numpy(model.target_embedding.embeddings)
    decoder.embeddings.weight = target
    decoder.start_from_zero_embedding = True
    _positions(decoder, a, max_positions)
    for block, layer in zip(model.decoder.blocks, decoder.layer):
        _norm(layer.self_attention.layer_norm, block.self_attention_norm)
        _self_attention(layer.self_attention, block.self_attention)
        _norm(layer.attention.layer_norm, block.cross_attention_norm)
        _cross_attention(layer.attention, block.cross_attention)
        _feed_forward(layer.ffn, block.feed_forward, block.feed_forward_norm)
    if pre_norm:
        _norm(decoder.layer_norm, model.decoder.final_norm)
    softmax = target.T if model.softmax is None else _numpy(model.softmax.kernel)  # [d, V]
    bias = np.zeros(softmax.shape[1], np.float32)
    bias[0] = _NEVER
    _linear(decoder.projection, softmax, bias)
    return spec


def vocabulary_tokens(encoder):
    """The token of every id of a problem's text encoder (SentencePiece pieces, or the symbols of an alphabet)."""
    if hasattr(encoder, "piece"):
        return [encoder.piece(i) for i in range(encoder.vocab_size)]
    if hasattr(encoder, "symbols"):
        return [_PAD_TOKEN, _EOS_TOKEN] + [str(s) for s in encoder.symbols]
    raise UnsupportedModelError(f"cannot list the tokens of a {type(encoder).__name__} vocabulary")


def check_exportable(model, problem, data_dir=None):
    """Raises `UnsupportedModelError` (one line) unless `export` can write this model and problem's vocabulary.

    Needs no trained weights: the trainer calls it before training when it is to export afterwards.

    Returns:
        (the problem's encoders, source tokens, target tokens).
    """
    if getattr(model, "decoder_only", False) or not getattr(problem, "has_inputs", True):
        raise UnsupportedModelError("a language model (a decoder-only model, a problem without inputs) has no "
                                    "CTranslate2 export here; export a SavedModel (--export_format=saved_model)")
    check_supported(model)
    encoders = problem.feature_encoders(data_dir)
    source, target = vocabulary_tokens(encoders["inputs"]), vocabulary_tokens(encoders["targets"])
    if source[:2] != [_PAD_TOKEN, _EOS_TOKEN] or target[:2] != [_PAD_TOKEN, _EOS_TOKEN]:
        raise UnsupportedModelError(f"ids 0 and 1 must be {_PAD_TOKEN} and {_EOS_TOKEN}, got {source[:2]}")
    return encoders, source, target


def export(model, problem, export_dir, data_dir=None, max_positions=1024):
    """Writes `model` as a CTranslate2 model directory, with the problem's vocabulary beside it.

    Args:
        model: A trained `Transformer` (see `check_supported`).
        problem: Its problem (for the vocabularies).
        export_dir: The directory to write; it must not exist yet or be empty.
        data_dir: Where the problem's vocabulary lives, if it has one.
        max_positions: The longest source or output, in tokens, the absolute position table covers.

    Returns:
        `export_dir`.
    """
    encoders, source, target = check_exportable(model, problem, data_dir)
    spec = model_spec(model, max_positions)
    spec.register_source_vocabulary(source)
    spec.register_target_vocabulary(target)
    # No BOS in the package: the decoder starts from padding (embedded as zeros, see `model_spec`).
    unk = "<unk>" if "<unk>" in target else _PAD_TOKEN  # An alphabet has no unknown token; inputs are checked.
    spec.config.unk_token = unk
    spec.config.bos_token = _PAD_TOKEN
    spec.config.decoder_start_token = _PAD_TOKEN
    spec.config.eos_token = _EOS_TOKEN
    spec.config.add_source_eos = True
    spec.validate()
    spec.optimize(quantization=None)
    if os.path.isdir(export_dir) and os.listdir(export_dir):
        raise errors.T2TRelposError(f"{export_dir} exists and is not empty")
    os.makedirs(export_dir, exist_ok=True)
    spec.save(export_dir)
    protos = {name: getattr(encoders[feature], "model_proto", None)
              for name, feature in (("sentencepiece.model", "inputs"), ("target_sentencepiece.model", "targets"))}
    if protos["target_sentencepiece.model"] == protos["sentencepiece.model"]:
        del protos["target_sentencepiece.model"]  # One vocabulary shared by source and target.
    for name, proto in protos.items():
        if proto is not None:
            with open(os.path.join(export_dir, name), "wb") as f:
                f.write(proto)
    with open(os.path.join(export_dir, "t2t_relpos.json"), "w", encoding="utf-8") as f:
        json.dump({"problem": problem.name, "leading_space": hasattr(encoders["inputs"], "model_proto"),
                   "max_positions": max_positions}, f, indent=2)
    return export_dir
