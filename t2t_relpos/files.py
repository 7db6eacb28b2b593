"""Files written whole or not at all, and storage failures told in one line.

A tool that is killed, or runs out of space, must leave what it had and nothing half-made under a final name:
a later reader (the decoder, TensorFlow Serving, a rerun of the same tool) takes a file or directory under its
final name as complete. So everything a tool writes goes to a temporary name beside the final one and is renamed
into place when whole (`os.replace` is atomic within one file system). A failure removes the temporary.

Example:

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "out.txt")
>>> with atomic_write(path) as f:
...     _ = f.write("hello\\n")
>>> open(path).read()
'hello\\n'
"""

import contextlib
import errno
import os
import shutil

from t2t_relpos import errors

_STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


def temporary_name(path):
    """The name `path` is written under until it is whole: hidden, beside it, unique to this process."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.partial-{os.getpid()}")


def storage_error(exc, what, path):
    """A `T2TRelposError` saying in one line why `what` could not be written to `path`.

    Args:
        exc: The `OSError` (or TensorFlow's `ResourceExhaustedError` / `PermissionDeniedError`, which carry no
            errno) that writing raised.
        what: What was being written, e.g. "the decoded output".
        path: Where.
    """
    reason = _STORAGE_ERRNOS.get(getattr(exc, "errno", None))
    if reason is None:
        reason = getattr(exc, "strerror", None) or getattr(exc, "message", None) or str(exc)
        reason = reason.strip().splitlines()[0] if reason.strip() else type(exc).__name__
    return errors.T2TRelposError(f"cannot write {what} to {path}: {reason}")


@contextlib.contextmanager
def atomic_write(path, mode="w", encoding="utf-8", what="the file"):
    """Opens a temporary file beside `path`; renames it to `path` when the block ends without an error.

    An earlier file at `path` stays as it was until the new one is whole. Any error (full disk, kill by an
    exception such as `KeyboardInterrupt`) removes the temporary and leaves `path` untouched; an `OSError` is
    raised again as a one-line `T2TRelposError`. A `path` that is not a regular file (a device such as /dev/null,
    a named pipe) is written in place: a rename would replace it with a file.
    """
    if os.path.exists(path) and not os.path.isfile(path):
        try:
            with open(path, mode, encoding=None if "b" in mode else encoding) as f:
                yield f
        except OSError as e:
            raise storage_error(e, what, path) from None
        return
    tmp = temporary_name(path)
    try:
        f = open(tmp, mode, encoding=None if "b" in mode else encoding)  # pylint: disable=consider-using-with
    except OSError as e:
        raise storage_error(e, what, path) from None
    try:
        with f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        _remove(tmp)
        raise storage_error(e, what, path) from None
    except BaseException:
        _remove(tmp)
        raise


@contextlib.contextmanager
def atomic_directory(path, what="the directory"):
    """Yields a temporary directory beside `path`, renamed to `path` when the block ends without an error.

    `path` must not exist yet (a directory cannot replace another atomically). On any error the temporary
    directory and everything in it are removed. A remote `path` (`gs://...`: an object store, where renaming a
    directory copies each file) is yielded as it is, to be written in place, as TensorFlow writes it.
    """
    if "://" in path:
        yield path
        return
    tmp = temporary_name(path)
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        os.makedirs(tmp)
    except OSError as e:
        raise storage_error(e, what, path) from None
    try:
        yield tmp
        os.rename(tmp, path)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise storage_error(e, what, path) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def make_directory(path, flag):
    """Creates the local directory `path` named by `flag`; one that is a file or cannot be made is an error."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise errors.T2TRelposError(f"{flag}={path} is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise errors.T2TRelposError(f"cannot create {flag}={path}: {e.strerror or e}") from None
    return path


def check_writable_directory(path, flag):
    """Raises a one-line error unless files can be created in directory `path` (checked by making one)."""
    probe = temporary_name(os.path.join(path, ".write-check"))
    try:
        with open(probe, "w", encoding="utf-8"):
            pass
    except OSError as e:
        raise errors.T2TRelposError(f"cannot write in {flag}={path}: "
                                    f"{_STORAGE_ERRNOS.get(e.errno, e.strerror or str(e))}") from None
    finally:
        _remove(probe)


def _remove(path):
    with contextlib.suppress(OSError):
        os.remove(path)
