"""A tiny trained run, decoded through the decoder CLI, averaged, and exported as a SavedModel."""

import contextlib
import io
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from test_cli import assert_usage_error, call_tool, run_tool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run trained for a few steps by the trainer CLI, with checkpoints at steps 10 and 20 and an export.

    In mixed precision: the export (of a float32 model) once failed after the run with a traceback."""
    directory = tmp_path_factory.mktemp("run")
    result = run_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                      "--hparams_set=transformer_cpu_rel", "--hparams=batch_size=256,max_length=12,beam_size=2",
                      f"--output_dir={directory}", "--train_steps=20", "--checkpoint_every=10", "--schedule=train",
                      "--mixed_precision=mixed_bfloat16", "--export", timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Exported a SavedModel" in result.stdout
    return directory


def write(path, data):
    path.write_bytes(data)
    return str(path)


def decode(run_dir, *args, stdin=None):
    return run_tool("t2t-relpos-decoder", f"--output_dir={run_dir}", *args, stdin=stdin, timeout=300)


def decode_here(run_dir, *args, stdin=None):
    """`decode` in this process (`test_cli.call_tool`): no new process importing TensorFlow. The decoder as a
    process: `test_round_trip_...`'s first decoding, and test_faults.py's."""
    return call_tool("t2t-relpos-decoder", f"--output_dir={run_dir}", *args, stdin=stdin)


def test_round_trip_keeps_order_empty_lines_and_truncates_long_lines(run_dir, tmp_path):
    lines = ["0123", "", "   ", "98765432101234", "42", "7"]
    source = write(tmp_path / "source.txt", ("\n".join(lines) + "\n").encode())
    reference = write(tmp_path / "reference.txt", ("\n".join(line[::-1] for line in lines) + "\n").encode())
    output = tmp_path / "out.txt"
    result = decode(run_dir, f"--decode_from_file={source}", f"--decode_to_file={output}",
                    f"--decode_reference={reference}", "--decode_hparams=beam_size=2,batch_size=2,"
                    "max_input_length=8,extra_length=4")
    assert result.returncode == 0, result.stderr
    decoded = output.read_text(encoding="utf-8").split("\n")
    assert len(decoded) == len(lines) + 1 and decoded[-1] == ""
    assert decoded[1] == "" and decoded[2] == ""
    assert all(set(text) <= set("0123456789+") for text in decoded)
    assert "line 4" in result.stderr and "truncated" in result.stderr
    assert "char_accuracy" in result.stderr and not result.stdout  # Scores are diagnostics; outputs went to the file.

    # The same lines one at a time from stdin give the same outputs (batching does not change results).
    for line, expected in zip(lines[:2], decoded):
        alone = decode_here(run_dir, "--decode_from_file=-", "--decode_hparams=beam_size=2,max_input_length=8,"
                            "extra_length=4", stdin=line + "\n")
        assert alone.returncode == 0, alone.stderr
        assert alone.stdout.split("\n")[0] == expected


@pytest.mark.parametrize("data, fragment", [(b"12\n\xff\xfe3\n", "line 2"), (b"12\n34\n5a6\n", "line 3")])
def test_bad_input_names_the_line_and_loses_nothing(run_dir, tmp_path, data, fragment):
    source = write(tmp_path / "source.txt", data)
    output = tmp_path / "out.txt"
    output.write_text("earlier results\n", encoding="utf-8")
    result = decode_here(run_dir, f"--decode_from_file={source}", f"--decode_to_file={output}")
    assert_usage_error(result, fragment)
    assert output.read_text(encoding="utf-8") == "earlier results\n"


def test_decode_split_reports_accuracy_by_length(run_dir):
    """`--decode_split=eval > out.txt`: the outputs on stdout, one per example, and the scores on stderr (they
    were mixed into the outputs)."""
    result = decode_here(run_dir, "--decode_split=eval", "--decode_hparams=beam_size=1,num_samples=20,"
                         "extra_length=5", "--decode_to_file=-")
    assert result.returncode == 0, result.stderr
    assert "char_accuracy" in result.stderr and "(20 sequences)" in result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 21 and lines[-1] == "" and all(set(line) <= set("0123456789") for line in lines), lines


def test_averaged_checkpoints_decode(run_dir, tmp_path):
    averaged = tmp_path / "averaged"
    result = call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={run_dir}", "--num_last=2",
                       f"--averaged_dir={averaged}")
    assert result.returncode == 0, result.stderr
    assert "Averaged 2 checkpoints (ckpt-10 .. ckpt-20)" in result.stdout
    decoded = decode_here(averaged, "--decode_from_file=-", "--decode_hparams=beam_size=1,extra_length=3",
                          stdin="0123\n")
    assert decoded.returncode == 0, decoded.stderr
    assert "ckpt-20" in decoded.stderr


RELOAD = """
import json, sys
sys.modules["t2t_relpos"] = None  # The SavedModel must not need this package.
import tensorflow as tf
translate = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = translate(tf.constant(json.loads(sys.argv[2])))
print(json.dumps([t.decode() for t in out["outputs"].numpy().tolist()]))
"""


def test_exported_saved_model_reloads_in_a_fresh_process_and_decodes(run_dir):
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    export_dir = os.path.join(run_dir, "export", "20")
    texts = ["0123456", "", "7654321", "1 2 3 4 5 6 7"]  # 7 symbols: the same decoding length on both sides.
    result = subprocess.run([sys.executable, "-c", RELOAD, export_dir, json.dumps(texts)], capture_output=True,
                            text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    exported = json.loads(result.stdout.strip().splitlines()[-1])

    model, problem, hparams, _ = runs.load(str(run_dir))
    translator = translator_lib.Translator(model, problem, beam_size=hparams.beam_size, alpha=hparams.alpha,
                                           extra_length=hparams.extra_length)
    assert exported == translator.translate(texts)
    assert exported[1] == ""


def test_ponder_plot_needs_a_universal_transformer(run_dir, tmp_path):
    result = decode_here(run_dir, "--decode_from_file=-", f"--decode_ponder_plot={tmp_path / 'p.png'}", stdin="12\n")
    assert_usage_error(result, "Universal Transformer")


def test_ponder_plot_of_decoded_sources(tmp_path):
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import decode_io  # pylint: disable=import-outside-toplevel
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer  # pylint: disable=import-outside-toplevel

    problem = registry.problem("algorithmic_reverse_decimal40")
    model = trainer.build_model(registry.hparams("adaptive_universal_transformer_cpu_rel"), problem)
    translator = translator_lib.Translator(model, problem, beam_size=1)
    path = decode_io.write_ponder_plot(translator, ["0123", "", "98765"], str(tmp_path / "ponder.png"))
    with open(path, "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def one_line_error(result, *fragments):
    assert_usage_error(result, *fragments)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


@pytest.mark.parametrize("output_flag, input_flag", [("--decode_to_file", "--decode_from_file"),
                                                     ("--decode_to_file", "--decode_reference"),
                                                     ("--decode_ponder_plot", "--decode_from_file")])
def test_an_output_that_is_an_input_is_refused_and_loses_nothing(run_dir, tmp_path, output_flag, input_flag):
    source = write(tmp_path / "source.txt", b"0123\n4567\n")
    reference = write(tmp_path / "reference.txt", b"3210\n7654\n")
    target = source if input_flag == "--decode_from_file" else reference
    result = decode_here(run_dir, f"--decode_from_file={source}", f"--decode_reference={reference}",
                         f"{output_flag}={target}", "--decode_hparams=beam_size=1,extra_length=2")
    one_line_error(result, f"{output_flag}={target} is the same file as {input_flag}={target}")
    assert (tmp_path / "source.txt").read_bytes() == b"0123\n4567\n"
    assert (tmp_path / "reference.txt").read_bytes() == b"3210\n7654\n"


# Paths relative to the working directory tmp_path/sub; link.txt -> source.txt, hard.txt is a hard link to it,
# later.txt -> out.txt (which does not exist yet).
@pytest.mark.parametrize("paths, flags", [
    ({"source": "../source.txt", "output": "../sub/../source.txt"}, ("--decode_to_file", "--decode_from_file")),
    ({"source": "../source.txt", "output": "../link.txt"}, ("--decode_to_file", "--decode_from_file")),
    ({"reference": "../link.txt", "output": "../hard.txt"}, ("--decode_to_file", "--decode_reference")),
    ({"reference": "../source.txt", "plot": "./../link.txt"}, ("--decode_ponder_plot", "--decode_reference")),
    ({"output": "out.txt", "plot": "../sub/out.txt"}, ("--decode_ponder_plot", "--decode_to_file")),
    ({"output": "later.txt", "plot": "out.txt"}, ("--decode_ponder_plot", "--decode_to_file")),
])
def test_same_file_is_seen_through_links_and_relative_paths(tmp_path, monkeypatch, paths, flags):
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import decode_io  # pylint: disable=import-outside-toplevel

    source = write(tmp_path / "source.txt", b"12\n")
    os.symlink(source, tmp_path / "link.txt")
    os.link(source, tmp_path / "hard.txt")
    (tmp_path / "sub").mkdir()
    os.symlink("out.txt", tmp_path / "sub" / "later.txt")
    monkeypatch.chdir(tmp_path / "sub")
    with pytest.raises(errors.DataError, match=f"^{flags[0]}=.* is the same file as {flags[1]}="):
        decode_io.check_paths(**paths)
    decode_io.check_paths("../source.txt", "../source.txt", "-")  # Reading one file twice overwrites nothing.
    decode_io.check_paths("../source.txt", output="out.txt", plot="plot.png")
    decode_io.check_paths(output=os.devnull, plot=os.devnull)  # Not a regular file: nothing to lose.


@pytest.mark.parametrize("setting, message", [
    ({"alpha": float("nan")}, "decoding setting 'alpha' must be a finite number, got nan"),
    ({"temperature": float("nan"), "beam_size": 1}, "decoding setting 'temperature' must be a finite number"),
    ({"temperature": float("inf"), "beam_size": 1}, "decoding setting 'temperature' must be a finite number"),
    ({"alpha": float("-inf")}, "decoding setting 'alpha' must be a finite number"),
    ({"top_k": 3, "beam_size": 4}, "decoding setting 'top_k' only applies when sampling (temperature > 0)"),
    ({"top_k": 3, "temperature": 0.0}, "decoding setting 'top_k' only applies when sampling (temperature > 0)"),
])
def test_decoding_settings_that_would_be_wrong_or_ignored_are_refused(setting, message):
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel

    with pytest.raises(errors.HParamsError, match=re.escape(message)):
        translator_lib.check_settings(**setting)
    translator_lib.check_settings(temperature=0.7, top_k=3)


@pytest.mark.parametrize("setting, message", [
    ("alpha=nan", "decoding setting 'alpha' must be a finite number, got nan"),
    ("top_k=3", "decoding setting 'top_k' only applies when sampling (temperature > 0)"),
    ("num_samples=1", "decoding setting 'num_samples' only applies to --decode_split"),
    # > 0 in Python, 0 in the search's float32 (sampling then drew ids outside the vocabulary).
    ("temperature=1e-320,beam_size=1", "decoding setting 'temperature' must be 0 (no sampling) or at least "
                                       "1.175e-38"),
    ("alpha=40", "decoding setting 'alpha' = 40.0 makes the length penalty ((5 + length) / 6) ** alpha overflow "
                 "float32 at length"),
    ("beam_size", "malformed --decode_hparams item 'beam_size': expected name=value"),
])
def test_bad_decode_hparams_are_one_line(run_dir, setting, message):
    one_line_error(decode_here(run_dir, "--decode_from_file=-", f"--decode_hparams={setting}", stdin="12\n"), message)


def test_return_beams_lines_hold_real_hypotheses_only(run_dir, tmp_path):
    """`beam_size` pairs where there are as many hypotheses; a blank line its only one, the empty output (it
    was padded with ("", -inf) placeholders, which read as hypotheses)."""
    source = write(tmp_path / "source.txt", b"12\n\n  \n345\n")
    output = tmp_path / "out.txt"
    result = decode_here(run_dir, f"--decode_from_file={source}", f"--decode_to_file={output}",
                         "--decode_hparams=beam_size=3,return_beams=true")
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [len(row) for row in rows] == [6, 2, 2, 6]
    assert rows[1] == rows[2] == ["", "0.0000"]


# Issue 46: what a decoder leaves when it is stopped or cannot write, and the inputs it reads.

def test_an_interrupted_decoder_leaves_an_earlier_output_whole_and_no_partial_one(run_dir, tmp_path, monkeypatch):
    """Ctrl-C after the first chunk was written: the earlier file at --decode_to_file is as it was (it was
    emptied at the start, then held the lines decoded so far, each whole: a partial output that looked
    complete), and nothing else is left beside it; one line, status 130."""
    from t2t_relpos.cli import decode_io  # pylint: disable=import-outside-toplevel
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel

    source = write(tmp_path / "source.txt", b"12\n34\n56\n78\n")
    output = tmp_path / "out.txt"
    output.write_text("earlier results\n", encoding="utf-8")
    monkeypatch.setattr(decode_io, "CHUNK_BATCHES", 1)  # Chunks of batch_size=2 lines: two here.
    decode_ids, chunks = translator_lib.Translator.decode_ids, []

    def interrupted_at_the_second_chunk(self, sources):
        chunks.append(sources)
        if len(chunks) == 2:
            raise KeyboardInterrupt
        return decode_ids(self, sources)

    monkeypatch.setattr(translator_lib.Translator, "decode_ids", interrupted_at_the_second_chunk)
    try:
        result = decode_here(run_dir, f"--decode_from_file={source}", f"--decode_to_file={output}",
                             "--decode_hparams=beam_size=1,batch_size=2,extra_length=2")
    except KeyboardInterrupt:
        pytest.fail("Ctrl-C left the decoder as a KeyboardInterrupt: a traceback, and pytest would stop here")
    assert result.returncode == 130, result.stderr
    assert result.stderr.splitlines()[-1] == "t2t-relpos-decoder: error: interrupted", result.stderr
    assert "Traceback" not in result.stderr and "decoded 2/4 lines" in result.stderr
    assert output.read_text(encoding="utf-8") == "earlier results\n"
    assert sorted(os.listdir(tmp_path)) == ["out.txt", "source.txt"]


def error_line(result, message):
    """The run failed with status 2 and `message` as its one error line (other stderr lines are progress)."""
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    assert [line for line in result.stderr.splitlines() if "error" in line] == [message], result.stderr


def test_a_full_disk_under_the_output_is_one_line(run_dir):
    result = decode_here(run_dir, "--decode_from_file=-", "--decode_to_file=/dev/full",
                         "--decode_hparams=beam_size=1,extra_length=2", stdin="12\n")
    error_line(result, "t2t-relpos-decoder: error: cannot write the decoded output to /dev/full: no space left on "
                       "the device")
    # A stdout on a full disk, every tool's: test_faults_decoder.py.


def test_a_closed_stdout_ends_the_decoder_quietly(run_dir):
    """`t2t-relpos-decoder ... | head -1`, head gone: status 141 as a Unix tool's, no BrokenPipeError traceback.
    (What Python's flush at exit would print is checked on real processes in test_faults_decoder.py.)"""
    read_end, write_end = os.pipe()
    os.close(read_end)
    with os.fdopen(write_end, "wb") as stdout:
        result = call_tool("t2t-relpos-decoder", f"--output_dir={run_dir}", "--decode_from_file=-",
                           "--decode_hparams=beam_size=1,extra_length=2", stdin="12\n34\n", stdout=stdout)
    assert result.returncode == 141, result.stderr
    assert "Traceback" not in result.stderr and "error" not in result.stderr, result.stderr


def test_interactive_decoding_prints_only_outputs_on_stdout(run_dir):
    """`--decode_interactive > out.txt`: the prompts go to stderr where stdout is not the terminal (input() wrote
    them into the outputs)."""
    result = decode_here(run_dir, "--decode_interactive", "--decode_hparams=beam_size=1,extra_length=2",
                         stdin="12\n34\n\n")
    assert result.returncode == 0, result.stderr
    assert len(result.stdout.split("\n")) == 3 and set(result.stdout) <= set("0123456789\n"), result.stdout
    assert result.stderr.count("> ") == 3, result.stderr


class Reverser:
    """A translator that reverses its input: the interactive loop without a model."""

    def translate(self, texts, return_beams=False):
        assert return_beams
        return [[(text[::-1], 0.0)] for text in texts]


def test_interactive_decoding_skips_a_line_that_is_not_utf8_and_goes_on(monkeypatch, capsys):
    """It was a UnicodeDecodeError traceback from input(); a bad line of a file stops the decoder before it
    decodes, but one typed is skipped, as a line the model refuses is, and the lines after it are decoded."""
    from t2t_relpos.cli import decode_io  # pylint: disable=import-outside-toplevel

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"12\nab\xffc\n34\r\n\n56\n"), encoding="utf-8"))
    assert decode_io.interactive(Reverser()) == 0
    out, err = capsys.readouterr()
    assert out == "21\n43\n"
    assert "error: the line is not valid UTF-8 (byte 0xff at column 3); skipped\n" in err
    assert "Traceback" not in err and err.count("error") == 1, err


