"""Keras 3 layers, written with keras.ops (TensorFlow, JAX and PyTorch backends)."""

from t2t_relpos.layers.act import AdaptiveComputationTime, ponder_cost
from t2t_relpos.layers.embedding import TokenEmbedding
from t2t_relpos.layers.fact_embedding import FactEmbedding
from t2t_relpos.layers.position import PositionOffset, SinusoidalPositionEncoding, StepEncoding, timing_signal
from t2t_relpos.layers.relative_attention import RelationAwareMultiHeadAttention
from t2t_relpos.layers.transformer_block import FeedForward, TransformerDecoderBlock, TransformerEncoderBlock
from t2t_relpos.layers.transformer_stack import TransformerDecoder, TransformerEncoder
from t2t_relpos.layers.transition import SeparableConvTransition
from t2t_relpos.layers.universal import UniversalTransformerDecoder, UniversalTransformerEncoder
from t2t_relpos.layers.universal_block import UniversalDecoderBlock, UniversalEncoderBlock

__all__ = [
    "AdaptiveComputationTime",
    "FactEmbedding",
    "FeedForward",
    "RelationAwareMultiHeadAttention",
    "PositionOffset",
    "SeparableConvTransition",
    "SinusoidalPositionEncoding",
    "StepEncoding",
    "TokenEmbedding",
    "TransformerDecoder",
    "TransformerDecoderBlock",
    "TransformerEncoder",
    "TransformerEncoderBlock",
    "UniversalDecoderBlock",
    "UniversalEncoderBlock",
    "UniversalTransformerDecoder",
    "UniversalTransformerEncoder",
    "ponder_cost",
    "timing_signal",
]
