"""The command-line tools under faults: damaged checkpoints, relative paths, another vocabulary, and bad values.
Each ends in a clear line, never in silent garbage or lost work. (Concurrent runs and lost workers:
tests/test_faults_workers.py.)"""

import json
import os
import shutil

import pytest

from test_cli import assert_usage_error, call_tool, run_tool, usr_dirs_forgotten

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# A problem of the user's whose vocabulary lives in its data directory (as a SentencePiece model would). Its
# strings are long, so that after a few steps a model has learnt that digits are likelier than EOS: it never
# stops by itself, and output limits show.
USR_PROBLEM = '''
import os

import numpy as np
import tensorflow as tf

from t2t_relpos import registry
from t2t_relpos.problems import problem


@registry.register_problem
class ReverseListedSymbols(problem.Problem):
    """Reverses strings of the symbols listed in <data_dir>/symbols.txt."""

    def feature_encoders(self, data_dir=None):
        with open(os.path.join(data_dir, "symbols.txt"), encoding="utf-8") as f:
            encoder = problem.SymbolEncoder(f.read().split())
        return {"inputs": encoder, "targets": encoder}

    def _dataset(self, split, data_dir, seed, num_shards, shard_index):
        size = self.vocab_sizes(data_dir)[0]

        def examples():
            rng = np.random.default_rng([seed or 0, ("train", "eval", "test").index(split), shard_index])
            for _ in iter(int, 1) if split == "train" else range(16):
                ids = rng.integers(2, size, size=rng.integers(20, 30))
                yield {"inputs": np.append(ids, 1), "targets": np.append(ids[::-1], 1)}

        spec = tf.TensorSpec([None], tf.int64)
        return tf.data.Dataset.from_generator(examples, output_signature={"inputs": spec, "targets": spec})
'''
DIGITS = "0 1 2 3 4 5 6 7 8 9"


def data_dir(root, symbols):
    root.mkdir()
    (root / "symbols.txt").write_text(symbols + "\n", encoding="utf-8")
    return str(root)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny run of the user's problem: checkpoints at steps 10 and 20, an export, 3 checkpoints to average."""
    root = tmp_path_factory.mktemp("faults")
    usr = root / "usr_problems.py"
    usr.write_text(USR_PROBLEM, encoding="utf-8")
    data = data_dir(root / "data", DIGITS)
    run = root / "run"
    result = run_tool("t2t-relpos-trainer", f"--usr_dir={usr}", "--problem=reverse_listed_symbols",
                      "--hparams_set=transformer_tiny_rel", f"--data_dir={data}", f"--output_dir={run}",
                      "--hparams=hidden_size=32,filter_size=64,num_heads=2,batch_size=256,max_length=40,"
                      "beam_size=2,num_averaged_checkpoints=3", "--train_steps=20", "--checkpoint_every=10",
                      "--schedule=train", "--export", "--seed=1", timeout=400)
    assert result.returncode == 0, result.stdout + result.stderr
    return {"root": root, "usr": str(usr), "data": data, "run": run}


def decode(trained, *args, run=None, stdin=None, usr=True, data=None, here=True):
    """The decoder on the trained run: in this process (`test_cli.call_tool`, no new process importing
    TensorFlow), or with here=False as a fresh process."""
    flags = [f"--output_dir={run or trained['run']}", f"--data_dir={data or trained['data']}"]
    flags += [f"--usr_dir={trained['usr']}"] if usr else []
    if here:
        return call_tool("t2t-relpos-decoder", *flags, *args, stdin=stdin)
    return run_tool("t2t-relpos-decoder", *flags, *args, stdin=stdin, timeout=300)


def one_line_error(result, *fragments):
    assert_usage_error(result, *fragments)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# -- wrong results without an error ------------------------------------------------------------------------
@pytest.mark.parametrize("symbols, fragment", [("1 0 2 3 4 5 6 7 8 9", "12 ids, sha256:"), (DIGITS + " x", "13 ids")])
def test_decoding_with_another_vocabulary_is_refused(trained, tmp_path, symbols, fragment):
    other = data_dir(tmp_path / "other", symbols)
    result = decode(trained, "--decode_from_file=-", stdin="0123\n", data=other)
    assert_usage_error(result, "another inputs vocabulary", fragment, "give the --data_dir it was trained with")


def test_decoding_a_usr_dir_run_without_its_usr_dir_says_which(trained):
    # A process: the run's problem must be missing from it, as for a user who forgot the flag.
    result = decode(trained, "--decode_from_file=-", stdin="0123\n", usr=False, here=False)
    assert_usage_error(result, "reverse_listed_symbols", f"trained with --usr_dir={trained['usr']}")


