"""benchmarks/learning_to_execute.py with the trainer and decoder faked (their real runs take hours): what it
trains and decodes, its scores against the problems' own references, the table beside the paper's, the verdict on
the training distribution, reuse of finished pairs, --report_only, --record and --plot."""

import json
import os

import pytest

from benchmark_scripts import load

lte = load("learning_to_execute")


def _fake_tools(monkeypatch, calls, wrong_figures=()):
    """The CLIs as the script calls them, without TensorFlow. The trainer leaves a checkpoint of its steps; the
    decoder writes the references, seed 2's eval and test outputs with their last symbol dropped (2 of every 4),
    transformer_rel's training-setting outputs wrong (it "has not learned" them), and prints the decoder's figures
    (wrong ones for the runs in `wrong_figures`)."""
    from t2t_relpos.decoding import scoring  # pylint: disable=import-outside-toplevel

    def run_cli(module, *args, log, threads=0):  # pylint: disable=unused-argument
        flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        run_dir = flags["output_dir"]
        name = os.path.basename(run_dir)
        if module == "trainer":
            steps = int(flags["train_steps"])
            os.makedirs(run_dir, exist_ok=True)
            with open(os.path.join(run_dir, "checkpoint"), "w", encoding="utf-8") as f:
                f.write(f'model_checkpoint_path: "ckpt-{steps}"\n')
            with open(os.path.join(run_dir, "problem"), "w", encoding="utf-8") as f:
                f.write(flags["problem"])
            calls.append(("trainer", name, steps, flags["hparams_set"], flags["seed"]))
            text = (f"step {steps}/{steps}  loss 0.5  accuracy 0.9700  lr 0.01\n"
                    "Final evaluation: accuracy 0.9500  accuracy_per_sequence 0.5000  loss 0.2000\n")
        else:
            with open(os.path.join(run_dir, "problem"), encoding="utf-8") as f:
                task = f.read().removeprefix("learning_to_execute_")
            split = flags.get("decode_split", "train")
            if split == "train":
                with open(flags["decode_reference"], encoding="utf-8") as f:
                    refs = f.read().split("\n")[:-1]
                hyps = ["" if name.rsplit("_s", 1)[0].endswith(("copy_transformer_rel", "addition_transformer_rel"))
                        else r for r in refs]
            else:
                samples = int(dict(s.split("=") for s in flags["decode_hparams"].split(","))["num_samples"])
                refs = lte.references(task, split, samples)
                hyps = [r[:-1] if name.endswith("_s2") and i % 4 < 2 else r for i, r in enumerate(refs)]
            with open(flags["decode_to_file"], "w", encoding="utf-8") as f:
                f.writelines(h + "\n" for h in hyps)
            calls.append(("decoder", name, split))
            text = "\n".join(scoring.report("accuracy", hyps, refs)) + "\n"
            if name in wrong_figures:
                text = text.replace("seq_accuracy = ", "seq_accuracy = 0.1234 was ")
        with open(log, "a", encoding="utf-8") as f:
            f.write(text)
        return text

    monkeypatch.setattr(lte.common, "run_cli", run_cli)
    monkeypatch.setattr(lte.common, "stop_tools_on_termination", lambda: None)  # Not in pytest's process.


def _cells(text, task, model):
    """The cells of the table's row of (task, model)."""
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    return next(row for row in rows if row[0] == task and row[1].startswith(model + " ("))


ARGV = ["--tasks", "copy,addition", "--models", "transformer_rel,universal_transformer_cpu_rel", "--seeds", "1,2",
        "--train_steps", "5,universal_transformer_rel:7", "--num_samples", "4", "--train_samples", "3"]


