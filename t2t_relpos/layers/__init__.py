"""Keras 3 layers, written with keras.ops (TensorFlow, JAX and PyTorch backends)."""

from t2t_relpos.layers.embedding import TokenEmbedding
from t2t_relpos.layers.position import SinusoidalPositionEncoding, StepEncoding, timing_signal
from t2t_relpos.layers.relative_attention import RelationAwareMultiHeadAttention
from t2t_relpos.layers.transformer_block import (FeedForward, TransformerDecoderBlock,
                                                 TransformerEncoderBlock)
from t2t_relpos.layers.transformer_stack import TransformerDecoder, TransformerEncoder

__all__ = [
    "FeedForward",
    "RelationAwareMultiHeadAttention",
    "SinusoidalPositionEncoding",
    "StepEncoding",
    "TokenEmbedding",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "timing_signal",
]
