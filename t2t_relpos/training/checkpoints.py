"""Checkpoints of a run: the model's and optimizer's variables, written so that a kill never corrupts them.

TensorFlow writes a checkpoint's files first and then atomically replaces the `checkpoint` index, so a run
killed mid-save resumes from the previous checkpoint; the partial files it leaves (`*_temp*`) are removed
at the next start. A checkpoint damaged afterwards (a full disk, a truncated copy) is skipped when training
resumes, with a warning naming it; decoding or averaging it is an error that names its files. A checkpoint of
another model (other shapes, weights missing or left over) is an error too, never loaded in part.

A run's checkpoints are those its `checkpoint` index lists; a directory without the index (copied without it)
has those its files show (`ckpt-<step>.index`), and the trainer writes the index again before it saves.

TensorFlow reads a checkpoint's name as a glob pattern and deletes old checkpoints by pattern: in a directory
such as `runs/exp[lr=2]` it found none of them, and kept every one. Such a directory is handed to TensorFlow
under an alias without those characters (`tf_path`); messages name it as the user did.
"""

import atexit
import errno
import gc
import glob
import os
import re
import shutil
import tempfile
import time

import tensorflow as tf
from absl import logging
from google.protobuf import text_format
from tensorflow.core.protobuf import trackable_object_graph_pb2
from tensorflow.python.training import checkpoint_state_pb2

from t2t_relpos import errors, files

CHECKPOINT_NAME = "ckpt"
INDEX_NAME = "checkpoint"
# What reading a truncated or corrupt checkpoint raises: IndexError ("Read less bytes than requested") for a
# short data file, an OpError (DataLossError, NotFoundError, ...) for a damaged index or a missing file.
UNREADABLE = (IndexError, tf.errors.OpError)
# Errors of the storage rather than of the files (a network file system away, a permission taken): the
# checkpoint may be intact, so it is never skipped or unlisted for them, which would roll the run back.
NOT_DAMAGE = (tf.errors.UnavailableError, tf.errors.DeadlineExceededError, tf.errors.AbortedError,
              tf.errors.CancelledError, tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError,
              tf.errors.UnauthenticatedError)


class UnreadableCheckpointError(errors.T2TRelposError):
    """A checkpoint whose files are truncated, corrupt or missing."""

    def __init__(self, path, cause):
        files = ", ".join(sorted(os.path.basename(f) for f in glob.glob(glob.escape(path) + ".*"))) or "none"
        super().__init__(f"checkpoint {path} is unreadable ({_first_line(cause)}); its files ({files}) are "
                         "truncated, corrupt or missing")
        self.path = path


class CheckpointAccessError(errors.T2TRelposError):
    """A checkpoint the storage would not give back (unavailable, timed out, not permitted): maybe intact."""


# -- paths TensorFlow can take -------------------------------------------------------------------------------
# What TensorFlow's file matching (and fnmatch) reads as a pattern: `[lr=2]` is a class of one character.
_GLOB_CHARACTERS = re.compile(r"[*?[\\]")
_ALIASES = {}  # directory (absolute) -> (alias, (st_dev, st_ino) of the directory it was made for)
_LINKS = []  # The temporary directory of the aliases, where there is no /proc.


def read_as_pattern(path):
    """Whether TensorFlow would read the checkpoint path `path` (or files under it) as a glob pattern."""
    return "://" not in path and bool(_GLOB_CHARACTERS.search(os.path.abspath(path)))


def tf_path(path):
    """The checkpoint prefix `path` as TensorFlow's checkpoint functions can take it: itself, or, where its
    directory's name holds a glob character (`*`, `?`, `[` or a backslash), the same file through an alias of the
    directory.

    The alias is `/proc/self/fd/<n>`, a descriptor of the directory that this process keeps open (where there is
    no /proc, a symbolic link in a temporary directory removed at exit); it names the directory for as long as
    the process runs, even if the directory is renamed.
    """
    if not _GLOB_CHARACTERS.search(path):
        return path
    _check_local(path)
    directory, name = os.path.split(os.path.abspath(path))
    if _GLOB_CHARACTERS.search(name):
        raise errors.T2TRelposError(f"checkpoint {path}: TensorFlow reads a checkpoint's name as a glob pattern "
                                    "and this one holds * ? [ or \\; rename its files")
    return os.path.join(tf_dir(directory), name)


