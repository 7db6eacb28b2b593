"""Sphinx configuration of the t2t-relpos documentation (`make docs`; tests/test_docs.py builds it with -W -n).

Pages are Markdown (myst-parser); the API reference is autodoc over the package's Google-style docstrings
(napoleon). Nothing is fetched at build time: no intersphinx, so names of other packages (keras, tf, numpy)
are shown as written and not linked.
"""

import inspect
import os
import re
import sys

_ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), os.pardir))
sys.path.insert(0, _ROOT)  # The checkout's package, also when it is not installed (editable installs are).

# Quiet TensorFlow's C++ logs while autodoc imports the modules; the command-line tools' allocator choice.
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

from sphinx import addnodes  # noqa: E402  pylint: disable=wrong-import-position
from sphinx.transforms import SphinxTransform  # noqa: E402  pylint: disable=wrong-import-position

from t2t_relpos.version import __version__  # noqa: E402  pylint: disable=wrong-import-position

project = "t2t-relpos"
author = "the t2t-relpos authors"
copyright = "the t2t-relpos authors"  # pylint: disable=redefined-builtin
version = release = __version__

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]

# Markdown: fenced ```{directive} blocks, ::: blocks, $math$, and anchors for headings down to ####, so that
# [text](page.md#a-heading) links are checked by Sphinx like any cross reference.
myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 4

# In docstrings, `name` is code, as in Markdown (reStructuredText's default would set it in italics).
default_role = "code"

# Autodoc: members in source order, signatures without the type hints' clutter (the docstrings give shapes).
autodoc_default_options = {
    "members": True,
    "undoc-members": True,  # Every public name of a module; a class's undocumented methods are left out (below).
    "member-order": "bysource",
    "show-inheritance": True,
}
autodoc_typehints = "description"
autodoc_class_signature = "mixed"
autosummary_generate = False  # Nothing is written into the source tree at build time.
napoleon_google_docstring = True
napoleon_numpy_docstring = False
napoleon_use_rtype = False
napoleon_custom_sections = [("Call arguments", "params_style"), ("Returns (dict)", "returns_style")]

# Nitpicky (-n) builds check every cross reference; names of other packages cannot be resolved without
# intersphinx (no network at build time), so they are left as text.
nitpick_ignore_regex = [
    ("py:.*", r"(keras|tf|tensorflow|np|numpy|jax|torch|gin|sentencepiece|ctranslate2|absl|abc)(\..*)?"),
    # Private base classes named by "Bases:" (show-inheritance); they are not part of the API.
    ("py:class", r"t2t_relpos\..*\._\w+"),
]

html_theme = "furo"
html_title = f"t2t-relpos {version}"
html_static_path = []


def _literal_blocks(app, what, name, obj, options, lines):  # pylint: disable=unused-argument,too-many-arguments
    """Shows the docstrings' indented examples as code.

    The package's docstrings (Google style) introduce an example or a table with a paragraph, a blank line and
    an indented block, as plain text reads best; reStructuredText would take that block for a quotation (and
    warn where it holds deeper indentation). Each such block becomes a literal block: the paragraph before it
    ends with "::" (or a "::" paragraph, which shows nothing, is put before it).
    """
    i = 0
    while i < len(lines):
        line = lines[i]
        indent = len(line) - len(line.lstrip())
        j = i + 1
        while j < len(lines) and not lines[j].strip():
            j += 1
        follows = (line.strip() and j > i + 1 and j < len(lines)
                   and len(lines[j]) - len(lines[j].lstrip()) > indent)
        if follows and not line.lstrip().startswith(".."):
            if not line.rstrip().endswith("::"):
                if line.rstrip().endswith(":"):
                    lines[i] = line.rstrip() + ":"
                else:
                    lines.insert(i + 1, "")
                    lines.insert(i + 2, " " * indent + "::")
                    j += 2
            # Past the literal block: its lines are blank or indented deeper than the paragraph.
            while j < len(lines) and (not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent):
                j += 1
            i = j
            continue
        i += 1


class _FilesOutsideTheSite(SphinxTransform):
    """Links from a page to a Markdown file of the repository outside docs/ (`../benchmarks/README.md`) become
    links to a copy of that file, as links to other files (scripts, images) already are.

    Such links are right on GitHub and in a checkout; myst-parser would take the file for a page of the site and
    warn that it is missing. A file that does not exist stays a broken link, and -W fails on it.
    """

    default_priority = 100

    def apply(self, **kwargs):
        for node in list(self.document.findall(addnodes.pending_xref)):
            if node.get("reftype") != "myst" or node.get("refdomain") != "doc":
                continue
            target = node["reftarget"]
            if target in self.env.all_docs or target in self.env.found_docs:
                continue
            path = os.path.normpath(target) + ".md"
            if not os.path.isabs(path) or not os.path.isfile(path) or not path.startswith(_ROOT + os.sep):
                continue
            here = os.path.dirname(str(self.env.doc2path(node["refdoc"])))
            link = addnodes.download_reference(refdomain=None, reftype="myst", refexplicit=True,
                                               refdoc=node["refdoc"], reftarget=os.path.relpath(path, here))
            link.extend(child.deepcopy() for child in node.children)
            node.replace_self(link)


def _skip_undocumented_methods(app, what, name, obj, skip, options):  # pylint: disable=unused-argument,too-many-arguments
    """A class's members without a docstring (Keras's `call`, `build`, ...) stay out of the reference, and so do
    its data attributes (the class docstring's "Attributes:" describes them); a module's public functions,
    classes and constants are all in it."""
    if what == "class" and not skip:
        routine = inspect.isroutine(obj) or isinstance(obj, (property, type))
        if not routine or not inspect.getdoc(obj):
            return True
    return None


_STUDIES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "studies")


def _studies_toctree(folder=_STUDIES):
    """The "Studies" part of the table of contents: every page in docs/studies/, as they land.

    `studies/index.md`, where there is one, comes first and its own toctree orders the pages it lists; the pages it
    does not list follow, so a new page joins the site by itself (like a `studies/*` glob, without listing a page
    twice). No pages, no part (an empty glob would be a warning).
    """
    pages = sorted(name[:-3] for name in os.listdir(folder) if name.endswith(".md")) if os.path.isdir(folder) else []
    if not pages:
        return ""
    entries, listed = [], set()
    if "index" in pages:
        entries.append("studies/index")
        with open(os.path.join(folder, "index.md"), encoding="utf-8") as f:
            for block in re.findall(r"^```\{toctree\}\n(.*?)^```", f.read(), re.MULTILINE | re.DOTALL):
                listed.update(line.strip() for line in block.splitlines() if line.strip() and line[0] != ":")
    entries += [f"studies/{page}" for page in pages if page != "index" and page not in listed]
    return "```{toctree}\n:caption: Studies\n:maxdepth: 1\n:hidden:\n\n" + "\n".join(entries) + "\n```\n\n"


def _add_studies(app, docname, source):  # pylint: disable=unused-argument
    if docname == "index":
        source[0] = source[0].replace("```{toctree}\n:caption: Reference", _studies_toctree() +
                                      "```{toctree}\n:caption: Reference", 1)


def setup(app):
    app.connect("source-read", _add_studies)
    app.connect("autodoc-skip-member", _skip_undocumented_methods)
    # After napoleon (priority 500) has turned the Google-style sections into fields.
    app.connect("autodoc-process-docstring", _literal_blocks, priority=600)
    app.add_transform(_FilesOutsideTheSite)
