"""The command-line tools: help, the registry listing, and exit status 2 with one clear line on bad input.

`run_tool` runs a tool as a fresh process; `call_tool` runs it in the test's own process, as a fresh process
would see it, for runs that train nothing (refusals, decoding, averaging, export): no new process importing
TensorFlow. Each tool's path as a process keeps its tests: --help and --no_such_flag here, and, with TensorFlow
imported, one-line refusals of each tool (test_faults.py: trainer, decoder, averaging, export; test_babi.py:
datagen), besides the trainers of the runs the tests decode.
"""

import contextlib
import copy
import importlib
import io
import logging
import os
import re
import shlex
import subprocess
import sys
import tempfile
import traceback
import warnings

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


class _Exit(BaseException):
    """`os._exit(status)` called by a tool run in this process: ends the run, not the test process."""

    def __init__(self, status):
        super().__init__(status)
        self.status = status


@contextlib.contextmanager
def usr_dirs_forgotten():
    """What a `--usr_dir` imported inside the block adds to this process (registrations, its modules, search
    paths) is gone after it, so that later tests on this pytest worker do not see it."""
    import gin.config  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.hparams import hparams_lib  # pylint: disable=import-outside-toplevel

    # pylint: disable=protected-access
    registry._load_builtins()  # Loaded once per process: the package's own registrations stay.
    registries = [(r, dict(r._entries)) for r in (registry.PROBLEMS, registry.MODELS, registry.HPARAMS)]
    lists = [(x, list(x)) for x in (registry._USR_DIRS, hparams_lib._SEARCH_PATHS, gin.config._LOCATION_PREFIXES,
                                    sys.path)]
    modules = set(sys.modules)
    try:
        yield
    finally:
        for entries, saved in registries:
            entries._entries.clear()
            entries._entries.update(saved)
        for items, saved in lists:
            items[:] = saved
        for name in set(sys.modules) - modules:
            if name.startswith("t2t_relpos_usr."):
                del sys.modules[name]
    # pylint: enable=protected-access


@contextlib.contextmanager
def _as_a_fresh_process(stdin, stdout=None):
    """Gives a tool run in this process what `python -c` would give it: stdin, stdout and stderr of its own
    (file descriptors 1 and 2 included, for what TensorFlow's C++ code writes; stdout: `stdout`'s where given,
    a binary file object such as /dev/full or a pipe nobody reads), Python's default warning
    filters, the absl logging handler on the root logger writing to that stderr, and no flags parsed. All of it
    (and the flags the tool defines, os.environ, the root logger, and what a --usr_dir registers) is put back
    afterwards."""
    from absl import flags  # pylint: disable=import-outside-toplevel
    from absl import logging as absl_logging  # pylint: disable=import-outside-toplevel

    names = set(flags.FLAGS)
    was_parsed = flags.FLAGS.is_parsed()
    environ = dict(os.environ)
    root = logging.getLogger()
    root_handlers, root_level = list(root.handlers), root.level
    absl_handler = absl_logging.get_absl_handler()
    absl_level, absl_stream = absl_logging.get_absl_logger().level, absl_handler.python_handler.stream
    streams = sys.stdin, sys.stdout, sys.stderr
    files = [stdout or tempfile.TemporaryFile(), tempfile.TemporaryFile()]
    out = {}
    for stream in streams[1:]:
        stream.flush()
    saved_fds = [os.dup(1), os.dup(2)]
    os_exit = os._exit  # pylint: disable=protected-access
    stack = contextlib.ExitStack()
    try:
        stack.enter_context(usr_dirs_forgotten())  # What --usr_dir adds goes when the run ends.
        os.dup2(files[0].fileno(), 1)
        os.dup2(files[1].fileno(), 2)
        sys.stdin = io.TextIOWrapper(io.BytesIO((stdin or "").encode()), encoding="utf-8")
        sys.stdout, sys.stderr = (io.TextIOWrapper(io.FileIO(fd, "w", closefd=False), encoding="utf-8",
                                                   write_through=True) for fd in (1, 2))
        if was_parsed:
            flags.FLAGS.unparse_flags()
        for handler in [h for h in root.handlers if isinstance(h, logging.StreamHandler) and h.stream in streams]:
            root.removeHandler(handler)  # As absl's app.run does in a fresh process.
        absl_handler.python_handler.stream = sys.stderr
        absl_logging.use_absl_handler()

        def exit_now(status):
            raise _Exit(status)

        os._exit = exit_now  # pylint: disable=protected-access
        with warnings.catch_warnings():
            warnings.resetwarnings()  # Python's defaults (no -W, no PYTHONWARNINGS), not pytest's.
            for action, category, module in (("default", DeprecationWarning, "__main__"),
                                             ("ignore", DeprecationWarning, ""),
                                             ("ignore", PendingDeprecationWarning, ""),
                                             ("ignore", ImportWarning, ""), ("ignore", ResourceWarning, "")):
                warnings.filterwarnings(action, category=category, module=module)
            warnings.showwarning = warnings._showwarning_orig  # pylint: disable=protected-access
            yield out
    finally:
        os._exit = os_exit  # pylint: disable=protected-access
        sys.stdout.flush()
        sys.stderr.flush()
        os.dup2(saved_fds[0], 1)
        os.dup2(saved_fds[1], 2)
        for fd in saved_fds:
            os.close(fd)
        sys.stdin, sys.stdout, sys.stderr = streams
        for name, file in zip(("stdout", "stderr"), files):
            if file is stdout:  # The caller's: not read back here.
                out[name] = ""
                continue
            file.seek(0)
            out[name] = file.read().decode("utf-8", "replace")
            file.close()
        for name in set(flags.FLAGS) - names:  # The tool's (absl.app's own --help and --pdb flags stay).
            if not flags.FLAGS.find_module_defining_flag(name, "").startswith("absl."):
                delattr(flags.FLAGS, name)
        flags.FLAGS.unparse_flags()
        if was_parsed:
            flags.FLAGS.mark_as_parsed()
        root.removeHandler(absl_handler)
        for handler in root_handlers:
            if handler not in root.handlers:
                root.addHandler(handler)
        root.setLevel(root_level)
        absl_logging.get_absl_logger().setLevel(absl_level)
        absl_handler.python_handler.stream = absl_stream
        os.environ.clear()
        os.environ.update(environ)
        stack.close()


