"""The four command-line tools: help, the registry listing, and exit status 2 with one clear line on bad input."""

import os
import subprocess
import sys

import pytest

TOOLS = {
    "t2t-relpos-trainer": "t2t_relpos.cli.trainer",
    "t2t-relpos-decoder": "t2t_relpos.cli.decoder",
    "t2t-relpos-datagen": "t2t_relpos.cli.datagen",
    "t2t-relpos-avg-checkpoints": "t2t_relpos.cli.avg_checkpoints",
    "t2t-relpos-export": "t2t_relpos.cli.export",
}


def run_tool(tool, *args, stdin=None, timeout=120):
    """Runs a tool as a fresh process (as `python -c`, so it needs no installed script)."""
    code = f"import {TOOLS[tool]} as m; m.run()"
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.run([sys.executable, "-c", code, *args], input=stdin, capture_output=True, text=True,
                          timeout=timeout, env=env, check=False)


def assert_usage_error(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_help_exits_zero_and_lists_flags(tool):
    result = run_tool(tool, "--help")
    assert result.returncode == 0, result.stderr
    assert "--usr_dir" in result.stdout
    assert "--output_dir" in result.stdout or "--data_dir" in result.stdout


def test_registry_help_lists_problems_models_and_sets():
    result = run_tool("t2t-relpos-trainer", "--registry_help")
    assert result.returncode == 0, result.stderr
    for name in ("algorithmic_reverse_decimal40", "transformer", "transformer_base", "transformer_big",
                 "transformer_base_rel", "transformer_big_rel", "transformer_tiny", "transformer_tiny_rel",
                 "transformer_cpu_rel", "babi_qa_facts_all_tasks_1k", "universal_transformer_encoder"):
        assert name in result.stdout


def test_unknown_flag_is_a_usage_error():
    assert_usage_error(run_tool("t2t-relpos-trainer", "--no_such_flag=1"), "no_such_flag")


def test_unknown_problem_lists_close_names(tmp_path):
    result = run_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal4",
                      "--hparams_set=transformer_tiny_rel", f"--output_dir={tmp_path}")
    assert_usage_error(result, "problem", "algorithmic_reverse_decimal40")


def test_unknown_hparams_set_lists_close_names(tmp_path):
    result = run_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                      "--hparams_set=transformer_big_rell", f"--output_dir={tmp_path}")
    assert_usage_error(result, "transformer_big_rel")


def test_malformed_override_names_the_field(tmp_path):
    result = run_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                      "--hparams_set=transformer_big_rel", "--hparams=hidden_size=x", f"--output_dir={tmp_path}")
    assert_usage_error(result, "hidden_size")


def test_decoder_without_a_run_is_a_usage_error(tmp_path):
    result = run_tool("t2t-relpos-decoder", f"--output_dir={tmp_path}", "--decode_split=eval")
    assert_usage_error(result, str(tmp_path))


def test_datagen_unknown_problem(tmp_path):
    assert_usage_error(run_tool("t2t-relpos-datagen", "--problem=wmt14_endee", f"--data_dir={tmp_path}"),
                       "problem")


def test_avg_checkpoints_without_checkpoints(tmp_path):
    assert_usage_error(run_tool("t2t-relpos-avg-checkpoints", f"--output_dir={tmp_path}"), str(tmp_path))
