"""The command-line tools under faults of processes: concurrent runs on one directory and lost, late or silent
workers of a multi-worker run. Each ends in a clear line, never in silent garbage or lost work.

Apart from tests/test_faults.py, whose module-scoped run makes its tests one unit of work under `pytest -n`:
these need no such run, and each can go to whichever worker is free."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from test_cli import call_tool, run_tool
from test_faults import one_line_error
from test_training import _free_ports, killed_when_left
from test_translate import make_raw

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_a_seed_numpy_cannot_take_is_a_flag_error(tmp_path):
    one_line_error(run_tool("t2t-relpos-trainer", *TRAINER, f"--output_dir={tmp_path}", "--seed=-1"), "--seed=-1")


# -- concurrent runs ----------------------------------------------------------------------------------------
TRAINER = ["--problem=algorithmic_reverse_decimal40", "--hparams_set=transformer_tiny_rel",
           "--hparams=hidden_size=16,filter_size=32,num_heads=2,batch_size=128,max_length=10,num_encoder_layers=1,"
           "num_decoder_layers=1", "--eval_steps=1"]


def _tool_process(tool, *args, **kwargs):
    module = {"trainer": "t2t_relpos.cli.trainer", "datagen": "t2t_relpos.cli.datagen"}[tool]
    return subprocess.Popen([sys.executable, "-c", f"import {module} as m; m.run()", *args], text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), **kwargs)


def test_a_second_trainer_on_a_run_is_refused_and_a_killed_one_leaves_no_lock(tmp_path):
    from t2t_relpos import locks  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli.trainer import LOCK_NAME  # pylint: disable=import-outside-toplevel

    run = f"--output_dir={tmp_path / 'run'}"
    first = _tool_process("trainer", *TRAINER, run, "--train_steps=100000", stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT)
    try:
        assert first.stdout.readline().startswith("Training "), "the first trainer did not start"
        # The second one in this process (`call_tool`: it is refused before it trains; no second import of
        # TensorFlow): the lock it meets is the first one's, another process's.
        second = call_tool("t2t-relpos-trainer", *TRAINER, run, "--train_steps=2")
        one_line_error(second, "another trainer is writing to", f"process {first.pid} on")
    finally:
        first.kill()  # As a crash or an out-of-memory kill would.
        first.communicate(timeout=60)
    with locks.hold(str(tmp_path / "run" / LOCK_NAME)):  # Free at once: the kernel released it.
        pass


def test_concurrent_datagen_on_one_data_dir(tmp_path):
    make_raw(tmp_path)
    args = ("--problem=translate_local", f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={tmp_path}")
    processes = [_tool_process("datagen", *args, stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    outputs = [p.communicate(timeout=300) for p in processes]
    for process, (_, err) in zip(processes, outputs):
        assert process.returncode == 0, err
    errs = "".join(err for _, err in outputs)
    assert errs.count("translate_local: prepared in") == 1 and "already prepared" in errs, errs
    assert not [name for name in os.listdir(tmp_path / "data") if ".incomplete" in name]


def _outputs(processes, timeout):
    """Each process's output once it has ended; those still running after `timeout` s are killed."""
    with killed_when_left(processes):
        return [p.communicate(timeout=timeout)[0] for p in processes]


