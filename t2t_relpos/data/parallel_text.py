"""Reading parallel text: line-aligned file pairs, TSV files and WMT's SGML test sets, plain or gzipped.

Every reader yields `(source, target)` pairs of str, lazily (corpora of millions of lines stream through).
Lines are split on "\\n" only (a "\\r" before it is dropped, and a UTF-8 byte-order mark at the start of a
file); everything else in a line is kept as it is, so text reaches the vocabulary exactly as written. Malformed
input (invalid UTF-8, files of different lengths, a TSV line without exactly one tab, a damaged or truncated
gzip file, a file that cannot be read) is a `DataError` that names the file and the line.
"""

import contextlib
import gzip
import re
import zlib

from t2t_relpos import errors, files

_SEGMENT = re.compile(r"<seg[^>]*>(.*)</seg>")


def open_binary(path):
    """`path` opened for reading bytes, decompressed if its name ends in ".gz"."""
    reason = files.not_a_file(path)
    if reason:
        raise errors.DataError(f"{path} {reason}")
    try:
        # pylint: disable-next=consider-using-with
        return gzip.open(path, "rb") if path.endswith(".gz") else open(path, "rb")
    except OSError as e:
        raise errors.DataError(f"cannot read {path}: {e.strerror or e}") from None


@contextlib.contextmanager
def _reading(path, lines_read):
    """Turns the errors of reading `path` (a damaged gzip stream, an I/O error) into a `DataError` naming the file
    and how far it was read (`lines_read()`: the lines read whole so far)."""
    try:
        yield
    except (EOFError, zlib.error, OSError) as e:
        where = f"after line {lines_read():,}" if lines_read() else "before its first line"
        if isinstance(e, EOFError):  # gzip: the stream ends before its end marker.
            reason = f"the gzip data ends early, {where} (a truncated copy or download?)"
        elif isinstance(e, zlib.error):
            reason = f"damaged gzip data {where} ({e})"
        elif isinstance(e, gzip.BadGzipFile):  # Not gzip at all, or a failed CRC or length check at the end.
            reason = f"not readable as gzip {where} ({e}); a name ending in .gz must hold gzip data"
        else:
            reason = f"cannot be read {where}: {e.strerror or e}"
        raise errors.DataError(f"{path}: {reason}") from None


UTF8_BOM = b"\xef\xbb\xbf"


def read_lines(path):
    """Yields the lines of a (possibly gzipped) UTF-8 text file, without their line ends or a leading byte-order
    mark (which editors on Windows write, and which would otherwise become the first sentence's first piece)."""
    number = 0
    with _reading(path, lambda: number), open_binary(path) as f:
        for number, raw in enumerate(f, 1):
            if number == 1 and raw.startswith(UTF8_BOM):
                raw = raw[len(UTF8_BOM):]
            if raw.endswith(b"\n"):
                raw = raw[:-1]
            if raw.endswith(b"\r"):
                raw = raw[:-1]
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise errors.DataError(f"{path}: line {number} is not valid UTF-8 (byte {raw[e.start]:#04x} at "
                                       f"column {e.start + 1})") from None
            yield text


def read_sgm_segments(path):
    """Yields the text of each `<seg id="...">text</seg>` line of a WMT SGML file (as tensorflow-datasets)."""
    for line in read_lines(path):
        match = _SEGMENT.search(line)
        if match:
            yield match.group(1)


def _read_any(path):
    return read_sgm_segments(path) if path.endswith((".sgm", ".sgm.gz")) else read_lines(path)


def aligned_pairs(source_path, target_path):
    """Yields (source line, target line) of two line-aligned files (text, or SGML for names ending ".sgm")."""
    sources, targets = _read_any(source_path), _read_any(target_path)
    count = 0
    while True:
        source, target = next(sources, None), next(targets, None)
        if source is None and target is None:
            return
        if source is None or target is None:
            longer, shorter = (target_path, source_path) if source is None else (source_path, target_path)
            raise errors.DataError(f"{shorter} ends after {count} lines but {longer} goes on: line-aligned "
                                   "files must have the same number of lines")
        count += 1
        yield source, target


def tsv_pairs(path):
    """Yields (source, target) from a file of `source<TAB>target` lines."""
    for number, line in enumerate(read_lines(path), 1):
        columns = line.split("\t")
        if len(columns) != 2:
            raise errors.DataError(f"{path}: line {number} has {len(columns) - 1} tabs; a TSV line must be "
                                   "source<TAB>target (a sentence containing a tab needs line-aligned files)")
        yield columns[0], columns[1]


def count_lines(path):
    """The number of lines of a (possibly gzipped) file, without decoding them."""
    count = 0
    with _reading(path, lambda: count), open_binary(path) as f:
        for count, _ in enumerate(f, 1):  # noqa: B007  The count is read after the loop and on an error.
            pass
    return count
