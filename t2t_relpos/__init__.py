"""t2t-relpos: relation-aware self-attention and Universal Transformers for Keras 3.

Layers live in `t2t_relpos.layers`, models in `t2t_relpos.models`, and the tensor2tensor-style registry of
problems, models and hparams sets in `t2t_relpos.registry`.
"""

from t2t_relpos.version import __version__

__all__ = ["__version__"]
