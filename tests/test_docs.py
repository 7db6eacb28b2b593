"""The documentation site: it builds without a warning, its links lead somewhere, and its examples run.

- The Sphinx build (`make docs`) runs with warnings as errors and nitpicky cross references (`-W -n`): a broken
  link between pages, a missing toctree document, a docstring that does not parse, a name that resolves to
  nothing all fail it. Every public name of the API has an entry in the built inventory. On the built pages:
  every class shows its `__init__`'s parameters (not Keras's `(*args, **kwargs)`), no Keras method docstring
  (`get_config`'s "Returns the config of the object.") is repeated, no link downloads a Markdown file, and every
  link to `page.html#anchor` finds the anchor.
- Every relative Markdown link in `docs/**/*.md`, `README.md` and `benchmarks/README.md` points to a file that
  exists and, with `#anchor`, to a heading of that file (GitHub's anchors, which the site uses too).
- Every line of a fenced code block of `docs/*.md`, `docs/guide/` and `docs/api/` is at most 90 characters.
- Every ```` ```python ```` block of a page runs, the page's blocks in order in one process (on TensorFlow, in a
  temporary directory). A block fenced ```` ```python notest ```` is shown and not run: one that needs data, a
  trained run, a GPU or another backend (the text beside it says what; `tests/backend_checks.py` runs the
  Backends page's on their backends). `docs/writing_docs.md` says the same for writers.
"""

import ast
import html as html_module
import importlib
import importlib.util
import os
import pathlib
import pkgutil
import re
import subprocess
import sys
import textwrap
import urllib.parse
import zlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def _pages():
    return sorted(p for p in DOCS.glob("**/*.md") if "_build" not in p.relative_to(DOCS).parts)


def _name(path, root=ROOT):
    return str(path.relative_to(root))


# -- The Sphinx build ------------------------------------------------------------------------------------------

_LOG_NOISE = re.compile(r"^(I0000|W0000|E0000|WARNING: All log messages before absl|To enable the following)")


def test_the_site_builds_without_warnings_and_documents_every_public_name(tmp_path):
    """The site built as `make docs` builds it (one test, so that parallel workers build it once)."""
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow")
    command = [sys.executable, "-m", "sphinx", "-b", "html", "-W", "--keep-going", "-n", "-j", "1", "-q",
               "-d", str(tmp_path / "doctrees"), str(DOCS), str(tmp_path / "html")]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600, check=False)
    output = "\n".join(line for line in (result.stdout + result.stderr).splitlines() if not _LOG_NOISE.match(line))
    html = tmp_path / "html"
    missing = undocumented_names(html) if (html / "objects.inv").exists() else []
    assert result.returncode == 0 and not missing, (
        f"sphinx-build -W -n: exit status {result.returncode}\n{output}\n"
        f"public names without an entry in the API reference: {missing}")
    # What the built pages show, checked on this build (the site is built once).
    assert not signatures_without_parameters(html), (
        "classes shown as (*args, **kwargs) instead of their __init__'s parameters: "
        f"{signatures_without_parameters(html)}")
    assert not inherited_keras_docstrings(html), (
        f"Keras's own method docstrings on the API pages: {inherited_keras_docstrings(html)}")
    assert not links_to_raw_markdown(html), (
        f"links that would download a Markdown file instead of showing a page: {links_to_raw_markdown(html)}")
    assert not missing_anchors(html), f"links to an anchor that the page does not have: {missing_anchors(html)}"


def _inventory(html):
    """The names in the built `objects.inv` (Sphinx's inventory format, version 2)."""
    data = (html / "objects.inv").read_bytes()
    header_end = 0
    for _ in range(4):
        header_end = data.index(b"\n", header_end) + 1
    names = set()
    for line in zlib.decompress(data[header_end:]).decode("utf-8").splitlines():
        match = re.match(r"(.+?)\s+(\S+:\S+)\s+-?\d+\s", line)
        if match:
            names.add(match.group(1))
    return names


