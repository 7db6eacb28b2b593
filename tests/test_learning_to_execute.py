"""Learning to Execute: programs print their targets, the difficulties are honoured, the splits are seeded and
apart, and the demo writer's lines run."""

import ast
import collections
import contextlib
import io
import itertools

import pytest

from t2t_relpos import registry
from t2t_relpos.cli import demo
from t2t_relpos.problems import learning_to_execute as lte
from t2t_relpos.problems import learning_to_execute_programs as programs
from t2t_relpos.problems import problem as problem_lib

TASKS = ("program", "control", "addition", "copy", "double", "reverse")
EVALUATED = ("program", "control", "addition")
DRAWS = 2000


def _problem(task, **kwargs):
    p = registry.problem(f"learning_to_execute_{task}")
    return type(p)(**kwargs) if kwargs else p


def _take(p, split, count, **kwargs):
    return list(itertools.islice(p.examples(split, **kwargs), count))


def _printed(source):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, "<program>", "exec"), {})  # pylint: disable=exec-used
    return out.getvalue()


def _check(task, source, target):
    if task in EVALUATED:
        assert _printed(source) == target + "\n", (source, target)
    else:
        assert source.isdigit() and target.isdigit()
        assert source == {"copy": target, "double": target + target, "reverse": target[::-1]}[task]


def _operations(source):
    """The operations a program's text shows: each +, -, * (a loop's += is its `for`), if-expression and loop."""
    return sum(isinstance(node, (ast.BinOp, ast.IfExp, ast.For)) for node in ast.walk(ast.parse(source)))


def _numbers(source):
    return [node.value for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Constant)]


@pytest.mark.parametrize("task", TASKS)
def test_every_program_prints_its_target_in_every_split(task):
    p = _problem(task)
    for split, count in (("train", DRAWS), ("eval", 300), ("test", 300)):
        for source, target in _take(p, split, count, **({"seed": 3} if split == "train" else {})):
            _check(task, source, target)


def test_nesting_and_length_are_honoured():
    p = _problem("control")  # No `equality`, so every step of the chain shows in the text.
    train = [source for source, _ in _take(p, "train", 1000, seed=0)]
    assert max(map(_operations, train)) == 2 and min(map(_operations, train)) == 1
    numbers = [n for s in train for n in _numbers(s)]
    assert min(numbers) > 0 and max(numbers) < 10**5 and max(len(str(n)) for n in numbers) == 5
    assert {_operations(s) for s, _ in _take(p, "eval", 300)} == {2}
    test = [source for source, _ in _take(p, "test", 300)]
    assert {_operations(s) for s in test} == {3} and max(n for s in test for n in _numbers(s)) >= 10**5
    harder = _problem("program", length=2, nesting=4)
    sources = [source for source, _ in _take(harder, "train", 500, seed=0)]
    assert max(map(_operations, sources)) == 4 and max(n for s in sources for n in _numbers(s)) < 100
    with pytest.raises(ValueError, match="variables"):
        programs.program(programs.Draws([0]), programs.fixed(1, 11))
    addition = [source for source, _ in _take(_problem("addition"), "eval", 300)]
    assert all(len(str(n)) == 5 for s in addition for n in _numbers(s))
    assert {len(s) for s, _ in _take(_problem("copy"), "eval", 50)} == {55}
    assert {len(t) for _, t in _take(_problem("double"), "test", 300)} == set(range(56, 71))


def test_mix_spreads_difficulties_as_the_original_does():
    """The original's `mix` draws the nesting uniform in [1, N] per program and a length uniform in [1, L] for
    every number, the number then uniform in [1, 10**length]: short numbers are over-represented."""
    draws = programs.Draws([7])
    pairs = [_numbers(programs.program(draws, programs.mix(5, 1), ("pair",))[0]) for _ in range(DRAWS)]
    numbers = [n for pair in pairs for n in pair]
    expected = {d: sum(9 * 10 ** (d - 1) / (10**length - 1) for length in range(d, 6)) / 5 for d in range(1, 6)}
    counts = collections.Counter(len(str(n)) for n in numbers)
    for d, share in expected.items():  # 1 digit: 0.22, ..., 5 digits: 0.18 of the numbers.
        assert abs(counts[d] / len(numbers) - share) < 0.025, (d, counts[d] / len(numbers), share)
    same = sum(len(str(a)) == len(str(b)) for a, b in pairs) / DRAWS  # A length per number, not per program.
    assert abs(same - sum(share**2 for share in expected.values())) < 0.03, same
    nestings = collections.Counter(_operations(s) for s, _ in _take(_problem("control"), "train", DRAWS, seed=1))
    assert abs(nestings[1] / DRAWS - 0.5) < 0.04
    lengths = collections.Counter(len(s) for s, _ in _take(_problem("copy"), "train", DRAWS, seed=1))
    assert set(lengths) == set(range(1, 56)) and max(lengths.values()) < 3 * DRAWS / 55


