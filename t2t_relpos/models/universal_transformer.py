"""The Universal Transformer (Dehghani et al. 2018), with fixed steps or Adaptive Computation Time."""

import keras
from keras import ops

from t2t_relpos import registry
from t2t_relpos.layers.act import ponder_cost
from t2t_relpos.layers.universal import UniversalTransformerDecoder, UniversalTransformerEncoder
from t2t_relpos.models.inputs import check_features, check_ids, ensure_built
from t2t_relpos.models.transformer import ARCHITECTURE_HPARAMS, PAD_ID, Transformer, shift_right

# Hyperparameters (names as in `hparams/defaults.py`) of the recurrence, on top of the Transformer's.
RECURRENCE_HPARAMS = (
    "num_rec_steps", "recurrence_type", "transition_type", "act_max_steps", "act_epsilon",
    "act_halting_bias_init", "act_type", "act_loss_weight", "step_timing_signal_type",
)


# The recurrence's constructor arguments (those of `UniversalTransformerEncoder` / `Decoder`) and their defaults.
RECURRENCE_DEFAULTS = {
    "num_rec_steps": 6, "recurrence_type": "basic", "transition_type": "ffn", "act_max_steps": 12,
    "act_epsilon": 0.01, "act_halting_bias_init": 1.0, "act_type": "copy", "step_timing_signal_type": "sinusoid",
}


class RecurrentEncoderMixin:
    """What the Universal Transformer models share: the recurrence's arguments (`RECURRENCE_DEFAULTS`, taken out
    of the keyword arguments), the ponder loss weight, a Universal Transformer encoder, and their config."""

    def __init__(self, input_vocab_size, target_vocab_size, act_loss_weight=0.01, **kwargs):
        # Set before the parent's __init__, which calls make_encoder (and make_decoder).
        self.recurrence = {name: kwargs.pop(name, default) for name, default in RECURRENCE_DEFAULTS.items()}
        self.act_loss_weight = act_loss_weight
        super().__init__(input_vocab_size, target_vocab_size, **kwargs)

    def make_encoder(self, num_layers, stack_kwargs):
        del num_layers  # Depth is the number of recurrent steps.
        return UniversalTransformerEncoder(**self.recurrence, **stack_kwargs, name="encoder")

    @property
    def adaptive(self):
        return self.recurrence["recurrence_type"] == "act"

    def get_config(self):
        config = super().get_config()
        config.update(self.recurrence)
        config["act_loss_weight"] = self.act_loss_weight
        return config


@registry.register_model("universal_transformer")
@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalTransformer(RecurrentEncoderMixin, Transformer):
    """Encoder-decoder Universal Transformer: one encoder block and one decoder block, each shared over steps.

    Everything else (embeddings, softmax, the `encode` / `decode` / `init_cache` / `decode_step` contract used
    by training and decoding) is the `Transformer`'s. `num_encoder_layers` and `num_decoder_layers` are
    accepted for a common configuration but unused: depth is `num_rec_steps` ("basic") or at most
    `act_max_steps` ("act"). Positions may be sinusoidal, relative (relation-aware recurrent self-attention),
    both, or none.

    With `recurrence_type="act"`, `call(..., return_details=True)` returns the ponder loss
    `act_loss_weight * (encoder ponder cost + decoder ponder cost)` in `"losses"` (each cost the mean N + R
    over non-padding positions), the mean ponder times in `"summaries"`, and the per-position ponder times
    in `"ponder_times"` (`{"encoder": [B, S], "decoder": [B, T]}`, any recurrence type). A decoder-only
    model (`input_vocab_size=None`, see `Transformer`) has the decoder's alone.

    `num_rec_steps`, `recurrence_type`, `transition_type`, `act_max_steps`, `act_epsilon`,
    `act_halting_bias_init` and `step_timing_signal_type` are those of `UniversalTransformerEncoder`.

    Args:
        input_vocab_size, target_vocab_size: Vocabulary sizes.
        act_loss_weight: Weight of the ponder cost in the training loss (0.01 in tensor2tensor).
        **kwargs: The `Transformer`'s arguments.

    Example:

    >>> import numpy as np
    >>> model = UniversalTransformer(12, 12, hidden_size=16, filter_size=32, num_heads=2, num_rec_steps=3,
    ...                              recurrence_type="act", act_max_steps=4, position_encoding="relative")
    >>> features = {"inputs": np.array([[5, 6, 7, 1]]), "targets": np.array([[7, 6, 5, 1]])}
    >>> details = model(features, return_details=True)
    >>> tuple(details["logits"].shape), sorted(details["losses"])
    ((1, 4, 12), ['act_loss'])
    >>> tuple(model.ponder_times(features["inputs"]).shape)
    (1, 4)
    """

    @classmethod
    def hparams_names(cls):
        return ARCHITECTURE_HPARAMS + RECURRENCE_HPARAMS

    # -- construction ------------------------------------------------------------------------------------
    def make_decoder(self, num_layers, stack_kwargs):
        del num_layers
        return UniversalTransformerDecoder(**self.recurrence, **stack_kwargs, name="decoder")

    # -- the forward pass --------------------------------------------------------------------------------
    def encode_with_ponder_times(self, inputs, training=None, position_offset=None):
        """`[B, S]` ids -> (encoder output `[B, S, D]`, bool mask `[B, S]`, float32 ponder times `[B, S]`)."""
        ensure_built(self)
        inputs = check_ids("inputs", inputs)
        mask = ops.not_equal(inputs, PAD_ID)
        output, ponder_times = self.encoder(self.input_embedding(inputs), padding_mask=mask, training=training,
                                            return_ponder_times=True, position_offset=position_offset)
        return output, mask, ponder_times

    def ponder_times(self, inputs):
        """Ponder time N + R of every source position (0 at padding): `[B, S]` ids -> float32 `[B, S]`.

        With "basic" recurrence every position takes `num_rec_steps`.
        """
        return self.encode_with_ponder_times(inputs, training=False)[2]

    def call(self, features, training=None, return_details=False):
        check_features(features, self.feature_names())
        targets = features["targets"]
        offset = self.shared_offset(features, training)
        encoder_output = encoder_mask = encoder_ponder = None
        if not self.decoder_only:
            encoder_output, encoder_mask, encoder_ponder = self.encode_with_ponder_times(
                features["inputs"], training=training, position_offset=offset)
        # Decoder position i predicts targets[i], so the target mask says which positions are padding.
        target_mask = ops.not_equal(targets, PAD_ID)
        y, decoder_ponder = self.decoder(self.target_embedding(shift_right(targets)), encoder_output,
                                         encoder_mask=encoder_mask, padding_mask=target_mask, training=training,
                                         return_ponder_times=True, position_offset=offset)
        logits = self.logits(y)
        if not return_details:
            return logits
        ponder_times = {"decoder": decoder_ponder}
        if not self.decoder_only:
            ponder_times["encoder"] = encoder_ponder
        details = {"logits": logits, "losses": {}, "summaries": {}, "ponder_times": ponder_times}
        if self.adaptive:
            costs = {"decoder": ponder_cost(decoder_ponder, target_mask)}
            if not self.decoder_only:
                costs["encoder"] = ponder_cost(encoder_ponder, encoder_mask)
            details["losses"]["act_loss"] = self.act_loss_weight * sum(costs.values())
            for name, cost in costs.items():
                details["summaries"][f"{name}_ponder_time"] = cost
        return details