def _api_modules():
    """The modules that docs/api/*.md document with `automodule`."""
    modules = set()
    for page in sorted((DOCS / "api").glob("*.md")):
        modules.update(re.findall(r"^\.\. automodule:: (\S+)", page.read_text(encoding="utf-8"), re.MULTILINE))
    return modules


def _public_names(module):
    """`__all__`, or the classes and functions defined in the module whose names do not start with '_'."""
    if hasattr(module, "__all__"):
        return list(module.__all__)
    return [name for name, value in vars(module).items()
            if not name.startswith("_") and getattr(value, "__module__", None) == module.__name__
            and (isinstance(value, type) or callable(value))]


def undocumented_names(html):
    """The public names that have no entry in the built site's inventory.

    Every module of the package is on an API page, except the command-line tools (flags, not an API) and the
    modules of `layers` and `models`, whose packages' __all__ is their API."""
    documented = _inventory(html)
    modules = _api_modules()
    package = importlib.import_module("t2t_relpos")
    expected = set()
    for info in pkgutil.walk_packages(package.__path__, prefix="t2t_relpos."):
        parts = info.name.split(".")
        if parts[1] == "cli" or (parts[1] in ("layers", "models") and len(parts) > 2) or parts[-1] == "version":
            continue
        expected.add(info.name)
    missing = [f"{name} (not on any docs/api/*.md page)" for name in sorted(expected - modules)]
    for name in sorted(modules):
        module = importlib.import_module(name)
        for public in _public_names(module):
            value = getattr(module, public)
            # A name re-exported by a package is documented where it is defined (`hparams.HParams`, say).
            defined = f"{getattr(value, '__module__', name)}.{getattr(value, '__qualname__', public)}"
            if f"{name}.{public}" not in documented and defined not in documented:
                missing.append(f"{name}.{public}")
    return missing


def _api_pages(html):
    return {_name(page, html): page.read_text(encoding="utf-8") for page in sorted((html / "api").glob("*.html"))}


def _text(fragment):
    """HTML as the reader sees it: tags dropped, entities decoded, white space collapsed."""
    return " ".join(html_module.unescape(re.sub(r"<[^>]+>", "", fragment)).split())


_SIGNATURE = re.compile(r'<dt class="sig sig-object py" id="([^"]+)">(.*?)</dt>', re.DOTALL)


def signatures_without_parameters(html):
    """The classes of the API pages whose signature reads `(*args, **kwargs)`: what autodoc shows of Keras's
    layers and models when it takes `keras.Layer.__new__` for the class's signature."""
    found = []
    for name, page in _api_pages(html).items():
        for target, signature in _SIGNATURE.findall(page):
            match = re.match(r"(?:class|exception) [^(]+\((.*?)\)", _text(signature))
            if match and match.group(1).replace(" ", "") == "*args,**kwargs":
                found.append(f"{name}: {target}")
    return found


def keras_method_docstrings():
    """The first lines of the docstrings of Keras's layer, model, callback, optimizer and schedule methods."""
    import keras  # pylint: disable=import-outside-toplevel

    lines = set()
    for base in (keras.Model, keras.callbacks.Callback, keras.optimizers.Adam,
                 keras.optimizers.schedules.LearningRateSchedule):
        for cls in base.__mro__:
            if not cls.__module__.startswith("keras"):
                continue
            for value in vars(cls).values():
                doc = getattr(value, "__doc__", None) if callable(value) or isinstance(value, property) else None
                first = (doc or "").strip().split("\n", 1)[0].strip()
                if len(first) >= 20:
                    lines.add(first)
    return lines


def inherited_keras_docstrings(html):
    """(page, first line) of each Keras method docstring shown on an API page (a layer's `get_config` that
    inherits Keras's "Returns the config of the object.", say)."""
    docstrings = keras_method_docstrings()
    found = []
    for name, page in _api_pages(html).items():
        text = _text(page)
        found += [(name, line) for line in sorted(docstrings) if line in text]
    return found


def _built_pages(html):
    return sorted(page for page in html.glob("**/*.html") if not _name(page, html).startswith("_"))


