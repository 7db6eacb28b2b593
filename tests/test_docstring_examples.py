"""Every example in the package's docstrings runs and shows what it says (doctest), on the TensorFlow backend."""

import doctest
import importlib
import pathlib
import pkgutil

import pytest

import t2t_relpos

PACKAGE = pathlib.Path(t2t_relpos.__file__).parent


def _modules_with_examples():
    for module in pkgutil.walk_packages([str(PACKAGE)], prefix="t2t_relpos."):
        path = PACKAGE.joinpath(*module.name.split(".")[1:])
        source = path / "__init__.py" if module.ispkg else path.with_suffix(".py")
        if ">>>" in source.read_text(encoding="utf-8"):
            yield module.name


MODULES = sorted(_modules_with_examples())


def test_the_layers_and_models_have_examples():
    assert {"t2t_relpos.layers.relative_attention", "t2t_relpos.layers.transformer_stack",
            "t2t_relpos.layers.universal", "t2t_relpos.models.transformer"} <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples in {name} failed (output above)"