def _quietly_list_devices():
    sys.stderr.flush()
    saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 2)
    try:
        sys.modules["tensorflow"].config.list_physical_devices()
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(devnull)


def call_tool(tool, *args, stdin=None, stdout=None):
    """Runs a tool in this process as `run_tool` runs it in a fresh one, and returns the same: its exit status,
    stdout and stderr (a traceback on stderr and status 1 for an exception, as Python prints it). `stdout`, a
    binary file object, takes the tool's stdout instead (the result's is then empty).

    For runs that train nothing (a trainer's refusal before it starts, decoding, averaging, export): it saves
    the 5-10 s of a new process importing TensorFlow. Not for training: a tool that trains stops its input
    pipeline and installs signal handlers, which a fresh process is for. Each tool's path as a process keeps
    tests of its own, with `run_tool`."""
    module = importlib.import_module(TOOLS[tool])
    if "tensorflow" in sys.modules:
        # A fresh process probes for devices while it imports TensorFlow, with stderr quiet (common.
        # import_tensorflow, a no-op where TensorFlow is imported already): the probe must not come first
        # inside the run, where the CUDA stub's error line would land in its stderr.
        _quietly_list_devices()
    argv = ["-c", *args]
    with _as_a_fresh_process(stdin, stdout) as out:
        try:
            module.run(argv=argv)
            status = 0
        except SystemExit as e:
            if e.code is None or isinstance(e.code, int):
                status = e.code or 0
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except _Exit as e:
            status = e.status
        except Exception:  # pylint: disable=broad-except  # Python prints it and exits with status 1.
            traceback.print_exc()
            status = 1
    return subprocess.CompletedProcess(argv, status, out["stdout"], out["stderr"])


def assert_usage_error(result, *fragments):
    assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
    assert "Traceback" not in result.stderr, result.stderr
    for fragment in fragments:
        assert fragment in result.stderr, result.stderr