def test_trains_decodes_scores_and_tabulates_beside_the_paper_then_reuses(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_tools(monkeypatch, calls)
    monkeypatch.setattr(lte.common, "RESULTS", str(tmp_path / "results"))
    work = str(tmp_path / "runs")
    assert lte.main(ARGV + ["--work_dir", work, "--record", "--plot", str(tmp_path / "lte.png")]) == 0
    out = capsys.readouterr().out
    trained = sorted(c[1:] for c in calls if c[0] == "trainer")
    assert trained == sorted((f"{t}_{m}_s{s}", 7 if m.startswith("universal") else 5, lte.MODELS[m], str(s))
                             for t in ("copy", "addition") for m in ("transformer_rel", "universal_transformer_rel")
                             for s in (1, 2))
    assert sorted(c[2] for c in calls if c[0] == "decoder") == sorted(["eval", "test", "train"] * 8)
    # Table 5 and Table 6, a row per (task, model): seeds, steps, the splits' figures over seeds, the paper's row.
    assert "### Table 5, memorization" in out and "### Table 6, program evaluation" in out
    copy_ut = _cells(out, "copy", "universal_transformer_rel")
    assert copy_ut[2:4] == ["1,2", "7"] and copy_ut[6] == "yes"
    # Seed 2 lost the last digit of 2 of its 4 eval strings (55 digits each): char 1 - 2/220, seq 0.5.
    char2 = 1 - 2 / 220
    assert copy_ut[7] == f"{(1 + char2) / 2:.2f} +- {(1 - char2) / 2 ** 0.5:.2f} (2 seeds): 1.00, {char2:.2f}"
    assert copy_ut[8] == "0.75 +- 0.35 (2 seeds): 1.00, 0.50" and copy_ut[11] == "1.00 / 1.00 (UT)"
    addition_transformer = _cells(out, "addition", "transformer_rel")
    assert addition_transformer[5:7] == ["0.00 / 0.00 ; 0.00 / 0.00", "NO (2 of 2 seeds)"]
    assert addition_transformer[11] == "1.00 / 1.00 (Transformer)"
    assert "- universal_transformer_rel: learned the training distribution of copy, addition." in out
    assert ("- transformer_rel: learned none of the training distributions; has NOT learned it at its budget: "
            "copy seed 1 (0.00 / 0.00)") in out
    assert "relative (k = 16, per-head tables, no absolute signal)" in out
    # --record: a row per (task, model, seed), with the commit; --plot: the PNG.
    rows = json.loads((tmp_path / "results" / "learning_to_execute.json").read_text())["rows"]
    assert len(rows) == 8 and {r["table"] for r in rows} == {5, 6}
    row = next(r for r in rows if (r["task"], r["model"], r["seed"]) == ("copy", "universal_transformer_rel", 2))
    assert row["eval"] == {"char": round(char2, 4), "seq": 0.5, "char_strict": round(char2, 4), "n": 4}
    assert row["train"]["n"] == 3 and row["learned"] and row["paper"] == {"char": 1.0, "seq": 1.0}
    assert row["trainer_eval"]["accuracy_per_sequence"] == 0.5 and row["train_batch_accuracy"] == 0.97
    assert row["train_steps"] == 7 and row["code"] and row["hparams_set"] == "universal_transformer_cpu_rel"
    assert (tmp_path / "lte.png").stat().st_size > 0
    # Finished pairs are neither trained nor decoded again; --report_only gives the same table.
    calls.clear()
    assert lte.main(ARGV + ["--work_dir", work]) == 0
    assert calls == []
    again = capsys.readouterr().out
    assert lte.main(ARGV + ["--work_dir", work, "--report_only"]) == 0
    assert calls == [] and _cells(capsys.readouterr().out, "copy", "universal_transformer_rel") == _cells(
        again, "copy", "universal_transformer_rel")
    # Other samples: decoded again, not trained; more steps for one model: that model trains on, the other is kept.
    assert lte.main(ARGV[:-3] + ["2", "--train_samples", "3", "--work_dir", work]) == 0
    assert {c[0] for c in calls} == {"decoder"} and len(calls) == 24
    calls.clear()
    assert lte.main(ARGV[:7] + ["5,universal_transformer_rel:9"] + ARGV[8:] + ["--work_dir", work]) == 0
    assert {c[1:3] for c in calls if c[0] == "trainer"} == {(f"{t}_universal_transformer_rel_s{s}", 9)
                                                            for t in ("copy", "addition") for s in (1, 2)}
    capsys.readouterr()
    # Asked for fewer steps than a run has trained, with no figures kept there: refused before anything runs.
    with pytest.raises(SystemExit, match="has trained to step 9, past its 8 steps"):
        lte.main(ARGV[:7] + ["5,universal_transformer_rel:8"] + ARGV[8:] + ["--work_dir", work])
    assert lte.main(ARGV[:7] + ["5,universal_transformer_rel:8"] + ARGV[8:] + ["--work_dir", work,
                                                                                "--report_only"]) == 0
    assert "copy / universal_transformer_rel seed 1 at step 9 of 8" in capsys.readouterr().out


def test_from_record_tabulates_and_plots_the_recorded_rows_without_the_runs(tmp_path, monkeypatch, capsys):
    _fake_tools(monkeypatch, [])
    monkeypatch.setattr(lte.common, "RESULTS", str(tmp_path / "results"))
    argv = ARGV + ["--work_dir", str(tmp_path / "runs")]
    with pytest.raises(SystemExit, match="there is no .*learning_to_execute.json"):
        lte.main(argv + ["--report_only", "--from_record"])
    assert lte.main(argv + ["--record"]) == 0
    ran = capsys.readouterr().out
    # The runs gone, the record gives the same rows; a setting not recorded is named, not guessed.
    empty = ARGV + ["--work_dir", str(tmp_path / "elsewhere"), "--report_only"]
    assert lte.main(empty + ["--from_record", "--plot", str(tmp_path / "both.png")]) == 0
    out = capsys.readouterr().out
    for task, model in (("copy", "universal_transformer_rel"), ("addition", "transformer_rel")):
        assert _cells(out, task, model) == _cells(ran, task, model)
    assert "collected from `" in out and "learning_to_execute.json`" in out and "Not in the record" not in out
    assert (tmp_path / "both.png").stat().st_size > 0
    assert lte.main(ARGV[:7] + ["5,universal_transformer_rel:9"] + empty[8:] + ["--from_record"]) == 0
    assert ("Not in the record at these steps and samples: copy / universal_transformer_rel seed 1, "
            in capsys.readouterr().out)
    for extra in (["--from_record"], ["--report_only", "--from_record", "--record"]):
        with pytest.raises(SystemExit):
            lte.main(argv + extra)
    assert "--from_record goes with --report_only" in capsys.readouterr().err


def test_hparams_overrides_run_apart_and_are_named(tmp_path, monkeypatch, capsys):
    calls = []
    _fake_tools(monkeypatch, calls)
    monkeypatch.setattr(lte.common, "RESULTS", str(tmp_path / "results"))
    argv = ["--tasks", "addition", "--models", "transformer_rel", "--seeds", "1", "--train_steps", "3",
            "--num_samples", "2", "--train_samples", "2", "--work_dir", str(tmp_path / "runs")]
    assert lte.main(argv) == 0
    plain = capsys.readouterr().out
    calls.clear()
    trainer_args = []
    run_cli = lte.common.run_cli
    monkeypatch.setattr(lte.common, "run_cli", lambda module, *args, **kw: (
        trainer_args.extend(args) if module == "trainer" else None) or run_cli(module, *args, **kw))
    assert lte.main(argv + ["--hparams", "learning_rate=0.5", "--record"]) == 0
    out = capsys.readouterr().out
    # Trained again, in a folder of its own, with the overrides; the table and the record name them.
    assert [c[1] for c in calls if c[0] == "trainer"] == ["addition_transformer_rel_s1_learning_rate=0.5"]
    assert "--hparams=learning_rate=0.5" in trainer_args
    assert _cells(out, "addition", "transformer_rel")[1] == "transformer_rel (transformer_cpu_rel, learning_rate=0.5)"
    assert _cells(plain, "addition", "transformer_rel")[1] == "transformer_rel (transformer_cpu_rel)"
    assert "Every set with the overrides `learning_rate=0.5`." in out
    rows = json.loads((tmp_path / "results" / "learning_to_execute.json").read_text())["rows"]
    assert [row["hparams"] for row in rows] == ["learning_rate=0.5"]
    # --from_record takes only the rows of the overrides asked for.
    assert lte.main(argv + ["--report_only", "--from_record"]) == 0
    assert "Not in the record at these steps and samples: addition / transformer_rel seed 1." in (
        capsys.readouterr().out)


def test_a_pair_whose_decoder_disagrees_with_the_references_fails_alone(tmp_path, monkeypatch, capsys):
    _fake_tools(monkeypatch, [], wrong_figures=("copy_transformer_rel_s1",))
    argv = ["--tasks", "copy", "--models", "transformer_rel", "--seeds", "1,2", "--train_steps", "3",
            "--num_samples", "2", "--train_samples", "2", "--work_dir", str(tmp_path)]
    assert lte.main(argv) == 1
    captured = capsys.readouterr()
    assert [line for line in captured.err.splitlines() if line.startswith("error:")] == [
        "error: copy / transformer_rel seed 1 failed: train: the decoder's figures (char_accuracy = 0.0000  "
        "seq_accuracy = 0.1234) are not those of "
        f"{tmp_path}/copy_transformer_rel_s1/results/steps3_samples2_train2/decoded_train.txt against the "
        "references here ({'char': 0.0, 'seq': 0.0, 'char_strict': 0.0, 'n': 2})"]
    assert _cells(captured.out, "copy", "transformer_rel")[2] == "2"
    assert "copy / transformer_rel seed 1 at step 3 of 3 (failed in this invocation" in captured.out


def test_char_accuracy_is_over_the_references_length_and_seq_accuracy_exact():
    scores = lte.score(["1234", "12", "999"], ["123", "123", "999"])
    # 3 + 2 + 3 of 9 reference symbols; the decoder's strict figure also counts the extra "4" (of 10).
    assert scores == {"char": 8 / 9, "seq": 1 / 3, "char_strict": 8 / 10, "n": 3}


def test_settings_and_refusals():
    args = lte.argparse.Namespace(train_steps="3000,double:5000,universal_transformer_rel:4000,"
                                  "double/universal_transformer_rel:6000", tasks="", table="5,6",
                                  models="transformer_cpu_rel,adaptive_universal_transformer_rel", seeds="2,1,2")
    assert [lte.steps_for(t, m, args) for t, m in (("copy", "transformer_rel"), ("double", "transformer_rel"),
                                                   ("copy", "universal_transformer_rel"),
                                                   ("double", "universal_transformer_rel"))] == [3000, 5000, 4000,
                                                                                                 6000]
    assert lte.tasks_of(args) == ["copy", "double", "reverse", "program", "control", "addition"]
    assert lte.models_of(args) == ["transformer_rel", "adaptive_universal_transformer_rel"]
    assert lte.seeds_of(args) == [2, 1]
    assert lte.paper_model("adaptive_universal_transformer_rel") == "universal_transformer"
    for bad in ("x", "copy:0", "sorting:10", "copy/nomodel:3", "copy:3"):
        with pytest.raises(SystemExit, match="--train_steps"):
            lte.steps_for("reverse", "transformer_rel", lte.argparse.Namespace(train_steps=bad))
    for field, value, message in (("tasks", "copy,sorting", "--tasks"), ("table", "7", "--table")):
        with pytest.raises(SystemExit, match=message):
            lte.tasks_of(lte.argparse.Namespace(**{**vars(args), field: value}))
    with pytest.raises(SystemExit, match="--models: unknown model 'lstm'"):
        lte.models_of(lte.argparse.Namespace(models="lstm"))