def links_to_raw_markdown(html):
    """Links of the built site to a `.md` file: the browser would download the Markdown (anchor dropped)."""
    found = []
    for page in _built_pages(html):
        for target in re.findall(r'<a [^>]*href="([^"]+)"', page.read_text(encoding="utf-8")):
            if re.match(r"[^#?]*\.md($|[#?])", target) and not re.match(r"[a-z]+:", target):
                found.append(f"{_name(page, html)}: {target}")
    return found


def missing_anchors(html):
    """Links between the built pages to `page.html#id` where the page has no element with that id."""
    ids, found = {}, []
    for page in _built_pages(html):
        ids[page] = set(re.findall(r'\sid="([^"]+)"', page.read_text(encoding="utf-8")))
    for page in _built_pages(html):
        for target in re.findall(r'<a [^>]*href="([^"]+)"', page.read_text(encoding="utf-8")):
            if re.match(r"[a-z]+:", target) or "#" not in target:
                continue
            file_part, _, anchor = target.partition("#")
            linked = (page.parent / file_part).resolve() if file_part else page
            if anchor and linked in ids and urllib.parse.unquote(anchor) not in ids[linked]:
                found.append(f"{_name(page, html)}: {target}")
    return found


def test_the_built_site_checks_catch_what_they_should(tmp_path):
    """The checks of the built pages, on pages made to fail them and on pages that pass."""
    (tmp_path / "api").mkdir()
    (tmp_path / "api" / "layers.html").write_text(textwrap.dedent("""\
        <dt class="sig sig-object py" id="m.Bad"><em class="property"><span class="pre">class</span> </em>
        <span class="sig-name descname"><span class="pre">Bad</span></span><span class="sig-paren">(</span>
        <em class="sig-param"><span class="o"><span class="pre">*</span></span><span class="n">args</span></em>,
        <em class="sig-param"><span class="o">**</span><span class="n">kwargs</span></em>
        <span class="sig-paren">)</span></dt>
        <dt class="sig sig-object py" id="m.Good"><em class="property">class </em>Good(<em>units</em>,
        <em>**kwargs</em>)</dt>
        <dt class="sig sig-object py" id="m.f">f(*args, **kwargs)</dt>
        <dd><p>Returns the config of the object.</p></dd>
        <a href="../benchmarks/README.md#decoding">report</a> <a href="../report.html#decoding">report</a>
        <a href="../report.html#nowhere">report</a> <a href="https://example.org/x.md#a">elsewhere</a>
        """), encoding="utf-8")
    (tmp_path / "report.html").write_text('<section id="decoding"></section>', encoding="utf-8")
    assert signatures_without_parameters(tmp_path) == ["api/layers.html: m.Bad"]
    assert ("api/layers.html", "Returns the config of the object.") in inherited_keras_docstrings(tmp_path)
    assert links_to_raw_markdown(tmp_path) == ["api/layers.html: ../benchmarks/README.md#decoding"]
    assert missing_anchors(tmp_path) == ["api/layers.html: ../report.html#nowhere"]


def test_the_studies_join_the_table_of_contents_as_they_land(tmp_path):
    """docs/studies/: no part when there are no pages (an empty glob would fail -W), every page once."""
    conf = _conf()
    assert conf._studies_toctree(str(tmp_path / "none")) == ""  # pylint: disable=protected-access
    assert conf._studies_toctree(str(tmp_path)) == ""  # pylint: disable=protected-access
    for name in ("b", "a", "index"):
        (tmp_path / f"{name}.md").write_text(f"# {name}\n", encoding="utf-8")

    def entries():
        block = conf._studies_toctree(str(tmp_path))  # pylint: disable=protected-access
        return [line for line in block.splitlines() if line and line[0] not in ":`"]

    assert entries() == ["studies/index", "studies/a", "studies/b"]
    (tmp_path / "index.md").write_text("# Studies\n\n```{toctree}\n:maxdepth: 1\n\nb\n```\n", encoding="utf-8")
    assert entries() == ["studies/index", "studies/a"]  # b is in the index's own toctree.
    (tmp_path / "index.md").unlink()
    assert entries() == ["studies/a", "studies/b"]


