"""benchmarks/translate_small.py without training: it skips cleanly without data, configures translate_local
correctly, and reads the tools' output."""

import importlib.util
import os
import subprocess
import sys

import translation_data as data
from t2t_relpos import registry

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "translate_small.py")
_SPEC = importlib.util.spec_from_file_location("benchmark_translate_small", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(bench)


def test_skips_cleanly_without_the_data(tmp_path):
    result = subprocess.run([sys.executable, _PATH, f"--multi30k={tmp_path}", f"--work_dir={tmp_path / 'w'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and "train.en.gz" in result.stdout
    assert not os.path.exists(tmp_path / "w")


def test_settings_name_the_multi30k_files_for_translate_local(tmp_path):
    for stem in ("train", "val", "test_2016_flickr"):
        pairs = data.pairs(5, seed=len(stem))
        data.write_lines(tmp_path / f"{stem}.en.gz", [s for s, _ in pairs])
        data.write_lines(tmp_path / f"{stem}.de.gz", [t for _, t in pairs])
    assert bench.missing_files(str(tmp_path)) == []
    settings = bench.settings(str(tmp_path), 4000)
    assert settings["vocab_size"] == 4000 and settings["dev"][1].endswith("val.de.gz")
    problem = registry.problem("translate_local")
    sources = problem.raw_sources(str(tmp_path), ("train", "eval", "test"), dict(settings, seed=1))
    assert sorted(sources) == ["eval", "test", "train"]
    assert next(iter(sources["test"].pairs())) == data.pairs(5, seed=len("test_2016_flickr"))[0]


def test_reads_throughput_evaluation_and_bleu():
    trainer = ("step 50/100  loss 5.1  accuracy 0.2  lr 0.001  tok/s 1.2e+04\n"
               "eval accuracy 0.3  loss 4.0\nstep 100/100  loss 4.1  accuracy 0.3  lr 0.001  tok/s 9876\n"
               "Final evaluation: accuracy 0.3500  loss 3.9000  neg_log_perplexity -4.1000\n")
    assert bench.tokens_per_second(trainer) == [12000.0, 9876.0]
    assert bench.final_eval(trainer) == {"accuracy": 0.35, "loss": 3.9, "neg_log_perplexity": -4.1}
    decoder = ("decoded 10/10 lines\nBLEU = 12.34  (nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0)\n"
               "BLEU = 12.50  (nrefs:1|case:mixed|eff:no|tok:intl|smooth:exp|version:2.6.0)\n")
    scores = bench.bleu_scores(decoder)
    assert scores["13a"][0] == 12.34 and scores["intl"][0] == 12.5 and "tok:intl" in scores["intl"][1]


def test_a_seed_has_runs_of_its_own_and_its_rows_are_recorded(tmp_path):
    """--seed N trains in <hparams set>_s<N> (seed 1 keeps the runs ablations.py reuses); --record's rows."""
    import types  # pylint: disable=import-outside-toplevel

    args = types.SimpleNamespace(work_dir=str(tmp_path), seed=1, hparams="", steps=1500, rounds=2, decode_samples=0)
    assert bench.run_dir(args, "transformer_cpu_rel") == str(tmp_path / "transformer_cpu_rel")
    args.seed = 3
    assert bench.run_dir(args, "transformer_cpu_rel") == str(tmp_path / "transformer_cpu_rel_s3")
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    results = {"transformer_cpu_rel": {"rates": [14000.0, 15000.0, 14230.0], "train_s": 448.04,
                                       "eval": {"loss": 1.971, "accuracy": 0.558},
                                       "bleu": {"13a": (31.01, signature), "intl": (31.1, signature)},
                                       "decode_s": 29.2}}
    (row,) = bench.record_rows(args, results)
    assert (row["model"], row["seed"], row["bleu_13a"], row["bleu_intl"], row["signature"]) == (
        "transformer_cpu_rel", 3, 31.01, 31.1, signature)
    assert (row["val_loss"], row["tokens_per_s"], row["train_wall_s"], row["decode_wall_s"]) == (1.971, 14230, 448.0,
                                                                                                  29.2)
    assert row["date"] and row["code"] and row["command"] and row["machine"]


def test_the_seeds_table_gives_each_seed_and_the_spread_of_todays_rows():
    def row(model, seed, bleu, date="2026-11-27", steps=1500, ponder=None, **extra):
        return {"model": model, "seed": seed, "bleu_13a": bleu, "val_loss": 2.0 + seed / 100, "steps": steps,
                "date": date, "hparams": "", "encoder_ponder_time": ponder, "decoder_ponder_time": ponder,
                "parameters": 504832, **extra}

    rows = [row("rel", 1, 31.0, date="2026-11-21"), row("rel", 2, 29.0), row("rel", 1, 28.0),
            row("rel", 3, 30.0, steps=750), row("rel", 4, 35.0, hparams="max_relative_position=0"),
            row("act", 1, 27.0, ponder=1.5), row("act", 2, 28.0, ponder=2.5), row("abs", 1, 25.0)]
    chosen = bench.seed_rows(rows, ["act", "rel", "absent"], 1500, "2026-11-27")
    assert list(chosen) == ["act", "rel"] and [r["seed"] for r in chosen["rel"]] == [1, 2]
    table = bench.seeds_table(rows, ["rel", "act"], 1500, "2026-11-27").splitlines()
    assert len(table) == 4 and table[2].startswith("| rel ") and table[3].startswith("| act ")
    assert "28.00, 29.00" in table[2] and "28.50 +- 0.71 (2 seeds)" in table[2] and "504,832" in table[2]
    assert table[2].rstrip(" |").endswith("(2 seeds)")  # No ponder time without ACT.
    assert "27.50 +- 0.71 (2 seeds)" in table[3] and table[3].rstrip(" |").endswith("2.00 / 2.00")
    # With overrides (ablations.py's rows): a line per set and overrides, after the plain ones.
    table = bench.seeds_table(rows, ["rel"], 1500, "2026-11-27", overrides="*").splitlines()
    assert len(table) == 4 and table[3].startswith("| rel (max_relative_position=0) ") and "|     4 |" in table[3]
    assert len(bench.seeds_table(rows, ["rel"], 1500, "2026-11-27", overrides="norm_position=pre").splitlines()) == 3


def test_ablations_record_the_runs_they_trained_with_their_overrides_and_seed():
    spec = importlib.util.spec_from_file_location("benchmark_ablations", _PATH.replace("translate_small", "ablations"))
    ablations = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ablations)
    import types  # pylint: disable=import-outside-toplevel

    args = types.SimpleNamespace(seed=2, steps=1500, rounds=2, decode_samples=0)
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    result = {"bleu": {"13a": (22.3, signature), "intl": (22.4, signature)}, "eval": {"loss": 2.3, "accuracy": 0.5},
              "train_s": 600.0, "decode_s": 30.0}
    rows = ablations.record_rows(args, {"k0": result, "k16": dict(result, train_s=None), "sinusoid": result})
    assert [(r["model"], r["hparams"], r["seed"], r["bleu_13a"]) for r in rows] == [
        ("transformer_cpu_rel", "max_relative_position=0", 2, 22.3)]  # k16 and sinusoid: translate_small's rows.
