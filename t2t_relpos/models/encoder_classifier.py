"""Encoder-only models that read a sequence and answer with one class (bAbI question answering).

    transformer_encoder             a Transformer encoder stack
    universal_transformer_encoder   one shared block over T steps, or ACT (Dehghani et al. 2018, §3.1)

Both take token ids, or, with `fact_width` (bAbI's facts layout), fixed-width sentences that `FactEmbedding`
turns into one position each. Positions are sinusoidal, relative, both or none, as in the seq2seq models. The
answer is read through a dense layer from the encoder's output: its mean over the non-padding positions
(`classifier_readout="mean"`, tensor2tensor's class-label output), or its first or last non-padding position
(`"first"` / `"last"`: where bAbI's concat / facts layouts put the question).
"""

import keras
from keras import ops

from t2t_relpos import registry
from t2t_relpos.layers.act import ponder_cost
from t2t_relpos.layers.embedding import TokenEmbedding
from t2t_relpos.layers.fact_embedding import FactEmbedding
from t2t_relpos.layers.transformer_stack import TransformerEncoder
from t2t_relpos.models import size
from t2t_relpos.models.inputs import architecture_arguments, build_once, check_features, check_ids, ensure_built
from t2t_relpos.models.transformer import PAD_ID, stack_arguments
from t2t_relpos.models.universal_transformer import RECURRENCE_HPARAMS, RecurrentEncoderMixin

ENCODER_HPARAMS = (
    "hidden_size", "filter_size", "num_heads", "num_encoder_layers", "attention_key_channels",
    "attention_value_channels", "norm_position", "norm_epsilon", "position_encoding", "max_relative_position",
    "relative_keys", "relative_values", "heads_share_relative_embeddings", "layer_prepostprocess_dropout",
    "attention_dropout", "relu_dropout", "initializer_gain", "classifier_readout", "fact_mask_initializer",
    "fact_mask_trainable",
)
READOUTS = ("mean", "first", "last")


