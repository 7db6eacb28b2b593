"""Original data archives: checking them against their published size and SHA-256, extracting chosen members.

    archive = Archive("dev.tgz", "http://data.statmt.org/wmt19/translation-task/dev.tgz", 38654961, "7a7d...")
    check_size(path, archive)                         # quick: fails at once on a truncated download
    extract_members(path, archive, ["dev/newstest2013.de"], out_dir)   # -> {member: extracted path}

Extraction streams through the archive once and writes each wanted member under a temporary name, renamed
when complete (a failure, such as a full disk, removes it); members already extracted are not extracted again
(nor is the archive re-hashed).
"""

import dataclasses
import hashlib
import os
import shutil
import tarfile

from t2t_relpos import errors, files
from t2t_relpos.data import preparation


@dataclasses.dataclass(frozen=True)
class Archive:
    """A published archive: its file name, where it is downloaded from, its size in bytes and SHA-256."""

    filename: str
    url: str
    size: int
    sha256: str


def check_size(path, archive):
    """A `DataError` unless `path` exists with the archive's size (a quick test of a complete download)."""
    if not os.path.isfile(path):
        raise errors.DataError(f"{path} does not exist (download it from {archive.url})")
    size = os.path.getsize(path)
    if size != archive.size:
        raise errors.DataError(f"{path} has {size:,} bytes, the original {archive.filename} has {archive.size:,} "
                               f"(an incomplete or different download?); get it again from {archive.url}")


def check_checksum(path, archive):
    """A `DataError` unless `path` has the archive's size and SHA-256 (reads the whole file)."""
    check_size(path, archive)
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    except OSError as e:
        raise preparation.read_error(e, "the archive", path) from None
    if digest.hexdigest() != archive.sha256:
        raise errors.DataError(f"{path} has SHA-256 {digest.hexdigest()}, the original {archive.filename} has "
                               f"{archive.sha256}; get it again from {archive.url}")


def extract_members(path, archive, members, out_dir):
    """Extracts `members` (paths inside the tar archive) of a checked archive into `out_dir`.

    Args:
        path: The archive file (.tar, .tgz, .tar.gz).
        archive: Its `Archive` record, for the checksum.
        members: Member names as the archive lists them, e.g. "training/europarl-v7.de-en.de".
        out_dir: Where they go (as `out_dir/<member>`).

    Returns:
        {member: extracted path}.
    """
    targets = {m: os.path.join(out_dir, *m.split("/")) for m in members}
    wanted = {m for m, target in targets.items() if not os.path.isfile(target)}
    if not wanted:
        return targets
    check_checksum(path, archive)
    with tarfile.open(path, "r|*") as tar:
        for info in tar:
            name = info.name[2:] if info.name.startswith("./") else info.name
            if name in wanted and info.isfile():
                try:
                    os.makedirs(os.path.dirname(targets[name]), exist_ok=True)
                except OSError as e:
                    raise files.storage_error(e, f"{name} of {archive.filename}", targets[name]) from None
                with preparation.written(targets[name], f"{name} of {archive.filename}") as partial:
                    with tar.extractfile(info) as source, open(partial, "wb") as sink:
                        shutil.copyfileobj(source, sink, 1 << 20)
                wanted.discard(name)
                if not wanted:
                    break
    if wanted:
        raise errors.DataError(f"{path} lacks {', '.join(sorted(wanted))}: not the original {archive.filename}?")
    return targets
