"""What the command-line tools share: flag parsing, help, and one-line errors with exit status 2.

Flags are defined by each tool's `define_flags()` (not at import time), so the tools' modules can be imported
together, e.g. by tests. Heavy imports (TensorFlow) happen inside `main`, so `--help` answers at once.
"""

import errno
import logging as pylogging
import os
import signal
import sys

# TensorFlow's CPU allocator by default takes every tensor from malloc and gives it back, and glibc returns
# large blocks to the system at once: the next step maps the memory again and the kernel zeroes it page by
# page. A width-64 Universal Transformer run spent 43% of its CPU time in the kernel that way (200 M page
# faults in 40 minutes). The BFC allocator keeps freed memory for reuse: the same training, bit for bit, with
# 0.5 M instead of 16 M faults and a third less CPU time. Read when TensorFlow makes its first CPU tensor;
# TF_CPU_ALLOCATOR_USE_BFC=false in the environment keeps the default.
os.environ.setdefault("TF_CPU_ALLOCATOR_USE_BFC", "true")

from absl import app, flags, logging  # pylint: disable=wrong-import-position

from t2t_relpos import errors  # pylint: disable=wrong-import-position

FLAGS = flags.FLAGS
USAGE_ERROR = 2
FAILED = 1  # Not the user's doing (e.g. a lost worker): rerunning the same command resumes.
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process stopped by Ctrl-C.
CLOSED_PIPE = 128 + signal.SIGPIPE  # As a shell reports a tool ended by a closed pipe (`tool | head -1`).


def fail(prog, message, status=USAGE_ERROR, immediately=False):
    """Prints `prog: error: message` on stderr and exits with `status` (no traceback).

    A closed stderr (nobody reads it any more) does not change the status. `immediately` ends the process
    without Python's clean-up (`os._exit`, after flushing stdout and stderr): for a process whose work is saved
    and whose remaining objects may not be destroyed safely (see `t2t_relpos.cli.trainer`).
    """
    for stream, text in ((sys.stdout, ""), (sys.stderr, f"{prog}: error: {message}\n")):
        try:
            stream.write(text)
            stream.flush()
        except OSError:
            if stream is sys.stdout:
                _drop_stdout()
    if immediately:
        os._exit(status)  # pylint: disable=protected-access
    sys.exit(status)


# Every flag of the tools whose value is a path (or, --checkpoints and --gin_file, a list of paths). A shell
# expands `~` only at the start of a word, not after `--flag=`; the tools expand it, as tensor2tensor did
# (tests/test_cli_paths.py checks that every string flag of every tool is either here or known not to be a path).
PATH_FLAGS = ("output_dir", "data_dir", "tmp_dir", "usr_dir", "gin_file", "checkpoint_path", "checkpoints",
              "averaged_dir", "export_dir", "decode_from_file", "decode_to_file", "decode_reference",
              "decode_ponder_plot", "score_file")


def expand_paths(flag_values=FLAGS):
    """Expands a leading `~` or `~user` in the values of the `PATH_FLAGS` that `flag_values` has (after parsing)."""
    for name in PATH_FLAGS:
        if name not in flag_values:
            continue
        value = flag_values[name].value
        if isinstance(value, list):
            expanded = [os.path.expanduser(item) for item in value]
        elif isinstance(value, str):
            expanded = os.path.expanduser(value)
        else:
            continue
        if expanded != value:  # Defaults (None, "-", []) hold no "~": they stay defaults.
            setattr(flag_values, name, expanded)


def define_usr_dir_flag():
    flags.DEFINE_string("usr_dir", None, "A Python file, package or directory of the user's own "
                        "registrations (problems, models, hparams sets, .gin files) to import first.")


