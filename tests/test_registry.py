"""The registry: registration, default names, lookups with close-match errors, duplicates, --usr_dir."""

import re
import textwrap

import pytest

from t2t_relpos import errors, registry


@pytest.fixture
def scratch():
    reg = registry.Registry("gadget")
    yield reg


def test_default_name_is_snake_case():
    assert registry.default_name("TransformerRel") == "transformer_rel"
    assert registry.default_name("AlgorithmicReverseDecimal40") == "algorithmic_reverse_decimal40"
    assert registry.default_name("WMT14EnDe") == "wmt14_en_de"
    assert registry.default_name("my_hparams") == "my_hparams"


def test_register_with_and_without_name(scratch):
    @scratch.register
    class FancyThing:
        pass

    @scratch.register("other")
    def plain():
        return 1

    @scratch.register()
    def third():
        return 3

    assert scratch.get("fancy_thing") is FancyThing
    assert scratch.get("other") is plain
    assert scratch.get("third") is third
    assert {"fancy_thing", "other", "third"} <= set(scratch.names())


def test_duplicate_name_is_an_error(scratch):
    scratch.add("thing", object())
    with pytest.raises(errors.DuplicateNameError, match="already registered"):
        scratch.add("thing", object())


def test_bad_names_are_refused(scratch):
    with pytest.raises(errors.T2TRelposError, match="snake_case"):
        scratch.add("Not-Snake", object())


def test_unknown_name_lists_close_matches():
    with pytest.raises(errors.UnknownNameError) as info:
        registry.hparams("transformer_big_rell")
    message = str(info.value)
    assert "hparams set" in message and "'transformer_big_rell'" in message
    assert "transformer_big_rel" in message


def test_unknown_problem_and_model_name_their_kind():
    with pytest.raises(errors.UnknownNameError, match="unknown problem 'no_such_problem'"):
        registry.problem("no_such_problem")
    with pytest.raises(errors.UnknownNameError, match="unknown model 'transformr'.*'transformer'"):
        registry.model("transformr")


def test_builtin_sets_are_listed_in_help():
    text = registry.help_string()
    for name in ("transformer_base", "transformer_big", "transformer_base_rel", "transformer_big_rel",
                 "transformer_tiny", "transformer_tiny_rel"):
        assert re.search(rf"^ +{name} +\S", text, re.M), name  # With its line of description.
    assert text.index("Problems") < text.index("Models") < text.index("Hparams sets")


def _listed(text):
    """{name: description} of the rows of `help_string()`'s text: a name, then its description, continued on lines
    indented to where it starts."""
    listed, name, column = {}, None, None
    for line in text.splitlines():
        if name and len(line) - len(line.lstrip()) == column:
            listed[name] += " " + line.strip()
            continue
        match = re.match(r"( +)([a-z0-9_]+)( +)(\S.*)$", line)
        name, column = (match.group(2), match.end(3)) if match else (None, None)
        if match:
            listed[name] = match.group(4)
    return listed


def test_help_shows_each_description_whole():
    """Cut at 120 columns, the sets' descriptions ended where the sets differ ("... with relative positions
    (k =..."): each is shown whole, wrapped under itself, and no two sets read the same."""
    text = registry.help_string()
    listed = _listed(text)
    sets = registry.list_hparams()
    for kind, names, entries in (("hparams", sets, registry.HPARAMS), ("model", registry.list_models(),
                                                                         registry.MODELS)):
        for name in names:
            described = registry.description(entries._entries[name])  # pylint: disable=protected-access
            assert listed.get(name) == described, (kind, name)
    assert len({listed[name] for name in sets}) == len(sets)
    assert "..." not in text and max(len(line) for line in text.splitlines()) <= 120
    assert "relative positions (k = 16, per-head tables), no absolute signal." in listed[
        "adaptive_universal_transformer_tiny_rel"]


def test_usr_dir_file_registers_problems_models_and_gin_sets(tmp_path):
    (tmp_path / "my_registrations.py").write_text(textwrap.dedent("""
        from t2t_relpos import registry

        @registry.register_hparams
        def usr_dir_test_set():
            hp = registry.hparams("transformer_tiny_rel")
            hp.hidden_size = 96
            return hp
    """))
    (tmp_path / "usr_dir_test_gin.gin").write_text(
        "include 'transformer_tiny.gin'\nhparams.num_heads = 2\n")
    try:
        registry.import_usr_dir(str(tmp_path / "my_registrations.py"))
        assert registry.hparams("usr_dir_test_set").hidden_size == 96
        assert registry.hparams("usr_dir_test_set").position_encoding == "relative"
        hp = registry.hparams("usr_dir_test_gin")
        assert (hp.num_heads, hp.hidden_size) == (2, 128)
    finally:
        registry.HPARAMS.remove("usr_dir_test_set")
        registry.HPARAMS.remove("usr_dir_test_gin")


def test_usr_dir_package(tmp_path):
    package = tmp_path / "usr_pkg_for_test"
    package.mkdir()
    (package / "__init__.py").write_text(textwrap.dedent("""
        from t2t_relpos import registry

        @registry.register_hparams("usr_pkg_set")
        def _set():
            return registry.hparams("transformer_tiny")
    """))
    try:
        registry.import_usr_dir(str(package))
        assert registry.hparams("usr_pkg_set").hparams_set == "usr_pkg_set"
    finally:
        registry.HPARAMS.remove("usr_pkg_set")


def test_usr_dir_missing_is_a_clear_error(tmp_path):
    with pytest.raises(errors.T2TRelposError, match="does not exist"):
        registry.import_usr_dir(str(tmp_path / "nope"))


def test_hparams_function_must_return_hparams():
    registry.register_hparams("bad_return_set")(lambda: {"hidden_size": 3})
    try:
        with pytest.raises(errors.T2TRelposError, match="not HParams"):
            registry.hparams("bad_return_set")
    finally:
        registry.HPARAMS.remove("bad_return_set")


def test_lookups_from_two_threads_wait_for_the_builtins():
    """A lookup made while another thread loads the builtins waits for them (it used to find none registered:
    benchmarks/learning_to_execute.py's second job failed every pair it took). Run in a fresh interpreter, whose
    first load is slowed so that the second thread asks in the middle of it."""
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel

    script = textwrap.dedent("""
        import importlib, threading
        from t2t_relpos import registry
        found = []
        def look_up():
            try:
                found.append(type(registry.problem("algorithmic_reverse_decimal40")).__name__)
            except Exception as error:
                found.append(repr(error))
        other = threading.Thread(target=look_up)
        real = importlib.import_module
        def slowed(name, *args):
            if name == "t2t_relpos.problems" and other.ident is None:  # Only the first time.
                other.start()
                other.join(timeout=1.0)  # Without the lock it ends here, having looked up in an empty registry.
            return real(name, *args)
        registry.importlib.import_module = slowed
        registry.hparams("transformer_tiny")
        other.join()
        print(found)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['AlgorithmicReverseDecimal40']", done.stdout
