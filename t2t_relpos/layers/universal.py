"""The Universal Transformer's recurrence (Dehghani et al. 2018): one block applied over T steps.

At step t (0-based here) the shared block reads its previous state plus the signals P^t:

    A^t = LayerNorm((H^{t-1} + P^t) + SelfAttention(H^{t-1} + P^t))
    H^t = LayerNorm(A^t + Transition(A^t))

as in the paper and tensor2tensor (the signals enter the residual too). P^t is the sinusoid of each position
(unless positions are relative-only or absent) plus the signal of the step t: its sinusoid (the paper's) or a
trained vector per step (`step_timing_signal_type="learned"`, tensor2tensor's default). With `position_encoding`
"relative" or "both" the recurrent self-attention is relation-aware (Shaw et al. 2018). The recurrence is
"basic" (exactly `num_rec_steps` steps) or "act" (Adaptive Computation Time per position, at most
`act_max_steps` steps; see `AdaptiveComputationTime`).
"""

import keras
from keras import ops

from t2t_relpos.layers.act import ACT_TYPES, AdaptiveComputationTime
from t2t_relpos.layers.checks import check_int, keras_mask
from t2t_relpos.layers.position import SinusoidalPositionEncoding, StepEncoding
from t2t_relpos.layers.transformer_stack import block_arguments, position_offset_layer, self_caches, source_mask
from t2t_relpos.layers.universal_block import TRANSITION_TYPES, UniversalDecoderBlock, UniversalEncoderBlock

RECURRENCE_TYPES = ("basic", "act")