def tf_dir(directory):
    """The directory `directory` as TensorFlow's checkpoint functions can take it (see `tf_path`); a directory
    that does not exist (yet) is returned as it is."""
    if not _GLOB_CHARACTERS.search(directory):
        return directory
    _check_local(directory)
    if not os.path.isdir(directory):
        return directory
    directory = os.path.abspath(directory)
    status = os.stat(directory)
    identity = (status.st_dev, status.st_ino)
    known = _ALIASES.get(directory)
    if known is None or known[1] != identity:  # New, or another directory under the same name since.
        # An earlier descriptor stays open: an alias handed out before must not come to name another file.
        known = _ALIASES[directory] = (_alias(directory), identity)
    return known[0]


def _check_local(path):
    """Raises where `path`, which holds a glob character, is on a remote file system (`gs://...`): it has no
    alias, and TensorFlow would find no checkpoint there."""
    if "://" in path:
        raise errors.T2TRelposError(f"{path}: TensorFlow reads checkpoint paths as glob patterns, and this one holds "
                                    "* ? [ or \\, which it would not find; use a name without them")


def _alias(directory):
    if os.path.isdir("/proc/self/fd"):
        return f"/proc/self/fd/{os.open(directory, os.O_RDONLY | os.O_DIRECTORY)}"
    if not _LINKS:
        _LINKS.append(tempfile.mkdtemp(prefix="t2t_relpos_paths_"))
        atexit.register(shutil.rmtree, _LINKS[0], True)
    link = os.path.join(_LINKS[0], str(len(os.listdir(_LINKS[0]))))
    os.symlink(directory, link)
    return link


def _shown(text):
    """A message of TensorFlow's with the aliases in it replaced by the directories they stand for."""
    for directory, (alias, _) in _ALIASES.items():
        text = re.sub(re.escape(alias) + r"(?=/|\b|$)", lambda _, d=directory: d, text)
    return text


# -- finding and writing checkpoints ---------------------------------------------------------------------------
def listed(directory):
    """The checkpoints of the run in `directory`, oldest first: those its `checkpoint` index lists, or, where it
    has no index (or an empty or unreadable one), those whose files (`ckpt-<step>.index`) are there; [] when it
    has none."""
    state = _index(directory)
    if state is not None and state.model_checkpoint_path:
        return list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
    return _found(directory)


def latest_checkpoint(directory):
    """The newest checkpoint of the run in `directory` (see `listed`), or None."""
    paths = listed(directory)
    return paths[-1] if paths else None


def _index(directory):
    """The `checkpoint` index of `directory` (a CheckpointState proto), or None where it has none or one that
    cannot be read (TensorFlow warns of that) or is empty (TensorFlow raises a ValueError for that)."""
    try:
        return tf.train.get_checkpoint_state(directory)
    except ValueError:
        return None


def _found(directory):
    """The checkpoints whose files are in `directory`, by step, oldest first (none where it is not a directory)."""
    try:
        names = tf.io.gfile.listdir(directory)
    except tf.errors.OpError:
        return []
    steps = sorted(int(m.group(1)) for m in (re.fullmatch(re.escape(CHECKPOINT_NAME) + r"-(\d+)\.index", name)
                                               for name in names) if m)
    return [os.path.join(directory, f"{CHECKPOINT_NAME}-{step}") for step in steps]


def remove_partial_saves(directory):
    """Deletes the temporary files of a save that was interrupted."""
    for path in glob.glob(os.path.join(glob.escape(directory), f"{CHECKPOINT_NAME}-*_temp*")):
        _remove(path)


