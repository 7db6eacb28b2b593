"""The decoder's input and output: reading lines safely, writing in order, a progress line, interaction.

Outputs (the translations, the ponder plot) are written whole or not at all: a file is written under a
temporary name beside it and renamed when done (`t2t_relpos.files.atomic_write`), so an interrupted or failed
decoder leaves an earlier file at that path as it was and never a partial one under the final name. Stdout, a
pipe or a device (e.g. /dev/stdout) is written as the lines are decoded.
"""

import contextlib
import os
import sys
import time

from absl import logging

from t2t_relpos import errors, files
from t2t_relpos.data import parallel_text
from t2t_relpos.decoding import translator as translator_lib

# Lines decoded between writes: large enough for length-sorting to pay off, small enough that a reader of
# stdout (and the progress line) sees outputs soon.
CHUNK_BATCHES = 16


def check_paths(source=None, reference=None, output="-", plot=None, scored=None):
    """Fails before the model is loaded when an input is not there to read, an output cannot be written (its
    directory is missing or not writable), or an output would overwrite an input or the other output."""
    taken = [("--decode_from_file", source), ("--decode_reference", reference), ("--score_file", scored)]
    for flag, path in taken:
        if path not in (None, "-"):
            _check_input(flag, path)
    for flag, path in (("--decode_to_file", output), ("--decode_ponder_plot", plot)):
        if path in (None, "-"):
            continue
        if os.path.isdir(path):
            raise errors.DataError(f"{flag}={path} is a directory; give a file name")
        parent = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(parent):
            raise errors.DataError(f"{flag}={path}: the directory {parent} does not exist")
        if not _written_in_place(path):  # Written beside itself, then renamed: its directory must take files.
            files.check_writable_directory(os.path.dirname(os.path.realpath(path)), flag)
        for other_flag, other in taken:
            if other not in (None, "-") and _same_file(other, path):
                raise errors.DataError(f"{flag}={path} is the same file as {other_flag}={other}, which it would "
                                       f"overwrite")
        taken.append((flag, path))


def _same_file(path, other):
    """Whether writing `other` would overwrite `path`: the same regular file (through links and relative paths),
    or, for files not made yet, the same place."""
    if os.path.exists(path) and os.path.exists(other):
        return os.path.isfile(path) and os.path.samefile(path, other)
    return os.path.realpath(path) == os.path.realpath(other)


def _written_in_place(path):
    """Whether output to `path` is written to it as it comes: an existing file that is not a regular one (a
    pipe such as `>(...)`, a device such as /dev/stdout), which has no earlier content to keep and cannot be
    replaced by a renamed file."""
    return os.path.exists(path) and not os.path.isfile(path)


@contextlib.contextmanager
def open_output(path, what, mode="w"):
    """A file object for the output `path` ('-': stdout): a temporary file renamed to `path` when the block
    ends without an error (through a symbolic link, to where it points), or `path` itself where it is written
    in place. A failure to write (a full disk) is one line that names `what` and `path`."""
    if path == "-":
        yield sys.stdout
    elif _written_in_place(path):
        try:
            with open(path, mode, encoding=None if "b" in mode else "utf-8") as f:
                yield f
        except OSError as e:
            raise files.storage_error(e, what, path) from None
    else:
        with files.atomic_write(os.path.realpath(path), mode, what=what) as f:
            yield f


def _check_input(flag, path):
    if os.path.isdir(path):
        raise errors.DataError(f"{flag}={path} is a directory, not a file of lines")
    if not os.path.exists(path):  # A pipe (`<(...)`, a FIFO) or a device is read as a file is.
        raise errors.DataError(f"{flag}={path} does not exist")


