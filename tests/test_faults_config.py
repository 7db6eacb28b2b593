"""The trainer's configuration under faults: a resumed run overridden by a gin file, a TF_CONFIG of the wrong
shape, rates and epsilons that are 0 in float32, gin files and `--usr_dir` code that fail. Each is refused in
one line before anything is built, never trained silently wrong or ended in a traceback.

The checks are called in this process; one refusal of each kind goes through the trainer (`call_tool`, which
trains nothing: each is refused before a run is written)."""

import json

import pytest

from test_cli import call_tool, usr_dirs_forgotten
from test_faults import one_line_error

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

TRAINER = ("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40", "--hparams_set=transformer_tiny_rel")


def _refused(call, *fragments):
    """The one-line message of the `T2TRelposError` that `call()` raises, checked for `fragments`."""
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel

    with pytest.raises(errors.T2TRelposError) as raised:
        call()
    message = str(raised.value)
    assert "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message
    return message


# -- resuming: every route that sets a value is compared with the stored run ------------------------------
def test_resuming_compares_gin_files_and_every_override_with_the_stored_run(tmp_path):
    from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel

    # A run made at 64 wide (the set's 128) with a 256 FFN (the set's 512).
    run = str(tmp_path / "run")
    stored.save(run, stored.resolve("transformer_tiny_rel", "hidden_size=64,filter_size=256"), "p", "transformer")
    gin_file = tmp_path / "wide.gin"
    gin_file.write_text("hparams.hidden_size = 128\nhparams.filter_size = 512\n")
    # The gin file's values are the set's: compared with the set, it resumed at 64 and 256, exit 0. Every
    # difference is named.
    both = ("hidden_size=64 (asked 128)", "filter_size=256 (asked 512)", "use a new --output_dir")
    _refused(lambda: stored.resolve_for_run(run, gin_files=[str(gin_file)]), *both)
    _refused(lambda: stored.resolve_for_run(run, overrides="hidden_size=128,filter_size=512"), *both)
    _refused(lambda: stored.resolve_for_run(run, gin_params=["hparams.hidden_size = 128",
                                                             "hparams.filter_size = 512"]), *both)
    # Through an include too (the set's own file binds them), and mixed routes.
    (tmp_path / "inc.gin").write_text("include 'transformer_tiny_rel.gin'\nhparams.relu_dropout = 0.2\n")
    _refused(lambda: stored.resolve_for_run(run, gin_files=[str(tmp_path / "inc.gin")]), *both)
    _refused(lambda: stored.resolve_for_run(run, overrides="hidden_size=128",
                                            gin_params=["hparams.filter_size = 512"]), *both)
    # The stored values asked again, or values the run never changed, resume it as it was.
    gin_file.write_text("hparams.hidden_size = 64\nhparams.filter_size = 256\n")
    again, _, _ = stored.resolve_for_run(run, gin_files=[str(gin_file)], overrides="hidden_size=64")
    assert (again.hidden_size, again.filter_size) == (64, 256)
    # Through the trainer: one line, exit 2.
    gin_file.write_text("hparams.hidden_size = 128\n")
    one_line_error(call_tool(TRAINER[0], f"--output_dir={run}", f"--gin_file={gin_file}"),
                   "hidden_size=64 (asked 128)")


# -- TF_CONFIG ----------------------------------------------------------------------------------------------
GOOD_CLUSTER = {"worker": ["h1:2222", "h2:2222"]}


