"""Installs t2t-relpos.

`problems/` and `hparams/` sit at the top of the repository (as in tensor2tensor's layout) but are installed
inside the package as `t2t_relpos.problems` and `t2t_relpos.hparams`, so nothing called `problems` or
`hparams` ever lands at the top of site-packages.
"""

import os
import re

from setuptools import find_packages, setup

_HERE = os.path.dirname(os.path.abspath(__file__))


def _version():
    scope = {}
    with open(os.path.join(_HERE, "t2t_relpos", "version.py")) as f:
        exec(f.read(), scope)  # pylint: disable=exec-used
    return scope["__version__"]


# A Markdown link or image whose target is not absolute (http, https, mailto): `[text](target "title")`.
_RELATIVE_LINK = re.compile(r'!?\[((?:[^\[\]]|\[[^\[\]]*\])*)\]\((?!https?://|mailto:)[^()\s]*(?:\s+"[^"]*")?\)')


def long_description(readme):
    """The package's description on an index page: the README with its relative links (the repository's docs,
    benchmarks, anchors), which would be dead there, replaced by their text; absolute links are kept."""
    return _RELATIVE_LINK.sub(r"\1", readme)


def _long_description():
    with open(os.path.join(_HERE, "README.md"), encoding="utf-8") as f:
        return long_description(f.read())


# The documentation site (`make docs`): Sphinx with Markdown pages, the API reference from the docstrings.
_DOCS = ["sphinx>=7.2,<10", "myst-parser>=2.0,<6", "furo>=2023.9.10"]

_SCRIPTS = {
    "t2t-relpos-trainer": "t2t_relpos.cli.trainer:run",
    "t2t-relpos-decoder": "t2t_relpos.cli.decoder:run",
    "t2t-relpos-datagen": "t2t_relpos.cli.datagen:run",
    "t2t-relpos-avg-checkpoints": "t2t_relpos.cli.avg_checkpoints:run",
    "t2t-relpos-export": "t2t_relpos.cli.export:run",
}

setup(
    name="t2t-relpos",
    version=_version(),
    description=("Relation-aware (relative-position) self-attention and Universal Transformers "
                 "for TensorFlow 2 / Keras 3, in the style of tensor2tensor."),
    long_description=_long_description(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    # No public repository is known: the papers the package implements, and its own citation and history.
    project_urls={
        "Paper: relative positions": "https://arxiv.org/abs/1803.02155",
        "Paper: Universal Transformers": "https://arxiv.org/abs/1807.03819",
        "Based on: tensor2tensor": "https://github.com/tensorflow/tensor2tensor",
    },
    python_requires=">=3.10,<3.14",
    packages=(find_packages(include=["t2t_relpos", "t2t_relpos.*"]) +
              ["t2t_relpos.problems", "t2t_relpos.hparams"]),
    package_dir={
        "t2t_relpos.problems": "problems",
        "t2t_relpos.hparams": "hparams",
    },
    package_data={"t2t_relpos.hparams": ["*.gin"]},
    install_requires=[
        "tensorflow~=2.21.0",
        "tensorflow-text~=2.21.0",
        "tensorboard>=2.20,<3",  # tf.summary needs it; TensorFlow 2.21 no longer installs it.
        "keras>=3.10,<4",
        "tensorflow-datasets>=4.9.4,<5",
        "importlib_resources>=6",
        "sacrebleu>=2.4,<3",
        "absl-py>=2.1",
        "gin-config>=0.5,<0.6",
        "sentencepiece>=0.2,<0.3",
        "numpy>=1.26",
    ],
    extras_require={
        # jax: the backend tests (tests/test_backends.py); ctranslate2: the CTranslate2 export's round trip;
        # the docs' packages: tests/test_docs.py builds the site; ruff: `make test` lints first (ruff.toml).
        "test": ["pytest>=8", "pytest-xdist>=3.5", "jax>=0.4.36", "ctranslate2>=4.0,<5", "ruff>=0.6", *_DOCS],
        "jax": ["jax>=0.4.36"],
        "ctranslate2": ["ctranslate2>=4.0,<5"],
        "plot": ["matplotlib>=3.8"],
        "docs": _DOCS,
    },
    entry_points={"console_scripts": [f"{name}={target}" for name, target in _SCRIPTS.items()]},
    classifiers=[
        "Programming Language :: Python :: 3",
        *(f"Programming Language :: Python :: 3.{minor}" for minor in range(10, 14)),  # As python_requires.
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Intended Audience :: Science/Research",
    ],
)