def read_lines(path, flag="--decode_from_file"):
    """The lines of `path` ('-': stdin; a file, a named pipe or `<(...)`) as text; an undecodable line is an
    error that names it."""
    if path == "-":
        data = sys.stdin.buffer.read()
    else:
        _check_input(flag, path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise errors.DataError(f"cannot read {flag}={path}: {e.strerror or e}") from None
    if data.startswith(parallel_text.UTF8_BOM):  # Not text: a byte-order mark, as in the training files.
        data = data[len(parallel_text.UTF8_BOM):]
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    text = []
    for number, raw in enumerate(lines, 1):
        try:
            text.append(raw.rstrip(b"\r").decode("utf-8"))
        except UnicodeDecodeError as e:
            raise errors.DataError(f"{path}: line {number} is not valid UTF-8 (byte {raw[e.start]:#04x} at "
                                   f"column {e.start + 1})") from None
    return text


def split_text(problem, split, data_dir, num_samples=0):
    """(sources, references) as text, from the problem's own `split` (its first `num_samples`; 0: all)."""
    encoders = problem.feature_encoders(data_dir)
    sources, references = [], []
    examples = problem.dataset(split, data_dir)
    if num_samples > 0:
        examples = examples.take(num_samples)
    for example in examples.as_numpy_iterator():
        sources.append(encoders["inputs"].decode(example["inputs"].tolist()))
        references.append(encoders["targets"].decode(example["targets"].tolist()))
    return sources, references


def _encode_all(translator, sources):
    encoded = []
    for number, line in enumerate(sources, 1):
        try:
            ids, truncated = translator.encode(line)
        except ValueError as e:
            raise errors.DataError(f"line {number}: {e}") from None
        if truncated:
            logging.warning("line %d has more than %d tokens; truncated", number, translator.max_input_length)
        encoded.append(ids)
    return encoded


def decode_to_file(translator, sources, path, return_beams=False):
    """Decodes `sources` chunk by chunk, writing each chunk in order as soon as it is done (to `path`'s
    temporary name when `path` is a file: see `open_output`).

    Every line is encoded (and so checked) before anything is decoded. Returns the best hypotheses.
    """
    encoded = _encode_all(translator, sources)
    progress = _Progress(len(sources))
    best = []
    chunk = translator.batch_size * CHUNK_BATCHES
    try:
        with open_output(path, "the decoded output") as out:
            for start in range(0, len(sources), chunk):
                indices = range(start, min(start + chunk, len(sources)))
                # Blank lines too, as the Translator does: they get the empty output, their only hypothesis.
                results = translator.decode_ids([encoded[i] for i in indices])
                for i, found in zip(indices, results):
                    hypotheses = [(_one_line(translator.target_encoder.decode(ids)), score)
                                  for ids, score in translator_lib.hypotheses_of_text(sources[i], found)]
                    best.append(hypotheses[0][0])
                    if return_beams:
                        out.write("\t".join(f"{text}\t{score:.4f}" for text, score in hypotheses) + "\n")
                    else:
                        out.write(hypotheses[0][0] + "\n")
                out.flush()
                progress.update(indices.stop)
    finally:
        progress.close()
    return best


def continue_to_file(continuer, prompts, path):
    """Continues each of `prompts` (text; a language model's `lm_decode.Continuer`), writing one continuation a
    line (`lm_decode.escape`), in order, chunk by chunk as `decode_to_file` does. Returns the continuations."""
    from t2t_relpos.cli import lm_decode  # pylint: disable=import-outside-toplevel

    encoded = []
    for number, line in enumerate(prompts, 1):
        try:
            ids, truncated = continuer.encode(line)
        except ValueError as e:
            raise errors.DataError(f"line {number}: {e}") from None
        if truncated:
            logging.warning("line %d has more than %d tokens; only its last %d are the prompt", number,
                            continuer.max_input_length, continuer.max_input_length)
        encoded.append(ids)
    progress = _Progress(len(prompts))
    texts = []
    chunk = continuer.batch_size * CHUNK_BATCHES
    try:
        with open_output(path, "the generated output") as out:
            for start in range(0, len(prompts), chunk):
                indices = range(start, min(start + chunk, len(prompts)))
                found = continuer.continue_ids([encoded[i] for i in indices])
                for i, (ids, _) in zip(indices, found):
                    texts.append(continuer.decode(encoded[i], ids))
                    out.write(lm_decode.escape(texts[-1]) + "\n")
                out.flush()
                progress.update(indices.stop)
    finally:
        progress.close()
    return texts


def _one_line(text):
    """A hypothesis as one line: byte-level vocabularies can emit line breaks (and, with return_beams, tabs),
    which would shift every later line of the output file."""
    return text.replace("\r", " ").replace("\n", " ").replace("\t", " ")


def write_ponder_plot(translator, sources, path, rows=16):
    """Heatmap of the encoder's ponder time per source token for the first `rows` non-empty sources.

    A model over sentences (bAbI's facts layout) gets, instead, one bar per fact of the first source.
    """
    import numpy as np  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import ponder_plot  # pylint: disable=import-outside-toplevel

    chosen = [translator.encode(line)[0] for line in sources if line.strip()][:rows]
    if not chosen:
        raise errors.DataError("no non-empty source to plot ponder times for")
    batch = np.zeros((len(chosen), max(len(ids) for ids in chosen)), np.int32)
    for row, ids in enumerate(chosen):
        batch[row, :len(ids)] = ids
    times = np.asarray(translator.model.ponder_times(batch))
    decode = translator.input_encoder.decode
    width = getattr(translator.model, "fact_width", 0)
    if width:
        ids = chosen[0][:-1]  # Without the EOS.
        facts = [decode(ids[i:i + width]) for i in range(0, len(ids), width)]
        with open_output(path, "the ponder-time plot", "wb") as f:
            ponder_plot.write_ponder_bars(facts, times[0, :len(facts)], f)
        return path
    tokens = [[decode([i]) for i in ids[:-1]] + ["<eos>"] for ids in chosen]
    with open_output(path, "the ponder-time plot", "wb") as f:
        ponder_plot.write_ponder_heatmap(tokens, times, f)
    return path


def interactive(translator, return_beams=False, escaped=False):
    """A read-decode-print loop on the terminal; an empty line or Ctrl-D ends it. Only the outputs go to
    stdout: the prompt goes to stderr unless stdout is the terminal too. With `escaped` (a language model's
    prompts), typed lines are read and outputs written with `lm_decode`'s escapes (`\\n` for a newline)."""
    from t2t_relpos.cli import lm_decode  # pylint: disable=import-outside-toplevel

    what = "a prompt" if escaped else "a sentence"
    print(f"Type {what} and press Enter (empty line or Ctrl-D to quit).", file=sys.stderr)
    prompt_here = sys.stdout.isatty()  # input() writes its prompt to stdout (with line editing on a terminal).
    while True:
        if not prompt_here:
            sys.stderr.write("> ")
            sys.stderr.flush()
        try:
            line = _typed_line("> " if prompt_here else "")
        except EOFError:
            break
        except UnicodeDecodeError as e:  # As a bad line of a file, but skipped: the next one may be fine.
            print(f"error: the line is not valid UTF-8 (byte {e.object[e.start]:#04x} at column {e.start + 1}); "
                  "skipped", file=sys.stderr)
            continue
        if not line.strip():
            break
        try:
            hypotheses = translator.translate([lm_decode.unescape(line) if escaped else line], return_beams=True)[0]
        except ValueError as e:
            print(f"error: {e}", file=sys.stderr)
            continue
        for text, score in (hypotheses if return_beams else hypotheses[:1]):
            text = lm_decode.escape(text) if escaped else text
            print(f"{text}\t{score:.4f}" if return_beams else text, flush=True)
    return 0


def _typed_line(prompt):
    """The next line of stdin, decoded as UTF-8 (raises UnicodeDecodeError for that line alone, EOFError at the
    end). On a terminal, `input()` (line editing; the terminal gives a line at a time); from a pipe or a file,
    the line's bytes, so that a line that is not UTF-8 takes no later line with it (a text stream decodes a
    block of lines at once, and one bad byte lost them all)."""
    raw_stdin = getattr(sys.stdin, "buffer", None)
    if raw_stdin is None or sys.stdin.isatty():
        return input(prompt)
    if prompt:
        sys.stdout.write(prompt)
        sys.stdout.flush()
    raw = raw_stdin.readline()
    if not raw:
        raise EOFError
    return raw.rstrip(b"\n").rstrip(b"\r").decode("utf-8")


class _Progress:
    """'decoded N/M lines (X lines/s)' on stderr, rewritten in place on a terminal."""

    def __init__(self, total):
        self.total = total
        self.began = time.perf_counter()
        self.tty = sys.stderr.isatty()

    def update(self, done):
        rate = done / max(time.perf_counter() - self.began, 1e-9)
        text = f"decoded {done}/{self.total} lines ({rate:.1f} lines/s)"
        if self.tty:
            sys.stderr.write("\r" + text)
        else:
            sys.stderr.write(text + "\n")
        sys.stderr.flush()

    def close(self):
        if self.tty:
            sys.stderr.write("\n")
