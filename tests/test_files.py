"""Files written whole or not at all (`t2t_relpos.files`)."""

import errno
import os
import threading

import pytest

from t2t_relpos import errors, files


def test_a_failed_write_leaves_the_earlier_file_and_no_temporary(tmp_path):
    path = tmp_path / "out.txt"
    path.write_text("earlier\n")
    with pytest.raises(errors.T2TRelposError, match=r"cannot write the output to .*out.txt: no space left"):
        with files.atomic_write(str(path), what="the output") as f:
            f.write("half")
            raise OSError(errno.ENOSPC, "No space left on device")
    assert path.read_text() == "earlier\n" and os.listdir(tmp_path) == ["out.txt"]


def test_a_named_pipe_is_written_into_not_replaced(tmp_path):
    """Renaming a temporary over a pipe (or, as root, over /dev/null) would replace it with a file."""
    pipe = str(tmp_path / "pipe")
    os.mkfifo(pipe)
    got = []
    reader = threading.Thread(target=lambda: got.append(open(pipe, encoding="utf-8").read()), daemon=True)
    reader.start()
    with files.atomic_write(pipe) as f:
        f.write("through the pipe\n")
    reader.join(10)
    assert got == ["through the pipe\n"] and not os.path.isfile(pipe) and os.listdir(tmp_path) == ["pipe"]
