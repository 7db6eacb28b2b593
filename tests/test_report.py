"""The benchmark report, benchmarks/README.md, stays a report and not a lab notebook (pure file reading, fast).

Per benchmark it gives a headline, one table, a command and its provenance; experiment logs, superseded tables
and run-by-run histories belong in docs/studies/. These checks hold it to that: its length, its prose lines'
length, no machine paths, no "uncommitted" code (a figure names the commit it ran on), no issue numbers, and a
command block in every section.
"""
import pathlib
import re

import pytest

REPORT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "README.md"
MAX_LINES = 450
MAX_PROSE_LINE = 250
ABSOLUTE_PATH = re.compile(r"(?<![\w.])(/work/|/tmp/|/home/|/root/|~/)")
ISSUE = re.compile(r"\bissues? #?\d+|(?<![\w&])#\d+\b", re.IGNORECASE)


def _without_links(line):
    """The line less its Markdown link targets and HTML anchors (where `#name` is an anchor, not an issue)."""
    line = re.sub(r"\]\([^)]*\)", "]()", line)
    return re.sub(r"<a\s[^>]*>", "", line)


def problems(text):
    """What makes `text` (a report) fail the checks, one line each."""
    lines = text.splitlines()
    found = []
    if len(lines) > MAX_LINES:
        found.append(f"{len(lines)} lines (at most {MAX_LINES}): move logs and old tables to docs/studies/")
    for number, line in enumerate(lines, 1):
        if len(line) > MAX_PROSE_LINE and not line.startswith("|"):
            found.append(f"line {number}: {len(line)} characters outside a table")
        if ABSOLUTE_PATH.search(line):
            found.append(f"line {number}: a machine path: {ABSOLUTE_PATH.search(line).group(0)}")
        if "uncommitted" in line.lower():
            found.append(f"line {number}: 'uncommitted': name the commit the code ran on")
        if ISSUE.search(_without_links(line)):
            found.append(f"line {number}: an issue reference: {ISSUE.search(_without_links(line)).group(0)}")
    sections = re.split(r"(?m)^## ", text)[1:]
    for section in sections:
        if not re.search(r"(?m)^```", section):
            found.append(f"section '{section.splitlines()[0]}' has no command block")
    return found


def test_the_report_is_a_report():
    assert REPORT.exists()
    found = problems(REPORT.read_text(encoding="utf-8"))
    assert not found, "benchmarks/README.md:\n" + "\n".join(found)


@pytest.mark.parametrize("text, expected", [
    ("# B\n\n## A\n\n```sh\nx\n```\n", []),
    ("# B\n\n## A\n\nno command\n", ["section 'A' has no command block"]),
    ("## A\n\nran in /work/runs/x\n\n```sh\nx\n```\n", ["line 3: a machine path: /work/"]),
    ("## A\n\nran on abc + uncommitted changes\n\n```sh\nx\n```\n",
     ["line 3: 'uncommitted': name the commit the code ran on"]),
    ("## A\n\nthe target of issue 44\n\n```sh\nx\n```\n", ["line 3: an issue reference: issue 44"]),
    ("## A\n\nsee #44.\n\n```sh\nx\n```\n", ["line 3: an issue reference: #44"]),
    ("## A <a id=\"x-2\"></a>\n\n[b](#table-4-copy) [c](study.md#x-2026-11-27)\n\n```sh\nx\n```\n", []),
    ("## A\n\n" + "w " * 130 + "\n\n| " + "c " * 200 + "|\n\n```sh\nx\n```\n",
     ["line 3: 260 characters outside a table"]),
])
def test_the_checks_catch_what_they_should(text, expected):
    assert problems(text) == expected


def test_the_checks_fail_on_the_lab_notebook():
    """The report as it was before it was condensed (1602 lines, 17 addition sections) fails on every count."""
    old = ("# Benchmarks\n\n" + "## Addition\n\ntrained in /work/runs/a (issue 44), code b11e16b + uncommitted "
           "changes\n\n" + "x" * 300 + "\n") * 70
    found = problems(old)
    assert any("lines (at most" in p for p in found)
    for kind in ("characters outside a table", "a machine path", "'uncommitted'", "an issue reference",
                 "no command block"):
        assert any(kind in p for p in found), kind