class _UniversalBase(keras.layers.Layer):
    """The shared block, its signals and the recurrence; the arguments of both the encoder and the decoder.

    Args:
        num_rec_steps: T, the steps of the "basic" recurrence.
        hidden_size, num_heads, filter_size, key_dim, value_dim, max_relative_position, use_relative_keys,
            use_relative_values, heads_share_relative_embeddings, dropout, attention_dropout, relu_dropout,
            norm_position, norm_epsilon, kernel_initializer: as for `TransformerEncoder`.
        position_encoding: "sinusoid" (the paper), "relative" (relation-aware self-attention, no absolute
            signal), "both" or "none"; the step signal is added in every case.
        transition_type: "ffn" or "sepconv".
        recurrence_type: "basic" or "act".
        act_max_steps, act_epsilon, act_halting_bias_init, act_type: see `AdaptiveComputationTime`.
        step_timing_signal_type: "sinusoid" (the paper's step signal) or "learned" (tensor2tensor's default:
            a trained vector per step); see `StepEncoding`.
        position_start_index: "none", "random" or "step": in training, the position signal of every recurrent
            step starts at an offset (tensor2tensor's `position_start_index`; the paper's randomized offsets,
            §3.4): a random one drawn anew at every step, or floor(T * step / num_steps). See `PositionOffset`.
            A caller that shares one offset (between the encoder and the decoder, and over the steps) passes
            it as the call argument `position_offset` instead. Not read without an absolute signal.
        max_position_offset: "random" offsets are drawn from [0, max_position_offset); None: [0, T), with T
            the length of the call's input (tensor2tensor's range).
    """

    block_class = None

    def __init__(self, num_rec_steps, hidden_size, num_heads, filter_size, key_dim=None, value_dim=None,
                 position_encoding="sinusoid", max_relative_position=16, use_relative_keys=True,
                 use_relative_values=True, heads_share_relative_embeddings=False, dropout=0.0,
                 attention_dropout=0.0, relu_dropout=0.0, norm_position="post", norm_epsilon=1e-6,
                 kernel_initializer="glorot_uniform", transition_type="ffn", recurrence_type="basic",
                 act_max_steps=12, act_epsilon=0.01, act_halting_bias_init=1.0, act_type="copy",
                 step_timing_signal_type="sinusoid", position_start_index="none", max_position_offset=None,
                 extra_block_arguments=None, **kwargs):
        super().__init__(**kwargs)
        if transition_type not in TRANSITION_TYPES:
            raise ValueError(f"transition_type must be one of {TRANSITION_TYPES}, got {transition_type!r}")
        if recurrence_type not in RECURRENCE_TYPES:
            raise ValueError(f"recurrence_type must be one of {RECURRENCE_TYPES}, got {recurrence_type!r}")
        num_rec_steps = check_int("num_rec_steps", num_rec_steps, 1)
        # ACT's arguments are checked whatever the recurrence: they are part of the config either way.
        act_max_steps = check_int("act_max_steps", act_max_steps, 1)
        if act_type not in ACT_TYPES:
            raise ValueError(f"act_type must be one of {ACT_TYPES}, got {act_type!r}")
        if not 0.0 <= act_epsilon < 1.0:
            raise ValueError(f"act_epsilon must be in [0, 1), got {act_epsilon}")
        self.num_rec_steps = num_rec_steps
        self.position_encoding = position_encoding
        self.recurrence_type = recurrence_type
        self.act_max_steps = act_max_steps
        self.act_epsilon = act_epsilon
        self.act_halting_bias_init = act_halting_bias_init
        self.act_type = act_type
        self.step_timing_signal_type = step_timing_signal_type
        self.position_start_index = position_start_index
        self.max_position_offset = max_position_offset
        self.block_kwargs, block_kwargs = block_arguments(
            position_encoding, hidden_size=hidden_size, num_heads=num_heads, filter_size=filter_size,
            key_dim=key_dim, value_dim=value_dim, max_relative_position=max_relative_position,
            use_relative_keys=use_relative_keys, use_relative_values=use_relative_values,
            heads_share_relative_embeddings=heads_share_relative_embeddings, dropout=dropout,
            attention_dropout=attention_dropout, relu_dropout=relu_dropout, norm_position=norm_position,
            norm_epsilon=norm_epsilon, kernel_initializer=kernel_initializer, transition_type=transition_type)
        dtype = self.dtype_policy
        self.block = self.block_class(**block_kwargs, **(extra_block_arguments or {}), dtype=dtype, name="block")
        self.position_signal = SinusoidalPositionEncoding(dtype=dtype)
        self.position_offset = position_offset_layer(position_encoding, position_start_index,
                                                     max_position_offset, dtype)
        self.step_signal = StepEncoding(step_timing_signal_type,
                                        num_steps=act_max_steps if recurrence_type == "act" else num_rec_steps,
                                        dtype=dtype, name="step_signal")
        for signal in (self.position_signal, self.step_signal):
            signal.supports_masking = True  # They only read the shape of a (possibly masked) state.
        self.input_dropout = keras.layers.Dropout(dropout, dtype=dtype)
        self.act = None
        if recurrence_type == "act":
            self.act = AdaptiveComputationTime(act_max_steps, act_epsilon, act_halting_bias_init,
                                               kernel_initializer=kernel_initializer, act_type=act_type,
                                               dtype=dtype, name="act")
        self.final_norm = (keras.layers.LayerNormalization(epsilon=norm_epsilon, dtype=dtype, name="final_norm")
                           if norm_position == "pre" else None)

    @property
    def num_steps(self):
        """How many times the block runs: `num_rec_steps`, or `act_max_steps` with ACT."""
        return self.act_max_steps if self.act is not None else self.num_rec_steps

    @property
    def uses_absolute_positions(self):
        return self.position_encoding in ("sinusoid", "both")

    def _build_recurrence(self, x_shape):
        self.step_signal.build(x_shape)
        if self.act is not None:
            self.act.build(x_shape)
        if self.final_norm is not None:
            self.final_norm.build(x_shape)

    def _signals(self, h, step, start_index, training=None, position_offset=None):
        """H^{t-1} + P^t: the position signal (if absolute, shifted by the step's offset) and the step signal."""
        if self.uses_absolute_positions:
            if position_offset is None and self.position_offset is not None:
                position_offset = self.position_offset(h, step=step, num_steps=self.num_steps, training=training)
            if position_offset is not None:
                start_index = start_index + position_offset
            h = h + self.position_signal(h, start_index=start_index)
        return h + self.step_signal(h, step=step)

    def _recur(self, x, step_fn, padding_mask, halt_early=False):
        """Runs the recurrence: (output `[B, L, D]`, float32 ponder times `[B, L]`, zero at padding).

        `halt_early` (ACT at inference): stop once every position has halted; the results are the same.
        """
        if self.act is not None:
            result = self.act(x, step_fn=step_fn, padding_mask=padding_mask, halt_early=halt_early)
            output, ponder_times = result["output"], result["ponder_times"]
        else:
            for step in range(self.num_rec_steps):
                x = step_fn(step, x)[1]
            output = x
            shape = ops.shape(x)[:2]
            valid = ops.ones(shape, "float32") if padding_mask is None else ops.cast(padding_mask, "float32")
            ponder_times = valid * float(self.num_rec_steps)
        if self.final_norm is not None:
            output = self.final_norm(output)
        return output, ponder_times

    def compute_output_shape(self, input_shape, *args, **kwargs):
        return input_shape

    def get_config(self):
        config = super().get_config()
        config.update(self.block_kwargs)
        config.update({
            "num_rec_steps": self.num_rec_steps,
            "position_encoding": self.position_encoding,
            "recurrence_type": self.recurrence_type,
            "act_max_steps": self.act_max_steps,
            "act_epsilon": self.act_epsilon,
            "act_halting_bias_init": self.act_halting_bias_init,
            "act_type": self.act_type,
            "step_timing_signal_type": self.step_timing_signal_type,
            "position_start_index": self.position_start_index,
            "max_position_offset": self.max_position_offset,
        })
        return config


