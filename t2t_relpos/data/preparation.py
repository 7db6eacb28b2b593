"""Preparing a problem's data in a data directory, one process at a time.

Several processes may be asked to prepare the same data at once (`--generate_data` on every worker of a
multi-worker job, two datagen commands started by hand). The first prepares it while holding a lock on the
data directory; the others wait for it, then find the data ready and leave it as it is. Files are written
under temporary names of their writer's own and renamed into place when complete (see `data.shards`), so a
reader never sees half a file.
"""

import glob
import os
import socket
import sys

from t2t_relpos import locks

PARTIAL = ".incomplete"


def partial_path(path):
    """Where this process writes `path` before renaming it into place: a name no other process uses."""
    return f"{path}{PARTIAL}.{socket.gethostname()}.{os.getpid()}"


def prepare(problem, data_dir, tmp_dir):
    """`problem.generate_data(data_dir, tmp_dir)` under the lock `<data_dir>/<problem>.datagen.lock`."""
    if not data_dir or "://" in data_dir:  # Nothing written (generated on the fly), or no advisory locks.
        problem.generate_data(data_dir, tmp_dir)
        return
    os.makedirs(data_dir, exist_ok=True)

    def say_waiting(busy):
        print(f"{problem.name}: waiting for {busy.holder or 'another process'} preparing {data_dir} "
              f"({busy.path})", file=sys.stderr, flush=True)

    with locks.hold(os.path.join(data_dir, f"{problem.name}.datagen.lock"), wait=True, on_wait=say_waiting):
        # Holding the lock, nobody else writes here: partial files are what killed runs left behind.
        for stale in glob.glob(os.path.join(glob.escape(data_dir), f"{problem.name}*{PARTIAL}*")):
            os.remove(stale)
        problem.generate_data(data_dir, tmp_dir)