def _conf():
    spec = importlib.util.spec_from_file_location("docs_conf", DOCS / "conf.py")
    conf = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(conf)
    return conf


def test_an_included_report_keeps_its_links_and_anchors(tmp_path):
    """docs/conf.py's rewriting of an included file (the benchmark report): its links and images lead where they
    lead from the file's folder, links to it land on the page that includes it (anchor kept), a heading's inline
    `<a id>` becomes a MyST target; code is left alone."""
    conf = _conf()
    report = str(tmp_path / "benchmarks" / "README.md")
    included = {report: "benchmarks"}
    docs = str(tmp_path / "docs")
    text = textwrap.dedent("""\
        ## Serving <a id="serving-old-name"></a>
        [study](../docs/studies/a.md#x) ![plot](plot.png) [script](run.py) [top](#serving)
        [web](https://a.org/b) [self](README.md#serving) `[code](run.py)`
        [ref]: results/r.json
        ```sh
        [not a link](run.py)
        ```
        """)
    conf._DOCS = docs  # pylint: disable=protected-access
    rewritten = conf._site_links(text, str(tmp_path / "benchmarks"), docs, included)  # pylint: disable=protected-access
    assert rewritten == textwrap.dedent("""\
        (serving-old-name)=
        ## Serving
        [study](studies/a.md#x) ![plot](../benchmarks/plot.png) [script](../benchmarks/run.py) [top](#serving)
        [web](https://a.org/b) [self](benchmarks.md#serving) `[code](run.py)`
        [ref]: ../benchmarks/results/r.json
        ```sh
        [not a link](run.py)
        ```
        """)
    study = "See [the report](../../benchmarks/README.md#serving) and [a study](other.md).\n"
    assert conf._site_links(study, f"{docs}/studies", f"{docs}/studies", included) == (  # pylint: disable=protected-access
        "See [the report](../benchmarks.md#serving) and [a study](other.md).\n")


# -- Links -----------------------------------------------------------------------------------------------------

LINKED_FILES = [ROOT / "README.md", ROOT / "benchmarks" / "README.md"]


def _without_code(text, inline=True):
    """The lines of the text with fenced code blocks (and inline code) blanked, line numbers kept."""
    lines, fence = [], None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence is None and re.match(r"(`{3,}|~{3,})", stripped):
            fence = re.match(r"(`{3,}|~{3,})", stripped).group(1)
            lines.append("")
        elif fence is not None:
            if stripped.startswith(fence) and not stripped[len(fence):].strip():
                fence = None
            lines.append("")
        elif inline:
            lines.append(re.sub(r"(`+)(?:(?!\1).)+?\1", lambda m: " " * len(m.group(0)), line))
        else:
            lines.append(line)
    return lines


def github_anchor(heading):
    """The anchor GitHub (and myst-parser, for the site) gives a Markdown heading."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # Links and images: their text.
    text = re.sub(r"<[^>]+>", "", text)  # HTML tags.
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"(^|\s)_+|_+(\s|$)", r"\1\2", text)  # Emphasis with underscores, not snake_case.
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(path):
    """Every anchor of a Markdown file: its headings' (duplicates numbered as GitHub does), explicit
    `<a id/name=...>` anchors and myst-parser's `(label)=` targets."""
    text = path.read_text(encoding="utf-8")
    found, counts = set(), {}
    for line in _without_code(text, inline=False):
        heading = re.match(r" {0,3}#{1,6}\s+(.*?)\s*#*\s*$", line)
        if heading:
            slug = github_anchor(heading.group(1))
            found.add(slug if slug not in counts else f"{slug}-{counts[slug]}")
            counts[slug] = counts.get(slug, 0) + 1
        found.update(re.findall(r"<a\s+(?:id|name)=\"([^\"]+)\"", line))
        label = re.match(r"\(([^)\s]+)\)=\s*$", line)
        if label:
            found.add(label.group(1))
    return found