@registry.register_model("transformer_encoder")
@keras.saving.register_keras_serializable(package="t2t_relpos")
class TransformerEncoderClassifier(keras.Model):
    """A Transformer encoder and a class-label output.

    Args:
        input_vocab_size: Input ids (0 is padding).
        target_vocab_size: Class labels, the reserved ids 0 and 1 included (they are never targets).
        fact_width: 0 reads one token per position; W > 0 reads W-id sentences, one per position.
        fact_mask_initializer: with `fact_width`, the initial positional masks of `FactEmbedding` ("ones" or
            "position_encoding").
        fact_mask_trainable: with `fact_width`, whether those masks are trained (False: fixed at their
            initial value).
        classifier_readout: "mean" (of the non-padding positions), "first" or "last" (non-padding position).

    The other arguments are the hyperparameters of `ENCODER_HPARAMS` (see `hparams/defaults.py`);
    `from_hparams` reads them from an `HParams`.

    Call arguments:
        features: dict with int `"inputs"` `[B, S]` (for `fact_width` W: `[B, F * W]`); `"targets"` (`[B, 1]`
            labels) is not read.
        training: Enables dropout.
        return_details: Return `{"logits", "losses", "summaries", "ponder_times"}`.

    Returns:
        float32 logits `[B, 1, target_vocab_size]`: one "token", the answer.

    Example:

    >>> import numpy as np
    >>> model = TransformerEncoderClassifier(20, 6, hidden_size=16, filter_size=32, num_heads=2,
    ...                                      num_encoder_layers=1, position_encoding="relative")
    >>> tuple(model({"inputs": np.array([[5, 6, 7, 1]])}).shape)
    (1, 1, 6)
    """

    def __init__(self, input_vocab_size, target_vocab_size, fact_width=0, hidden_size=512, filter_size=2048,
                 num_heads=8, num_encoder_layers=6, attention_key_channels=0, attention_value_channels=0,
                 norm_position="post", norm_epsilon=1e-6, position_encoding="sinusoid", max_relative_position=16,
                 relative_keys=True, relative_values=True, heads_share_relative_embeddings=False,
                 layer_prepostprocess_dropout=0.1, attention_dropout=0.1, relu_dropout=0.1, initializer_gain=1.0,
                 classifier_readout="mean", fact_mask_initializer="ones", fact_mask_trainable=True, **kwargs):
        super().__init__(**kwargs)
        if classifier_readout not in READOUTS:
            raise ValueError(f"classifier_readout must be one of {READOUTS}, got {classifier_readout!r}")
        self.classifier_readout = classifier_readout
        self.input_vocab_size = input_vocab_size
        self.target_vocab_size = target_vocab_size
        self.fact_width = fact_width
        self.fact_mask_initializer = fact_mask_initializer
        self.fact_mask_trainable = bool(fact_mask_trainable)
        self.architecture = {
            "hidden_size": hidden_size, "filter_size": filter_size, "num_heads": num_heads,
            "num_encoder_layers": num_encoder_layers, "attention_key_channels": attention_key_channels,
            "attention_value_channels": attention_value_channels, "norm_position": norm_position,
            "norm_epsilon": norm_epsilon, "position_encoding": position_encoding,
            "max_relative_position": max_relative_position, "relative_keys": relative_keys,
            "relative_values": relative_values, "heads_share_relative_embeddings": heads_share_relative_embeddings,
            "layer_prepostprocess_dropout": layer_prepostprocess_dropout, "attention_dropout": attention_dropout,
            "relu_dropout": relu_dropout, "initializer_gain": initializer_gain,
        }
        self.hidden_size = hidden_size
        dtype = self.dtype_policy
        self.embedding = (FactEmbedding(input_vocab_size, hidden_size, fact_width,
                                        mask_initializer=fact_mask_initializer,
                                        trainable_mask=self.fact_mask_trainable, dtype=dtype, name="embedding")
                          if fact_width else TokenEmbedding(input_vocab_size, hidden_size, dtype=dtype,
                                                            name="embedding"))
        self.encoder = self.make_encoder(num_encoder_layers, stack_arguments(self.architecture, dtype))
        self.classifier = keras.layers.Dense(target_vocab_size, dtype=dtype, name="classifier")

    def make_encoder(self, num_layers, stack_kwargs):
        return TransformerEncoder(num_layers, name="encoder", **stack_kwargs)

    @classmethod
    def hparams_names(cls):
        return ENCODER_HPARAMS

    @classmethod
    def from_hparams(cls, hparams, input_vocab_size, target_vocab_size, **kwargs):
        """Builds the model described by an `HParams` (see `hparams_names`)."""
        return cls(input_vocab_size, target_vocab_size, **architecture_arguments(hparams, cls.hparams_names()),
                   **kwargs)

    def parameter_counts(self):
        """The model's parameters by part, before any weight exists (see `Transformer.parameter_counts`)."""
        return size.parameters({**self.architecture, **getattr(self, "recurrence", {})}, self.input_vocab_size,
                               self.target_vocab_size, len(getattr(self.encoder, "blocks", [None])), 0,
                               classifier=True)

    def build(self, features_shape=None):
        if not self.built:
            size.check_fits(self.parameter_counts())
        build_once(self.embedding)
        build_once(self.encoder, (None, None, self.hidden_size))
        build_once(self.classifier, (None, self.hidden_size))

    # -- the forward pass --------------------------------------------------------------------------------
    def embed(self, inputs):
        """`[B, S]` ids -> (`[B, L, hidden_size]` positions, bool `[B, L]` mask); L = S, or facts."""
        ensure_built(self)
        inputs = check_ids("inputs", inputs)
        if self.fact_width:
            return self.embedding(inputs)
        return self.embedding(inputs), ops.not_equal(inputs, PAD_ID)

    def encode_with_ponder_times(self, inputs, training=None):
        """`[B, S]` ids -> (output `[B, L, D]`, mask `[B, L]`, float32 ponder times `[B, L]` or None)."""
        x, mask = self.embed(inputs)
        return self.encoder(x, padding_mask=mask, training=training), mask, None

    def classify(self, inputs, training=None):
        """`[B, S]` ids -> float32 class logits `[B, target_vocab_size]`."""
        return self._classify(*self.encode_with_ponder_times(inputs, training=training)[:2])

    def _classify(self, encoded, mask):
        if self.classifier_readout == "mean":
            weights = ops.cast(mask, encoded.dtype)[..., None]
            pooled = ops.sum(encoded * weights, axis=1) / ops.maximum(ops.sum(weights, axis=1), 1.0)
        else:
            # The first / last True of each row (row 0's position when a row is all padding).
            positions = ops.arange(ops.shape(mask)[1], dtype="int32")[None, :]
            if self.classifier_readout == "first":
                index = ops.argmin(ops.where(mask, positions, ops.shape(mask)[1]), axis=1)
            else:
                index = ops.argmax(ops.where(mask, positions, -1), axis=1)
            pooled = ops.take_along_axis(encoded, ops.cast(index, "int32")[:, None, None], axis=1)[:, 0]
        return ops.cast(self.classifier(pooled), "float32")

    def call(self, features, training=None, return_details=False):
        check_features(features, ("inputs",))
        encoded, mask, ponder_times = self.encode_with_ponder_times(features["inputs"], training=training)
        logits = self._classify(encoded, mask)[:, None, :]
        if not return_details:
            return logits
        details = {"logits": logits, "losses": {}, "summaries": {}}
        if ponder_times is not None:
            details["ponder_times"] = {"encoder": ponder_times}
            details.update(self.ponder_details(ponder_times, mask))
        return details

    def ponder_details(self, ponder_times, mask):
        del ponder_times, mask
        return {}

    def get_config(self):
        config = super().get_config()
        config.update({"input_vocab_size": self.input_vocab_size, "target_vocab_size": self.target_vocab_size,
                       "fact_width": self.fact_width, "classifier_readout": self.classifier_readout,
                       "fact_mask_initializer": self.fact_mask_initializer,
                       "fact_mask_trainable": self.fact_mask_trainable})
        config.update(self.architecture)
        return config


