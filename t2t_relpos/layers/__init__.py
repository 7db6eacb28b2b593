"""Keras 3 layers, written with keras.ops (TensorFlow, JAX and PyTorch backends)."""

from t2t_relpos.layers.position import SinusoidalPositionEncoding, StepEncoding, timing_signal
from t2t_relpos.layers.relative_attention import RelationAwareMultiHeadAttention

__all__ = [
    "RelationAwareMultiHeadAttention",
    "SinusoidalPositionEncoding",
    "StepEncoding",
    "timing_signal",
]
