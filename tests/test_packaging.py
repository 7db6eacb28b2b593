"""What the package ships besides its code: the licence, the citation, the history, and what setup.py tells an
index (its description without the README's relative links, which are dead there, and its links)."""

import os
import re
import runpy

import pytest
import setuptools

from t2t_relpos import version

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(name="setup_args")
def fixture_setup_args(monkeypatch):
    """The keyword arguments setup.py gives `setuptools.setup`, and its module's names, without building."""
    given = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: given.update(kwargs))
    module = runpy.run_path(os.path.join(ROOT, "setup.py"))
    return given, module


def _read(name):
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return f.read()


def test_the_licence_is_the_apache_license_setup_py_declares_and_ships(setup_args):
    given, _ = setup_args
    text = _read("LICENSE")
    assert given["license"] == "Apache-2.0" and given["license_files"] == ["LICENSE"]
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text and "http://www.apache.org/licenses/LICENSE-2.0" in text


def test_the_citation_is_cff_of_this_version_and_cites_both_papers():
    text = _read("CITATION.cff")
    try:
        import yaml  # pylint: disable=import-outside-toplevel
    except ImportError:  # PyYAML comes with TensorFlow's dependencies, not with this package.
        yaml = None
    if yaml is not None:
        cff = yaml.safe_load(text)
        assert cff["cff-version"] == "1.2.0" and cff["title"] == "t2t-relpos"
        assert cff["version"] == version.__version__  # A string: 0.1.0 would not be, unquoted, were it 0.1.
        assert cff["authors"] == [{"name": "the t2t-relpos authors"}] and cff["license"] == "Apache-2.0"
        papers = {ref["title"]: ref for ref in cff["references"]}
        assert [a["family-names"] for a in papers["Self-Attention with Relative Position Representations"][
            "authors"]] == ["Shaw", "Uszkoreit", "Vaswani"]
        assert [a["family-names"] for a in papers["Universal Transformers"]["authors"]] == [
            "Dehghani", "Gouws", "Vinyals", "Uszkoreit", "Kaiser"]
        assert {ref["url"] for ref in papers.values()} == {"https://arxiv.org/abs/1803.02155",
                                                         "https://arxiv.org/abs/1807.03819"}
    assert re.search(rf"^version: \"?{re.escape(version.__version__)}\"?$", text, re.M)
    assert "arXiv:1803.02155" in text and "arXiv:1807.03819" in text


def test_the_changelog_covers_this_version():
    text = _read("CHANGELOG.md")
    assert f"## {version.__version__}" in text
    assert "31.0" in text and "30.41 +- 0.52" in text and "29.65 +- 1.44" in text


def test_the_description_on_an_index_has_no_relative_links(setup_args):
    """The README's ~40 links to docs/ and benchmarks/ would be dead on an index page: their text stays, the
    link goes; absolute links stay links."""
    given, module = setup_args
    description = given["long_description"]
    targets = re.findall(r"\]\(([^)\s]*)", description)
    assert targets and all(re.match(r"(https?|mailto):", target) for target in targets), targets
    assert "https://arxiv.org/abs/1803.02155" in targets  # The README's links to the papers.
    assert given["long_description_content_type"] == "text/markdown"
    sample = ('See [the guide](docs/guide/training.md), [Guarantees](#guarantees "title"), '
              '![plot](benchmarks/plot.png), [`x[0]`](a.md) and [the paper](https://arxiv.org/abs/1803.02155).')
    assert module["long_description"](sample) == (
        "See the guide, Guarantees, plot, `x[0]` and [the paper](https://arxiv.org/abs/1803.02155).")


def test_the_project_urls_are_real_pages(setup_args):
    """No repository of the package is public: the links are the papers' (and tensor2tensor's), not a guess."""
    given, _ = setup_args
    urls = given["project_urls"]
    assert urls["Paper: relative positions"] == "https://arxiv.org/abs/1803.02155"
    assert urls["Paper: Universal Transformers"] == "https://arxiv.org/abs/1807.03819"
    assert all(url.startswith(("https://arxiv.org/", "https://github.com/tensorflow/")) for url in urls.values())
    assert given["version"] == version.__version__ and given["python_requires"] == ">=3.10,<3.14"
