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


_DOCS = os.path.dirname(os.path.abspath(__file__))
_INCLUDE = re.compile(r"^(?:`{3,}|:{3,})\{include\}\s+(\S+)\s*$", re.MULTILINE)


def _included_files(srcdir=_DOCS):
    """{absolute path of a Markdown file outside the site that a page includes whole: that page's docname}.

    `docs/benchmarks.md` is a MyST `{include}` of `benchmarks/README.md`: the report is a page of the site, and
    links to the file from anywhere land on that page (`_site_links`)."""
    included = {}
    for folder, dirs, files in os.walk(srcdir):
        dirs[:] = [d for d in dirs if not d.startswith(("_", "."))]
        for name in sorted(files):
            if not name.endswith(".md"):
                continue
            page = os.path.join(folder, name)
            with open(page, encoding="utf-8") as f:
                for target in _INCLUDE.findall(f.read()):
                    path = os.path.normpath(os.path.join(folder, target))
                    if path.endswith(".md") and not path.startswith(srcdir + os.sep):
                        docname = os.path.relpath(page, srcdir)[:-3].replace(os.sep, "/")
                        included.setdefault(path, docname)
    return included


_CODE_SPAN = re.compile(r"(`+)(?:(?!\1).)+?\1")
_FENCE_OPEN = re.compile(r"\s{0,3}(`{3,}|~{3,})")
# A link's or image's destination, `[text](dest ...)` / `![alt](dest ...)`, and a reference definition's.
_DESTINATION = re.compile(r"(!?)(\]\(\s*<?)([^\s)>]+)")
_DEFINITION = re.compile(r"^(\s{0,3}\[[^\]]+\]:\s*<?)(\S+?)(?=>|\s|$)")
# `## Heading <a id="old-anchor"></a>`: an anchor kept for old links, written inside a heading (the README's).
_HEADING_ANCHOR = re.compile(r"^(\s{0,3}#{1,6}\s.*?)\s*<a\s+(?:id|name)=\"([^\"]+)\"\s*>\s*</a>\s*$")


def _rewrite_markdown(text, rewrite):
    """The Markdown `text` with each link's and image's destination outside code replaced by
    `rewrite(destination, image)` (None keeps it), and headings' inline `<a id>` anchors made MyST targets.

    An anchor inside a heading would end up in myst-parser's slug of the heading ("addition-" where GitHub has
    "addition"), and a link to it would not resolve; a `(name)=` target before the heading gives the site both."""
    lines, fence = [], None
    for line in text.split("\n"):
        opening = _FENCE_OPEN.match(line)
        if fence is not None:
            if line.strip().startswith(fence) and not line.strip()[len(fence):].strip():
                fence = None
            lines.append(line)
            continue
        if opening:
            fence = opening.group(1)
            lines.append(line)
            continue
        anchor = _HEADING_ANCHOR.match(line)
        if anchor:
            lines += [f"({anchor.group(2)})=", anchor.group(1)]
            continue

        def destination(match):
            new = rewrite(match.group(3), bool(match.group(1)))
            return match.group(0) if new is None else match.group(1) + match.group(2) + new

        def definition(match):
            new = rewrite(match.group(2), False)
            return match.group(0) if new is None else match.group(1) + new

        parts, last = [], 0
        for code in _CODE_SPAN.finditer(line):
            parts += [_DESTINATION.sub(destination, line[last:code.start()]), code.group(0)]
            last = code.end()
        parts.append(_DESTINATION.sub(destination, line[last:]))
        lines.append(_DEFINITION.sub(definition, "".join(parts)))
    return "\n".join(lines)


def _relative(destination):
    """(path, #anchor) of a relative destination; None for a URL, an absolute path or an anchor alone."""
    if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:|/|#", destination):
        return None
    path, hash_, anchor = destination.partition("#")
    return path, hash_ + anchor


def _site_links(text, file_dir, page_dir, included):
    """Rewrites the links of Markdown read from `file_dir` to be rendered as a page in `page_dir`: a link to a
    file that a page includes goes to that page (its anchor kept), other relative links and images are made
    relative to the page (the same files)."""

    def rewrite(destination, image):
        relative = _relative(destination)
        if relative is None or not relative[0]:
            return None
        path = os.path.normpath(os.path.join(file_dir, relative[0]))
        if not image and path in included:
            page = os.path.join(_DOCS, included[path] + ".md")
            return os.path.relpath(page, page_dir).replace(os.sep, "/") + relative[1]
        if file_dir == page_dir:
            return None
        return os.path.relpath(path, page_dir).replace(os.sep, "/") + relative[1]

    return _rewrite_markdown(text, rewrite)


def _included(app):
    if not hasattr(app, "t2t_included_files"):
        app.t2t_included_files = _included_files(os.fspath(app.srcdir))
    return app.t2t_included_files