@contextlib.contextmanager
def read_only_directory(path):
    """`path`, made a directory in which no file can be made, even by root (CI runs as root): a read-only tmpfs
    mounted there; for another user, chmod does it. Skips where neither can."""
    path.mkdir()
    if os.geteuid() != 0:
        path.chmod(0o555)
        try:
            yield str(path)
        finally:
            path.chmod(0o755)
        return
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=64k", "tmpfs", str(path)], capture_output=True,
                             text=True, check=False)
    if mounted.returncode != 0:
        pytest.skip(f"a read-only directory for root needs a tmpfs mount, which failed here: {mounted.stderr.strip()}")
    try:
        yield str(path)
    finally:
        subprocess.run(["umount", str(path)], check=False)


@pytest.mark.parametrize("flag", ["--decode_to_file", "--decode_ponder_plot"])
def test_an_output_directory_that_takes_no_files_is_refused_before_the_model_loads(run_dir, tmp_path, flag):
    """One line and nothing else: the model was loaded first ("Decoding with ..."), and only then the output
    found unwritable."""
    with read_only_directory(tmp_path / "read_only") as directory:
        result = decode_here(run_dir, "--decode_from_file=-", f"{flag}={directory}/out", stdin="12\n")
    one_line_error(result, f"cannot write in {flag}={os.path.realpath(directory)}: read-only file system")


