"""Registered models built from `t2t_relpos.layers`."""

from t2t_relpos.models.encoder_classifier import TransformerEncoderClassifier, UniversalTransformerEncoderClassifier
from t2t_relpos.models.transformer import Transformer
from t2t_relpos.models.universal_transformer import UniversalTransformer

__all__ = ["Transformer", "TransformerEncoderClassifier", "UniversalTransformer",
           "UniversalTransformerEncoderClassifier"]