_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*(<[^>]*>|[^\s)]+)(?:\s+\"[^\"]*\")?\s*\)")
_REFERENCE = re.compile(r"^\s{0,3}\[[^\]]+\]:\s*(<[^>]*>|\S+)")
_HTML_LINK = re.compile(r"<(?:a|img)\s[^>]*?(?:href|src)=\"([^\"]+)\"")


def links(path):
    """(line number, target) of every link, image and reference definition outside code."""
    found = []
    for number, line in enumerate(_without_code(path.read_text(encoding="utf-8")), 1):
        for pattern in (_LINK, _REFERENCE, _HTML_LINK):
            for match in pattern.finditer(line):
                found.append((number, match.group(1).strip("<>")))
    return found


def broken_links(path, root=ROOT):
    problems = []
    for number, target in links(path):
        if re.match(r"[a-zA-Z][a-zA-Z0-9+.-]*:", target) or target.startswith("//"):
            continue  # A URL (http:, mailto:, ...): not checked here, there is no network.
        file_part, _, anchor = target.partition("#")
        file_part = urllib.parse.unquote(file_part)
        linked = path if not file_part else (path.parent / file_part).resolve()
        where = f"{_name(path, root)}:{number}: {target}"
        if not file_part and not anchor:
            problems.append(f"{where}: empty link")
        elif not linked.exists():
            problems.append(f"{where}: no such file")
        elif root not in linked.parents and linked != root:
            problems.append(f"{where}: outside the repository")
        elif anchor:
            if linked.suffix != ".md":
                problems.append(f"{where}: an anchor in a file that is not Markdown")
            elif urllib.parse.unquote(anchor) not in anchors(linked):
                problems.append(f"{where}: no heading or anchor #{anchor} in {_name(linked, root)}")
    return problems


@pytest.mark.parametrize("path", [p for p in LINKED_FILES if p.exists()] + _pages(), ids=_name)
def test_relative_links_lead_somewhere(path):
    problems = broken_links(path)
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_the_link_checker_catches_what_it_should(tmp_path):
    """The checker itself: a missing file, a missing heading and a wrong duplicate number are caught; GitHub's
    anchors of headings with code, punctuation and duplicates are found."""
    (tmp_path / "a.md").write_text(textwrap.dedent("""\
        # Guarantees: what is checked, crashes and resuming
        ## Training: `t2t-relpos-trainer`
        ## Notes
        ## Notes
        ```sh
        # not a heading
        ```
        [ok](#guarantees-what-is-checked-crashes-and-resuming) [ok](#training-t2t-relpos-trainer)
        [ok](#notes-1) [ok](b.md) [ok](b.md#the-b_file) [ok](https://example.org/#x) `[code](nowhere.md)`
        [bad](#notes-2) [bad](missing.md) [bad](b.md#nowhere) [bad](#not-a-heading)
        """), encoding="utf-8")
    (tmp_path / "b.md").write_text("# The `b_file`\n", encoding="utf-8")
    problems = broken_links(tmp_path / "a.md", root=tmp_path)
    assert [p.split(": ", 1)[1] for p in problems] == [
        "#notes-2: no heading or anchor #notes-2 in a.md", "missing.md: no such file",
        "b.md#nowhere: no heading or anchor #nowhere in b.md",
        "#not-a-heading: no heading or anchor #not-a-heading in a.md"]


# -- Code blocks fit the page ---------------------------------------------------------------------------------

CODE_WIDTH = 90  # Characters of a code block that the site shows without scrolling at a 1280-pixel window.


def long_code_lines(path, width=CODE_WIDTH):
    """(line number, length) of each line of a fenced code block of the Markdown file longer than `width`."""
    from markdown_it import MarkdownIt  # pylint: disable=import-outside-toplevel  (myst-parser's parser)

    found = []
    for token in MarkdownIt("commonmark").parse(path.read_text(encoding="utf-8")):
        if token.type == "fence":
            for number, line in enumerate(token.content.splitlines(), token.map[0] + 2):
                if len(line) > width:
                    found.append((number, len(line)))
    return found


SITE_PAGES = [p for folder in (DOCS, DOCS / "guide", DOCS / "api") for p in sorted(folder.glob("*.md"))]


