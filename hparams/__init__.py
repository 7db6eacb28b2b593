"""Hyperparameters: `HParams`, the package defaults, and the named sets (one `.gin` file each, here)."""

import os

from t2t_relpos import registry
from t2t_relpos.hparams.defaults import default_hparams
from t2t_relpos.hparams.hparams_lib import HParams, from_gin_files

__all__ = ["HParams", "default_hparams", "from_gin_files"]

_HERE = os.path.dirname(os.path.abspath(__file__))

for _entry in sorted(os.listdir(_HERE)):
    if _entry.endswith(".gin"):
        registry.register_hparams_file(os.path.join(_HERE, _entry))