def _two_workers(run_dir, code="import t2t_relpos.cli.trainer as m; m.run()", steps=100000):
    """Two trainer processes of one multi-worker run; `code` runs them (a pair: one for each)."""
    workers = [f"127.0.0.1:{port}" for port in _free_ports(2)]
    codes = (code, code) if isinstance(code, str) else code
    processes = []
    for index in range(2):
        config = {"cluster": {"worker": workers}, "task": {"type": "worker", "index": index}}
        processes.append(subprocess.Popen(
            [sys.executable, "-c", codes[index], *TRAINER, "--log_every=1", f"--output_dir={run_dir}",
             f"--train_steps={steps}", "--distribution=multi_worker"],
            env=dict(os.environ, PYTHONUNBUFFERED="1", TF_CONFIG=json.dumps(config)), text=True,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    return processes


_SHORT_HEARTBEAT = "import t2t_relpos.training.strategy as s; s.HEARTBEAT_TIMEOUT_SECONDS = 2; "


def test_a_lost_worker_ends_the_survivor_with_one_line(tmp_path):
    # The survivor learns of the loss from the missing heartbeats: 2 s here, not 60, so the test takes seconds.
    survivor, lost = processes = _two_workers(tmp_path / "run",
                                              _SHORT_HEARTBEAT + "import t2t_relpos.cli.trainer as m; m.run()")
    with killed_when_left(processes):
        deadline = time.time() + 300
        for line in survivor.stdout:
            if line.startswith("step 2/") or time.time() > deadline:
                break
        lost.send_signal(signal.SIGKILL)
        began = time.time()
        output = survivor.communicate(timeout=180)[0]
    assert survivor.returncode == 1, output
    assert time.time() - began < 60
    assert "Traceback" not in output, output
    assert output.rstrip().splitlines()[-1].startswith("t2t-relpos-trainer: error: lost contact with another "
                                                       "worker"), output
    assert "start every worker again with the same command" in output


@pytest.mark.slow  # 36 s; the end-of-run barrier itself is in tests/test_training.py's two-worker test.
def test_a_worker_that_never_reaches_the_end_of_the_run_is_one_line_after_the_run_is_saved(tmp_path):
    # The second worker trains to the end, then exits without coming to the end-of-run barrier (as if it died
    # there). The chief, waiting at the barrier, says so in one line with status 1; its checkpoint is written.
    run = "import t2t_relpos.cli.trainer as m; m.run()"
    gone = "import os; s.leave_together = lambda strategy: os._exit(0); "
    chief, other = processes = _two_workers(tmp_path / "run", (_SHORT_HEARTBEAT + run,
                                                               _SHORT_HEARTBEAT + gone + run), steps=2)
    outputs = _outputs(processes, timeout=300)
    assert other.returncode == 0, outputs[1]
    assert chief.returncode == 1, outputs[0]
    assert "Traceback" not in outputs[0] and "Final evaluation" in outputs[0], outputs[0]
    # One line of ours (TensorFlow's own log of the lost task may come before or after it).
    errors = [line for line in outputs[0].splitlines() if line.startswith("t2t-relpos-trainer: error:")]
    assert errors == [errors[0]] and errors[0].startswith(
        "t2t-relpos-trainer: error: the run is trained and saved, but another worker did not reach the end of the "
        "run"), outputs[0]
    assert os.path.exists(tmp_path / "run" / "ckpt-2.index")


def test_a_worker_silent_past_the_heartbeat_timeout_ends_the_run_at_once(tmp_path):
    # The coordination service declares a worker that sent no heartbeat for the timeout (60 s; 2 s here) dead
    # and aborts every collective: both workers end with the lost-contact line, within seconds. (Once, before
    # they ended without Python's clean-up, such a run hung for over 400 s after the error.)
    processes = _two_workers(tmp_path / "run", _SHORT_HEARTBEAT + "import t2t_relpos.cli.trainer as m; m.run()")
    with killed_when_left(processes):
        deadline = time.time() + 300
        for line in processes[1].stdout:
            if line.startswith("step 2/") or time.time() > deadline:
                break
        processes[1].send_signal(signal.SIGSTOP)  # Not the worker that hosts the coordination service.
        time.sleep(8)
        processes[1].send_signal(signal.SIGCONT)
        began = time.time()
        outputs = [p.communicate(timeout=120)[0] for p in processes]
    assert time.time() - began < 30, outputs
    for process, output in zip(processes, outputs):
        assert process.returncode == 1, output
        assert output.rstrip().splitlines()[-1].startswith("t2t-relpos-trainer: error: lost contact with another "
                                                           "worker"), output
