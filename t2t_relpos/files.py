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
import hashlib
import os
import shutil
import stat

from t2t_relpos import errors

_STORAGE_ERRNOS = {
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
    errno.EROFS: "read-only file system",
    errno.EACCES: "permission denied",
    errno.EPERM: "operation not permitted",
}


# Bytes a temporary name leaves free below the file system's limit on a name, for names made from it (averaging
# moves an earlier average aside as `<temporary>.old`).
_NAME_SPARE = 8


def temporary_name(path):
    """The name `path` is written under until it is whole: hidden, beside it, unique to this process.

    `.<name>.partial-<pid>`, or, where that would pass the file system's limit on a name's length (255 bytes on
    most), the longest start of `<name>` that fits with a digest of the whole: a name the user may give is never
    refused because its temporary name is longer.
    """
    head, tail = os.path.split(path)
    suffix = f".partial-{os.getpid()}"
    name = f".{tail}{suffix}"
    limit = _name_max(head) - _NAME_SPARE
    if len(os.fsencode(name)) <= limit:
        return os.path.join(head, name)
    digest = "-" + hashlib.sha256(os.fsencode(tail)).hexdigest()[:12]
    keep = max(0, limit - len(os.fsencode(f".{digest}{suffix}")))
    return os.path.join(head, "." + os.fsdecode(os.fsencode(tail)[:keep]) + digest + suffix)


def _name_max(directory):
    """The longest name, in bytes, that the file system of `directory` takes (255 where it cannot say)."""
    try:
        return os.pathconf(directory or ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        return 255


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

    An earlier file at `path` stays as it was until the new one is whole, and the new one gets its mode (and,
    where the process may give it, its owner), as a shell's `>` keeps them: an output of mode 600 stays
    private. Any error (full disk, kill by an exception such as `KeyboardInterrupt`) removes the temporary and
    leaves `path` untouched; an `OSError` is raised again as a one-line `T2TRelposError`. A `path` that is not a
    regular file (a device such as /dev/null, a named pipe) is written in place: a rename would replace it with
    a file.
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
            _keep_mode(f.fileno(), path)
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


def _keep_mode(fd, path):
    """Gives the open file `fd` the permissions (and, where allowed, the owner and group) of the file `path`,
    if there is one: the file it is about to replace."""
    try:
        earlier = os.stat(path)
    except OSError:
        return  # A new file: the process's umask decides, as for any file it creates.
    ours = os.fstat(fd)
    if (earlier.st_uid, earlier.st_gid) != (ours.st_uid, ours.st_gid):
        with contextlib.suppress(OSError):  # Only root may give a file away; a group of one's own, anyone.
            os.fchown(fd, earlier.st_uid, earlier.st_gid)
    os.fchmod(fd, stat.S_IMODE(earlier.st_mode))


def make_directory(path, flag):
    """Creates the local directory `path` named by `flag`; one that is a file or cannot be made is an error."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise errors.T2TRelposError(f"{flag}={path} is a file, not a directory")
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        link = broken_link(path)
        if link:
            raise errors.T2TRelposError(f"cannot create {flag}={path}: {link}") from None
        raise errors.T2TRelposError(f"cannot create {flag}={path}: {e.strerror or e}") from None
    return path


def broken_link(path):
    """What is wrong with the first symbolic link on the way to `path` that leads nowhere, e.g. "runs/x is a
    dangling symbolic link (to runs/gone, which does not exist)" or "... is a symbolic link loop"; or None."""
    parts, current = os.path.normpath(path).split(os.sep), ""
    for part in parts:
        current = os.path.join(current, part) if current else (part or os.sep)
        if not os.path.islink(current):
            continue
        try:
            os.stat(current)
        except OSError as e:
            if e.errno == errno.ELOOP:
                return f"{current} is a symbolic link loop (it leads back to itself)"
            if e.errno == errno.ENOENT:
                return f"{current} is a dangling symbolic link (to {os.readlink(current)}, which does not exist)"
    return None


def not_a_file(path):
    """Why `path` cannot be read as a regular file ("does not exist", "is a directory", ...), or None if it can."""
    if os.path.isfile(path):
        return None
    if os.path.isdir(path):
        return "is a directory, not a file"
    if os.path.exists(path):
        return "is not a regular file (a named pipe, a device or a socket)"
    link = broken_link(path)
    return f"does not exist ({link})" if link else "does not exist"


def check_writable_directory(path, flag):
    """Raises a one-line error unless files can be created in directory `path` (checked by making one)."""
    probe = temporary_name(os.path.join(path, ".write-check"))
    try:
        # Written to, not only made: a disk already full still takes an empty file, and nothing more.
        with open(probe, "w", encoding="utf-8") as f:
            f.write("write check\n")
    except OSError as e:
        raise errors.T2TRelposError(f"cannot write in {flag}={path}: "
                                    f"{_STORAGE_ERRNOS.get(e.errno, e.strerror or str(e))}") from None
    finally:
        _remove(probe)


def _remove(path):
    with contextlib.suppress(OSError):
        os.remove(path)