def make_manager(checkpoint, directory, max_to_keep, is_chief=True):
    """A `tf.train.CheckpointManager` of a `tf.train.Checkpoint(model=..., optimizer=...)`, numbered by the
    optimizer's step. Read its newest checkpoint with `latest(manager)` (the manager's own names a directory
    by its alias where the name holds a glob character).

    Non-chief workers of a multi-worker run must save too (saving is collective) but into a scratch
    directory of their own, which `save` removes after every save (TensorFlow's advice for workers).
    """
    shown = directory
    if not is_chief:
        directory = shown = tempfile.mkdtemp(prefix="t2t_relpos_worker_ckpt_")
        os.rmdir(directory)  # `save` makes it when it needs it; a run never leaves it behind.
        max_to_keep = 1
    else:
        tf_dir(directory)  # Refuses a remote name TensorFlow could not read back, before anything is written.
        try:
            tf.io.gfile.makedirs(directory)
        except tf.errors.OpError as e:
            raise storage_error(e, "checkpoints", directory) from None
        remove_partial_saves(directory)
        index = os.path.join(directory, INDEX_NAME)
        if "://" not in directory and os.path.exists(index) and not listed(directory):
            os.remove(index)  # Empty or unreadable, and no checkpoint beside it: the manager would fail on it.
        directory = tf_dir(directory)
    manager = tf.train.CheckpointManager(checkpoint, directory, max_to_keep=max_to_keep,
                                         checkpoint_name=CHECKPOINT_NAME, step_counter=checkpoint.optimizer.iterations)
    manager.t2t_relpos_directory = shown
    return manager


def latest(manager):
    """The newest checkpoint `manager` saved or found, named as the user named its directory; or None."""
    path = manager.latest_checkpoint
    shown = getattr(manager, "t2t_relpos_directory", None)
    return os.path.join(shown, os.path.basename(path)) if path and shown else path


def save(manager, step, is_chief=True):
    """Saves a checkpoint of `step`; a non-chief worker's copy is deleted at once (nobody reads it).

    Raises:
        T2TRelposError: the storage refused it (a full disk, a read-only file system): one line that says the
            newest checkpoint is still the previous one. The save's partial files are removed.
    """
    if is_chief:
        try:
            manager.save(checkpoint_number=step)
        except (OSError,) + STORAGE_ERRORS as e:
            remove_partial_saves(manager.t2t_relpos_directory)
            where = os.path.join(manager.t2t_relpos_directory, f"{CHECKPOINT_NAME}-{step}")
            before = latest(manager)
            if before:
                then = (f"the newest checkpoint is still {before}; rerun the same command to resume from it once "
                        "there is room")
            else:
                then = "no checkpoint was written; rerun the same command once there is room"
            raise storage_error(e, f"the checkpoint of step {step}", where, then) from None
        return latest(manager)
    os.makedirs(manager.directory, exist_ok=True)
    try:
        return manager.save(checkpoint_number=step)
    finally:
        shutil.rmtree(manager.directory, ignore_errors=True)


# Errors of writing that the storage causes (TensorFlow's, for a full disk, a read-only or a vanished directory).
STORAGE_ERRORS = (tf.errors.ResourceExhaustedError, tf.errors.PermissionDeniedError, tf.errors.NotFoundError,
                  tf.errors.FailedPreconditionError, tf.errors.UnknownError, tf.errors.InternalError,
                  tf.errors.DataLossError)
_TF_REASONS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
               "Read-only file system": errno.EROFS, "Permission denied": errno.EACCES}


def storage_error(exc, what, path, then=None):
    """`files.storage_error` for TensorFlow's errors too (whose message holds the reason, not an errno), with
    `then` (what is left, what to do) after it."""
    if isinstance(exc, tf.errors.OpError):
        text = _shown(exc.message)
        code = next((code for phrase, code in _TF_REASONS.items() if phrase in text), None)
        detail = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\]", "", _first_line(text))
        exc = OSError(code, os.strerror(code) if code else detail)
    error = files.storage_error(exc, what, path)
    return errors.T2TRelposError(f"{error}; {then}") if then else error