def open_when_read(fifo, process=None, timeout=120):
    """Opens the named pipe `fifo` to write once a reader has it open (returns the file), waiting at most
    `timeout` seconds or until `process` ends."""
    began = time.monotonic()
    while time.monotonic() - began < timeout and (process is None or process.poll() is None):
        try:
            return os.fdopen(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK), "w", encoding="utf-8")
        except OSError:  # ENXIO: nobody reads it yet.
            time.sleep(0.05)
    raise AssertionError(f"nobody opened {fifo} to read")


# read(2)'s number, for the architectures /proc/PID/syscall is read on.
READ_SYSCALL = {"x86_64": 0, "aarch64": 63}.get(os.uname().machine)


def wait_until_blocked_reading(process, path, timeout=120):
    """Waits until the main thread of `process` sleeps in read(2) on `path`.

    A signal that comes between Python's last check for signals and its read(2) runs the C handler, but the
    read, begun afterwards, is not interrupted; the KeyboardInterrupt then waits for input that never comes
    (CI once saw the decoder hang so). A signal sent once it sleeps in read(2) interrupts it. Without
    /proc/PID/syscall (another kernel or architecture), it waits a second instead."""
    if READ_SYSCALL is None:
        time.sleep(1)
        return
    began = time.monotonic()
    while time.monotonic() - began < timeout and process.poll() is None:
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = pathlib.Path(f"/proc/{process.pid}/syscall").read_text(encoding="ascii").split()
            if int(fields[0]) == READ_SYSCALL and os.path.samefile(f"/proc/{process.pid}/fd/{int(fields[1], 16)}",
                                                                    path):
                return
        time.sleep(0.02)
    if process.poll() is None:
        raise AssertionError(f"the process did not read {path} within {timeout} s")