@pytest.mark.parametrize("config, fragment", [
    ([1, 2], "TF_CONFIG is a JSON list, not an object"),
    ({"clutser": GOOD_CLUSTER, "task": {"type": "worker", "index": 0}},
     "unknown entry 'clutser' (did you mean 'cluster'?)"),
    ({"task": {"type": "worker", "index": 0}}, "TF_CONFIG has no 'cluster'"),
    ({"cluster": {}, "task": {"type": "worker", "index": 0}}, "'cluster' is {}"),
    ({"cluster": {"worker": "h1:2222"}, "task": {"type": "worker", "index": 0}},
     "job 'worker' is 'h1:2222', not a list of 'host:port' addresses"),
    ({"cluster": GOOD_CLUSTER}, "TF_CONFIG has no 'task'"),
    ({"cluster": GOOD_CLUSTER, "task": {"type": "worker", "index": 2}},
     "'task' has index 2, out of range for the 'worker' job's 2 task(s) (0 to 1)"),
    ({"cluster": GOOD_CLUSTER, "task": {"type": "worker"}}, "'task' has no 'index'"),
    ({"cluster": GOOD_CLUSTER, "task": {"type": "evaluator", "index": 0}},
     "'task' has type 'evaluator', but this trainer runs 'chief' and 'worker' tasks only"),
    ({"cluster": {**GOOD_CLUSTER, "ps": ["h3:2222"]}, "task": {"type": "ps", "index": 0}}, "has a job 'ps'"),
    ({"cluster": GOOD_CLUSTER, "task": {"type": "chief", "index": 0}}, "'task' has type 'chief', which is not a job"),
])
def test_a_tf_config_without_a_usable_cluster_is_refused(config, fragment):
    from t2t_relpos.training import strategy  # pylint: disable=import-outside-toplevel

    # TensorFlow took the first two for no cluster (the worker trained alone, "with 1 replica(s)"), and the
    # last ones ended in a ValueError or a KeyError.
    _refused(lambda: strategy.check_tf_config(json.dumps(config)), fragment,
             "--distribution=multi_worker needs the cluster and this process's task in it")


def test_a_tf_config_of_a_cluster_is_accepted():
    from t2t_relpos.training import strategy  # pylint: disable=import-outside-toplevel

    for config in ({"cluster": GOOD_CLUSTER, "task": {"type": "worker", "index": 1}},
                   {"cluster": GOOD_CLUSTER, "task": {"type": "worker", "index": "1"}},  # TensorFlow's int().
                   {"cluster": {"chief": ["h0:2222"], **GOOD_CLUSTER}, "task": {"type": "chief", "index": 0},
                    "rpc_layer": "grpc"}):
        assert strategy.check_tf_config(json.dumps(config)) == config


def test_the_trainer_refuses_a_misspelt_tf_config_before_it_trains(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps({"clutser": GOOD_CLUSTER, "task": {"type": "worker", "index": 0}}))
    result = call_tool(*TRAINER, "--distribution=multi_worker", f"--output_dir={tmp_path / 'run'}")
    one_line_error(result, "TF_CONFIG has an unknown entry 'clutser'")
    assert not (tmp_path / "run").exists()


# -- values that are 0 in float32 ---------------------------------------------------------------------------
@pytest.mark.parametrize("overrides, fragment", [
    ("learning_rate=1e-50", "learning_rate=1e-50 gives a learning rate of 0 in float32"),
    # 1e-44 is a float32 number, but a subnormal one, which TensorFlow flushes to 0.
    ("learning_rate=1e-44", "gives a learning rate of 0 in float32"),
    ("learning_rate_schedule=constant,learning_rate=1e-40", "learning_rate=1e-40 gives a learning rate of 0"),
    ("optimizer_adam_epsilon=1e-50", "'optimizer_adam_epsilon' is 1e-50, which is 0 in float32"),
    ("norm_epsilon=1e-50", "'norm_epsilon' is 1e-50, which is 0 in float32, the type layer normalization"),
    ("norm_epsilon=1e-40", "it must be at least 1.175e-38"),
])
def test_rates_and_epsilons_that_are_0_in_float32_are_refused(overrides, fragment):
    from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import schedules  # pylint: disable=import-outside-toplevel

    # The rate trained at "lr 0" without moving a weight, exit 0; an epsilon of 0 stopped the run as diverged.
    _refused(lambda: schedules.check(stored.resolve("transformer_tiny_rel", overrides)), fragment)


def test_small_rates_and_epsilons_that_float32_holds_are_accepted():
    from t2t_relpos.hparams import stored  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import schedules  # pylint: disable=import-outside-toplevel

    for overrides in ("learning_rate=1e-20", "optimizer_adam_epsilon=1e-30,norm_epsilon=1e-30",
                      "learning_rate_schedule=constant,learning_rate=1e-37"):
        schedules.check(stored.resolve("transformer_tiny_rel", overrides))


def test_the_trainer_refuses_a_learning_rate_of_0_in_float32_before_it_writes_the_run(tmp_path):
    result = call_tool(*TRAINER, "--hparams=learning_rate=1e-50", f"--output_dir={tmp_path / 'run'}")
    one_line_error(result, "gives a learning rate of 0 in float32")
    assert not (tmp_path / "run").exists()


