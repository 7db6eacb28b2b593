"""A tiny trained run, decoded through the decoder CLI, averaged, and exported as a SavedModel."""

import json
import os
import re
import subprocess
import sys

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
                      f"--output_dir={directory}", "--train_steps=20", "--checkpoint_every=10", "--eval_steps=1",
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
    assert "char_accuracy" in result.stdout

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
    result = decode_here(run_dir, "--decode_split=eval", "--decode_hparams=beam_size=1,num_samples=20,"
                         "extra_length=5", "--decode_to_file=-")
    assert result.returncode == 0, result.stderr
    assert "char_accuracy" in result.stdout and "(20 sequences)" in result.stdout


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
    ("beam_size", "malformed --decode_hparams item 'beam_size': expected name=value"),
])
def test_bad_decode_hparams_are_one_line(run_dir, setting, message):
    one_line_error(decode_here(run_dir, "--decode_from_file=-", f"--decode_hparams={setting}", stdin="12\n"), message)


def test_every_line_of_return_beams_has_beam_size_pairs(run_dir, tmp_path):
    """Blank lines included (they had one pair where the others had `beam_size`): columns stay aligned."""
    source = write(tmp_path / "source.txt", b"12\n\n  \n345\n")
    output = tmp_path / "out.txt"
    result = decode_here(run_dir, f"--decode_from_file={source}", f"--decode_to_file={output}",
                         "--decode_hparams=beam_size=3,return_beams=true")
    assert result.returncode == 0, result.stderr
    rows = [line.split("\t") for line in output.read_text(encoding="utf-8").splitlines()]
    assert [len(row) for row in rows] == [6, 6, 6, 6]
    assert rows[1] == rows[2] == ["", "0.0000", "", "-inf", "", "-inf"]