def test_a_lines_output_does_not_depend_on_its_batch_mates(trained, tmp_path):
    """The decoder, the Translator and the export agree, alone or beside a long line (extra_length is 50)."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.decoding import translator as translator_lib  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    line, long_line = "0123456789", "7" * 100
    source = tmp_path / "source.txt"
    source.write_text(f"{line}\n{long_line}\n", encoding="utf-8")
    beside = decode(trained, f"--decode_from_file={source}")
    assert beside.returncode == 0, beside.stderr
    from_cli = beside.stdout.splitlines()[0]
    # At most the source's tokens (EOS included) + extra_length, never the long line's 100 + ... (a barely trained
    # model may still stop earlier by itself).
    assert len(from_cli) <= len(line) + 1 + 50

    with usr_dirs_forgotten():  # Its problem stays out of the later tests on this worker.
        registry.import_usr_dir(trained["usr"])
        model, problem, hparams, _ = runs.load(str(trained["run"]), data_dir=trained["data"])
        translator = translator_lib.Translator(model, problem, trained["data"], beam_size=hparams.beam_size,
                                               alpha=hparams.alpha, extra_length=hparams.extra_length)
        assert translator.translate([line]) == [from_cli]

    # The export, loaded in this process: that it loads without this package in a fresh process is
    # test_decoder_cli.py's test_exported_saved_model_reloads_in_a_fresh_process_and_decodes.
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    translate = tf.saved_model.load(os.path.join(trained["run"], "export", "20")).signatures["serving_default"]
    alone, together = ([t.decode() for t in translate(tf.constant(texts))["outputs"].numpy().tolist()]
                       for texts in ([line], [line, long_line]))
    assert alone[0] == together[0] == from_cli


# -- bad values: one line, exit status 2 --------------------------------------------------------------------
# The other settings' checks are in test_decoding.py (in-process: each process here costs a TensorFlow import).
@pytest.mark.parametrize("setting, fragment", [("beam_size=0", "'beam_size' must be >= 1, got 0"),
                                               ("extra_length=-100", "'extra_length' must be >= 0")])
def test_bad_decode_hparams(trained, setting, fragment):
    one_line_error(decode(trained, "--decode_from_file=-", f"--decode_hparams={setting}", stdin="12\n"), fragment)


@pytest.mark.parametrize("flag, fragment", [("--decode_to_file", "is a directory; give a file name"),
                                            ("--decode_from_file", "is a directory, not a file of lines")])
def test_directories_where_files_belong(trained, tmp_path, flag, fragment):
    args = [f"{flag}={tmp_path}"] + (["--decode_from_file=-"] if flag == "--decode_to_file" else [])
    one_line_error(decode(trained, *args, stdin="12\n"), fragment)


# The other fields' checks are in test_hparams.py.
@pytest.mark.parametrize("overrides, fragment", [
    ("hidden_size=64,num_heads=5", "'num_heads' (5) must divide 'hidden_size' (64)"),
    ("hidden_size=64,hidden_size=128", "'hidden_size' is set twice"),
])
def test_hparams_no_model_can_use(tmp_path, overrides, fragment):
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_tiny_rel", f"--hparams={overrides}", f"--output_dir={tmp_path / 'r'}")
    one_line_error(result, fragment)


@pytest.mark.parametrize("flag", ["--eval_every=10", "--eval_steps=1"])
def test_evaluation_flags_with_the_train_schedule(tmp_path, flag):
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_tiny_rel", "--schedule=train", flag, f"--output_dir={tmp_path / 'r'}")
    one_line_error(result, "--schedule=train never evaluates")
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("where, fragment", [("file", "is a file, not a directory"),
                                             ("file/run", "cannot create --output_dir")])
def test_output_dir_that_cannot_be_a_directory(tmp_path, where, fragment):
    (tmp_path / "file").write_text("not a directory\n")
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_tiny_rel", f"--output_dir={tmp_path / where}")
    one_line_error(result, fragment)


# -- checkpoints --------------------------------------------------------------------------------------------
def test_a_truncated_newest_checkpoint(trained, tmp_path):
    """Decoding and averaging name it; training resumes from the newest intact checkpoint with a warning."""
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run, ignore=shutil.ignore_patterns("export", "averaged"))
    data_file = next(run.glob("ckpt-20.data-*"))
    os.truncate(data_file, 1000)

    one_line_error(decode(trained, "--decode_from_file=-", stdin="12\n", run=run),
                   f"checkpoint {run}/ckpt-20 is unreadable", data_file.name)
    averaged = call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={run}", "--num_last=2",
                         f"--usr_dir={trained['usr']}", f"--data_dir={trained['data']}")
    one_line_error(averaged, "ckpt-20 is unreadable", data_file.name)

    resumed = run_tool("t2t-relpos-trainer", f"--usr_dir={trained['usr']}", f"--data_dir={trained['data']}",
                       f"--output_dir={run}", "--train_steps=21", "--schedule=train", timeout=300)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert "ckpt-20 is unreadable" in resumed.stderr and "resuming from an older checkpoint" in resumed.stderr
    assert f"Resuming from {run}/ckpt-10 (step 10)" in resumed.stdout
    index = (run / "checkpoint").read_text()
    assert '"ckpt-20"' not in index and '"ckpt-21"' in index and '"ckpt-10"' in index


def test_averaging_a_relative_output_dir_with_the_sets_count(trained, monkeypatch):
    """The README's own form (--output_dir=name, relative to the working directory); the run asks for 3
    checkpoints and has 2: a warning."""
    monkeypatch.chdir(trained["root"])
    result = call_tool("t2t-relpos-avg-checkpoints", "--output_dir=run", f"--usr_dir={trained['usr']}",
                       f"--data_dir={trained['data']}")
    monkeypatch.undo()
    assert result.returncode == 0, result.stderr
    assert "asked to average the last 3 checkpoints but run has only 2" in result.stderr
    assert "Averaged 2 checkpoints (ckpt-10 .. ckpt-20) into run/averaged/ckpt-20" in result.stdout
    decoded = decode(trained, "--decode_from_file=-", stdin="0123\n", run=trained["run"] / "averaged")
    assert decoded.returncode == 0, decoded.stderr
    assert "the average of 2 checkpoints (ckpt-10 .. ckpt-20)" in decoded.stderr


def test_averaging_a_checkpoint_of_another_model(trained, tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    foreign = tf.train.Checkpoint(v=tf.Variable(tf.zeros([1000]))).write(str(tmp_path / "ckpt-5"))
    result = call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={trained['run']}", f"--checkpoints={foreign}",
                       f"--averaged_dir={tmp_path / 'avg'}", f"--usr_dir={trained['usr']}",
                       f"--data_dir={trained['data']}")
    one_line_error(result, "does not fit this run's model", "another model")


def test_averaging_into_a_run_or_twice_the_same_checkpoint_is_refused_and_loses_nothing(trained, tmp_path):
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import averaging  # pylint: disable=import-outside-toplevel

    # Averaging into the run's own directory used to delete its older checkpoints and replace its newest by
    # weights without their optimizer, with exit status 0.
    run = tmp_path / "run"
    shutil.copytree(trained["run"], run, ignore=shutil.ignore_patterns("averaged"))
    before = sorted(os.listdir(run)), (run / "checkpoint").read_text()
    usr = (f"--usr_dir={trained['usr']}", f"--data_dir={trained['data']}", "--num_last=2")
    result = call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={run}", f"--averaged_dir={run}", *usr)
    one_line_error(result, f"--averaged_dir={run} is the run's own directory")
    assert (sorted(os.listdir(run)), (run / "checkpoint").read_text()) == before
    for target, fragment in ((trained["run"], "holds a run of its own"), (trained["root"], "holds files of its own")):
        with pytest.raises(errors.T2TRelposError, match=f"--averaged_dir={target} {fragment}"):
            averaging.check_target(str(run), str(target))
    with pytest.raises(errors.T2TRelposError, match="ckpt-20 is named twice"):
        averaging.average(None, [f"{run}/ckpt-20", f"{run}/ckpt-10", f"{run}/../run/ckpt-20"])

    # An earlier average is replaced, with a word; a checkpoint from elsewhere is recorded as a full path.
    for checkpoints in (f"{run}/ckpt-10", f"{run}/ckpt-20,{trained['run']}/ckpt-10"):
        result = call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={run}", f"--checkpoints={checkpoints}", *usr)
        assert result.returncode == 0, result.stderr
    assert "replacing the average of ckpt-10" in result.stdout
    record = json.loads((run / "averaged" / "hparams.json").read_text())
    assert record["averaged_checkpoints"] == ["ckpt-20", os.path.realpath(trained["run"] / "ckpt-10")]


def test_exporting_over_a_file_or_into_a_full_directory_is_refused(trained, tmp_path):
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import export  # pylint: disable=import-outside-toplevel

    # A file ended in a traceback; a full directory got the SavedModel mixed into it, with status 0.
    (tmp_path / "file").write_text("precious")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("precious")
    for target, fragment in (("file", "is a file, not a directory to export into"),
                             ("full", "exists and is not empty")):
        with pytest.raises(errors.T2TRelposError, match=f"{tmp_path / target} {fragment}"):
            export.write_export(None, None, None, None, 20, None, "saved_model", str(tmp_path / target))
    # The trainer's own export of step 20 is there already: exporting it again is refused the same way.
    result = call_tool("t2t-relpos-export", f"--usr_dir={trained['usr']}", f"--data_dir={trained['data']}",
                       f"--output_dir={trained['run']}")
    one_line_error(result, f"{trained['run']}/export/20 exists and is not empty")