def test_a_tool_called_in_this_process_answers_as_its_process_does(tmp_path):
    """`call_tool` stands in for `run_tool` in the refusal tests: the same status, stdout and stderr, byte for byte
    (a stray line of TensorFlow's in its stderr would pass for a tool's own in one-line tests)."""
    args = ("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40", "--hparams_set=transformer_tiny_rel",
            "--hparams=hidden_size=64,num_heads=5", f"--output_dir={tmp_path / 'run'}")
    here, there = call_tool(*args), run_tool(*args)
    assert (here.returncode, here.stdout, here.stderr) == (there.returncode, there.stdout, there.stderr), (here, there)
    assert here.returncode == 2 and len(here.stderr.splitlines()) == 1, here
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_help_exits_zero_and_lists_flags(tool):
    result = run_tool(tool, "--help")
    assert result.returncode == 0, result.stderr
    assert "--usr_dir" in result.stdout
    assert "--output_dir" in result.stdout or "--data_dir" in result.stdout


def test_registry_help_lists_problems_models_and_sets():
    """Grouped, translation first, each name with its docstring's first sentence (a set: its .gin file's opening
    comment), and the 164 bAbI problems in a few lines (they were 164 of 212 bare names, the translation
    problems at the bottom)."""
    result = call_tool("t2t-relpos-trainer", "--registry_help")
    assert result.returncode == 0, result.stderr
    text = result.stdout
    for name in ("algorithmic_reverse_decimal40", "transformer", "transformer_base", "transformer_big",
                 "transformer_base_rel", "transformer_big_rel", "transformer_tiny", "transformer_tiny_rel",
                 "transformer_cpu_rel", "babi_qa_facts_all_tasks_1k", "universal_transformer_encoder",
                 "translate_local", "wmt14_ende"):
        assert re.search(rf"^ +{name} +[A-Za-z]", text, re.M), name  # A description follows each name.
    assert re.search(r"^ +wmt14_ende +WMT14 English -> German\.$", text, re.M)
    assert re.search(r"^ +transformer_cpu_rel +transformer_cpu with relative positions", text, re.M)
    assert re.search(r"^ +transformer +Encoder-decoder Transformer \(Vaswani et al\. 2017\)", text, re.M)
    assert text.index("Translation") < text.index("Algorithmic") < text.index("bAbI") < text.index("Models")
    assert "164 problems named babi_qa_<layout>_<tasks>_<subset>:" in text
    assert len(re.findall(r"^ +babi_qa_", text, re.M)) == 3, text  # One example of each kind.
    assert text.index("  Adaptive Universal Transformer (ACT):\n") < text.index("\n  Transformer:\n")
    # About 180 lines with the language-model and Learning-to-Execute families (the bare bAbI names were 164).
    assert len(text.splitlines()) < 200 and max(len(line) for line in text.splitlines()) <= 120


def test_registry_help_imports_no_tensorflow():
    """It took 8 s, importing TensorFlow to list names; the package's models are registered by name until used."""
    code = ("import atexit, sys; atexit.register(lambda: print('tensorflow' in sys.modules, 'keras' in sys.modules, "
            "file=sys.stderr)); import t2t_relpos.cli.trainer as m; m.run()")
    result = subprocess.run([sys.executable, "-c", code, "--registry_help"], capture_output=True, text=True,
                            timeout=120, check=False)
    assert (result.returncode, result.stderr) == (0, "False False\n"), result.stderr
    assert "universal_transformer_encoder" in result.stdout


def test_the_registry_names_every_model_of_the_package():
    """The names registered before the models are imported are the package's models, each the class its
    module registers (a model added to t2t_relpos.models but not to registry._BUILTIN_MODELS fails here)."""
    import t2t_relpos.models  # noqa: F401  # pylint: disable=import-outside-toplevel,unused-import
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    builtin = registry._BUILTIN_MODELS  # pylint: disable=protected-access
    for name, (module, attribute) in builtin.items():
        assert registry.model(name) is getattr(importlib.import_module(module), attribute)
    assert {name for name in registry.list_models()
            if registry.model(name).__module__.startswith("t2t_relpos.models.")} == set(builtin)


# An example command in a tool's --help (a line ending in a backslash continued on the next, as a shell reads
# it): `  [echo ... |] t2t-relpos-<tool> --flag=value ...`.
EXAMPLE = re.compile(r"^ +(?:echo [^|\n]*\| *)?(t2t-relpos-[a-z-]+)( .*)?$", re.M)
CHECKED = ("problem", "hparams_set", "model", "hparams", "gin_param", "decode_hparams", "decode_split")


