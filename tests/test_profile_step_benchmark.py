"""The step profiler on a tiny run: it times the trainer's own step and ranks ops or says what it needs."""

import os
import subprocess
import sys

_SCRIPT = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "profile_step.py")


def test_profile_step_times_the_trainers_step_and_profiles_it(tmp_path):
    result = subprocess.run(
        [sys.executable, _SCRIPT, "--problem=algorithmic_identity_decimal40", "--hparams_set=transformer_cpu_rel",
         "--hparams=batch_size=256,hidden_size=16,filter_size=32,num_heads=2", "--warmup_steps=2", "--steps=3",
         "--profile_steps=2", f"--work_dir={tmp_path}"],
        capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    assert "median step" in lines[0] and "tokens per CPU-second" in lines[0] and "(3 steps after 2)" in lines[0]
    assert any(line.startswith("busy host time") for line in lines) or "pip install xprof" in result.stdout
    assert os.listdir(os.path.join(tmp_path, "profile"))
