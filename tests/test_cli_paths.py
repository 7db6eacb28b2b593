"""`~` in the tools' path flags: a shell expands it only at the start of a word, so `--output_dir=~/runs/mine`
reached the tools as a directory named `~` (the decoder: "holds no run"; datagen: "not a directory"). They
expand it, as tensor2tensor did, in one place (`common.expand_paths`)."""

import os

import pytest

from t2t_relpos.cli import common, demo
from test_cli import TOOLS, assert_usage_error, call_tool, tool_flags

# Every string-valued flag of the tools that is not a path: a flag added to a tool is either a path
# (common.PATH_FLAGS) or named here, so that a new path flag cannot be left unexpanded.
NOT_PATHS = {"problem", "model", "hparams_set", "hparams", "gin_param", "decode_hparams", "decode_split",
             "distribution", "schedule", "mixed_precision", "export_format"}


def _string_flags(values, own):
    """The names of the flags in `own` whose values are text or lists of text."""
    return {name for name in own if values[name].flag_type() in ("string", "multi_string", "list", "enum")}


@pytest.mark.parametrize("tool", sorted(TOOLS))
def test_every_path_flag_of_every_tool_expands_the_home_directory(tool, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    with tool_flags(tool) as (values, own):
        names = _string_flags(values, own)
        assert not names - set(common.PATH_FLAGS) - NOT_PATHS, "a string flag neither a path nor known not to be"
        paths = sorted(names & set(common.PATH_FLAGS))
        assert paths, tool
        argv = [tool]
        for name in paths:
            argv += [f"--{name}=~/{name}"] if values[name].flag_type() != "list" else [f"--{name}=~/a,~/b"]
        values(argv)
        common.expand_paths(values)
        for name in paths:
            value = values[name].value
            expected = {"list": [f"{tmp_path}/a", f"{tmp_path}/b"], "multi_string": [f"{tmp_path}/{name}"]}.get(
                values[name].flag_type(), f"{tmp_path}/{name}")
            assert value == expected, (tool, name, value)
        # What the user did not give stays the default, and a path without "~" stays as written.
        values.unparse_flags()
        values([tool, f"--{paths[0]}=runs/~x"])
        common.expand_paths(values)
        assert values[paths[0]].value in ("runs/~x", ["runs/~x"])
        assert all(values[name].using_default_value for name in paths[1:])


def test_the_tools_expand_home_in_what_they_read(tmp_path, monkeypatch):
    """Through each tool's own parsing: the decoder's --output_dir and datagen's --tmp_dir are looked for in
    $HOME, and their refusals name the expanded paths."""
    monkeypatch.setenv("HOME", str(tmp_path))
    result = call_tool("t2t-relpos-decoder", "--output_dir=~/runs/mine", "--decode_split=eval")
    assert_usage_error(result, f"{tmp_path}/runs/mine")
    assert "~" not in result.stderr
    (tmp_path / "corpus").mkdir()
    result = call_tool("t2t-relpos-datagen", "--problem=wmt14_ende", "--data_dir=~/data", "--tmp_dir=~/corpus")
    assert_usage_error(result, f"no WMT14 de-en data for train, eval, test in {tmp_path}/corpus")
    assert "not a directory" not in result.stderr


def test_the_demo_expands_home_in_its_output(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    assert demo.main(["--output=~/strings", "--count=3"]) == 0
    assert sorted(os.listdir(tmp_path)) == ["strings.ref.txt", "strings.txt"]