def test_streams_follow_their_seeds_and_the_splits_are_apart():
    p = _problem("program")
    first = _take(p, "train", 50, seed=1)
    assert _take(p, "train", 50, seed=1) == first
    assert _take(p, "train", 50, seed=2) != first and _take(p, "train", 50, seed=1, shard_index=1) != first
    assert _take(p, "train", 20) != _take(p, "train", 20)  # No seed: a fresh stream.
    assert _take(p, "eval", 50) == _take(_problem("program"), "eval", 50) != _take(p, "test", 50)
    # At one digit a string recurs often: each split keeps only its own third of the texts (the original's hash).
    tiny = _problem("copy", length=1)
    train = {s for s, _ in _take(tiny, "train", 200, seed=0)}
    evaluated = {s for s, _ in _take(tiny, "eval", 200)}
    assert train and evaluated and not train & evaluated and len(train | evaluated) <= 10


def test_problems_encode_and_decode_programs_and_build_a_pipeline():
    from t2t_relpos.data import pipeline  # pylint: disable=import-outside-toplevel

    for task in TASKS:
        p = _problem(task)
        encoder = p.feature_encoders()["inputs"]
        assert p.feature_encoders()["targets"] is encoder and p.shared_vocab
        for source, target in _take(p, "test", 20):
            ids = encoder.encode(source)
            assert encoder.decode(ids + [problem_lib.EOS_ID, problem_lib.PAD_ID]) == source
            assert encoder.encode(lte.escape(source)) == ids and encoder.decode(encoder.encode(target)) == target
    with pytest.raises(ValueError, match="'/' of"):
        encoder.encode("print(4/2)")
    with pytest.raises(ValueError, match="unknown escape"):
        encoder.encode("print(1)\\t")
    p = _problem("program", num_eval_examples=8)
    assert p.max_eval_length == 1 + max(len(x) for s in ("eval", "test") for pair in _take(p, s, 8) for x in pair)
    hparams = registry.hparams("transformer_tiny")
    batches = list(pipeline.input_dataset(p, hparams, "eval"))
    rows = [(list(map(int, b["inputs"][i])), list(map(int, b["targets"][i])))
            for b in batches for i in range(b["inputs"].shape[0])]
    assert sorted((encoder.decode(x), encoder.decode(y)) for x, y in rows) == sorted(_take(p, "eval", 8))
    tokenizer = encoder.graph_tokenizer()
    source = _take(p, "eval", 1)[0][0]
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    assert tokenizer.tokenize(tf.constant([source, lte.escape(source)])).to_list() == [encoder.encode(source)] * 2
    ids = tf.constant([encoder.encode(source) + [problem_lib.EOS_ID]])
    assert tokenizer.detokenize(ids).numpy()[0].decode("utf-8") == source


def test_escaping_round_trips():
    for text in ("a=1;\nprint(a)", "back\\slash\nand \\n", ""):
        line = lte.escape(text)
        assert "\n" not in line and lte.unescape(line) == text


@pytest.mark.parametrize("task", ["program", "double"])
def test_the_demo_writer_lines_unescape_to_programs_that_print_the_reference(task, tmp_path):
    assert demo.main([f"--problem=learning_to_execute_{task}", "--count=200", f"--output={tmp_path}/x"]) == 0
    inputs = (tmp_path / "x.txt").read_text(encoding="utf-8").splitlines()
    targets = (tmp_path / "x.ref.txt").read_text(encoding="utf-8").splitlines()
    assert len(inputs) == len(targets) == 200
    p = _problem(task)
    for line, target in zip(inputs, targets):
        _check(task, lte.unescape(line), target)
    if task == "program":
        assert sum("\\n" in line for line in inputs) > 20  # Programs of several lines were written on one.
    # Training difficulties, none of them a training example (seed 0's stream keeps the other texts).
    assert not set(zip(map(lte.unescape, inputs), targets)) & set(_take(p, "train", 5000, seed=0))