def random_states(model):
    """The states of the model's random-number generators (`keras.random.SeedGenerator`: dropout, position
    offsets), in the model's order: a training checkpoint keeps them (as `random`) so that a resumed run draws
    what the uninterrupted run would have drawn."""
    return [v for v in model.non_trainable_variables if v.name == "seed_generator_state"]


def _without_random_states(checkpoint, path):
    """`checkpoint`, or for a checkpoint saved before they were kept (before 2026-12-01), one of the same
    objects less the random states, which then start as a new run's do."""
    random = getattr(checkpoint, "random", None)
    if random is None or "random" in _saved_children(path):
        return checkpoint
    logging.warning("%s holds no random-number states (saved before they were kept): dropout and position "
                    "offsets draw anew from the seed", path)
    return tf.train.Checkpoint(model=checkpoint.model, optimizer=checkpoint.optimizer)


def restore_latest(checkpoint, directory, is_chief=True):
    """Restores the newest readable checkpoint of `directory` into `checkpoint`; returns its path or None.

    An unreadable newer checkpoint is skipped with a warning that names it, and (by the chief) dropped from
    the `checkpoint` index so that averaging and decoding do not pick it up; its files stay until a save of
    the same step replaces them. A directory without the index (copied without it) resumes from the newest
    checkpoint its files show, and the chief writes the index of them, so that the manager goes on numbering
    after them and deletes the oldest in turn, instead of saving over them from step 0. Every worker restores
    from the run's directory, even those whose manager saves elsewhere. Call it before making the run's
    manager, which reads the index.

    Raises:
        UnreadableCheckpointError: when the run has checkpoints and none of them is readable.
    """
    state = _index(directory)
    if state is None or not state.model_checkpoint_path:
        paths = _found(directory)
        if not paths:
            return None
        logging.warning("%s has no %s index; its checkpoints are found by their files: %s", directory, INDEX_NAME,
                        ", ".join(os.path.basename(p) for p in paths))
        state = _state(paths, [tf.io.gfile.stat(p + ".index").mtime_nsec / 1e9 for p in paths])
        indexed = False
    else:
        paths = list(state.all_model_checkpoint_paths) or [state.model_checkpoint_path]
        indexed = True
    unreadable = []
    for path in reversed(paths):
        try:
            _check_loss_scaling(checkpoint, path)
            _restore(lambda path=path: _without_random_states(checkpoint, path).restore(tf_path(path))
                     .assert_existing_objects_matched(), path)
        except UnreadableCheckpointError as e:
            unreadable.append(e)
            logging.warning("%s; resuming from an older checkpoint", e)
            continue
        except CheckpointAccessError:
            raise
        except errors.T2TRelposError:  # Does not fit the model.
            if "optimizer" not in _saved_children(path):
                raise errors.T2TRelposError(
                    f"checkpoint {path} holds a model's weights only (an averaged checkpoint?), not a training "
                    "checkpoint with its optimizer: resume training from the run's own --output_dir") from None
            raise
        if getattr(checkpoint, "model", None) is not None:  # A run's checkpoint (tests restore others too).
            _check_no_extra_weights(checkpoint.model, path)
        if (unreadable or not indexed) and is_chief:
            _forget(directory, state, {u.path for u in unreadable}, path)
        return path
    raise errors.T2TRelposError(f"no checkpoint of {directory} is readable ({unreadable[0]}); move them away "
                                "to start afresh")


def _state(paths, timestamps):
    """A CheckpointState proto (what the `checkpoint` index holds) of `paths`, saved at `timestamps`."""
    state = checkpoint_state_pb2.CheckpointState(model_checkpoint_path=paths[-1], last_preserved_timestamp=time.time())
    state.all_model_checkpoint_paths.extend(paths)
    state.all_model_checkpoint_timestamps.extend(timestamps)
    return state


