"""Preparing a problem's data in a data directory, one process at a time.

Several processes may be asked to prepare the same data at once (`--generate_data` on every worker of a
multi-worker job, two datagen commands started by hand). The first prepares it while holding a lock on the
data directory; the others wait for it, then find the data ready and leave it as it is. Files are written
under temporary names of their writer's own and renamed into place when complete (see `data.shards`, `written`),
so a reader never sees half a file; a writer that fails (a full disk) removes its partial file, and one killed
leaves it for the next `prepare` to remove.

A data directory that cannot be written in (a read-only mount of prepared data) is still checked: when everything
is prepared there, preparing it succeeds with nothing to write (as `--generate_data` on every worker of a job
asks); when something is missing, the first file to be written is refused in one line.
"""

import contextlib
import errno
import glob
import json
import os
import socket
import sys

from t2t_relpos import errors, files, locks

PARTIAL = ".incomplete"
# Errors of a directory that cannot be written in, whatever the space: its files can still be read.
_READ_ONLY = (errno.EROFS, errno.EACCES, errno.EPERM)


def partial_path(path):
    """Where this process writes `path` before renaming it into place: a name no other process uses."""
    return f"{path}{PARTIAL}.{socket.gethostname()}.{os.getpid()}"


@contextlib.contextmanager
def written(path, what):
    """Yields the name to write `path` under (`partial_path`); renames it to `path` when the block ends.

    On any error (a full disk, a read-only file system, an interrupt) the partial file is removed and `path`
    is left as it was; a storage error, from Python or from a TensorFlow writer (`tf.io.TFRecordWriter`
    raises `ResourceExhaustedError` on a full disk), is raised as one line naming `what` and `path`.

    Example:

    >>> import tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "x.json")
    >>> with written(path, "the example") as partial:
    ...     with open(partial, "w", encoding="utf-8") as f:
    ...         _ = f.write("{}")
    >>> sorted(os.listdir(os.path.dirname(path)))
    ['x.json']
    """
    partial = partial_path(path)
    try:
        yield partial
        os.replace(partial, path)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.remove(partial)
        error = storage_os_error(e)
        if error is not None:
            raise files.storage_error(error, what, path) from None
        raise


def storage_os_error(exc):
    """`exc` as an `OSError` if it is one, or a TensorFlow file system error of storage (a full disk, a
    read-only file system, no permission); otherwise None."""
    if isinstance(exc, OSError):
        return exc
    kind = type(exc).__name__
    if kind not in ("ResourceExhaustedError", "PermissionDeniedError") or not hasattr(exc, "message"):
        return None
    # TensorFlow's message is "<path>; <strerror>".
    reason = exc.message.rsplit("; ", 1)[-1].strip()
    known = {os.strerror(n): n for n in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM)}
    return OSError(known.get(reason, errno.ENOSPC if kind == "ResourceExhaustedError" else errno.EACCES), reason)


def remove(path, what):
    """Removes the file `path` (gone already is fine); a failure is one line naming `what`."""
    try:
        os.remove(path)
    except FileNotFoundError:
        pass
    except OSError as e:
        raise errors.DataError(f"cannot remove {what} {path}: {e.strerror or e}") from None


def read_error(exc, what, path):
    """A `DataError` saying in one line why `what` at `path` could not be read (`exc`: the `OSError`)."""
    return errors.DataError(f"cannot read {what} {path}: {exc.strerror or exc}")


def read_json(path, what):
    """The JSON value of the file `path`, or None if there is none; unreadable or malformed: a `DataError`."""
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise read_error(e, what, path) from None
    except ValueError as e:
        raise errors.DataError(f"{path}: {what} is not valid JSON ({e}); it is written whole or not at all, so "
                               "it was changed by hand or damaged") from None


def write_json(path, value, what):
    """Writes `value` as JSON to `path` whole or not at all (see `written`)."""
    with written(path, what) as partial:
        with open(partial, "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2, ensure_ascii=False)
            f.write("\n")


def prepare(problem, data_dir, tmp_dir):
    """`problem.generate_data(data_dir, tmp_dir)` under the lock `<data_dir>/<problem>.datagen.lock`.

    Where the lock cannot be made because `data_dir` cannot be written in, the problem checks what is
    prepared there without it: nobody can write there either.
    """
    check_settings = getattr(problem, "check_settings", None)
    if check_settings is not None:  # A setting that cannot work is refused before anything is written.
        check_settings(tmp_dir)
    if not data_dir or "://" in data_dir:  # Nothing written (generated on the fly), or no advisory locks.
        problem.generate_data(data_dir, tmp_dir)
        return
    files.make_directory(data_dir, "--data_dir")

    def say_waiting(busy):
        print(f"{problem.name}: waiting for {busy.holder or 'another process'} preparing {data_dir} "
              f"({busy.path})", file=sys.stderr, flush=True)

    lock = os.path.join(data_dir, f"{problem.name}.datagen.lock")
    try:  # Can the lock be had at all? (Opened for writing, as `locks.hold` opens it.)
        os.close(os.open(lock, os.O_RDWR | os.O_CREAT, 0o644))
    except OSError as e:
        if e.errno not in _READ_ONLY:
            raise files.storage_error(e, "the datagen lock", lock) from None
        problem.generate_data(data_dir, tmp_dir)  # Read-only: checks, and refuses the first write.
        return
    with locks.hold(lock, wait=True, on_wait=say_waiting):
        # Holding the lock, nobody else writes here: partial files are what killed runs left behind.
        for stale in glob.glob(os.path.join(glob.escape(data_dir), f"{problem.name}*{PARTIAL}*")):
            remove(stale, "a partial file of an interrupted datagen")
        problem.generate_data(data_dir, tmp_dir)