@pytest.mark.parametrize("path", SITE_PAGES, ids=_name)
def test_code_blocks_fit_the_page(path):
    """Commands and examples wrap (a backslash, a shorter comment) rather than run off the page."""
    found = long_code_lines(path)
    assert not found, f"code lines over {CODE_WIDTH} characters in {_name(path)} (line, length): {found}"


def test_long_code_lines_are_found(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text ```` ```sh ```` is inline\n" + "x" * 120 + "\n\n```sh\nshort\n" + "y" * 91 + "\n```\n\n"
                    "- item:\n\n  ```python\n  " + "z" * 90 + "\n  ```\n", encoding="utf-8")
    assert long_code_lines(page) == [(6, 91)]


# -- Code examples ---------------------------------------------------------------------------------------------

_FENCE = re.compile(r"^(?P<indent> {0,3})(?P<fence>`{3,})python(?P<info>[^\n`]*)\n"
                    r"(?P<code>.*?)^(?P=indent)(?P=fence)\s*$", re.MULTILINE | re.DOTALL)


def python_blocks(path):
    """(first line number, code) of each ```python block to run; ```python notest blocks are left out."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        if "notest" in match.group("info").split():
            continue
        line = text.count("\n", 0, match.start("code")) + 1
        blocks.append((line, textwrap.dedent(match.group("code"))))
    return blocks


_RUNNER = """
import sys
namespace = {"__name__": "__main__"}
for path, line, code in BLOCKS:
    print(f"--- {path}:{line}", flush=True)
    exec(compile("\\n" * (line - 1) + code, path, "exec"), namespace)
"""

PAGES_WITH_EXAMPLES = [p for p in [ROOT / "README.md"] + _pages() if p.exists() and python_blocks(p)]


@pytest.mark.parametrize("path", PAGES_WITH_EXAMPLES, ids=_name)
def test_the_examples_of_a_page_run(path, tmp_path):
    blocks = [(_name(path), line, code) for line, code in python_blocks(path)]
    script = f"BLOCKS = {blocks!r}\n{_RUNNER}"
    ast.parse(script)
    env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="2", KERAS_BACKEND="tensorflow", PYTHONPATH=str(ROOT))
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=600, check=False)
    output = "\n".join(line for line in (result.stdout + result.stderr).splitlines() if not _LOG_NOISE.match(line))
    assert result.returncode == 0, f"an example of {_name(path)} failed (the block is the last '---' line):\n" \
                                   f"{output[-6000:]}"


def test_notest_blocks_are_left_out(tmp_path):
    page = tmp_path / "page.md"
    page.write_text("text\n\n```python\nx = 1\n```\n\n```python notest\nraise SystemExit(1)\n```\n\n"
                    "- item:\n\n  ```python\n  y = 2\n  ```\n", encoding="utf-8")
    assert python_blocks(page) == [(4, "x = 1\n"), (14, "y = 2\n")]


# -- Facts the pages state -------------------------------------------------------------------------------------

def test_the_act_table_is_true_to_the_sets():
    """docs/guide/universal_transformer.md's table of which adaptive set runs which ACT, against the sets."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    page = (DOCS / "guide" / "universal_transformer.md").read_text(encoding="utf-8")
    section = page.split("### Which sets run which ACT", 1)[1]
    rows = re.findall(r"^\| (`adaptive.*?) \| `(\w+)` \| (\d+) \|$", section, re.MULTILINE)
    listed = {}
    for names, act_type, max_steps in rows:
        for name in re.findall(r"`(\w+)`", names):
            listed[name] = (act_type, int(max_steps))
    adaptive = {name for name in registry.list_hparams()
                if registry.hparams(name).get("recurrence_type") == "act"}
    assert set(listed) == adaptive, f"the table lists {sorted(listed)}, the adaptive sets are {sorted(adaptive)}"
    for name, (act_type, max_steps) in listed.items():
        hparams = registry.hparams(name)
        assert (hparams.act_type, hparams.act_max_steps) == (act_type, max_steps), name