@contextlib.contextmanager
def tool_flags(tool):
    """A new `FlagValues` with copies of the flags `tool` has when it runs (its own, the shared ones and absl's),
    and the names of those not absl's; none of them is left defined on the global FLAGS afterwards."""
    from absl import flags  # pylint: disable=import-outside-toplevel

    from t2t_relpos.cli import common  # pylint: disable=import-outside-toplevel

    module = importlib.import_module(TOOLS[tool])
    before = set(flags.FLAGS)
    module.define_flags()
    common.define_shared_flags()
    try:
        values = flags.FlagValues()
        for name in flags.FLAGS:
            if flags.FLAGS[name].name == name:  # Not a short name (-v), which comes with its flag.
                values[name] = copy.deepcopy(flags.FLAGS[name])
        own = {name for name in values if not flags.FLAGS.find_module_defining_flag(name, "").startswith("absl.")}
        yield values, own
    finally:
        for name in set(flags.FLAGS) - before:
            delattr(flags.FLAGS, name)


def _check_example_values(values):
    """Raises unless the registry names and the overrides in `values` ({flag: value}) are valid."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import registry
    from t2t_relpos.cli import decoder
    from t2t_relpos.hparams import stored

    for flag, names in (("problem", registry.list_problems()), ("hparams_set", registry.list_hparams()),
                        ("model", registry.list_models()), ("decode_split", ("eval", "test"))):
        assert values.get(flag, names[0]) in names, (flag, values)
    hparams_set = values.get("hparams_set", "transformer_base_rel")
    stored.resolve(hparams_set, values.get("hparams", ""), gin_params=[values["gin_param"]] if "gin_param" in values
                   else ())
    if "decode_hparams" in values:
        decoder.decode_settings(registry.hparams(hparams_set), values["decode_hparams"], values.get("decode_split"))


def test_every_example_in_the_tools_help_is_valid():
    """The example commands of every tool's --help, as printed, and the examples in its flags' help: one command
    a line (a backslash at a line's end in a module docstring that is not raw joined the lines of the trainer's
    and the decoder's examples), flags the tool has with values of their types (parsed by the tool's flags),
    registered names, overrides that parse and pass the checks (`--hparams='hidden_size=256,dropout=0.2'` was
    `unknown hparam 'dropout'`). The cheapest, `--registry_help`, is run."""
    import ast  # pylint: disable=import-outside-toplevel
    import inspect  # pylint: disable=import-outside-toplevel

    from absl import flags  # pylint: disable=import-outside-toplevel

    for module in [*TOOLS.values(), "t2t_relpos.cli.demo"]:  # The docstring as written is the text printed.
        module = importlib.import_module(module)
        source = inspect.getsource(module)
        written = ast.get_source_segment(source, ast.parse(source).body[0].value)
        assert written.count("\n") == module.__doc__.count("\n"), f"{module.__name__}'s docstring joins lines"
    helps = {tool: call_tool(tool, "--help").stdout for tool in TOOLS}
    commands = [(tool, args) for text in helps.values()
                for tool, args in EXAMPLE.findall(re.sub(r"\\\n *", " ", text))]
    assert len(commands) >= 10 and {tool for tool, _ in commands} == set(TOOLS), commands
    ran = False
    for tool, args in commands:
        assert "t2t-relpos-" not in args and not re.search(r"\S {3,}-", args.split("#")[0]), (tool, args)
        words = shlex.split(args.replace("[", "").replace("]", ""), comments=True)
        words = words[:next((i for i, word in enumerate(words) if word in (">", "|")), len(words))]
        with tool_flags(tool) as (values, own):
            try:
                values([tool, *words])
            except flags.Error as e:
                raise AssertionError(f"{tool} {args}: {e}") from None
            for name in (word.partition("=")[0][2:] for word in words):  # The tool's, not absl's (--verbosity).
                assert name in own or name.startswith("no") and name[2:] in own, (tool, name)
            given = {name: values[name].value for name in own if values[name].present}
        _check_example_values({flag: value[-1] if isinstance(value, list) else value
                               for flag, value in given.items() if flag in CHECKED})
        if words == ["--registry_help"]:
            result = call_tool(tool, *words)
            assert result.returncode == 0 and "Hparams sets" in result.stdout, result
            ran = True
    assert ran
    examples = {}
    for text in helps.values():
        for paragraph in re.split(r"\n  (?=--)", text):
            flag = re.match(r"--(?:\[no\])?(\w+):", paragraph)
            paragraph = " ".join(paragraph.split())
            example = (re.search(r"e\.g\. (?:'([^']*)'|\"([^\"]*)\"|([\w.]+\w))", paragraph)
                       or re.search(r"'([^']*=[^']*)'", paragraph))  # A quoted override, without "e.g.".
            if flag and example and flag.group(1) in CHECKED:
                examples[flag.group(1)] = next(group for group in example.groups() if group is not None)
    assert set(examples) == {"problem", "hparams_set", "hparams", "gin_param", "decode_hparams"}, examples
    _check_example_values(examples)


def test_unknown_flag_is_a_usage_error():
    assert_usage_error(run_tool("t2t-relpos-trainer", "--no_such_flag=1"), "no_such_flag")


def test_unknown_problem_lists_close_names(tmp_path):
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal4",
                       "--hparams_set=transformer_tiny_rel", f"--output_dir={tmp_path}")
    assert_usage_error(result, "problem", "algorithmic_reverse_decimal40")


def test_unknown_hparams_set_lists_close_names(tmp_path):
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_big_rell", f"--output_dir={tmp_path}")
    assert_usage_error(result, "transformer_big_rel")


def test_malformed_override_names_the_field(tmp_path):
    result = call_tool("t2t-relpos-trainer", "--problem=algorithmic_reverse_decimal40",
                       "--hparams_set=transformer_big_rel", "--hparams=hidden_size=x", f"--output_dir={tmp_path}")
    assert_usage_error(result, "hidden_size")


def test_decoder_without_a_run_is_a_usage_error(tmp_path):
    result = call_tool("t2t-relpos-decoder", f"--output_dir={tmp_path}", "--decode_split=eval")
    assert_usage_error(result, str(tmp_path))


def test_datagen_unknown_problem(tmp_path):
    assert_usage_error(call_tool("t2t-relpos-datagen", "--problem=wmt14_endee", f"--data_dir={tmp_path}"),
                       "problem")


def test_avg_checkpoints_without_checkpoints(tmp_path):
    assert_usage_error(call_tool("t2t-relpos-avg-checkpoints", f"--output_dir={tmp_path}"), str(tmp_path))


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


def test_the_trainers_export_into_a_taken_directory_names_flags_the_tools_have(tmp_path):
    """The trainer's --export of a step exported before (the same command run again) offered "name another
    --export_dir", a flag the trainer does not have: it offers t2t-relpos-export's, for this run."""
    from t2t_relpos import errors  # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import export, trainer  # pylint: disable=import-outside-toplevel

    run = tmp_path / "run"
    (run / "export" / "20").mkdir(parents=True)
    (run / "export" / "20" / "saved_model.pb").write_text("an earlier export")
    (run / "export_ctranslate2").mkdir()
    (run / "export_ctranslate2" / "20").write_text("a file")
    with pytest.raises(errors.T2TRelposError) as info:
        trainer.export(None, None, None, str(run), 20, None, "saved_model")
    assert str(info.value) == (f"the run is trained and saved, but {run}/export/20 exists and is not empty; remove "
                               f"it or export it elsewhere with t2t-relpos-export --output_dir={run} --export_dir=DIR")
    with pytest.raises(errors.T2TRelposError, match=r"export_ctranslate2/20 is a file, not a directory to export "
                       r"into; remove it or export it elsewhere with t2t-relpos-export --output_dir=.* "
                       r"--export_dir=DIR --export_format=ctranslate2$"):
        trainer.export(None, None, None, str(run), 20, None, "ctranslate2")
    with pytest.raises(errors.T2TRelposError, match="exists and is not empty; remove it or name another --export_dir$"):
        export.write_export(None, None, None, str(run), 20, None, "saved_model")
    with tool_flags("t2t-relpos-export") as (_, own):
        assert {"output_dir", "export_dir", "export_format"} <= own
    with tool_flags("t2t-relpos-trainer") as (_, own):
        assert "export_dir" not in own and "export" in own
