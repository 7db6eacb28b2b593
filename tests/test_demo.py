"""`make demo`'s strings of the training lengths (t2t_relpos.cli.demo): what the demo's second step decodes."""

from t2t_relpos import registry
from t2t_relpos.cli import demo


def _lines(path):
    with open(path, encoding="utf-8") as f:
        return f.read().splitlines()


def test_strings_are_new_training_length_inputs_and_their_reversals(tmp_path):
    problem = registry.problem("algorithmic_reverse_decimal20")
    source, reference = demo.write_strings(problem, 100, str(tmp_path / "strings"))
    assert (source, reference) == (str(tmp_path / "strings.txt"), str(tmp_path / "strings.ref.txt"))
    inputs, targets = _lines(source), _lines(reference)
    assert len(inputs) == len(targets) == 100
    assert all(x.isdigit() and 1 <= len(x) <= 20 and y == x[::-1] for x, y in zip(inputs, targets))
    assert max(map(len, inputs)) >= 15  # Spread over the training lengths.
    # The same strings every time (a rerun of the demo decodes them again), others for another seed.
    assert _lines(demo.write_strings(problem, 100, str(tmp_path / "again"))[0]) == inputs
    assert _lines(demo.write_strings(problem, 100, str(tmp_path / "other"), seed=1)[0]) != inputs


def test_a_mistake_is_one_line_and_status_2(tmp_path, capsys):
    assert demo.main([f"--output={tmp_path}/missing/strings"]) == 2
    assert capsys.readouterr().err.strip().count("\n") == 0
    assert demo.main([f"--output={tmp_path}/strings", "--problem=translate_local"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("python -m t2t_relpos.cli.demo: error: translate_local is not an algorithmic problem")
    assert not (tmp_path / "strings.txt").exists()