@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalTransformerEncoder(_UniversalBase):
    """One encoder block shared over the recurrent steps (the Universal Transformer's encoder).

    Args: see `_UniversalBase` (the block arguments are those of `TransformerEncoder`).

    Call arguments:
        x: `[B, S, hidden_size]` embedded tokens.
        padding_mask: bool `[B, S]`, False at padding (default: the Keras mask of x). Padding positions are
            masked as keys and, with ACT, never run and cost no ponder time.
        training: Enables dropout and position offsets; `training=False` with ACT also stops the loop once
            all positions halted.
        return_ponder_times: Also return the ponder time of each position.
        position_offset: int scalar: the position signal of every step starts there (instead of the offsets
            `position_start_index` draws).

    Returns:
        `[B, S, hidden_size]`; with `return_ponder_times`, also float32 `[B, S]` ponder times N + R (ACT) or
        `num_rec_steps` ("basic"), zero at padding.

    Example:

    >>> import numpy as np
    >>> encoder = UniversalTransformerEncoder(num_rec_steps=3, hidden_size=16, num_heads=2, filter_size=32,
    ...                                       position_encoding="relative", max_relative_position=4,
    ...                                       recurrence_type="act", act_max_steps=6)
    >>> out, ponder = encoder(np.random.rand(2, 5, 16).astype("float32"), return_ponder_times=True)
    >>> tuple(out.shape), tuple(ponder.shape)
    ((2, 5, 16), (2, 5))
    """

    block_class = UniversalEncoderBlock

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.supports_masking = True

    def build(self, x_shape):
        self.block.build(x_shape)
        self._build_recurrence(x_shape)

    def call(self, x, padding_mask=None, training=None, return_ponder_times=False, position_offset=None):
        if padding_mask is None:
            padding_mask = keras_mask(x)
        x = self.input_dropout(x, training=training)

        def step_fn(step, h):
            h = self._signals(h, step, 0, training, position_offset)
            return h, self.block(h, padding_mask=padding_mask, training=training)

        output, ponder_times = self._recur(x, step_fn, padding_mask, halt_early=training is False)
        return (output, ponder_times) if return_ponder_times else output

    def compute_output_spec(self, x, padding_mask=None, training=None, return_ponder_times=False,
                            position_offset=None):
        out = keras.KerasTensor(tuple(x.shape), dtype=self.compute_dtype)
        if return_ponder_times:
            return out, keras.KerasTensor(tuple(x.shape[:2]), dtype="float32")
        return out