def _forget(directory, state, dropped, latest):
    """Rewrites the `checkpoint` index of `directory` (a CheckpointState proto) without the paths `dropped`."""
    kept = [(p, t) for p, t in zip(state.all_model_checkpoint_paths, state.all_model_checkpoint_timestamps)
            if p not in dropped]
    # Names relative to `directory`, as the manager writes them (the run directory stays movable), and the
    # save times, by which the manager decides what to delete later.
    state.model_checkpoint_path = os.path.basename(latest)
    del state.all_model_checkpoint_paths[:]
    del state.all_model_checkpoint_timestamps[:]
    state.all_model_checkpoint_paths.extend(os.path.basename(p) for p, _ in kept)
    state.all_model_checkpoint_timestamps.extend(t for _, t in kept)
    write_index(directory, state)


def write_index(directory, state):
    """Writes the `checkpoint` index of `directory` (a CheckpointState proto) whole or not at all."""
    index, text = os.path.join(directory, INDEX_NAME), text_format.MessageToString(state)
    if "://" in directory:
        with tf.io.gfile.GFile(index + ".tmp", "w") as f:
            f.write(text)
        tf.io.gfile.rename(index + ".tmp", index, overwrite=True)
        return
    with files.atomic_write(index, what="the checkpoint index") as f:
        f.write(text)


# Where a training checkpoint keeps its step: the optimizer's counter (under `inner_optimizer/` with loss scaling).
_STEP_KEY = "/_iterations/.ATTRIBUTES/VARIABLE_VALUE"


def step_of(path):
    """The step of the checkpoint `path`: the number its name ends in (`.../ckpt-1200`), or, for one named
    otherwise (`keep/best`, a copy put aside), the optimizer's step stored in it.

    Raises:
        T2TRelposError: `path` is named otherwise and holds no step (a model's weights only, as an average), or
            is not a checkpoint (see `check_exists`).
    """
    number = re.search(r"-(\d+)$", os.path.basename(path))
    if number:
        return int(number.group(1))
    check_exists(path)
    try:
        reader = tf.train.load_checkpoint(tf_path(path))
        keys = sorted((k for k in reader.get_variable_to_shape_map()
                       if k.startswith("optimizer/") and k.endswith(_STEP_KEY)), key=len)
        if keys:
            return int(reader.get_tensor(keys[0]))
    except UNREADABLE as e:
        raise UnreadableCheckpointError(path, e) from None
    raise errors.T2TRelposError(f"checkpoint {path} is not named {CHECKPOINT_NAME}-<step> and holds no step of its "
                                "own (a model's weights only, as an average has): rename its files "
                                f"{os.path.basename(path)}.* to {CHECKPOINT_NAME}-<step>.*")


def check_exists(path):
    """Raises a one-line `T2TRelposError` unless `path` names a checkpoint (the prefix of its files): one that
    names a directory says so, and for a run's directory names its newest checkpoint."""
    if tf.io.gfile.isdir(path):
        newest = latest_checkpoint(path)
        if newest:
            raise errors.T2TRelposError(f"checkpoint {path} is a directory, a run's: a checkpoint is named by the "
                                        f"prefix of its files, e.g. {newest} (its newest); or give the run as "
                                        f"--output_dir={path}")
        raise errors.T2TRelposError(f"checkpoint {path} is a directory, not a checkpoint (a checkpoint is named by "
                                    "the prefix of its files, e.g. runs/x/ckpt-1000)")
    if not tf.io.gfile.exists(path + ".index"):
        raise errors.T2TRelposError(f"checkpoint {path} does not exist (a checkpoint is named by the prefix of "
                                    "its files, e.g. runs/x/ckpt-1000)")


