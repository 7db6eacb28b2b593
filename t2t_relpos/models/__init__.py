"""Registered models built from `t2t_relpos.layers`."""

from t2t_relpos.models.transformer import Transformer

__all__ = ["Transformer"]
