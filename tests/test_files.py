"""Files written whole or not at all (`t2t_relpos.files`)."""

import errno
import os
import stat
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


def test_a_replaced_file_keeps_its_mode_as_a_shell_redirect_does(tmp_path):
    """Before, the renamed temporary had the default mode: an output of mode 600 became 644 (readable by all)."""
    path = tmp_path / "private.txt"
    path.write_text("earlier\n")
    os.chmod(path, 0o600)
    with files.atomic_write(str(path)) as f:
        f.write("new\n")
    assert path.read_text() == "new\n" and stat.S_IMODE(os.stat(path).st_mode) == 0o600
    os.chmod(path, 0o640)  # And a wider mode the same.
    with files.atomic_write(str(path), "wb") as f:
        f.write(b"newer\n")
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_the_temporary_name_of_the_longest_name_fits_the_file_system(tmp_path):
    """A 250-byte name is valid (the limit is 255), but `.<name>.partial-<pid>` is not: "File name too long"."""
    long_name = "o" * 246 + ".txt"
    with files.atomic_write(str(tmp_path / long_name)) as f:
        f.write("whole\n")
    assert os.listdir(tmp_path) == [long_name]
    names = [os.path.basename(files.temporary_name(str(tmp_path / (long_name + end)))) for end in ("1", "2", "")]
    assert all(len(name.encode()) <= 255 - 8 for name in names) and len(set(names)) == 3, names  # Room for ".old".
    assert all(name.startswith(".ooo") and name.endswith(f".partial-{os.getpid()}") for name in names)
    assert files.temporary_name(str(tmp_path / "out.txt")) == str(tmp_path / f".out.txt.partial-{os.getpid()}")


def test_an_output_dir_that_is_a_dangling_link_or_a_loop_says_so(tmp_path):
    """Before, both were "cannot create --output_dir=...: File exists"."""
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    os.symlink(tmp_path / "b", tmp_path / "a")
    os.symlink(tmp_path / "a", tmp_path / "b")
    for name, reason in (("dangling", f"is a dangling symbolic link (to {tmp_path / 'gone'}, which does not exist)"),
                         ("a", "is a symbolic link loop"), ("dangling/run", "is a dangling symbolic link")):
        with pytest.raises(errors.T2TRelposError) as caught:
            files.make_directory(str(tmp_path / name), "--output_dir")
        assert str(caught.value).startswith(f"cannot create --output_dir={tmp_path / name}: "
                                            f"{tmp_path / name.split('/')[0]} {reason}"), caught.value


def test_what_is_not_a_regular_file_says_what_it_is(tmp_path):
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "file").write_text("")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")
    assert files.not_a_file(str(tmp_path / "file")) is None
    assert files.not_a_file(str(tmp_path)) == "is a directory, not a file"
    assert files.not_a_file(str(tmp_path / "fifo")) == "is not a regular file (a named pipe, a device or a socket)"
    assert files.not_a_file(str(tmp_path / "missing")) == "does not exist"
    assert files.not_a_file(str(tmp_path / "dangling")).startswith("does not exist (")