class DeletedWhileReadError(errors.T2TRelposError):
    """A checkpoint that was there when it was chosen and is not any more: deleted while being read."""

    def __init__(self, path, why=""):
        super().__init__(f"checkpoint {path} was deleted while being read{why}, probably by a trainer still running "
                         "there (it deletes its oldest checkpoint as it saves one, keeping --keep_checkpoint_max); "
                         "rerun, or copy the checkpoint aside and name the copy")
        self.path = path


def restore_model(model, path):
    """Restores only `model`'s weights from a run's checkpoint `path` (optimizer slots are skipped).

    Raises:
        T2TRelposError: `path` does not exist or was written for another model.
        UnreadableCheckpointError: its files are truncated or corrupt.
        DeletedWhileReadError: its files went while they were read (a running trainer deleting old ones).
    """
    check_exists(path)
    try:
        _restore(lambda: tf.train.Checkpoint(model=model).restore(tf_path(path)).expect_partial()
                 .assert_existing_objects_matched(), path)
        _check_no_extra_weights(model, path)
    except errors.T2TRelposError:
        if not tf.io.gfile.exists(path + ".index"):
            raise DeletedWhileReadError(path) from None
        raise


# Times a reader picks the newest checkpoint again when the one it picked is deleted under it.
ATTEMPTS = 3


def vanished(path, directory=None):
    """Whether the checkpoint `path` of the run in `directory` (default: its own) is gone, or going: its files
    removed, or no longer listed (a trainer unlists a checkpoint in the index before it deletes its files)."""
    if not tf.io.gfile.exists(path + ".index"):
        return True
    return os.path.basename(path) not in {os.path.basename(p) for p in listed(directory or os.path.dirname(path))}


def restore_newest(model, directory):
    """Restores the newest checkpoint of the run in `directory` into `model`; returns its path, or None where the
    run has none.

    A trainer still running there deletes its oldest checkpoint each time it saves one (`--keep_checkpoint_max`;
    with 1, the newest goes as soon as a newer one is written): one picked as the newest and deleted before or
    while it is read is replaced by the newest again, up to `ATTEMPTS` times.

    Raises:
        DeletedWhileReadError: the newest was deleted under the reader every time.
        T2TRelposError: as `restore_model`.
    """
    path = None
    for _ in range(ATTEMPTS):
        path = latest_checkpoint(directory)
        if path is None:
            return None
        try:
            restore_model(model, path)
            return path
        except errors.T2TRelposError:
            if not vanished(path, directory):
                raise
            logging.warning("checkpoint %s was deleted while being read; reading the newest again", path)
    raise DeletedWhileReadError(path, f" ({ATTEMPTS} times, each the newest in turn)")


def _restore(restore, path):
    """Runs `restore()` of the checkpoint `path`.

    Raises:
        UnreadableCheckpointError: its files are truncated or corrupt.
        CheckpointAccessError: the storage failed to give them back (they may be intact).
        T2TRelposError: it does not fit the model (weights missing, or of other shapes).
    """
    misfit = None
    logger = tf.get_logger()
    level = logger.level
    # A restore that failed half-way logs one warning for every value it did not reach when its remains are
    # freed (hundreds, after the error that says it all): quiet until they are.
    logger.setLevel("ERROR")
    try:
        try:
            restore()
        except NOT_DAMAGE as e:
            raise CheckpointAccessError(
                f"checkpoint {path} could not be read ({_first_line(e)}); nothing was changed: rerun once it "
                "can be read") from None
        except tf.errors.InvalidArgumentError as e:
            if "dtype" not in str(e):
                raise UnreadableCheckpointError(path, e) from None
            misfit = _misfit(path, e)  # Intact files of other types: not damage, and never to be skipped.
        except UNREADABLE as e:
            raise UnreadableCheckpointError(path, e) from None
        except (AssertionError, ValueError) as e:
            misfit = _misfit(path, e)
        if misfit:
            gc.collect()
    finally:
        logger.setLevel(level)
    if misfit:
        raise misfit