def _page_links(app, docname, source):
    """source-read: a page's links to an included file go to the page that includes it."""
    page_dir = os.path.dirname(os.fspath(app.env.doc2path(docname)))
    source[0] = _site_links(source[0], page_dir, page_dir, _included(app))


def _included_links(app, relative_path, parent_docname, content):  # pylint: disable=unused-argument
    """include-read: an included file's relative links and images lead where they lead from the file itself."""
    page_dir = os.path.dirname(os.fspath(app.env.doc2path(app.env.docname)))
    file_dir = os.path.dirname(os.path.normpath(os.path.join(os.fspath(app.srcdir), os.fspath(relative_path))))
    content[0] = _site_links(content[0], file_dir, page_dir, _included(app))


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


def _docstring_origin(obj, name):
    """The class whose docstring a method or property `obj` (named `name`, defined in a class) shows: the nearest
    class of the defining class's MRO that gives the name a docstring. None where it is not a class's member."""
    function = getattr(obj, "fget", None) or getattr(obj, "__func__", None) or obj
    owner = inspect.getmodule(function)
    for part in getattr(function, "__qualname__", "").split(".")[:-1]:
        owner = getattr(owner, part, None)
    if not isinstance(owner, type):
        return None
    for cls in owner.__mro__:
        if getattr(cls.__dict__.get(name), "__doc__", None):
            return cls
    return None


def _skip_undocumented_methods(app, what, name, obj, skip, options):  # pylint: disable=unused-argument,too-many-arguments
    """A class's members without a docstring of the package's (Keras's `call`, `build`, a layer's `get_config`
    that would show Keras's own docstring, ...) stay out of the reference, and so do its data attributes (the class
    docstring's "Attributes:" describes them); a module's public functions, classes and constants are all in it.

    A method that inherits its docstring from a class of the package (an override of a documented method) stays.
    """
    if what == "class" and not skip:
        routine = inspect.isroutine(obj) or isinstance(obj, (property, type))
        if not routine or not inspect.getdoc(obj):
            return True
        if not isinstance(obj, type) and not (obj.__doc__ or "").strip():
            origin = _docstring_origin(obj, name)
            if origin is None or not origin.__module__.startswith("t2t_relpos."):
                return True
    return None


def _init_parameters(mro):
    """The parameters (without `self`) of the first `__init__` in `mro`, a class's MRO or a tail of it; where it
    takes `*args` and passes them on, the next `__init__`'s parameters stand in for them (a layer that adds one
    keyword to its base's shows both)."""
    index = next((i for i, cls in enumerate(mro) if "__init__" in cls.__dict__), None)
    if index is None:
        return []
    owner = mro[index]
    parameters = list(inspect.signature(owner.__dict__["__init__"]).parameters.values())[1:]
    kinds = [p.kind for p in parameters]
    if inspect.Parameter.VAR_POSITIONAL not in kinds or owner is object:
        return parameters
    star = kinds.index(inspect.Parameter.VAR_POSITIONAL)
    before, after = parameters[:star], [p for p in parameters[star + 1:] if p.kind is p.KEYWORD_ONLY]
    keywords = [p for p in parameters if p.kind is p.VAR_KEYWORD]
    base = _init_parameters(mro[index + 1:])
    if not base:
        return parameters
    names = {p.name for p in before + after}
    keywords = [p for p in base if p.kind is p.VAR_KEYWORD] and keywords
    merged = before + [p for p in base if p.name not in names and p.kind is not p.VAR_KEYWORD] + after + keywords
    try:
        inspect.Signature(merged)
    except ValueError:  # Parameters that cannot be put together in one signature: the class's own.
        return parameters
    return merged


def _init_signature(app, what, name, obj, options, signature, return_annotation):  # pylint: disable=unused-argument,too-many-arguments
    """A class's signature is its `__init__`'s, with the defaults (type hints are in the description).

    Autodoc takes the first of the metaclass's `__call__`, `__new__` and `__init__` that the class defines or
    inherits; for Keras's layers and models that is `keras.Layer.__new__(*args, **kwargs)`, which says nothing.
    An `__init__(self, *args, **kwargs)` that passes everything on to its base shows the base's parameters.
    """
    if what != "class" or not isinstance(obj, type) or obj.__init__ is object.__init__:
        return None
    try:
        parameters = _init_parameters(obj.__mro__)
    except (TypeError, ValueError):
        return None
    parameters = [p.replace(annotation=inspect.Parameter.empty) for p in parameters]
    return str(inspect.Signature(parameters)), None


_STUDIES = os.path.join(_DOCS, "studies")


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
    app.connect("source-read", _page_links)
    app.connect("include-read", _included_links)
    app.connect("autodoc-skip-member", _skip_undocumented_methods)
    app.connect("autodoc-process-signature", _init_signature)
    # After napoleon (priority 500) has turned the Google-style sections into fields.
    app.connect("autodoc-process-docstring", _literal_blocks, priority=600)
    app.add_transform(_FilesOutsideTheSite)
