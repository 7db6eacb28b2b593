"""A training run's directory under faults (issue 46): a name TensorFlow reads as a pattern, a lost checkpoint
index, a full disk or a read-only directory, an interrupted average, a checkpoint of another vocabulary, a
hand-edited hparams.json, a value the schedule cannot take, a stop asked for during an evaluation. Each ends in
one line (or works), never in silent garbage, a traceback, or a run that cannot be resumed.

One tiny run, trained in this process, serves every test: its copies are damaged, never the run itself.
"""

import contextlib
import errno
import json
import os
import shutil
import signal

import pytest
import tensorflow as tf

from t2t_relpos import errors, files, registry
from t2t_relpos.training import checkpoints
from t2t_relpos.training import trainer as trainer_lib
from test_cli import call_tool, usr_dirs_forgotten
from test_faults import DIGITS, USR_PROBLEM, data_dir, one_line_error
from test_faults_data import full_from_the_start

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TINY = "hidden_size=16,filter_size=32,num_heads=2,batch_size=64,max_length=40,beam_size=1"
# TensorFlow read `exp[lr=2]/ckpt-3` as a pattern whose `[lr=2]` is a class of one character: it found no file.
GLOB_NAME = "exp[lr=2]"


@contextlib.contextmanager
def usr_problem(run):
    """The run's problem, registered from its --usr_dir for the block (and forgotten after it)."""
    with usr_dirs_forgotten():
        registry.import_usr_dir(run["usr"])
        yield registry.problem("reverse_listed_symbols")


def make_trainer(run, directory, **kwargs):
    settings = {"data_dir": run["data"], "seed": 1, "eval_every": 0, "eval_steps": 1, "verbose": False,
                "checkpoint_every": 1, "keep_checkpoint_max": 2, **kwargs}
    return trainer_lib.Trainer(registry.problem("reverse_listed_symbols"),
                               registry.hparams("transformer_tiny_rel").parse(TINY), str(directory), **settings)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """3 steps in a directory named `exp[lr=2]`, a checkpoint each step, 2 kept: ckpt-2 and ckpt-3. A SIGTERM
    arrives during the first batch of its final evaluation (of the whole eval split: 16 examples of 20-30
    symbols, in batches of 64 tokens): `interrupted` and `evaluated` say what became of it."""
    root = tmp_path_factory.mktemp("runs")
    usr = root / "usr_problems.py"
    usr.write_text(USR_PROBLEM, encoding="utf-8")
    found = {"root": root, "usr": str(usr), "data": data_dir(root / "data", DIGITS), "dir": root / GLOB_NAME,
             "evaluated": 0, "interrupted": None}
    with usr_problem(found):
        trainer = make_trainer(found, found["dir"], eval_steps=None)
        evaluate = tf.function(trainer._evaluate_batch, reduce_retracing=True, autograph=False)  # pylint: disable=protected-access

        def first_batch_then_sigterm(batch):  # A scheduler's SIGTERM, while the first eval batch runs.
            found["evaluated"] += 1
            if found["evaluated"] == 1 and callable(signal.getsignal(signal.SIGTERM)):  # The trainer's handler.
                os.kill(os.getpid(), signal.SIGTERM)  # Caught by the trainer: it stops cleanly.
            return evaluate(batch)

        trainer._eval_step = first_batch_then_sigterm  # pylint: disable=protected-access
        try:
            trainer.train(3)
        except trainer_lib.TrainingInterrupted as e:
            found["interrupted"] = str(e)
    return found


def tool(name, run, *args, directory=None, stdin=None):
    """A tool on the run (or on `directory`) in this process, with the run's --usr_dir and --data_dir."""
    return call_tool(name, f"--output_dir={directory or run['dir']}", f"--usr_dir={run['usr']}",
                     f"--data_dir={run['data']}", *args, stdin=stdin)


def copy_run(run, to, index=True):
    """A copy of the run's checkpoints and description (without `checkpoint`, the index, if not `index`)."""
    ignored = ["averaged", "export", "train", "eval"] + ([] if index else [checkpoints.INDEX_NAME])
    shutil.copytree(run["dir"], to, ignore=shutil.ignore_patterns(*ignored))
    return to