def define_run_flags():
    """The flags that name a run, shared by the trainer, decoder and datagen."""
    flags.DEFINE_string("problem", None, "Registered problem name, e.g. algorithmic_reverse_decimal40.")
    flags.DEFINE_string("model", None, "Registered model name (default: the hparams set's model).")
    flags.DEFINE_string("hparams_set", None, "Registered hparams set, e.g. transformer_base_rel.")
    flags.DEFINE_string("hparams", "", "Comma-separated overrides, e.g. "
                        "'hidden_size=256,layer_prepostprocess_dropout=0.2'.")
    flags.DEFINE_multi_string("gin_file", [], "Extra gin files parsed after the hparams set.")
    flags.DEFINE_multi_string("gin_param", [], "Extra gin bindings, e.g. \"hparams.num_heads = 4\".")
    flags.DEFINE_string("output_dir", None, "Model directory: checkpoints, hparams, summaries.")
    flags.DEFINE_string("data_dir", None, "Directory of prepared data (vocabularies, TFRecords).")
    flags.DEFINE_string("tmp_dir", None, "Directory of raw downloads or manually placed source files.")
    define_usr_dir_flag()


def define_download_flag():
    flags.DEFINE_boolean("download", False, "Let data preparation download raw data missing from --tmp_dir "
                         "(e.g. WMT14 through tensorflow-datasets). Off by default: missing data is an error at once.")


def define_shared_flags():
    """The flags every tool has (defined by `run`)."""
    if "tf_log" not in FLAGS:
        flags.DEFINE_boolean("tf_log", False, "Show TensorFlow's own log lines (its C++ runtime's 'E0000 ...', "
                             "'I0000 ...', start-up notes). Hidden by default: they are not the tool's and read as "
                             "errors. TF_CPP_MIN_LOG_LEVEL in the environment, where set, decides instead.")


def configure_tensorflow_log():
    """Sets TensorFlow's C++ log level for `--tf_log` before TensorFlow is imported (it reads the level once).

    Without `--tf_log`, level 3: only fatal errors, so none of the lines TensorFlow logs on its own (e.g.
    `E0000 ... oneDNN supports DT_INT64 only on platforms with AVX-512`, printed as an error on a CPU that has
    AVX-512) reach the tool's stderr; with it, level 0 (all). A TF_CPP_MIN_LOG_LEVEL the user set is kept.
    """
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "0" if FLAGS["tf_log"].value else "3")


def import_tensorflow():
    """Imports TensorFlow without the C++ start-up chatter it prints before logging is configured (shown with
    `--tf_log`)."""
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    if "tf_log" in FLAGS and FLAGS.is_parsed() and FLAGS.tf_log:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        tf.config.list_physical_devices()
        return tf
    sys.stderr.flush()
    saved = os.dup(2)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        import tensorflow as tf  # pylint: disable=import-outside-toplevel

        tf.config.list_physical_devices()  # Probes for GPUs now, while stderr is quiet.
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)
    return tf


def make_output_dir(path, flag="--output_dir"):
    """Creates the directory `path` (local or remote); one that is a file or cannot be made is an error."""
    if "://" in path:  # gs:// and the like: TensorFlow's file system creates and reports.
        return path
    from t2t_relpos import files  # pylint: disable=import-outside-toplevel

    return files.make_directory(path, flag)


def import_usr_dir():
    if FLAGS.usr_dir:
        from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

        registry.import_usr_dir(FLAGS.usr_dir)


def _help_text(doc, modules):
    sections = [doc.strip(), ""]
    for module in modules:
        text = FLAGS.module_help(module)
        if text:
            sections += ["flags:", text, ""]
    return "\n".join(sections) + "\n"


class ToolFormatter(pylogging.Formatter):
    """Warnings and errors this package logs (`absl.logging.warning`) as the tool's own lines,
    `<tool>: warning: ...`, not in absl's `W1203 20:50:00.123456 4242 averaging.py:32] ...` form, which reads as
    some other program's. Other libraries' lines (TensorFlow's) and INFO and DEBUG lines (`--verbosity`) keep
    `fallback`'s form."""

    PACKAGES = ("t2t_relpos", "t2t_relpos.problems", "t2t_relpos.hparams")

    def __init__(self, prog, fallback=None):
        super().__init__()
        self.prog = prog
        self.fallback = fallback or pylogging.Formatter()

    def _ours(self, path):
        roots = [os.path.dirname(sys.modules[name].__file__) for name in self.PACKAGES if name in sys.modules]
        path = os.path.abspath(path or "")
        return any(path.startswith(root + os.sep) for root in roots)

    def format(self, record):
        if record.levelno < pylogging.WARNING or not self._ours(record.pathname):
            return self.fallback.format(record)
        level = "warning" if record.levelno < pylogging.ERROR else "error"
        return f"{self.prog}: {level}: {record.getMessage()}"


