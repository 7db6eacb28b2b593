"""benchmarks/nanogpt.py: its pure parts (the blocks nanoGPT's checkpoint is scored in, the commands, the logs
it reads, the token-by-token data check, the table) and a clean one-line skip; no torch, no training."""

import math
import os
import subprocess
import sys

import numpy as np
import pytest

import benchmark_scripts

_PATH = os.path.join(benchmark_scripts.BENCHMARKS, "nanogpt.py")


@pytest.fixture(scope="module")
def benchmark():
    return benchmark_scripts.load("nanogpt")


def test_skips_cleanly_in_one_line_without_the_text(tmp_path):
    result = subprocess.run([sys.executable, _PATH, str(tmp_path / "nanoGPT"), str(tmp_path / "python"),
                             f"--text={tmp_path / 'absent.txt.gz'}", f"--work_dir={tmp_path / 'w'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1 and "skipped" in result.stdout and "absent.txt.gz" in result.stdout
    assert not os.path.exists(tmp_path / "w")


def test_skips_cleanly_without_a_nanogpt_checkout(tmp_path):
    text = tmp_path / "input.txt"
    text.write_text("To be, or not to be\n")
    result = subprocess.run([sys.executable, _PATH, str(tmp_path / "nanoGPT"), sys.executable, f"--text={text}",
                             f"--work_dir={tmp_path / 'w'}"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and "not a nanoGPT checkout" in result.stdout
    assert not os.path.exists(tmp_path / "w")


@pytest.mark.parametrize("length,size", [(10, 4), (9, 4), (111540, 64), (2, 64), (65, 64), (66, 64)])
def test_the_blocks_score_every_character_but_the_first_once(benchmark, length, size):
    spans = benchmark.blocks(length, size)
    targets = [t for start, end in spans for t in range(start + 1, end + 1)]
    assert targets == list(range(1, length))
    assert all(0 < end - start <= size for start, end in spans)
    assert all(end - start == size for start, end in spans[:-1])
    assert [start for start, _ in spans] == list(range(0, length - 1, size))


def test_the_whole_val_script_carries_the_blocks(benchmark):
    namespace = {}
    exec(benchmark.NANOGPT_EVAL.split("\nimport json")[0], namespace)  # pylint: disable=exec-used
    assert namespace["blocks"](10, 4) == [(0, 4), (4, 8), (8, 9)]


def test_the_commands_are_nanogpts_recipe_and_ours_at_its_size(benchmark):
    theirs = benchmark.nanogpt_command("py", 2000, "/o")
    assert theirs[:3] == ["py", "train.py", "config/train_shakespeare_char.py"]
    for flag in ("--device=cpu", "--compile=False", "--eval_iters=20", "--log_interval=1", "--block_size=64",
                 "--batch_size=12", "--n_layer=4", "--n_head=4", "--n_embd=128", "--max_iters=2000",
                 "--lr_decay_iters=2000", "--dropout=0.0", "--out_dir=/o", "--always_save_checkpoint=True"):
        assert flag in theirs
    ours = benchmark.ours_command("transformer_lm_cpu_rel", "/d", "/r", 2000)
    assert "--hparams=max_length=64,batch_size=768" in ours and "--train_steps=2000" in ours
    assert "--eval_every=0" in ours and not any(a.startswith("--eval_steps") for a in ours)
    assert benchmark.pinned(["x"], 1) == ["taskset", "-c", "1", "x"]


def test_the_logs_are_read(benchmark):
    nano = benchmark.parse_nanogpt_log(
        "number of parameters: 0.80M\nstep 0: train loss 4.1676, val loss 4.1649\n"
        "iter 0: loss 4.1828, time 1038.00ms, mfu -100.00%\niter 1: loss 4.1373, time 73.51ms, mfu -100.00%\n"
        "step 2000: train loss 1.7000, val loss 1.8800\nsaving checkpoint to /o\n")
    assert nano == {"iters": [(0, 4.1828, 1038.0), (1, 4.1373, 73.51)],
                    "estimates": [(0, 4.1676, 4.1649), (2000, 1.7, 1.88)]}
    final = benchmark.parse_final_evaluation(
        "eval accuracy 0.2  loss 9\nFinal evaluation: accuracy 0.2362  bits_per_character 4.2176  loss 2.9234  "
        "neg_log_perplexity -2.9234  perplexity 18.6046\n")
    assert final["neg_log_perplexity"] == -2.9234 and final["bits_per_character"] == 4.2176
    with pytest.raises(ValueError):
        benchmark.parse_final_evaluation("eval accuracy 0.2\n")
    assert benchmark.median_step_ms([1.0] * 10 + [0.05, 0.06, 0.07]) == pytest.approx(60.0)
    assert benchmark.median_step_ms([0.1] * 3) is None


def test_the_data_check_maps_the_vocabularies_and_finds_a_difference(benchmark):
    itos = {0: "\n", 1: " ", 2: "a", 3: "b"}
    characters = ["\n", " ", "a", "b"]
    theirs = np.array([2, 3, 1, 2, 0], np.uint16)
    ours = np.array([5, 6, 4, 5, 3, 1], np.int32)  # + 3 reserved ids, and EOS (1) at the end.
    assert benchmark.check_same_stream(ours, theirs, characters, itos, 3) == 5
    with pytest.raises(SystemExit, match="differ at 1 characters, first at 2"):
        benchmark.check_same_stream(np.array([5, 6, 5, 5, 3, 1]), theirs, characters, itos, 3)
    with pytest.raises(SystemExit, match="length"):
        benchmark.check_same_stream(ours[:-1], theirs, characters, itos, 3)
    with pytest.raises(SystemExit, match="not in ours"):
        benchmark.check_same_stream(ours, theirs, characters[:3], itos, 3)


def test_ours_are_scored_in_the_trainers_windows_and_in_nanogpts_blocks(benchmark):
    assert '("windows", 64, 64), ("blocks", 65, 64)' in benchmark.OURS_SCORE
    compile(benchmark.OURS_SCORE, "score", "exec")


def test_the_table_has_the_columns_asked_for(benchmark):
    row = {"toolkit": "ours", "model": "`m`", "params": 833792, "steps": 2000, "tokens_per_step": 768.0,
           "nats": 1.5, "nats_blocks": 1.49, "wall": 200.0, "cpu": 190.0, "median_ms": 61.23}
    lines = benchmark.format_table([row]).splitlines()
    cells = [cell.strip() for cell in lines[2].split("|")[1:-1]]
    assert cells[:9] == ["ours", "`m`", "833,792", "2,000", "768", "**1.5000**", f"{1.5 / math.log(2):.4f}",
                         "1.4900", "200"]
    assert cells[9:] == ["0.100", "190", "61.2"]
    assert "s / step" in lines[0] and "bits / char" in lines[0]


def test_steps_that_nanogpt_would_not_checkpoint_are_refused(tmp_path):
    result = subprocess.run([sys.executable, _PATH, str(tmp_path), sys.executable, "--steps=300",
                             f"--work_dir={tmp_path / 'w'}"], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2 and "multiple of 250" in result.stderr