def test_a_named_pipe_is_read_as_the_source(run_dir, tmp_path):
    """`--decode_from_file=<(...)` or a FIFO: read as a file is (it was 'does not exist')."""
    fifo = tmp_path / "source.fifo"
    os.mkfifo(fifo)

    def feed():
        with contextlib.suppress(AssertionError, OSError), open_when_read(fifo, timeout=60) as f:
            f.write("0123\n\n42\n")

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    result = decode_here(run_dir, f"--decode_from_file={fifo}", "--decode_hparams=beam_size=1,extra_length=2")
    feeder.join(timeout=60)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n")
    assert len(lines) == 4 and lines[1] == "" and lines[3] == "", lines


def test_ctrl_c_ends_the_decoder_in_one_line(run_dir, tmp_path):
    """A real SIGINT while the decoder waits for its input (from a FIFO, opened once it reads, signalled once
    it sleeps in read(2)): `error: interrupted` and status 130, not a KeyboardInterrupt traceback."""
    fifo = tmp_path / "source.fifo"
    os.mkfifo(fifo)
    # Ctrl-C as a foreground job gets it: a suite run in the background (`make test &`) hands its children
    # SIGINT ignored, and Python then installs no KeyboardInterrupt handler.
    code = ("import signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
            "import t2t_relpos.cli.decoder as m; m.run()")
    process = subprocess.Popen([sys.executable, "-c", code,
                                f"--output_dir={run_dir}", f"--decode_from_file={fifo}"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        with open_when_read(fifo, process):
            wait_until_blocked_reading(process, fifo)
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=120)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert (process.returncode, out, err) == (130, "", "t2t-relpos-decoder: error: interrupted\n")