class StdoutError(OSError):
    """Writing to the tool's stdout failed (a closed pipe, a full disk): an `OSError` with the same errno, so
    code that carries on when nobody reads its progress (the trainer) still can."""


class _Stdout:
    """The tool's stdout, whose write errors are `StdoutError`s: told apart from those of the tool's files."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text):
        try:
            return self._stream.write(text)
        except OSError as e:
            raise StdoutError(e.errno, e.strerror) from None

    def flush(self):
        try:
            self._stream.flush()
        except OSError as e:
            raise StdoutError(e.errno, e.strerror) from None

    def __getattr__(self, name):
        return getattr(self._stream, name)


def _drop_stdout():
    """Points stdout's file descriptor at /dev/null: what is still buffered for a stdout that failed is dropped
    at exit instead of failing again (Python prints that as 'Exception ignored ... BrokenPipeError')."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # No file descriptor (e.g. a StringIO): nothing flushes it.
        pass


def _stdout_failed(prog, error):
    """Ends the tool after its stdout failed: quietly with status 141 for a closed pipe (`tool | head -1`, as a
    Unix tool ends), else in one line (`tool > /dev/full`: status 2)."""
    _drop_stdout()
    if error.errno == errno.EPIPE:
        sys.exit(CLOSED_PIPE)
    from t2t_relpos import files  # pylint: disable=import-outside-toplevel

    fail(prog, str(files.storage_error(error, "the output", "stdout")))


def run(main, prog, doc, flag_modules, argv=None):
    """Parses flags, runs `main(argv)`, and turns user errors into `prog: error: ...` with status 2.

    Also, for every tool: Ctrl-C (`KeyboardInterrupt`) ends it with `prog: error: interrupted` and status 130
    (the trainer catches the signal itself while it trains, to save first); a closed stdout ends it quietly
    (status 141) and a failing one (a full disk) in one line; TensorFlow's own log lines are hidden unless
    `--tf_log`; `~` is expanded in the path flags (`expand_paths`).

    Args:
        main: `main(argv) -> int | None`.
        prog: The tool's name for messages.
        doc: Usage text printed by `--help` above the flags.
        flag_modules: Module names whose flags `--help` lists.
        argv: Arguments (default: sys.argv).
    """
    define_shared_flags()

    def parse(args):
        if any(a in ("-h", "--help", "--helpshort", "-?") for a in args[1:]):
            sys.stdout.write(_help_text(doc, flag_modules))
            sys.exit(0)
        try:
            remaining = FLAGS(args)
        except flags.Error as e:
            fail(prog, f"{e} (--help lists the flags)")
        if len(remaining) > 1:
            fail(prog, f"unexpected arguments: {' '.join(remaining[1:])} (flags are written --name=value)")
        expand_paths()
        return remaining

    def guarded(args):
        configure_tensorflow_log()
        if not FLAGS["verbosity"].present:  # Library INFO lines (gin, checkpoint saver) drown the progress.
            logging.set_verbosity(logging.WARNING)
        handler.setFormatter(ToolFormatter(prog, handler.formatter))
        try:
            return main(args) or 0
        except errors.T2TRelposError as e:
            fail(prog, str(e))
        except KeyboardInterrupt:
            # Files being written were removed as it came up (t2t_relpos.files); what is left may be a tf.data
            # pipeline stopped in mid-stream, whose clean-up can hang (see t2t_relpos.cli.trainer): end now.
            fail(prog, "interrupted", status=INTERRUPTED, immediately=True)

    handler = logging.get_absl_handler().python_handler
    formatter = handler.formatter
    stdout = sys.stdout
    sys.stdout = _Stdout(stdout)
    try:
        try:
            app.run(guarded, argv=argv or sys.argv, flags_parser=parse)
        except SystemExit as e:
            if not e.code:  # It worked: so far as what it printed reaches stdout.
                sys.stdout.flush()
            raise
    except StdoutError as e:
        sys.stdout = stdout
        _stdout_failed(prog, e)
    finally:
        handler.setFormatter(formatter)
        sys.stdout = stdout
