"""The encoder-decoder Transformer, with absolute, relative, both or no position information."""

import keras
from keras import ops

from t2t_relpos import registry
from t2t_relpos.layers.embedding import TokenEmbedding
from t2t_relpos.layers.position import PositionOffset
from t2t_relpos.layers.positionwise import at_positions
from t2t_relpos.layers.transformer_stack import TransformerDecoder, TransformerEncoder
from t2t_relpos.models import size
from t2t_relpos.models.inputs import architecture_arguments, build_once, check_features, check_ids, ensure_built

PAD_ID = 0

# Hyperparameters (names as in `hparams/defaults.py`) that define the architecture.
ARCHITECTURE_HPARAMS = (
    "hidden_size", "filter_size", "num_heads", "num_encoder_layers", "num_decoder_layers",
    "attention_key_channels", "attention_value_channels", "shared_embedding_and_softmax_weights",
    "norm_position", "norm_epsilon", "position_encoding", "max_relative_position", "relative_keys",
    "relative_values", "heads_share_relative_embeddings", "layer_prepostprocess_dropout",
    "attention_dropout", "relu_dropout", "initializer_gain", "position_start_index", "max_position_offset",
    "position_offset_shared",
)


def stack_arguments(architecture, dtype):
    """The encoder/decoder stacks' constructor arguments from a model's architecture hparams."""
    a = architecture
    return {
        "hidden_size": a["hidden_size"], "num_heads": a["num_heads"], "filter_size": a["filter_size"],
        "key_dim": a["attention_key_channels"] or None, "value_dim": a["attention_value_channels"] or None,
        "position_encoding": a["position_encoding"], "max_relative_position": a["max_relative_position"],
        "use_relative_keys": a["relative_keys"], "use_relative_values": a["relative_values"],
        "heads_share_relative_embeddings": a["heads_share_relative_embeddings"],
        "dropout": a["layer_prepostprocess_dropout"], "attention_dropout": a["attention_dropout"],
        "relu_dropout": a["relu_dropout"], "norm_position": a["norm_position"], "norm_epsilon": a["norm_epsilon"],
        "kernel_initializer": keras.initializers.VarianceScaling(
            scale=a["initializer_gain"], mode="fan_avg", distribution="uniform"),
        # A shared offset is drawn by the model and passed to the stacks, which then draw none of their own.
        # (The encoder-only classifiers have no offsets.)
        "position_start_index": ("none" if a.get("position_offset_shared")
                                 else a.get("position_start_index", "none")),
        "max_position_offset": a.get("max_position_offset") or None,
        "dtype": dtype,
    }


def shift_right(targets):
    """Decoder inputs: `[B, T]` targets preceded by the start symbol (PAD, which embeds to zeros)."""
    return ops.pad(targets, [[0, 0], [1, 0]], constant_values=PAD_ID)[:, :-1]