def leftovers(directory):
    """What a failed writer left beside its final names: temporary files and directories."""
    return sorted(name for name in os.listdir(directory) if ".partial-" in name or name.endswith((".tmp", "_temp")))


def no_space(*args, **kwargs):
    """A writer on a full disk."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def tf_no_space(path):
    """What TensorFlow raises for a full disk while it writes the checkpoint `path`."""
    return tf.errors.ResourceExhaustedError(None, None, f"{path}_temp/part-00000-of-00001.data-00000-of-00001"
                                            ".tempstate1; No space left on device")


# -- case 1: a directory whose name TensorFlow reads as a glob pattern ---------------------------------------
def test_a_run_in_a_directory_with_glob_characters_trains_resumes_decodes_and_averages(run):
    names = sorted(os.listdir(run["dir"]))
    # The manager deletes old checkpoints by a pattern too: it kept all of them.
    assert "ckpt-1.index" not in names and {"ckpt-2.index", "ckpt-3.index"} <= set(names), names
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    with usr_problem(run):  # What the decoder and the export read a run with.
        assert runs.load(str(run["dir"]), data_dir=run["data"])[3] == f"{run['dir']}/ckpt-3"

    averaged = tool("t2t-relpos-avg-checkpoints", run, "--num_last=2", f"--averaged_dir={run['root'] / 'avg[1]'}")
    assert averaged.returncode == 0, averaged.stderr
    assert "Averaged 2 checkpoints (ckpt-2 .. ckpt-3)" in averaged.stdout

    with usr_problem(run):
        resumed = make_trainer(run, run["dir"])  # Before, "ckpt-3 is unreadable ... truncated, corrupt or missing".
    assert resumed.restored_from == f"{run['dir']}/ckpt-3" and resumed.step == 3


def test_a_remote_directory_with_glob_characters_is_refused_before_anything_is_written():
    for name in ("gs://bucket/exp[lr=2]", "gs://bucket/exp[lr=2]/ckpt-3"):  # No alias there: refused, not lost.
        with pytest.raises(errors.T2TRelposError, match=r"gs://bucket/exp\[lr=2\].*: TensorFlow reads checkpoint "
                                                        r"paths as glob patterns"):
            (checkpoints.tf_path if name.endswith("ckpt-3") else checkpoints.tf_dir)(name)


# -- case 6: checkpoints without their index ------------------------------------------------------------------
def test_checkpoints_without_their_index_are_found_by_their_files(run, tmp_path):
    copy = copy_run(run, tmp_path / "copy", index=False)
    assert checkpoints.latest_checkpoint(str(copy)) == f"{copy}/ckpt-3"
    with usr_problem(run):
        resumed = make_trainer(run, copy)  # It started again at step 0, to save over ckpt-2 and ckpt-3.
    assert resumed.restored_from == f"{copy}/ckpt-3" and resumed.step == 3
    state = tf.train.get_checkpoint_state(str(copy))  # Written again, so that the manager goes on from them.
    assert [os.path.basename(p) for p in state.all_model_checkpoint_paths] == ["ckpt-2", "ckpt-3"]
    (copy / checkpoints.INDEX_NAME).write_text("")  # Emptied (a full disk while copying): TensorFlow's ValueError.
    assert checkpoints.listed(str(copy)) == [f"{copy}/ckpt-2", f"{copy}/ckpt-3"]

    bare = tmp_path / "bare"  # Checkpoints and no description: not a run to resume, nor to start over.
    bare.mkdir()
    for name in os.listdir(copy):
        if name.startswith("ckpt-"):
            shutil.copy(copy / name, bare / name)
    result = call_tool("t2t-relpos-trainer", f"--output_dir={bare}", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_tiny_rel")
    one_line_error(result, f"{bare} holds checkpoints but no hparams.json")


# -- case 5: a checkpoint of another vocabulary ---------------------------------------------------------------
def test_a_checkpoint_of_another_vocabulary_is_refused(run, tmp_path):
    other = copy_run(run, tmp_path / "other")
    record = json.loads((other / "hparams.json").read_text())
    for entry in record["vocabulary"].values():
        entry["fingerprint"] = "sha256:" + "0" * 64  # Run B's own SentencePiece model, of the same size.
    (other / "hparams.json").write_text(json.dumps(record))

    decoded = tool("t2t-relpos-decoder", run, "--decode_from_file=-", f"--checkpoint_path={other}/ckpt-3",
                   stdin="0123\n")
    one_line_error(decoded, f"checkpoint {other}/ckpt-3 is of a run trained with another inputs vocabulary "
                            "(12 ids, sha256:000000000000)", f"use it with --output_dir={other}")
    averaged = tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={run['dir']}/ckpt-3,{other}/ckpt-2",
                    f"--averaged_dir={tmp_path / 'avg'}")
    one_line_error(averaged, f"checkpoint {other}/ckpt-2 is of a run trained with another inputs vocabulary")
    assert not (tmp_path / "avg").exists()


# -- case 3 and 7: averaging again, interrupted ---------------------------------------------------------------
def test_averaging_again_interrupted_leaves_the_earlier_average(run, tmp_path):
    target = tmp_path / "avg"
    args = (f"--averaged_dir={target}",)
    assert tool("t2t-relpos-avg-checkpoints", run, "--num_last=2", *args).returncode == 0
    before = {name: (target / name).read_bytes() for name in os.listdir(target)}

    # A full disk at the weights (TensorFlow's error), then at the description written after them: before, the
    # description naming ckpt-3 alone was written first, beside the weights of ckpt-2 .. ckpt-3.
    def weights_on_a_full_disk(manager, checkpoint_number):
        raise tf_no_space(os.path.join(manager.directory, f"ckpt-{checkpoint_number}"))

    for writer in ((tf.train.CheckpointManager, "save", weights_on_a_full_disk), (files.os, "fsync", no_space)):
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(*writer)
            result = tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={run['dir']}/ckpt-3", *args)
        one_line_error(result, "cannot write the ", f"{target}", "no space left on the device",
                       "the earlier average is left as it was")
        assert {name: (target / name).read_bytes() for name in os.listdir(target)} == before, writer[1]
        assert leftovers(tmp_path) == [] and leftovers(target) == []

    again = tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={run['dir']}/ckpt-3", *args)  # Room again.
    assert again.returncode == 0, again.stderr
    assert "replacing the average of ckpt-2, ckpt-3" in again.stdout
    assert json.loads((target / "hparams.json").read_text())["averaged_checkpoints"] == ["ckpt-3"]
    assert leftovers(tmp_path) == []


def test_a_directory_is_replaced_whole_where_names_cannot_be_exchanged(tmp_path, monkeypatch):
    from t2t_relpos.training import averaging  # pylint: disable=import-outside-toplevel

    for exchange in (True, False):
        old, new = tmp_path / "average", tmp_path / ".average.partial-1"
        for directory, text in ((old, "old"), (new, "new")):
            directory.mkdir(exist_ok=True)
            (directory / "hparams.json").write_text(text)
        if not exchange:
            monkeypatch.setattr(averaging, "_exchange", lambda a, b: False)
        averaging._replace_directory(str(new), str(old))  # pylint: disable=protected-access
        assert (old / "hparams.json").read_text() == "new" and os.listdir(tmp_path) == ["average"]


# -- case 7: a full disk at a trainer's checkpoint, and at an export ------------------------------------------
def test_a_full_disk_at_a_checkpoint_is_one_line_and_the_run_resumes(run, tmp_path, monkeypatch):
    copy = copy_run(run, tmp_path / GLOB_NAME)
    step = tf.Variable(4, dtype=tf.int64)  # A run at step 4, as the trainer saves it.
    manager = checkpoints.make_manager(tf.train.Checkpoint(optimizer=tf.train.Checkpoint(iterations=step)), str(copy),
                                       max_to_keep=2)
    real_save = tf.train.CheckpointManager.save

    def full(manager, checkpoint_number):  # What TensorFlow raised, after its temporary files were begun.
        prefix = os.path.join(manager.directory, f"ckpt-{checkpoint_number}")
        os.makedirs(prefix + "_temp")
        raise tf_no_space(prefix)

    monkeypatch.setattr(tf.train.CheckpointManager, "save", full)
    with pytest.raises(errors.T2TRelposError) as caught:  # Before, a ResourceExhaustedError and its traceback.
        checkpoints.save(manager, 4)
    assert str(caught.value) == (f"cannot write the checkpoint of step 4 to {copy}/ckpt-4: no space left on the "
                                 f"device; the newest checkpoint is still {copy}/ckpt-3; rerun the same command to "
                                 "resume from it once there is room")
    assert leftovers(copy) == [] and checkpoints.latest_checkpoint(str(copy)) == f"{copy}/ckpt-3"
    monkeypatch.setattr(tf.train.CheckpointManager, "save", real_save)
    assert checkpoints.save(manager, 4) == f"{copy}/ckpt-4"  # Room again; ckpt-2, the oldest, goes.
    assert checkpoints.listed(str(copy)) == [f"{copy}/ckpt-3", f"{copy}/ckpt-4"]
    assert not [name for name in os.listdir(copy) if name.startswith("ckpt-2.")]


def test_a_full_disk_at_an_export_leaves_nothing_under_its_name_and_a_rerun_works(run, tmp_path):
    export_dir = tmp_path / "export" / "3"

    def full(module, path, signatures=None):  # The graph is down, the variables are not.
        del module, signatures
        os.makedirs(os.path.join(path, "variables"))
        with open(os.path.join(path, "saved_model.pb"), "wb") as f:
            f.write(b"graph")
        raise tf_no_space(os.path.join(path, "variables", "variables"))

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(tf.saved_model, "save", full)
        result = tool("t2t-relpos-export", run, f"--export_dir={export_dir}")
    one_line_error(result, f"cannot write the SavedModel to {export_dir}: no space left on the device")
    assert os.listdir(tmp_path / "export") == []  # Nothing under its name, nor a temporary beside it.
    result = tool("t2t-relpos-export", run, f"--export_dir={export_dir}")  # Room again; and the run is in exp[lr=2].
    assert result.returncode == 0, result.stderr
    assert (export_dir / "saved_model.pb").exists() and os.listdir(tmp_path / "export") == ["3"]


def test_a_full_disk_at_the_runs_description_leaves_the_earlier_one(run, tmp_path):
    from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel

    copy = copy_run(run, tmp_path / "copy")
    before = (copy / "hparams.json").read_text()
    hp, problem, model = stored.load(str(copy))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(files.os, "fsync", no_space)
        with pytest.raises(errors.T2TRelposError, match=f"cannot write the run's description to {copy}/hparams.json: "
                                                        "no space left on the device"):
            stored.save(str(copy), hp.override(beam_size=7), problem, model)
    assert (copy / "hparams.json").read_text() == before and leftovers(copy) == []


def test_a_disk_full_before_the_trainer_starts_is_one_line_and_changes_nothing(run, tmp_path, monkeypatch):
    """Full before the trainer starts (issue 6: before, its lock file's first write, `os.pwrite`, was a
    traceback): refused before anything is built, as a read-only run is."""
    copy = copy_run(run, tmp_path / "copy")
    before = sorted(os.listdir(copy))
    full_from_the_start(monkeypatch, copy)
    result = call_tool("t2t-relpos-trainer", f"--output_dir={copy}", f"--usr_dir={run['usr']}",
                       f"--data_dir={run['data']}", "--train_steps=4")
    monkeypatch.undo()
    one_line_error(result, f"cannot write in --output_dir={copy}: no space left on the device")
    assert sorted(os.listdir(copy)) == before


# -- case 8: a read-only run -----------------------------------------------------------------------------------
def test_a_read_only_output_dir_is_one_line(run, tmp_path, monkeypatch):
    copy = copy_run(run, tmp_path / "copy")
    before = sorted(os.listdir(copy))
    real_open, real_os_open = open, os.open

    def refused(path):
        return str(path).startswith(str(copy))

    def read_only_open(path, mode="r", *args, **kwargs):  # CI runs as root, whom chmod does not stop.
        if refused(path) and any(c in mode for c in "wax+"):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_open(path, mode, *args, **kwargs)

    def read_only_os_open(path, flags, *args, **kwargs):
        if refused(path) and flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS), str(path))
        return real_os_open(path, flags, *args, **kwargs)

    monkeypatch.setattr("builtins.open", read_only_open)
    monkeypatch.setattr(os, "open", read_only_os_open)
    result = call_tool("t2t-relpos-trainer", f"--output_dir={copy}", f"--usr_dir={run['usr']}",
                       f"--data_dir={run['data']}", "--train_steps=4")
    monkeypatch.undo()
    one_line_error(result, f"cannot write in --output_dir={copy}: read-only file system")
    assert sorted(os.listdir(copy)) == before


# -- case 13: a hand-edited hparams.json ----------------------------------------------------------------------
@pytest.mark.parametrize("edit, fragment", [
    ({"num_heads": 3}, "'num_heads' (3) must divide 'hidden_size' (16)"),
    ({"max_relative_position": -1}, "'max_relative_position' must be >= 0, got -1"),
    ({"attention_dropout": 2.0}, "'attention_dropout' must be in [0, 1), got 2.0"),
])
def test_a_hand_edited_description_is_checked_as_hparams_are(run, tmp_path, edit, fragment):
    copy = tmp_path / "copy"
    copy.mkdir()
    record = json.loads((run["dir"] / "hparams.json").read_text())
    record["hparams"].update(edit)
    (copy / "hparams.json").write_text(json.dumps(record))
    before = sorted(os.listdir(copy))
    tools = ["t2t-relpos-trainer"] + (["t2t-relpos-decoder"] if "num_heads" in edit else [])
    for name in tools:  # The decoder built the model and failed in it with a ValueError.
        result = tool(name, run, *(["--decode_from_file=-"] if name == "t2t-relpos-decoder" else []), directory=copy,
                      stdin="0123\n")
        one_line_error(result, f"{copy}/hparams.json: hparam {fragment}", "was the file edited?")
    assert sorted(os.listdir(copy)) == before


# -- case 14: a value the schedule cannot take -----------------------------------------------------------------
def test_no_warm_up_is_inverse_square_root_decay_and_a_schedule_that_fails_is_refused_first(tmp_path, monkeypatch):
    from t2t_relpos.training import schedules  # pylint: disable=import-outside-toplevel

    hparams = registry.hparams("transformer_tiny_rel").parse("learning_rate_warmup_steps=0")
    schedules.check(hparams)  # ZeroDivisionError at the first step, after the run was written.
    rate = schedules.from_hparams(hparams)
    assert float(rate(0)) == pytest.approx(hparams.learning_rate * hparams.hidden_size ** -0.5)
    assert float(rate(99)) == pytest.approx(hparams.learning_rate * (hparams.hidden_size * 100) ** -0.5)

    class Broken(schedules.Constant):
        def value(self, step):
            return step * (1.0 / (self.warmup_steps - 4000))  # A user's schedule with a division of its own.

    monkeypatch.setitem(schedules._SCHEDULES, "broken", lambda hp: Broken(1.0, 4000))  # pylint: disable=protected-access
    result = call_tool("t2t-relpos-trainer", f"--output_dir={tmp_path / 'run'}",
                       "--problem=algorithmic_reverse_decimal40", "--hparams_set=transformer_tiny_rel",
                       "--hparams=learning_rate_schedule=broken")
    one_line_error(result, "learning_rate_schedule='broken' cannot be computed at step 1 with these hparams "
                           "(ZeroDivisionError")
    assert not (tmp_path / "run").exists()


# -- SIGTERM during an evaluation -------------------------------------------------------------------------------
def test_a_stop_asked_for_during_an_evaluation_ends_it_between_batches(run):
    # Before, the whole split was evaluated first (a scheduler's grace period may be shorter), and a stop asked
    # for during the final evaluation was not even reported.
    assert run["evaluated"] == 1
    assert run["interrupted"] == (f"interrupted at step 3; checkpoint saved to {run['dir']}/ckpt-3; run the same "
                                  "command again to resume")


def test_a_remote_export_is_written_in_place(tmp_path, monkeypatch):
    """A gs:// run's export went to a hidden temporary name on the store, never renamed, and a local directory
    tree named `gs:/...` appeared: a remote directory is written where it is named (object stores have no atomic
    rename of a directory)."""
    monkeypatch.chdir(tmp_path)
    with files.atomic_directory("ram://run/export/7", "the SavedModel") as where:
        tf.io.gfile.makedirs(where)
        with tf.io.gfile.GFile(where + "/saved_model.pb", "w") as f:
            f.write("model")
    assert where == "ram://run/export/7" and tf.io.gfile.exists("ram://run/export/7/saved_model.pb")
    assert not os.listdir(tmp_path)


# -- a checkpoint not named ckpt-<step> --------------------------------------------------------------------------
def test_a_checkpoint_named_otherwise_is_numbered_by_its_step_or_refused_before_the_work(run, tmp_path, monkeypatch):
    """`keep/best`, a training checkpoint put aside, has its step stored; an average put aside has none. Before,
    a ValueError from `step_of`, for averaging only after the averaging was done."""
    from t2t_relpos.training import averaging  # pylint: disable=import-outside-toplevel

    keep = tmp_path / "keep"
    keep.mkdir()
    for name in os.listdir(run["dir"]):
        if name.startswith("ckpt-3."):
            shutil.copy(run["dir"] / name, keep / name.replace("ckpt-3", "best"))
    assert checkpoints.step_of(str(keep / "best")) == 3
    averaged = tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={run['dir']}/ckpt-2,{keep}/best",
                    f"--averaged_dir={tmp_path / 'avg'}")
    assert averaged.returncode == 0 and (tmp_path / "avg" / "ckpt-3.index").exists(), averaged.stderr

    for name in os.listdir(tmp_path / "avg"):  # Weights only: no step in it.
        if name.startswith("ckpt-3."):
            shutil.copy(tmp_path / "avg" / name, keep / name.replace("ckpt-3", "average"))
    monkeypatch.setattr(averaging, "average", lambda *args: pytest.fail("averaged before refusing"))
    refusal = (f"checkpoint {keep}/average is not named ckpt-<step> and holds no step of its own (a model's weights "
               "only, as an average has): rename its files average.* to ckpt-<step>.*")
    one_line_error(tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={run['dir']}/ckpt-2,{keep}/average",
                        f"--averaged_dir={tmp_path / 'avg2'}"), refusal)
    one_line_error(tool("t2t-relpos-export", run, f"--checkpoint_path={keep}/average",
                        f"--export_dir={tmp_path / 'export'}"), refusal)
    assert not (tmp_path / "avg2").exists() and not (tmp_path / "export").exists()


# -- names that are not what they are taken for --------------------------------------------------------------------
def test_a_checkpoint_path_or_gin_file_naming_a_directory_says_so(run, tmp_path):
    """Before: "checkpoint runs/x does not exist", "gin file conf does not exist"."""
    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    one_line_error(tool("t2t-relpos-export", run, f"--checkpoint_path={run['dir']}"),
                   f"checkpoint {run['dir']} is a directory, a run's: a checkpoint is named by the prefix of its "
                   f"files, e.g. {run['dir']}/ckpt-3 (its newest); or give the run as --output_dir={run['dir']}")
    one_line_error(tool("t2t-relpos-decoder", run, "--decode_from_file=-", f"--checkpoint_path={tmp_path}",
                        stdin="0123\n"), f"checkpoint {tmp_path} is a directory, not a checkpoint")
    with pytest.raises(errors.HParamsError, match=f"gin file {tmp_path} is a directory, not a file$"):
        hparams_lib.gin_bindings([str(tmp_path)])
    os.mkfifo(tmp_path / "pipe.gin")
    with pytest.raises(errors.HParamsError, match="pipe.gin is not a regular file"):
        hparams_lib.gin_bindings([str(tmp_path / "pipe.gin")])


def test_averaging_refuses_a_blank_checkpoint_name(run, tmp_path):
    """`--checkpoints=,` or a trailing comma: before, "checkpoint  is named twice" (or the blank name read as no
    name: the run's newest)."""
    for names in (",", f"{run['dir']}/ckpt-2,{run['dir']}/ckpt-3,"):
        one_line_error(tool("t2t-relpos-avg-checkpoints", run, f"--checkpoints={names}",
                            f"--averaged_dir={tmp_path / 'avg'}"),
                       "has a blank name (a comma too many?); name each checkpoint once, separated by single commas")
    assert not (tmp_path / "avg").exists()


# -- checkpoints deleted under a reader by a running trainer ---------------------------------------------------------
def trainer_saves(directory, keep):
    """What a trainer with `--keep_checkpoint_max=keep` does in `directory` as it saves its next step: the new
    checkpoint (here a copy of the newest), the index listing the newest `keep`, the older ones' files deleted."""
    paths = checkpoints.listed(str(directory))
    step = checkpoints.step_of(paths[-1]) + 1
    for name in os.listdir(directory):
        if name.startswith(os.path.basename(paths[-1]) + "."):
            shutil.copy(directory / name, directory / name.replace(os.path.basename(paths[-1]), f"ckpt-{step}"))
    kept = [*paths, os.path.join(str(directory), f"ckpt-{step}")][-keep:]
    checkpoints.write_index(str(directory), checkpoints._state([os.path.basename(p) for p in kept],  # pylint: disable=protected-access
                                                                [0.0] * len(kept)))
    for path in paths:
        if path not in kept:
            for name in os.listdir(directory):
                if name.startswith(os.path.basename(path) + "."):
                    os.remove(directory / name)


def deleting_under(monkeypatch, directory, keep, when):
    """Each `checkpoints.restore_model` of a checkpoint `when(path)` picks is preceded by a trainer's save."""
    real = checkpoints.restore_model

    def restore_model(model, path):
        if when(path):
            trainer_saves(directory, keep)
        return real(model, path)

    monkeypatch.setattr(checkpoints, "restore_model", restore_model)


def test_a_newest_checkpoint_deleted_under_a_reader_is_read_again_or_said_to_be(run, tmp_path, monkeypatch):
    """A decoder or export (`runs.load`) and averaging started while a trainer with --keep_checkpoint_max=1 (2)
    saves: before, "checkpoint .../ckpt-3 does not exist (a checkpoint is named by ...)", blaming the user."""
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    copy = copy_run(run, tmp_path / "copy")
    calls = []
    deleting_under(monkeypatch, copy, 1, lambda path: not calls and not calls.append(path))  # Once.
    with usr_problem(run):
        assert runs.load(str(copy), data_dir=run["data"])[3] == f"{copy}/ckpt-4"
        deleting_under(monkeypatch, copy, 1, lambda path: True)  # At every attempt: a trainer saving fast.
        with pytest.raises(checkpoints.DeletedWhileReadError) as caught:
            runs.load(str(copy), data_dir=run["data"])
    assert str(caught.value) == (f"checkpoint {copy}/ckpt-6 was deleted while being read (3 times, each the newest "
                                 "in turn), probably by a trainer still running there (it deletes its oldest "
                                 "checkpoint as it saves one, keeping --keep_checkpoint_max); rerun, or copy the "
                                 "checkpoint aside and name the copy")

    monkeypatch.undo()
    copy = copy_run(run, tmp_path / "again")  # ckpt-2, ckpt-3: ckpt-2 goes as ckpt-4 is saved.
    deleting_under(monkeypatch, copy, 2, lambda path: path.endswith("ckpt-2") and not calls.append(path))
    averaged = tool("t2t-relpos-avg-checkpoints", run, "--num_last=2", directory=copy)
    assert averaged.returncode == 0, averaged.stderr
    assert "Averaged 2 checkpoints (ckpt-3 .. ckpt-4)" in averaged.stdout


# -- the decoder's output file -----------------------------------------------------------------------------------
def test_a_decode_to_file_keeps_its_mode_and_may_have_the_longest_name(run, tmp_path):
    """Before, the output replaced by a renamed temporary became mode 644 (from 600), and a valid 250-byte name
    was "File name too long": its temporary name `.<name>.partial-<pid>` was longer."""
    out = tmp_path / ("o" * 246 + ".txt")
    out.write_text("earlier\n")
    os.chmod(out, 0o600)
    result = tool("t2t-relpos-decoder", run, "--decode_from_file=-", f"--decode_to_file={out}", stdin="0123\n")
    assert result.returncode == 0, result.stderr
    assert out.read_text() != "earlier\n" and oct(os.stat(out).st_mode & 0o777) == oct(0o600)
    assert os.listdir(tmp_path) == [out.name]
