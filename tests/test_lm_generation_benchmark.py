"""benchmarks/lm_generation.py at tiny sizes: the naive [n, n, d] language model equals ours, generation is timed
per generated token, and the tables and verdict read the measurements as documented."""

import pytest

from benchmark_scripts import load

lm_generation = load("lm_generation")
attention = load("attention")


def test_the_naive_layer_matches_ours_with_a_causal_mask():
    attention.check_naive_matches(use_causal_mask=True)


def test_the_naive_language_model_matches_ours_and_only_inside_its_context():
    lm_generation.check_naive_model(length=24)  # It checks that the naive model's layers are the naive form.
    naive, _ = lm_generation.memory_model("naive")
    assert {type(block.self_attention).__name__ for block in naive.decoder.blocks} == {"NaiveRelativeAttention"}
    model, _ = lm_generation.memory_model("relative")  # Built after the patch: ours again.
    names = {type(block.self_attention).__name__ for block in model.decoder.blocks}
    assert names == {"RelationAwareMultiHeadAttention"}


def test_measure_memory_gives_a_peak_and_a_step_time():
    result = lm_generation.measure_memory("naive", 32, memory_reps=2, time_reps=1)
    assert 0 < result["memory_min"] <= result["memory_bytes"] <= result["memory_max"]
    assert result["step_s"] > 0 and result["parameters"] > 0


def test_generation_is_timed_per_generated_token_and_tabulated():
    new = 4
    result = lm_generation.measure_generation("transformer_rel", [8, 16], new, reps=2)
    assert set(result["times"]) == {"8", "16"}
    assert set(result["times"]["8"]) == {str(lm_generation.FIRST_NEW), str(lm_generation.FIRST_NEW + new)}
    assert all(len(values) == 2 for by_tokens in result["times"].values() for by_clock in by_tokens.values()
               for values in by_clock.values())
    table = lm_generation.generation_table([result, {"model": "transformer", "error": "killed"}], [8, 16], new)
    lines = table.splitlines()
    assert len(lines) == 2 + 2 + 1 and lines[2].startswith("| transformer_rel | wall ")
    assert "error: killed" in lines[-1]


def test_per_token_cost_is_the_difference_of_the_two_calls_and_the_verdict_reads_it():
    first, last = str(lm_generation.FIRST_NEW), str(lm_generation.FIRST_NEW + 10)
    result = {"model": "m", "times": {
        "128": {first: {"wall": [1.0, 1.0, 1.0], "cpu": [1.0] * 3}, last: {"wall": [1.1, 1.2, 1.1], "cpu": [1.1] * 3}},
        "1024": {first: {"wall": [5.0, 5.0, 5.0], "cpu": [5.0] * 3}, last: {"wall": [5.2, 5.3, 5.2], "cpu": [5.2] * 3}},
    }}
    assert lm_generation.per_token(result, 128, 10) == pytest.approx([0.01, 0.02, 0.01])
    assert lm_generation.per_token(result, 1024, 10) == pytest.approx([0.02, 0.03, 0.02])
    verdict = lm_generation.generation_verdict([result], [128, 1024], 10)
    assert "m 2.00x, MISSED" in verdict  # Per-repetition ratios 2, 1.5, 2: median 2.
    result["times"]["1024"][last]["wall"] = [5.1, 5.2, 5.1]
    assert "m 1.00x, met" in lm_generation.generation_verdict([result], [128, 1024], 10)


def test_memory_table_gives_ratios_and_the_naive_forms_estimate():
    measured = {"memory_bytes": 100 * lm_generation.MIB, "memory_min": 99 * lm_generation.MIB,
                "memory_max": 101 * lm_generation.MIB, "step_s": 1.0}
    table = lm_generation.memory_table({4096: {
        "sinusoid": dict(measured, memory_bytes=50 * lm_generation.MIB), "relative": measured,
        "naive": {"error": "not measured: estimated ~24.0 GiB"}}}).splitlines()
    assert [c.strip() for c in table[3].split("|")][3:6] == ["100 (99-101)", "1.00x", "2.00x"]
    assert "not measured: estimated ~24.0 GiB" in table[4]
    assert lm_generation.naive_estimate_bytes(4096) == 12 * 4096 * 4096 * 32 * 4


@pytest.mark.parametrize("argv,message", [(["--parts", "speed"], "generation, memory or both"),
                                          (["--models", "lstm"], "unknown lstm"),
                                          (["--contexts", "0,128"], "integers >= 1")])
def test_bad_arguments_are_refused_in_one_line(argv, message):
    with pytest.raises(SystemExit, match=message):
        lm_generation._parse_args(argv)