# -- gin files that gin cannot read -------------------------------------------------------------------------
@pytest.mark.parametrize("text, fragment", [
    # tokenize.TokenError: the file ends inside brackets or a string.
    ("hparams.hidden_size = 64\nhparams.layers = [1, (2,\n", "bad.gin, line 2: '(' is never closed"),
    ("hparams.hidden_size = 64\nx = '''text\n\n", "bad.gin, line 2: a string is never closed"),
    # ModuleNotFoundError.
    ("import no_such_module_of_t2t_relpos\n",
     "ModuleNotFoundError: No module named 'no_such_module_of_t2t_relpos'; In file \"{path}\", line 1"),
    # A TypeError of gin's `macro`, when the values are computed, naming no file.
    ("hparams.filter_size = 64\nhparams.hidden_size = %WIDTH\n",
     "bad.gin, line 2: macro %WIDTH is used but never defined"),
])
def test_a_gin_file_gin_cannot_read_is_one_line_naming_it(tmp_path, text, fragment):
    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    path = tmp_path / "bad.gin"
    path.write_text(text)
    _refused(lambda: hparams_lib.gin_bindings([str(path)]), fragment.format(path=path))


def test_gin_errors_in_an_included_file_and_in_bindings_name_them(tmp_path):
    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    (tmp_path / "inner.gin").write_text("hparams.hidden_size = 64\n\nhparams.layers = [1, 2\n")
    (tmp_path / "outer.gin").write_text(f"include '{tmp_path / 'inner.gin'}'\n")
    _refused(lambda: hparams_lib.gin_bindings([str(tmp_path / "outer.gin")]), "inner.gin, line 3: '[' is never closed")
    _refused(lambda: hparams_lib.gin_bindings(bindings=["hparams.hidden_size = (64"]),
             "--gin_param='hparams.hidden_size = (64': '(' is never closed")
    _refused(lambda: hparams_lib.gin_bindings(bindings=["hparams.hidden_size = %W"]),
             "--gin_param='hparams.hidden_size = %W': macro %W is used but never defined")
    # A macro defined anywhere, before or after its use, is fine.
    (tmp_path / "macro.gin").write_text("hparams.hidden_size = %W\nW = 96\n")
    assert hparams_lib.gin_bindings([str(tmp_path / "macro.gin")]) == {"hidden_size": 96}


def test_the_trainer_refuses_a_gin_file_that_ends_inside_brackets(tmp_path):
    (tmp_path / "bad.gin").write_text("hparams.hidden_size = (64\n")
    result = call_tool(*TRAINER, f"--gin_file={tmp_path / 'bad.gin'}", f"--output_dir={tmp_path / 'run'}")
    one_line_error(result, "bad.gin, line 1: '(' is never closed")
    assert not (tmp_path / "run").exists()


# -- --usr_dir code that fails ------------------------------------------------------------------------------
@pytest.mark.parametrize("code, fragment", [
    ("x = 1\ndef f(:\n    pass\n", "mine.py, line 2: SyntaxError: invalid syntax"),
    ("import os\nimport no_such_module_of_t2t_relpos\n",
     "mine.py, line 2: ModuleNotFoundError: No module named 'no_such_module_of_t2t_relpos'"),
    ("def build():\n    return {}['table']\n\n\nTABLE = build()\n", "mine.py, line 2: KeyError: 'table'"),
])
def test_usr_dir_code_that_fails_is_one_line_naming_its_file_and_line(tmp_path, code, fragment):
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    (tmp_path / "mine.py").write_text(code)
    for usr_dir in (tmp_path, tmp_path / "mine.py"):
        with usr_dirs_forgotten():
            _refused(lambda path=str(usr_dir): registry.import_usr_dir(path),
                     f"cannot import --usr_dir={usr_dir}: {tmp_path / fragment}")


def test_a_usr_package_names_the_module_that_fails(tmp_path):
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    package = tmp_path / "mypackage"
    package.mkdir()
    (package / "__init__.py").write_text("from . import helpers\n")
    (package / "helpers.py").write_text("import json\n\nSETTINGS = json.loads('{')\n")
    with usr_dirs_forgotten():
        _refused(lambda: registry.import_usr_dir(str(package)), f"{package / 'helpers.py'}, line 3: JSONDecodeError")


def test_the_trainer_refuses_usr_dir_code_that_fails(tmp_path):
    (tmp_path / "mine.py").write_text("raise RuntimeError('not configured')\n")
    one_line_error(call_tool(*TRAINER, f"--usr_dir={tmp_path}", f"--output_dir={tmp_path / 'run'}"),
                   f"{tmp_path / 'mine.py'}, line 1: RuntimeError: not configured")