@registry.register_model("transformer")
@keras.saving.register_keras_serializable(package="t2t_relpos")
class Transformer(keras.Model):
    """Encoder-decoder Transformer (Vaswani et al. 2017) with relation-aware self-attention (Shaw et al. 2018).

    `position_encoding` chooses the position information: "sinusoid" (the paper's baseline), "relative"
    (relative positions in encoder and decoder self-attention, no absolute signal), "both", or "none".
    Encoder-decoder attention is plain. With `shared_embedding_and_softmax_weights` the target embedding is
    also the softmax matrix, and when the vocabularies have the same size the source embedding is shared too.

    Position offsets in training (the Universal Transformer paper's randomized offsets, tensor2tensor's
    `position_start_index`; see `PositionOffset`) shift the absolute signal: `position_start_index="random"`
    draws an offset in [0, `max_position_offset`) (0: in [0, the input's length), tensor2tensor's range);
    independently for the encoder and the decoder (and, in a Universal Transformer, at every recurrent step)
    as tensor2tensor does, or once per batch for all of them with `position_offset_shared=True`. Inference
    never shifts.

    With `input_vocab_size=None` the model is a decoder-only language model, as tensor2tensor's `transformer`
    was on a problem without inputs: no encoder and no attention to one; the features hold `"targets"` only
    and `init_cache` takes the batch size. `num_encoder_layers` is then not read.

    The arguments after the vocabulary sizes are the hyperparameters of `ARCHITECTURE_HPARAMS` (see
    `hparams/defaults.py`); `Transformer.from_hparams(hparams, ...)` reads them from an `HParams`.

    Args:
        input_vocab_size, target_vocab_size: Vocabulary sizes (id 0 is padding, 1 end-of-sequence);
            `input_vocab_size` None: a decoder-only model.

    Call arguments:
        features: dict with int `"inputs"` `[B, S]` (not with a decoder-only model) and `"targets"` `[B, T]`
            (0-padded; EOS-terminated, or windows of text for a language model).
        training: Enables dropout.
        return_details: Return `{"logits", "losses", "summaries"}` instead of the logits alone (models with
            auxiliary losses, like the adaptive Universal Transformer, put them there).

    Returns:
        float32 logits `[B, T, target_vocab_size]` for predicting `targets` (teacher forcing).

    Example:

    >>> import numpy as np
    >>> model = Transformer(input_vocab_size=12, target_vocab_size=12, hidden_size=16, filter_size=32,
    ...                     num_heads=2, num_encoder_layers=1, num_decoder_layers=1,
    ...                     position_encoding="relative", max_relative_position=4)
    >>> features = {"inputs": np.array([[5, 6, 7, 1]]), "targets": np.array([[7, 6, 5, 1]])}
    >>> tuple(model(features).shape)
    (1, 4, 12)
    >>> language_model = Transformer(input_vocab_size=None, target_vocab_size=12, hidden_size=16,
    ...                              filter_size=32, num_heads=2, num_decoder_layers=1,
    ...                              position_encoding="relative", max_relative_position=4)
    >>> tuple(language_model({"targets": np.array([[5, 6, 7, 8, 9]])}).shape)
    (1, 5, 12)
    """

    def __init__(self, input_vocab_size, target_vocab_size, hidden_size=512, filter_size=2048, num_heads=8,
                 num_encoder_layers=6, num_decoder_layers=6, attention_key_channels=0,
                 attention_value_channels=0, shared_embedding_and_softmax_weights=True, norm_position="post",
                 norm_epsilon=1e-6, position_encoding="sinusoid", max_relative_position=16,
                 relative_keys=True, relative_values=True, heads_share_relative_embeddings=False,
                 layer_prepostprocess_dropout=0.1, attention_dropout=0.1, relu_dropout=0.1,
                 initializer_gain=1.0, position_start_index="none", max_position_offset=0,
                 position_offset_shared=False, **kwargs):
        super().__init__(**kwargs)
        if position_offset_shared and position_start_index != "random":
            raise ValueError("position_offset_shared=True shares a random offset: it needs "
                             f'position_start_index="random", got {position_start_index!r}')
        self.input_vocab_size = input_vocab_size
        self.target_vocab_size = target_vocab_size
        self.architecture = {
            "hidden_size": hidden_size, "filter_size": filter_size, "num_heads": num_heads,
            "num_encoder_layers": num_encoder_layers, "num_decoder_layers": num_decoder_layers,
            "attention_key_channels": attention_key_channels,
            "attention_value_channels": attention_value_channels,
            "shared_embedding_and_softmax_weights": shared_embedding_and_softmax_weights,
            "norm_position": norm_position, "norm_epsilon": norm_epsilon,
            "position_encoding": position_encoding, "max_relative_position": max_relative_position,
            "relative_keys": relative_keys, "relative_values": relative_values,
            "heads_share_relative_embeddings": heads_share_relative_embeddings,
            "layer_prepostprocess_dropout": layer_prepostprocess_dropout,
            "attention_dropout": attention_dropout, "relu_dropout": relu_dropout,
            "initializer_gain": initializer_gain, "position_start_index": position_start_index,
            "max_position_offset": max_position_offset, "position_offset_shared": position_offset_shared,
        }
        self.hidden_size = hidden_size
        self.decoder_only = input_vocab_size is None
        dtype = self.dtype_policy
        self.shared_position_offset = None
        if position_offset_shared and position_encoding in ("sinusoid", "both"):
            self.shared_position_offset = PositionOffset(position_start_index, max_position_offset or None,
                                                         dtype=dtype, name="shared_position_offset")
        self.target_embedding = TokenEmbedding(target_vocab_size, hidden_size, dtype=dtype,
                                               name="target_embedding")
        share_source = shared_embedding_and_softmax_weights and input_vocab_size == target_vocab_size
        self.input_embedding = (None if self.decoder_only else self.target_embedding if share_source else
                                TokenEmbedding(input_vocab_size, hidden_size, dtype=dtype,
                                               name="input_embedding"))
        self.softmax = (None if shared_embedding_and_softmax_weights else
                        keras.layers.Dense(target_vocab_size, use_bias=False, dtype=dtype, name="softmax"))
        stack_kwargs = self.stack_arguments()
        self.encoder = None if self.decoder_only else self.make_encoder(num_encoder_layers, stack_kwargs)
        self.decoder = self.make_decoder(num_decoder_layers,
                                         {**stack_kwargs, "use_cross_attention": not self.decoder_only})

    # -- construction (overridden by the Universal Transformer) -----------------------------------------
    def stack_arguments(self):
        return stack_arguments(self.architecture, self.dtype_policy)

    def make_encoder(self, num_layers, stack_kwargs):
        return TransformerEncoder(num_layers, name="encoder", **stack_kwargs)

    def make_decoder(self, num_layers, stack_kwargs):
        return TransformerDecoder(num_layers, name="decoder", **stack_kwargs)

    @classmethod
    def from_hparams(cls, hparams, input_vocab_size, target_vocab_size, **kwargs):
        """Builds the model described by an `HParams` (see `ARCHITECTURE_HPARAMS`)."""
        return cls(input_vocab_size, target_vocab_size, **architecture_arguments(hparams, cls.hparams_names()),
                   **kwargs)

    @classmethod
    def hparams_names(cls):
        return ARCHITECTURE_HPARAMS

    def parameter_counts(self):
        """The model's parameters by part, counted from its architecture before any weight exists
        (`size.parameters`: a lower bound, close to `count_params()`)."""
        return size.parameters(
            {**self.architecture, **getattr(self, "recurrence", {})}, self.input_vocab_size,
            self.target_vocab_size, 0 if self.decoder_only else len(getattr(self.encoder, "blocks", [None])),
            len(getattr(self.decoder, "blocks", [None])),
            shared_embeddings=self.input_embedding is self.target_embedding, softmax=self.softmax is not None)

    def build(self, features_shape=None):
        """Creates every weight (the shapes of the features do not matter beyond their rank); a model too large
        for the machine's memory is refused first (`size.check_fits`)."""
        if not self.built:
            size.check_fits(self.parameter_counts())
        width = self.hidden_size
        build_once(self.target_embedding)
        if not self.decoder_only:
            build_once(self.input_embedding)
            build_once(self.encoder, (None, None, width))
        build_once(self.decoder, (None, None, width), None if self.decoder_only else (None, None, width))
        if self.softmax is not None:
            build_once(self.softmax, (None, None, width))

    # -- the forward pass --------------------------------------------------------------------------------
    def encode(self, inputs, training=None, position_offset=None):
        """`[B, S]` ids -> (encoder output `[B, S, hidden_size]`, bool padding mask `[B, S]`)."""
        if self.decoder_only:
            raise ValueError("a decoder-only model (input_vocab_size=None) has no encoder to encode inputs")
        ensure_built(self)
        inputs = check_ids("inputs", inputs)
        mask = ops.not_equal(inputs, PAD_ID)
        x = self.input_embedding(inputs)
        return self.encoder(x, padding_mask=mask, training=training, position_offset=position_offset), mask

    def decode(self, decoder_inputs, encoder_output, encoder_mask, training=None, position_offset=None):
        """Teacher-forced decoding: `[B, T]` right-shifted ids -> float32 logits `[B, T, V]` (a decoder-only
        model takes None for the encoder's output and mask)."""
        ensure_built(self)
        decoder_inputs = check_ids("decoder inputs", decoder_inputs)
        y = self.decoder(self.target_embedding(decoder_inputs), encoder_output, encoder_mask=encoder_mask,
                         training=training, position_offset=position_offset)
        return self.logits(y)

    def shared_offset(self, features, training):
        """The batch's one position offset for the encoder and the decoder, or None (see the class docstring).

        Drawn from [0, `max_position_offset`), or [0, the longer of the inputs and targets) when that is 0.
        """
        if self.shared_position_offset is None or training is not True:
            return None
        lengths = ops.shape(features["targets"])[1]
        if not self.decoder_only:
            lengths = ops.maximum(ops.shape(features["inputs"])[1], lengths)
        return self.shared_position_offset(ops.zeros((1, lengths, 1)), training=training)

    def logits(self, y):
        logits = (self.target_embedding.logits(y) if self.softmax is None
                  else at_positions(self.softmax, y))  # A 2-D matmul (`positionwise`).
        return ops.cast(logits, "float32")

    def feature_names(self):
        """The features a call reads: `("targets",)` for a decoder-only model, else also `"inputs"`."""
        return ("targets",) if self.decoder_only else ("inputs", "targets")

    def call(self, features, training=None, return_details=False):
        check_features(features, self.feature_names())
        offset = self.shared_offset(features, training)
        encoder_output = encoder_mask = None
        if not self.decoder_only:
            encoder_output, encoder_mask = self.encode(features["inputs"], training=training,
                                                       position_offset=offset)
        logits = self.decode(shift_right(features["targets"]), encoder_output, encoder_mask, training=training,
                             position_offset=offset)
        if return_details:
            return {"logits": logits, "losses": {}, "summaries": {}}
        return logits

    # -- incremental decoding ----------------------------------------------------------------------------
    def init_cache(self, encoder_output, encoder_mask, max_length, batch_size=None):
        """Decoder state for `decode_step`: empty self-attention buffers and the encoder's keys/values.

        A decoder-only model takes None for the encoder's output and mask, and the `batch_size`.
        """
        ensure_built(self)
        return self.decoder.init_cache(encoder_output, max_length, encoder_mask, batch_size=batch_size)

    def decode_step(self, ids, cache, index):
        """Decodes `[B, n]` ids at positions `index .. index + n - 1` -> (logits `[B, n, V]`, new cache).

        The first step feeds the start symbol (PAD) at index 0. Steps of several tokens are exact.
        """
        ensure_built(self)
        ids = check_ids("ids", ids)
        y, cache = self.decoder(self.target_embedding(ids), cache=cache, cache_index=index, training=False)
        return self.logits(y), cache

    def get_config(self):
        config = super().get_config()
        config.update({"input_vocab_size": self.input_vocab_size, "target_vocab_size": self.target_vocab_size})
        config.update(self.architecture)
        return config
