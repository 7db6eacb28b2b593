"""Every tool's console under faults (issue 46): a closed or full stdout, TensorFlow's own log lines. Real
processes, where the point is what a process prints as it ends (Python's flush of stdout at exit) or what
TensorFlow reads from the environment once. The decoder's own cases (its output on a full disk or in a
read-only directory, Ctrl-C, a closed stdout while it decodes, a named pipe as input) are in
test_decoder_cli.py, beside the trained run they decode."""

import os
import subprocess
import sys

import pytest

from test_cli import TOOLS

# A tool of one line on `t2t_relpos.cli.common.run` that makes TensorFlow's C++ runtime log an error, as the
# oneDNN note 'E0000 ... oneDNN supports DT_INT64 only on platforms with AVX-512' is on such a CPU.
LOGS_AN_ERROR = """
from t2t_relpos.cli import common

def main(argv):
    tf = common.import_tensorflow()
    tf.raw_ops.PrintV2(input=tf.constant("TensorFlow's own line"), output_stream="log(error)")
    print("done")

common.run(main, "probe", "probe", [])
"""


def run_python(code, *args, stdout=subprocess.PIPE, env=None):
    return subprocess.run([sys.executable, "-c", code, *args], stdout=stdout, stderr=subprocess.PIPE, text=True,
                          timeout=120, check=False, env=env)


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_a_closed_stdout_ends_every_tool_quietly_and_a_full_one_in_one_line(tool):
    """`tool --help | head -0` and `tool --help > /dev/full`: a BrokenPipeError or OSError line from Python's
    flush at exit (status 120) before; now status 141 and nothing, or one line and status 2."""
    code = f"import {TOOLS[tool]} as m; m.run()"
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        closed = run_python(code, "--help", stdout=write_end)
    finally:
        os.close(write_end)
    assert (closed.returncode, closed.stderr) == (141, ""), closed
    with open("/dev/full", "wb") as full:
        result = run_python(code, "--help", stdout=full)
    assert (result.returncode, result.stderr) == (
        2, f"{tool}: error: cannot write the output to stdout: no space left on the device\n"), result


def test_tensorflow_log_lines_are_shown_only_with_tf_log():
    """Without --tf_log nothing of TensorFlow's C++ logging reaches stderr (its errors read as the tool's);
    --tf_log shows it, and a TF_CPP_MIN_LOG_LEVEL of the user's decides over both."""
    env = {name: value for name, value in os.environ.items() if name != "TF_CPP_MIN_LOG_LEVEL"}
    quiet, shown = (run_python(LOGS_AN_ERROR, *args, env=env) for args in ((), ("--tf_log",)))
    assert (quiet.returncode, quiet.stdout, quiet.stderr) == (0, "done\n", ""), quiet
    assert shown.returncode == 0 and "TensorFlow's own line" in shown.stderr, shown


# In this process (no TensorFlow to import again): the lines of SentencePiece's C++ code and of the package's own
# warnings. Issue: datagen's stderr had `normalizer.cc(51) LOG(INFO) ...`; averaging's warning was absl's
# `W1203 20:50:00.123456 4242 averaging.py:32] asked to average ...`.

def test_loading_a_sentencepiece_model_into_tensorflow_logs_nothing(capfd, monkeypatch):
    from t2t_relpos.data import graph_text, sentencepiece_vocab  # pylint: disable=import-outside-toplevel

    # Models of their own: tensorflow-text loads a model once per process, and logs then only.
    models = [sentencepiece_vocab.train_sentencepiece(["der kleine Hund", f"the small dog {word}"] * 20,
                                                      vocab_size=280) for word in ("runs", "sleeps", "eats")]
    assert len(set(models)) == 3
    capfd.readouterr()
    for model, level in zip(models, ("3", None, "0")):  # A tool's default, a library user's, --tf_log.
        if level is None:
            monkeypatch.delenv("TF_CPP_MIN_LOG_LEVEL", raising=False)
        else:
            monkeypatch.setenv("TF_CPP_MIN_LOG_LEVEL", level)
        tokenizer = graph_text.SentencePieceTokenizer(model)
        assert tokenizer.tokenize(["dog"]).to_list()[0]
        err = capfd.readouterr().err
        assert ("LOG(INFO)" in err) if level == "0" else err == "", err  # --tf_log shows it, as TensorFlow's.


def test_the_packages_warnings_are_the_tools_own_lines(tmp_path):
    from t2t_relpos.cli import common  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import averaging  # pylint: disable=import-outside-toplevel
    from test_cli import _as_a_fresh_process  # pylint: disable=import-outside-toplevel

    (tmp_path / "checkpoint").write_text('model_checkpoint_path: "ckpt-2"\nall_model_checkpoint_paths: "ckpt-1"\n'
                                         'all_model_checkpoint_paths: "ckpt-2"\n')

    def main(argv):  # pylint: disable=unused-argument
        averaging.last_checkpoints(str(tmp_path), 5)

    with _as_a_fresh_process(None) as out:
        with pytest.raises(SystemExit):
            common.run(main, "t2t-relpos-avg-checkpoints", "doc", [], argv=["t2t-relpos-avg-checkpoints"])
    assert out["stderr"] == (f"t2t-relpos-avg-checkpoints: warning: asked to average the last 5 checkpoints but "
                             f"{tmp_path} has only 2; averaging those\n")