@registry.register_model("universal_transformer_encoder")
@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalTransformerEncoderClassifier(RecurrentEncoderMixin, TransformerEncoderClassifier):
    """A Universal Transformer encoder (fixed steps or ACT) and a class-label output.

    With `recurrence_type="act"` the details hold the ponder loss `act_loss_weight * mean(N + R)` over the
    non-padding positions in `"losses"`, its value in `"summaries"`, and the ponder time of every position
    (every fact, with `fact_width`) in `"ponder_times"["encoder"]`.

    `num_rec_steps`, `recurrence_type`, `transition_type`, `act_max_steps`, `act_epsilon`,
    `act_halting_bias_init`, `step_timing_signal_type` and `act_loss_weight` are keyword arguments, as for
    `UniversalTransformer`.

    Args:
        **kwargs: `TransformerEncoderClassifier`'s arguments (`num_encoder_layers` is unused).

    Example:

    >>> import numpy as np
    >>> model = UniversalTransformerEncoderClassifier(20, 6, fact_width=3, hidden_size=16, filter_size=32,
    ...                                               num_heads=2, num_rec_steps=2, recurrence_type="act",
    ...                                               act_max_steps=4)
    >>> details = model({"inputs": np.array([[5, 6, 0, 7, 8, 9, 1, 0, 0]])}, return_details=True)
    >>> tuple(details["logits"].shape), tuple(details["ponder_times"]["encoder"].shape)
    ((1, 1, 6), (1, 3))
    """

    @classmethod
    def hparams_names(cls):
        return ENCODER_HPARAMS + RECURRENCE_HPARAMS

    def encode_with_ponder_times(self, inputs, training=None):
        x, mask = self.embed(inputs)
        output, ponder_times = self.encoder(x, padding_mask=mask, training=training, return_ponder_times=True)
        return output, mask, ponder_times

    def ponder_times(self, inputs):
        """Ponder time N + R of every position (every fact), 0 at padding: `[B, S]` ids -> float32 `[B, L]`."""
        return self.encode_with_ponder_times(inputs, training=False)[2]

    def ponder_details(self, ponder_times, mask):
        if not self.adaptive:
            return {}
        cost = ponder_cost(ponder_times, mask)
        return {"losses": {"act_loss": self.act_loss_weight * cost}, "summaries": {"encoder_ponder_time": cost}}