def _misfit(path, error):
    """The error for a checkpoint whose weights are missing from the model or have other shapes."""
    if isinstance(error, AssertionError):
        # The message lists every unmatched variable with its values: name a few instead.
        names = re.findall(r"path=([^,\s]+)", str(error))
        what = "weights missing from it" + (f", e.g. {', '.join(names[:2])}" if names else "")
    elif isinstance(error, tf.errors.InvalidArgumentError):  # "... expected dtype float does not equal original
        # dtype int64": the loss-scale variables of a mixed_float16 run where a float32 run has others.
        detail = re.sub(r"\{\{.*?\}\}\s*|\s*\[Op:\w+\]", "", _first_line(error.message))  # TensorFlow's wrapping.
        what = "variables of other types: " + detail.rstrip(".")
        return errors.T2TRelposError(f"checkpoint {path} does not fit this run ({what}); was it written with "
                                     "another --mixed_precision, or by another model?")
    else:  # "Received incompatible tensor with shape (13, 32) when attempting to restore variable with shape ..."
        what = _first_line(error).rstrip(".")
    return errors.T2TRelposError(f"checkpoint {path} does not fit this run's model ({what}); was it written by "
                                 "another model?")


def _check_no_extra_weights(model, path):
    """Raises when `path` holds more model weights than `model` has: restoring matches what the model asks
    for and would silently drop the rest (a checkpoint of 6 layers would decode as a model of 4)."""
    held, has = _saved_model_weights(path), len({id(w) for w in model.weights})
    if held > has:
        raise errors.T2TRelposError(f"checkpoint {path} does not fit this run's model: it holds {held} model "
                                    f"weights, the model has {has}; was it written by a larger model?")


def _object_graph(path):
    graph = trackable_object_graph_pb2.TrackableObjectGraph()
    graph.ParseFromString(tf.train.load_checkpoint(tf_path(path)).get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
    return graph


def _check_loss_scaling(checkpoint, path):
    """Raises when `path` was saved with a loss-scaled optimizer (`mixed_float16`) and `checkpoint`'s is not, or
    the other way round: found before restoring, since a failed restore leaves a warning per variable behind."""
    optimizer = getattr(checkpoint, "optimizer", None)
    if optimizer is None:
        return
    try:
        graph = _object_graph(path)
    except UNREADABLE:
        return  # Damage: the restore says so.
    nodes = [child.node_id for child in graph.nodes[0].children if child.local_name == "optimizer"]
    saved = bool(nodes) and any(child.local_name == "inner_optimizer" for child in graph.nodes[nodes[0]].children)
    if nodes and saved != hasattr(optimizer, "inner_optimizer"):
        was, now = ("with", "without") if saved else ("without", "with")
        raise errors.T2TRelposError(
            f"checkpoint {path} does not fit this run: it was saved {was} the loss scaling of "
            f"--mixed_precision=mixed_float16, and this run is {now} it; resume with the run's own --mixed_precision")


def _saved_children(path):
    """The names of the checkpoint's top-level objects (`model`, `optimizer`, `save_counter`)."""
    return {child.local_name for child in _object_graph(path).nodes[0].children}


def _saved_model_weights(path):
    """How many variables of `path` belong to its `model` (found from it in the object graph: a training
    checkpoint files them under the optimizer, which reached them first)."""
    graph = _object_graph(path)
    roots = [child.node_id for child in graph.nodes[0].children if child.local_name == "model"]
    seen, stack = set(), roots
    while stack:
        node = stack.pop()
        if node not in seen:
            seen.add(node)
            stack.extend(child.node_id for child in graph.nodes[node].children)
    return sum(any(a.name == "VARIABLE_VALUE" for a in graph.nodes[node].attributes) for node in seen)


def _remove(path):
    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            os.remove(path)
        except OSError:
            pass


def _first_line(error):
    text = _shown(str(error)).strip().splitlines()
    return text[0] if text else type(error).__name__
