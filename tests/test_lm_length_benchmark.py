"""benchmarks/lm_length.py without training: its ratios, tables, verdict, plot, reuse of saved runs and refusals."""

import json
import os

import pytest

from benchmark_scripts import load

lm_length = load("lm_length")

WINDOWS = [128, 256, 512, 1024]


def result(model, seed, bits, steps=1000):
    """A saved run's result with bits per character `bits` at WINDOWS."""
    return {"setting": {"train_steps": steps, "windows": WINDOWS}, "model": model, "seed": seed,
            "train_seconds": 180.0 + seed, "eval_seconds": 40.0, "trainer_bits_per_char": bits[0],
            "checkpoint": f"/tmp/x/{model}_s{seed}/ckpt-{steps}", "parameters": 800000,
            "windows": {str(w): {"bits_per_char": b, "perplexity": 2.0 ** b, "tokens": 111541, "seconds": 5.0}
                        for w, b in zip(WINDOWS, bits)}}


RESULTS = [result("transformer", 1, [2.0, 2.5, 3.5, 4.5]), result("transformer", 2, [2.1, 2.4, 3.3, 4.1]),
           result("transformer_rel", 1, [2.0, 1.98, 1.97, 1.97]),
           result("transformer_rel", 2, [2.02, 2.0, 2.0, 2.03])]


def cells(line):
    return [cell.strip() for cell in line.strip("|").split("|")]


def test_ratio_is_the_per_character_perplexity_ratio():
    run = RESULTS[0]
    assert lm_length.ratio(run, 1024) == pytest.approx(run["windows"]["1024"]["perplexity"]
                                                       / run["windows"]["128"]["perplexity"])
    assert lm_length.ratio(run, 128) == 1.0


def test_tables_give_every_seed_then_mean_and_sample_std_in_the_models_order():
    per_seed = lm_length.per_seed_table(RESULTS, WINDOWS).splitlines()
    assert len(per_seed) == 2 + 4
    assert [cells(line)[:2] for line in per_seed[2:]] == [["transformer_rel", "1"], ["transformer_rel", "2"],
                                                          ["transformer", "1"], ["transformer", "2"]]
    first = cells(per_seed[2])
    assert first[2:6] == ["2.000", "1.980", "1.970", "1.970"]
    assert first[6] == f"{2 ** -0.03:.3f}" and first[7] == "2.000"  # The ratio; the trainer's own figure.
    summary = lm_length.summary_table(RESULTS, WINDOWS).splitlines()
    header = cells(summary[0])
    assert header[-3:] == ["ppl(256) / ppl(128)", "ppl(512) / ppl(128)", "ppl(1024) / ppl(128)"]
    sinusoid = cells(summary[3])
    assert sinusoid[:2] == ["transformer", "1,2"]
    assert sinusoid[5] == "4.300 +- 0.283"  # Mean and sample std of 4.5 and 4.1.
    ratios = [2 ** 2.5, 2 ** 2.0]
    mean = sum(ratios) / 2
    assert sinusoid[-1] == f"{mean:.3f} +- {abs(ratios[0] - ratios[1]) / 2 ** 0.5:.3f}"


def test_verdict_judges_the_relative_model_by_its_worst_seed_and_names_the_sinusoid():
    met = lm_length.verdict(RESULTS, WINDOWS)
    assert ": met" in met and "transformer (sinusoids): " in met
    slipping = RESULTS[:2] + [result("transformer_rel", 1, [2.0, 2.0, 2.0, 2.0]),
                              result("transformer_rel", 2, [2.0, 2.0, 2.05, 2.1])]
    assert "met on average, not by every seed (1 of 2 seeds above 1.05)" in lm_length.verdict(slipping, WINDOWS)
    assert ": MISSED" in lm_length.verdict(RESULTS[:2] + [result("transformer_rel", 1, [2.0, 2.1, 2.2, 2.3])],
                                           WINDOWS)
    assert "not measured" in lm_length.verdict(RESULTS[:2], WINDOWS)


def test_plot_writes_a_png(tmp_path):
    path = tmp_path / "lm_length.png"
    lm_length.plot(RESULTS + [result("universal_transformer_rel", 1, [2.1, 2.1, 2.1, 2.1])], WINDOWS, str(path))
    assert path.stat().st_size > 10000


def test_saved_results_are_reused_only_at_their_steps_and_windows(tmp_path, capsys):
    args = lm_length._parse_args(["--work_dir", str(tmp_path), "--models", "transformer_rel", "--seeds", "1,2"])
    os.makedirs(tmp_path / "transformer_rel_s1")
    with open(tmp_path / "transformer_rel_s1" / "result.json", "w", encoding="utf-8") as f:
        json.dump(RESULTS[2], f)
    assert lm_length.saved_result("transformer_rel", 1, args) == RESULTS[2]
    assert lm_length.saved_result("transformer_rel", 2, args) is None
    other = lm_length._parse_args(["--work_dir", str(tmp_path), "--train_steps", "2000"])
    assert lm_length.saved_result("transformer_rel", 1, other) is None
    # --report_only tabulates what is finished and names the rest.
    assert lm_length.main(["--work_dir", str(tmp_path), "--models", "transformer_rel", "--seeds", "1,2",
                           "--report_only"]) == 1
    out, err = capsys.readouterr()
    assert "| transformer_rel | 1    |" in out and err == "Not finished: transformer_rel_s2\n"


def test_the_trainers_final_bits_per_character_are_read_from_its_output():
    output = ("step 1000/1000  loss 1.2  accuracy 0.6\nFinal evaluation: accuracy 0.6120  bits_per_character 1.8123  "
              "loss 1.2561  perplexity 3.5113\n")
    assert lm_length.FINAL_BITS.findall(output) == ["1.8123"]


@pytest.mark.parametrize("argv,message", [
    (["--windows", "256,512"], "must include the training window 128"),
    (["--models", "transformer,lstm"], "unknown lstm"),
    (["--seeds", "1,x"], "give comma-separated integers"),
])
def test_bad_arguments_are_refused_in_one_line(argv, message):
    with pytest.raises(SystemExit, match=message):
        lm_length._parse_args(argv)
