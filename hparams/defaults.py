"""Every hyperparameter the package knows, with generic defaults and the allowed values of the enums.

The named sets (`*.gin` in this folder) override these; the paper's values live there, not here.
"""

from t2t_relpos.hparams.hparams_lib import HParams

CHOICES = {
    "position_encoding": ("sinusoid", "relative", "both", "none"),
    "norm_position": ("post", "pre"),
    "optimizer": ("adam", "adamw"),
    "recurrence_type": ("basic", "act"),
    "act_type": ("copy", "basic"),
    "transition_type": ("ffn", "sepconv"),
    "step_timing_signal_type": ("sinusoid", "learned"),
    "position_start_index": ("none", "random", "step"),
    "classifier_readout": ("mean", "first", "last"),
    "fact_mask_initializer": ("ones", "position_encoding"),
}


def default_hparams():
    """A fresh `HParams` with every field the models, trainer and decoder read."""
    return HParams(
        choices=CHOICES,
        # Which registered model the set is for (the trainer's --model overrides it).
        model="transformer",
        # -- Shape ------------------------------------------------------------------------------------------
        hidden_size=512,
        filter_size=2048,
        num_heads=8,
        num_encoder_layers=6,
        num_decoder_layers=6,
        attention_key_channels=0,  # Per-head key depth d_z; 0 means hidden_size // num_heads.
        attention_value_channels=0,
        shared_embedding_and_softmax_weights=True,
        norm_position="post",  # "post": the paper's residual-then-norm; "pre": norm-then-sublayer.
        norm_epsilon=1e-6,
        # -- Positions (Shaw et al. 2018) -------------------------------------------------------------------
        position_encoding="sinusoid",
        max_relative_position=16,  # Clipping distance k; 2k+1 relative labels.
        relative_keys=True,  # a^K: the Table 3 ablations switch these off.
        relative_values=True,  # a^V
        heads_share_relative_embeddings=False,
        # Position offsets in training (the Universal Transformer paper's randomized offsets, §3.4; tensor2tensor's
        # position_start_index): "none", "random" (an offset drawn in [0, max_position_offset), or in [0, the
        # input's length) when that is 0 as in tensor2tensor) or "step" (Universal Transformers: length * step /
        # steps). tensor2tensor draws independently for the encoder, the decoder and every recurrent step;
        # position_offset_shared=True draws once per batch for all of them. Inference never shifts. Only the
        # absolute (sinusoid) signal is shifted: relative models do not read these.
        position_start_index="none",
        max_position_offset=0,
        position_offset_shared=False,
        # -- Regularisation ---------------------------------------------------------------------------------
        layer_prepostprocess_dropout=0.1,
        attention_dropout=0.1,
        relu_dropout=0.1,
        label_smoothing=0.1,
        # -- Optimisation -----------------------------------------------------------------------------------
        optimizer="adam",
        optimizer_adam_beta1=0.9,
        optimizer_adam_beta2=0.98,
        optimizer_adam_epsilon=1e-9,
        weight_decay=0.0,
        learning_rate_schedule="noam",  # See t2t_relpos.training.schedules (extensible).
        learning_rate=1.0,  # Multiplier of the schedule.
        learning_rate_warmup_steps=4000,
        clip_grad_norm=0.0,  # 0 disables clipping.
        initializer_gain=1.0,
        # -- Batching (batch_size counts tokens per replica, as in tensor2tensor) ---------------------------
        batch_size=4096,
        max_length=256,  # Longer training examples are dropped.
        min_length_bucket=8,
        length_bucket_step=1.1,
        accumulation_steps=1,  # Gradient accumulation: micro-batches per optimizer step.
        # Top-level layers of the model left untrained (their weights kept as built or restored), by name:
        # ["encoder"], ["embedding", "classifier"] (OpenNMT-tf's freeze_layers). For fine-tuning and diagnosis.
        freeze_layers=[],
        # Joint multi-task training (bAbI's all-task problems): how often one pass over the training data shows
        # each example of a task, as "task:times" items (["16:4", "17:4"]: qa16's and qa17's four times, the
        # other tasks' once; "3:0" leaves qa3 out of training, not of evaluation). Other problems refuse it.
        task_repeats=[],
        train_steps=100000,
        # -- Decoding ---------------------------------------------------------------------------------------
        beam_size=4,
        alpha=0.6,
        extra_length=50,  # Decode up to source length + extra_length tokens.
        num_averaged_checkpoints=1,
        # -- Universal Transformer (Dehghani et al. 2018) ---------------------------------------------------
        num_rec_steps=6,
        recurrence_type="basic",
        transition_type="ffn",
        act_max_steps=12,
        act_epsilon=0.01,
        act_halting_bias_init=1.0,
        # "copy": a halted position's state is copied forward (Graves; the paper's text); "basic":
        # tensor2tensor's, every state transformed at every step and the output interpolated.
        act_type="copy",
        act_loss_weight=0.01,
        step_timing_signal_type="sinusoid",  # The paper's; tensor2tensor's UT sets use "learned".
        # -- Encoder-only classifiers (bAbI) ----------------------------------------------------------------
        # What the class is read from: "mean" of the non-padding positions (tensor2tensor's class-label top),
        # the "first" (the question, in bAbI's concat layout) or the "last" (the question, in the facts layout).
        classifier_readout="mean",
        # bAbI's facts layout: the initial positional masks over a fact's words, "ones" (a bag of words at first)
        # or "position_encoding" (End-To-End Memory Networks' encoding of word order).
        fact_mask_initializer="ones",
        # Whether those masks are trained (False: fixed at their initial value, as the memory networks' position
        # encoding was).
        fact_mask_trainable=True,
    )