@keras.saving.register_keras_serializable(package="t2t_relpos")
class UniversalTransformerDecoder(_UniversalBase):
    """One decoder block shared over the recurrent steps; it attends to the final encoder state at each step.

    With `use_cross_attention=False` it is the recurrence of a decoder-only language model: the block has no
    attention to an encoder, `encoder_output` is None, and `init_cache(None, max_length, batch_size=B)`.

    Incremental decoding keeps one self-attention cache per recurrent step (the keys and values of step t
    are projections of H^{t-1} + P^t, different at every step) and the encoder's keys and values once (the
    block, hence its cross-attention, is shared by all steps). With ACT every step of every new position is
    computed, halted or not, and its keys/values are written: a halted position's state is copied forward
    (`act_type="copy"`) or transformed on (`"basic"`), and later positions attend, at each step, to that state
    plus the step's signal, exactly as in the full pass. Cached decoding therefore equals the full pass, ACT
    included.

    Args: see `_UniversalBase` (the block arguments are those of `TransformerDecoder`).

    Call arguments:
        y: `[B, T, hidden_size]` embedded (right-shifted) targets.
        encoder_output: `[B, S, hidden_size]`; may be None when `cache` is given.
        encoder_mask: bool `[B, S]`, False at source padding (default: the Keras mask of `encoder_output`).
        padding_mask: bool `[B, T]`, False at target padding: with ACT those positions do not run and cost
            no ponder time (attention is causal, so padding at the end never reaches valid positions).
        cache: from `init_cache`, for incremental decoding; then `cache_index` is the position of y's first
            step and the updated cache is returned too.
        training: Enables dropout and position offsets; `training=False` with ACT and no cache also stops
            the loop once all positions halted.
        return_ponder_times: Also return the ponder time of each position.
        position_offset: int scalar added to the positions of every step's signal (instead of the offsets
            `position_start_index` draws).

    Returns:
        `[B, T, hidden_size]`, then float32 `[B, T]` ponder times if `return_ponder_times`, then the new cache
        if `cache` was passed.

    Example:

    >>> import numpy as np
    >>> decoder = UniversalTransformerDecoder(num_rec_steps=3, hidden_size=16, num_heads=2, filter_size=32,
    ...                                       recurrence_type="act", act_max_steps=4)
    >>> memory = np.random.rand(2, 7, 16).astype("float32")
    >>> cache = decoder.init_cache(memory, max_length=10)
    >>> y, cache = decoder(np.zeros((2, 1, 16), "float32"), None, cache=cache, cache_index=0)
    >>> tuple(y.shape), len(cache["self"])
    ((2, 1, 16), 4)
    """

    block_class = UniversalDecoderBlock

    def __init__(self, *args, use_cross_attention=True, **kwargs):
        self.use_cross_attention = bool(use_cross_attention)
        super().__init__(*args, extra_block_arguments={"use_cross_attention": self.use_cross_attention}, **kwargs)

    def build(self, y_shape, encoder_output_shape=None):
        self.block.build(y_shape, encoder_output_shape)
        self._build_recurrence(y_shape)

    def init_cache(self, encoder_output, max_length, encoder_mask=None, batch_size=None):
        """`max_length` empty self-attention positions per recurrent step, and the encoder's keys/values.

        `encoder_mask` defaults to the Keras mask of `encoder_output`, else no source padding. Without
        cross-attention there is no encoder: pass `encoder_output=None` and the `batch_size`.
        """
        if not self.use_cross_attention:
            return {"self": self_caches(self, encoder_output, batch_size, max_length, lambda batch: [
                self.block.init_cache(batch, max_length) for _ in range(self.num_steps)])}
        if not self.built:  # The encoder's keys/values need the cross-attention weights.
            width = encoder_output.shape[-1]
            self.build((None, None, self.block_kwargs["hidden_size"]), (None, None, width))
        batch = ops.shape(encoder_output)[0]
        encoder_mask = source_mask(encoder_output, encoder_mask)
        return {
            "encoder_mask": encoder_mask,
            "self": [self.block.init_cache(batch, max_length) for _ in range(self.num_steps)],
            "cross": self.block.compute_cross_cache(encoder_output),
        }

    def call(self, y, encoder_output=None, encoder_mask=None, padding_mask=None, cache=None, cache_index=None,
             training=None, return_ponder_times=False, position_offset=None):
        if cache is not None:
            encoder_mask = cache.get("encoder_mask")
            cross = cache.get("cross")
            new_self = list(cache["self"])
        elif not self.use_cross_attention:
            cross = None
        else:
            if encoder_mask is None:
                encoder_mask = keras_mask(encoder_output)
            # The block is shared, so the encoder's keys and values are projected once for all steps.
            cross = self.block.compute_cross_cache(encoder_output)
        start_index = 0 if cache_index is None else cache_index
        y = self.input_dropout(y, training=training)

        def step_fn(step, h):
            h = self._signals(h, step, start_index, training, position_offset)
            if cache is None:
                return h, self.block(h, encoder_mask=encoder_mask, cross_cache=cross, training=training)
            out, new_self[step] = self.block(h, encoder_mask=encoder_mask, self_cache=new_self[step],
                                             cross_cache=cross, cache_index=cache_index, training=training)
            return h, out

        # Incremental decoding runs every step (later positions need each step's keys and values).
        halt_early = training is False and cache is None
        output, ponder_times = self._recur(y, step_fn, padding_mask, halt_early=halt_early)
        results = [output]
        if return_ponder_times:
            results.append(ponder_times)
        if cache is not None:
            results.append({**cache, "self": new_self})
        return results[0] if len(results) == 1 else tuple(results)

    def get_config(self):
        config = super().get_config()
        config["use_cross_attention"] = self.use_cross_attention
        return config

    def compute_output_spec(self, y, encoder_output=None, encoder_mask=None, padding_mask=None, cache=None,
                            cache_index=None, training=None, return_ponder_times=False, position_offset=None):
        results = [keras.KerasTensor(tuple(y.shape), dtype=self.compute_dtype)]
        if return_ponder_times:
            results.append(keras.KerasTensor(tuple(y.shape[:2]), dtype="float32"))
        if cache is not None:
            results.append(keras.tree.map_structure(lambda t: keras.KerasTensor(t.shape, dtype=t.dtype), cache))
        return results[0] if len(results) == 1 else tuple(results)
