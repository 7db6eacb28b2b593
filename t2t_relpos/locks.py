"""Advisory locks on directories, so that two processes never write the same run or the same data at once.

A lock is `fcntl.flock` on a file in the directory. The kernel releases it when its process ends, however it
ends (SIGKILL, a crash, a reboot), so a killed run never leaves a stale lock behind. The file holds the
holder's host and process id, for messages; it is left in place (removing it would race with the next
holder).

    with locks.hold(os.path.join(output_dir, ".lock")):
        ...  # only one process at a time gets here
"""

import contextlib
import errno
import fcntl
import os
import socket

from t2t_relpos import errors, files


class LockedError(errors.T2TRelposError):
    """The lock is held by another process (`holder`: "host pid", or "" if it wrote nothing)."""

    def __init__(self, path, holder):
        who = f"process {holder.split()[-1]} on {holder.split()[0]}" if holder else "another process"
        super().__init__(f"{path} is held by {who}")
        self.path = path
        self.holder = holder


@contextlib.contextmanager
def hold(path, wait=False, on_wait=None):
    """Holds the lock `path` for the duration of the block.

    Args:
        path: The lock file (created if missing).
        wait: Wait for the holder to finish instead of raising `LockedError`.
        on_wait: Called with the `LockedError` once before waiting (e.g. to say whom we wait for).

    Raises:
        LockedError: another process holds it and `wait` is False.
        T2TRelposError: the lock file cannot be made or written (a read-only file system), in one line. A full
            disk is not an error here: the lock is held without the holder's name in it.
    """
    try:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as e:
        raise files.storage_error(e, "the lock file", path) from None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            busy = LockedError(path, os.pread(fd, 256, 0).decode("utf-8", "replace").strip())
            if not wait:
                raise busy from None
            if on_wait is not None:
                on_wait(busy)
            fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{socket.gethostname()} {os.getpid()}\n".encode("utf-8"), 0)
        except OSError as e:
            # The lock is held all the same: its text only names the holder in others' messages. A disk already
            # full is for the holder's own writes to report (datagen on prepared data writes nothing).
            if e.errno not in (errno.ENOSPC, errno.EDQUOT):
                raise files.storage_error(e, "the lock file", path) from None
        yield
    finally:
        os.close(fd)  # Releases the lock.
