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


# Page faults per pass over a 64 MiB tensor, in a process that has imported a tool: TensorFlow's default CPU
# allocator gives the result's memory back to the system after every pass (a fault per 4 KiB page when it
# is mapped again); the BFC allocator the tools choose reuses it. The test turns TensorFlow's oneDNN ops off:
# where they are on (x86 with AVX-512 on some builds), results of this pass come from oneDNN's own caching
# allocator whatever the setting, and the default allocator would seem to reuse memory too.
FAULTS_PER_PASS = """
import resource
import {module}
import tensorflow as tf
x = tf.ones((4096, 4096))
def step():
    return float(tf.reduce_sum(x * 2.0))
step()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(5):
    step()
print((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / 5)
"""


@pytest.mark.parametrize("setting, reused", [(None, True), ("false", False)])
def test_the_tools_reuse_cpu_memory_unless_told_not_to(setting, reused):
    env = {name: value for name, value in os.environ.items() if name != "TF_CPU_ALLOCATOR_USE_BFC"}
    env["TF_ENABLE_ONEDNN_OPTS"] = "0"
    if setting is not None:
        env["TF_CPU_ALLOCATOR_USE_BFC"] = setting
    result = subprocess.run([sys.executable, "-c", FAULTS_PER_PASS.format(module=TOOLS["t2t-relpos-trainer"])],
                            capture_output=True, text=True, timeout=120, env=env, check=False)
    assert result.returncode == 0, result.stderr
    faults = float(result.stdout.split()[-1])
    pages = 64 * 2 ** 20 / 4096
    assert (faults < 0.05 * pages) if reused else (faults > 0.5 * pages), faults


def test_overrides_the_run_will_not_read_are_named():
    # They were ignored without a word: max_relative_position on a sinusoid set looks like relative attention.
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import trainer  # pylint: disable=import-outside-toplevel

    overrides = "max_relative_position=8,num_rec_steps=3,act_loss_weight=0.5,hidden_size=32"
    lines = trainer.unread_overrides(registry.hparams("transformer_cpu").parse(overrides), "transformer", overrides)
    assert [line.split(" ", 2)[1] for line in lines] == ["'act_loss_weight'", "'num_rec_steps'",
                                                         "'max_relative_position'"], lines
    assert "has no effect with position_encoding='sinusoid'" in lines[-1]
    fixed = registry.hparams("universal_transformer_tiny").parse("act_max_steps=3")
    assert trainer.unread_overrides(fixed, "universal_transformer", "act_max_steps=3") == [
        "hparam 'act_max_steps' has no effect with recurrence_type='basic' (ACT: recurrence_type=act, as the "
        "adaptive_* sets have)"]
    assert not trainer.unread_overrides(registry.hparams("transformer_cpu_rel").parse(overrides.split(",", 1)[0]),
                                        "transformer", "max_relative_position=8")
