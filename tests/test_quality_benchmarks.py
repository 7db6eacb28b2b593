"""The quality benchmarks' parsing and tables (their real runs take hours; see benchmarks/README.md)."""

import json
import os
import subprocess
import sys
import time
import types

import numpy as np
import pytest

from benchmark_scripts import BENCHMARKS as _BENCHMARKS
from benchmark_scripts import load as _load

length_generalisation = _load("length_generalisation")
ablations = _load("ablations")
babi = _load("babi")

_DECODER_OUTPUT = """char_accuracy = 0.0252  seq_accuracy = 0.0000  (100 sequences)
  reference length   1-10  char_accuracy = 0.2727  seq_accuracy = 0.1000  (3 sequences)
  reference length  11-40  char_accuracy = 0.1399  seq_accuracy = 0.0000  (6 sequences)
  reference length 201-400 char_accuracy = 0.0148  seq_accuracy = 0.0000  (44 sequences)
"""


def test_length_buckets_keep_the_last_report():
    later = _DECODER_OUTPUT.replace("0.1399", "0.5000")
    buckets = length_generalisation.length_buckets(_DECODER_OUTPUT + "training...\n" + later)
    assert buckets == {"1-10": (0.2727, 0.1), "11-40": (0.5, 0.0), "201-400": (0.0148, 0.0)}
    assert length_generalisation.length_buckets("no report") == {}


def test_length_generalisation_report_puts_paper_rows_beside_ours(tmp_path):
    trainer = "step 500/1000  loss 1.2  accuracy 0.4218  lr 0.01\nstep 1000/1000  loss 0.5  accuracy 0.9873  lr 0.01\n"
    (tmp_path / "reverse_universal_transformer_rel.log").write_text(trainer + _DECODER_OUTPUT)
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=10, num_samples=100, jobs=2)
    results = {("reverse", "universal_transformer_rel"): (0.0252, 0.0, 120.0, 8.0),
               ("addition", "transformer"): (0.1, 0.0, 60.0, None)}
    text = length_generalisation.report(results, args, 180.0)
    table = text.split("Training-batch token accuracy")[0].strip().splitlines()[-4:]
    # The last training batch's accuracy, then the decoded accuracy by length and overall, the paper, ponder time
    # (teacher-forced accuracy only for finished runs, which have a checkpoint to measure).
    assert [c.strip() for c in table[2].split("|")[3:12]] == ["1", "0.99", "0.14", "0.01", "", "0.03", "0.00",
                                                             "0.96 / 0.46", "8.00"]
    # No log for this pair: the log's cells stay empty; the paper's Transformer addition row is 0.07 / 0.00.
    assert [c.strip() for c in table[3].split("|")[3:11]] == ["1", "", "", "", "", "0.10", "0.00", "0.07 / 0.00"]


def test_length_generalisation_reports_the_other_pairs_when_one_fails(tmp_path):
    """A pair whose trainer fails is named (one `error:` line, status 1) and the pairs that finished keep their
    rows: the report used to die with the first failure, after the others had trained for hours."""
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps="10", num_samples=100, hparams="")
    done = tmp_path / length_generalisation.run_name("reverse", "transformer", args)
    done.mkdir()
    (done / "result.json").write_text(json.dumps({"setting": {"train_steps": 10, "num_samples": 100},
                                                  "result": [0.5, 0.1, 60.0, None]}))
    (done / "teacher_forced_100.txt").write_text(f"teacher-forced, {done}/ckpt-10, eval split\n" + _DECODER_OUTPUT)
    (tmp_path / (done.name + ".log")).write_text(_DECODER_OUTPUT)
    script = os.path.join(_BENCHMARKS, "length_generalisation.py")
    ran = subprocess.run([sys.executable, script, "--tasks", "reverse", "--models", "transformer,universal_transformer",
                          "--train_steps", "10", "--num_samples", "100", "--jobs", "2", "--work_dir", str(tmp_path),
                          "--hparams", "universal_transformer:no_such_hparam=1"],
                         capture_output=True, text=True, timeout=300, check=False)
    assert ran.returncode == 1, ran.stderr
    errors = [line for line in ran.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "reverse / universal_transformer seed 1 failed" in errors[0]
    rows = [[c.strip() for c in line.split("|")[1:-1]] for line in ran.stdout.split("Not finished")[0].splitlines()
            if line.startswith("| reverse ")]
    assert [row[:2] + row[4:9] for row in rows] == [["reverse", "transformer", "0.14", "0.01", "0.01", "0.50", "0.10"]]
    assert ("reverse / universal_transformer seed 1 at step 0 of 10 (failed in this invocation: its log says why)"
            in ran.stdout)


def test_length_generalisation_seeds_and_offsets_have_runs_of_their_own(tmp_path):
    """Issue 44: offsets and seeds train runs of their own (relative models read no offsets: no new run), and
    the table gives every seed and the mean +- std over seeds."""
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=10, num_samples=100, jobs=1,
                                 offsets="shared:400", seed=2)
    name = length_generalisation.run_name
    assert name("identity", "universal_transformer", args) == "identity_universal_transformer_offsets_shared400_s2"
    assert name("identity", "universal_transformer_rel", args, seed=1) == "identity_universal_transformer_rel"
    args.hparams = "norm_position=pre"  # --hparams: every model's runs of their own, overrides joined.
    assert name("identity", "transformer", args) == "identity_transformer_offsets_shared400_norm_position-pre_s2"
    assert length_generalisation.overrides_of("transformer", args) == (
        "position_start_index=random,position_offset_shared=true,max_position_offset=400,norm_position=pre")
    assert length_generalisation.overrides_of("transformer_rel", args) == "norm_position=pre"
    args.hparams = "transformer:norm_position=pre;dropout=0.0"  # model:overrides are that model's alone.
    assert name("identity", "transformer", args) == (
        "identity_transformer_offsets_shared400_dropout-0.0-norm_position-pre_s2")
    assert length_generalisation.hparams_for("universal_transformer", args) == "dropout=0.0"
    args.hparams = ""
    args.train_steps = "2000,reverse:6000"  # Tasks that take longer to learn get steps of their own.
    assert [length_generalisation.steps_for(t, args) for t in ("identity", "reverse")] == [2000, 6000]
    for bad in ("2000,sorting:10", "reverse:6000", "x"):
        with pytest.raises(SystemExit, match="--train_steps"):
            length_generalisation.steps_for("identity", types.SimpleNamespace(train_steps=bad))
    assert length_generalisation._steps_text(["identity", "reverse"], args) == "2000 steps (reverse: 6000)"
    args.train_steps = 10
    args.seeds = "1,2;adaptive_universal_transformer_rel:1,2,3,4"  # One model gets more seeds than the others.
    assert [length_generalisation.seeds_for(m, args) for m in ("transformer_rel", "adaptive_universal_transformer_rel")
            ] == [[1, 2], [1, 2, 3, 4]]
    assert length_generalisation.seeds_for("transformer", types.SimpleNamespace(seeds="3")) == [3]
    for bad in ("1,x", "1;nomodel:2", "1,,2"):
        with pytest.raises(SystemExit, match="--seeds"):
            length_generalisation.seeds_for("transformer", types.SimpleNamespace(seeds=bad))
    assert length_generalisation.offsets_setting("shared:400", "transformer") == (
        "position_start_index=random,position_offset_shared=true,max_position_offset=400", "_offsets_shared400")
    for bad in ("sometimes", "random:x"):
        with pytest.raises(SystemExit, match="--offsets"):
            length_generalisation.offsets_setting(bad, "transformer")
    with pytest.raises(SystemExit, match="Universal Transformers"):
        length_generalisation.offsets_setting("step", "transformer")
    for seed, far, forced in ((1, 0.9, 0.95), (2, 0.7, 0.85)):
        log = _DECODER_OUTPUT.replace("0.0148", str(far))
        run = tmp_path / name("reverse", "universal_transformer", args, seed=seed)
        (tmp_path / (run.name + ".log")).write_text(log)
        # A finished pair's teacher-forced accuracy is measured once, at its last checkpoint, and then read.
        run.mkdir()
        (run / "result.json").write_text(json.dumps({"setting": {"train_steps": 10, "num_samples": 100},
                                                     "result": [0.5, 0.1, 60.0, None]}))
        (run / "teacher_forced_100.txt").write_text(f"teacher-forced, {run}/ckpt-10, eval split\n"
                                                    + _DECODER_OUTPUT.replace("0.0148", str(forced)))
    results = {("reverse", "universal_transformer", 1): (0.5, 0.1, 60.0, None),
               ("reverse", "universal_transformer", 2): (0.3, 0.0, 60.0, None)}
    text = length_generalisation.report(results, args, 120.0)
    assert "`--offsets=shared:400`" in text
    summary = text.split("Over seeds")[1].splitlines()[4]
    assert [c.strip() for c in summary.split("|")[1:8]] == [
        "reverse", "universal_transformer", "1,2", "0.80 +- 0.14 (2 seeds)", "0.90 +- 0.07 (2 seeds)",
        "0.40 +- 0.14 (2 seeds)", "0.05 +- 0.07 (2 seeds)"]
    first_row = text.split("Over seeds")[0].strip().splitlines()[-2]
    assert [c.strip() for c in first_row.split("|")[5:8]] == ["0.14", "0.90", "0.95"]


def _fake_tools(monkeypatch, calls):
    """The trainer, decoder and teacher_forced.py as length_generalisation calls them, without TensorFlow: the
    trainer's accuracy and the decoder's 11-40 figure are the steps trained / 1000, a checkpoint per run."""
    def run_cli(module, *args, log, threads=0):  # pylint: disable=unused-argument
        flags = dict(a[2:].split("=", 1) for a in args if a.startswith("--") and "=" in a)
        run_dir = flags["output_dir"]
        if module == "trainer":
            steps = int(flags["train_steps"])
            os.makedirs(run_dir, exist_ok=True)
            open(os.path.join(run_dir, f"ckpt-{steps}.index"), "w").close()
            with open(os.path.join(run_dir, "checkpoint"), "w", encoding="utf-8") as f:
                f.write(f'model_checkpoint_path: "ckpt-{steps}"\n')
            text = f"step {steps}/{steps}  loss 0.5  accuracy {steps / 1000:.4f}  lr 0.01\n"
        else:
            steps = max(int(n[5:-6]) for n in os.listdir(run_dir) if n.endswith(".index"))
            text = _DECODER_OUTPUT.replace("0.1399", f"{steps / 1000:.4f}")
        calls.append((module, steps))
        with open(log, "a", encoding="utf-8") as f:
            f.write(text)
        return text

    def run_python(script, *args, log, threads=0, name=""):  # pylint: disable=unused-argument
        checkpoint = next(a.split("=", 1)[1] for a in args if a.startswith("--checkpoint_path="))
        calls.append(("teacher_forced", checkpoint))
        with open(log, "w", encoding="utf-8") as f:
            f.write(f"teacher-forced, {checkpoint}, eval split\n"
                    + _DECODER_OUTPUT.replace("0.0148", f"{int(checkpoint.rsplit('-', 1)[1]) / 1000:.4f}"))

    monkeypatch.setattr(length_generalisation.common, "run_cli", run_cli)
    monkeypatch.setattr(length_generalisation.common, "run_python", run_python)


def _row_at(steps, tmp_path):
    """The report's row of copy / transformer with --train_steps `steps`: train acc, 11-40, 201-400 teacher-forced."""
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=str(steps), num_samples=100, jobs=1, seed=1)
    result = length_generalisation.finished("identity", "transformer", args)
    assert result is not None, f"no figures at {steps} steps"
    row = length_generalisation.report({("identity", "transformer"): result}, args, 1.0).split(
        "| copy ")[1].split("|")
    return [c.strip() for c in (row[3], row[4], row[6])]


def test_length_generalisation_keeps_each_step_counts_figures(tmp_path, monkeypatch):
    """A pair trained on from 200 to 300 steps keeps its figures at 200 (decoded, training accuracy, teacher-forced
    at ckpt-200): a continuation used to write over them, so a report of the shorter budget could not be made."""
    calls = []
    _fake_tools(monkeypatch, calls)
    for steps in (200, 300):
        args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=str(steps), num_samples=100, jobs=1, seed=1)
        length_generalisation.run_one("identity", "transformer", args)
    assert _row_at(200, tmp_path) == ["0.20", "0.20", "0.20"]
    assert _row_at(300, tmp_path) == ["0.30", "0.30", "0.30"]
    assert ("teacher_forced", str(tmp_path / "identity_transformer" / "ckpt-200")) in calls
    calls.clear()
    length_generalisation.run_one("identity", "transformer", args)  # Finished: nothing runs again.
    assert calls == []


def test_length_generalisation_refuses_a_run_trained_past_the_steps_asked(tmp_path, monkeypatch, capsys):
    """A run trained to 300 steps asked for 200 (no figures kept at 200): the trainer would stop at once and the
    decoder read ckpt-300, filed as the figures at 200. Refused in one line before anything runs; at 300 it runs."""
    _fake_tools(monkeypatch, calls := [])
    monkeypatch.setattr(length_generalisation.common, "stop_tools_on_termination", lambda: None)  # Not in pytest.
    argv = ["--tasks", "identity", "--models", "transformer", "--num_samples", "100", "--work_dir", str(tmp_path)]
    assert length_generalisation.main(argv + ["--train_steps", "300"]) == 0
    assert (tmp_path / "identity_transformer" / "checkpoint").exists()
    calls.clear()
    with pytest.raises(SystemExit, match=r"^error: copy / transformer seed 1 has trained to step 300, past "
                                         r"--train_steps=200, and has no figures kept at that step"):
        length_generalisation.main(argv + ["--train_steps", "200"])
    assert calls == []
    assert length_generalisation.main(argv + ["--train_steps", "200", "--report_only"]) == 0  # Names it unfinished.
    assert "copy / transformer seed 1 at step 300 of 200" in capsys.readouterr().out


def test_length_generalisation_files_an_older_runs_figures_before_it_trains_on(tmp_path, monkeypatch):
    """A run finished before figures were kept per step count (one RUN/result.json; its accuracy by length and
    training accuracy the last in its log) keeps them when it is trained on."""
    run = tmp_path / "identity_transformer"
    run.mkdir()
    (run / "ckpt-200.index").write_text("")
    (run / "result.json").write_text(json.dumps({"setting": {"train_steps": 200, "num_samples": 100},
                                                 "result": [0.1, 0.0, 60.0, None]}))
    (tmp_path / "identity_transformer.log").write_text(
        "step 200/200  loss 0.5  accuracy 0.2000  lr 0.01\n" + _DECODER_OUTPUT.replace("0.1399", "0.2000"))
    (run / "teacher_forced_100.txt").write_text(f"teacher-forced, {run}/ckpt-200, eval split\n"
                                                + _DECODER_OUTPUT.replace("0.0148", "0.2000"))
    assert _row_at(200, tmp_path) == ["0.20", "0.20", "0.20"]
    _fake_tools(monkeypatch, calls := [])
    length_generalisation.run_one("identity", "transformer", types.SimpleNamespace(
        work_dir=str(tmp_path), train_steps="300", num_samples=100, jobs=1, seed=1))
    assert [c[0] for c in calls] == ["trainer", "decoder", "teacher_forced"]
    assert _row_at(200, tmp_path) == ["0.20", "0.20", "0.20"]
    assert _row_at(300, tmp_path) == ["0.30", "0.30", "0.30"]


def test_length_generalisation_splits_addition_by_the_operands_each_digit_needs(tmp_path):
    """An addition pair's teacher-forced accuracy by digit kind (cached with its teacher-forced figures) gets a
    table of its own: a model that copies the longer operand scores on "one operand" only."""
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=10, num_samples=100, jobs=2)
    run = tmp_path / "addition_transformer"
    run.mkdir()
    (tmp_path / "addition_transformer.log").write_text(_DECODER_OUTPUT)
    (run / "result.json").write_text(json.dumps({"setting": {"train_steps": 10, "num_samples": 100},
                                                 "result": [0.1, 0.0, 60.0, None]}))
    (run / "teacher_forced_100.txt").write_text(
        f"teacher-forced, {run}/ckpt-10, eval split\n" + _DECODER_OUTPUT + "by digit kind:\n"
        "  reference length  11-40  both operands 0.10 (57% of digits), one operand 0.98 (43% of digits)\n"
        "  reference length 201-400 both operands 0.09 (26% of digits), one operand 0.12 (74% of digits), "
        "final carry 0.50 (0% of digits)\n")
    text = length_generalisation.report({("addition", "transformer"): (0.1, 0.0, 60.0, None)}, args, 60.0)
    row = text.split("by what the sum's digits need")[1].strip().splitlines()[4]
    assert [c.strip() for c in row.split("|")[1:8]] == ["addition", "transformer", "1", "0.10", "0.98", "0.09", "0.12"]
    assert length_generalisation.record_rows({("addition", "transformer"): (0.1, 0.0, 60.0, None)}, args)[0][
        "teacher_forced_digit_kinds"]["201-400"] == {"both operands": 0.09, "one operand": 0.12, "final carry": 0.5}
    # A cache from before the digit kinds is measured again (here: no checkpoint left, so nothing to show).
    (run / "teacher_forced_100.txt").write_text(f"teacher-forced, {run}/ckpt-10, eval split\n" + _DECODER_OUTPUT)
    assert length_generalisation.digit_kinds("addition", "transformer", args) == {}
    assert not (run / "teacher_forced_100.txt").exists()


def test_offsets_warmup_continues_a_copy_of_the_narrow_range_run_with_the_wide_range(tmp_path):
    """--offsets_warmup shared:40@6000: the pair's run starts as a copy of the shared:40 run at step 6000 (weights,
    Adam state, step, training time so far) with shared:400's hparams; relative models read no offsets."""
    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps="12000", num_samples=100, jobs=2, seed=1,
                                 offsets="shared:400", offsets_warmup="shared:40@6000", hparams="")
    name = length_generalisation.run_name
    assert name("reverse", "transformer", args) == "reverse_transformer_offsets_shared40_to_shared400_at6000"
    assert name("reverse", "transformer_rel", args) == "reverse_transformer_rel"
    first = tmp_path / "reverse_transformer_offsets_shared40"  # Trained to 8000: ckpt-6000 is copied.
    first.mkdir()
    for step in (6000, 8000):
        (first / f"ckpt-{step}.index").write_text(str(step))
        (first / f"ckpt-{step}.data-00000-of-00001").write_text(str(step))
    (first / "checkpoint").write_text('model_checkpoint_path: "ckpt-8000"\n')
    (first / "train_seconds").write_text("800.0\n")
    (first / "hparams.json").write_text(json.dumps({"hparams": {
        "position_start_index": "random", "max_position_offset": 40, "position_offset_shared": True,
        "hidden_size": 64}, "problem": "algorithmic_reverse_decimal40"}))
    run = tmp_path / name("reverse", "transformer", args)
    length_generalisation.start_after_warmup("reverse", "transformer", args, str(run), threads=1)
    assert sorted(p.name for p in run.iterdir()) == ["checkpoint", "ckpt-6000.data-00000-of-00001",
                                                     "ckpt-6000.index", "hparams.json", "train_seconds"]
    assert (run / "ckpt-6000.index").read_text() == "6000"
    assert 'model_checkpoint_path: "ckpt-6000"' in (run / "checkpoint").read_text()
    stored = json.loads((run / "hparams.json").read_text())
    assert stored["hparams"] == {"position_start_index": "random", "max_position_offset": 400,
                                 "position_offset_shared": True, "hidden_size": 64}
    assert float((run / "train_seconds").read_text()) == 600.0  # 800 s for 8000 steps, prorated to 6000.
    (run / "ckpt-6000.index").write_text("trained on")  # Once copied, never again: the run resumes itself.
    length_generalisation.start_after_warmup("reverse", "transformer", args, str(run), threads=1)
    assert (run / "ckpt-6000.index").read_text() == "trained on"
    # A warm-up without offsets (learn the task first, then widen): it used to be dropped without a word, the
    # pair training with shared:400 from its first step under the name of a plain run with offsets.
    plain_first = types.SimpleNamespace(**{**vars(args), "offsets_warmup": "none@6000"})
    assert length_generalisation.warmup_of("transformer", plain_first)[1] == 6000
    assert name("reverse", "transformer", plain_first) == "reverse_transformer_offsets_none_to_shared400_at6000"
    assert name("reverse", "transformer", length_generalisation.warmup_of("transformer", plain_first)[0]) == \
        "reverse_transformer"
    assert length_generalisation.warmup_of("transformer_rel", plain_first) is None
    # The report's curve shows the warm-up's last step and the one after the switch (the drop the wider range makes).
    assert length_generalisation._warmup_steps(plain_first) == 6000  # pylint: disable=protected-access
    assert {6000, 6500} <= set(length_generalisation._curve_steps(12000, switch=6000))  # pylint: disable=protected-access
    assert 6500 not in length_generalisation._curve_steps(12000)  # pylint: disable=protected-access
    for bad in ("shared:40", "shared:40@x"):
        with pytest.raises(SystemExit, match="--offsets_warmup"):
            length_generalisation.warmup_of("transformer", types.SimpleNamespace(offsets="shared:400",
                                                                                 offsets_warmup=bad))
    with pytest.raises(SystemExit, match="not more than the warm-up's 6000"):
        length_generalisation.main(["--tasks", "reverse", "--models", "transformer", "--offsets", "shared:400",
                                    "--offsets_warmup", "shared:40@6000", "--train_steps", "6000",
                                    "--work_dir", str(tmp_path), "--report_only"])


def test_teacher_forced_predicts_each_symbol_from_the_true_ones_before_it():
    """benchmarks/teacher_forced.py, tensor2tensor's evaluation metric beside the decoded accuracy: one prediction
    per reference symbol (EOS and padding left out), the same for an example batched with longer ones as alone."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer  # pylint: disable=import-outside-toplevel

    teacher_forced = _load("teacher_forced")
    keras.utils.set_random_seed(3)
    problem = registry.problem("algorithmic_reverse_decimal40")
    model = trainer.build_model(registry.hparams("transformer_cpu"), problem)
    hypotheses, references, inputs = teacher_forced.predictions(model, problem, "eval", 4, batch_size=4)
    examples = list(problem.dataset("eval").take(4).as_numpy_iterator())
    assert len({len(e["targets"]) for e in examples}) > 1  # Padded in the batch.
    assert references == [e["targets"][:-1].tolist() for e in examples]
    assert [i[:len(e["inputs"])] for i, e in zip(inputs, examples)] == [e["inputs"].tolist() for e in examples]
    for example, hypothesis in zip(examples, hypotheses):
        alone = model({k: v[None] for k, v in example.items()}, training=False)
        assert hypothesis == np.argmax(np.asarray(alone)[0], -1)[:-1].tolist()


def test_teacher_forced_splits_an_addition_by_the_operands_each_digit_needs():
    """--digit_kinds: a sum digit below the shorter operand's length needs both operands, the longer one's other
    digits one, a final carry neither; a model that copies the longer operand scores on the second kind only."""
    teacher_forced = _load("teacher_forced")
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    problem = registry.problem("algorithmic_addition_decimal40")
    encode = problem.feature_encoders()["inputs"].encode
    separator = problem.base + 2
    # Least-significant digit first: 29+3 is 92 + 3 = 95, written 59; 9+1 = 10, written 01; 7+123 = 7 + 321.
    assert teacher_forced.digit_kinds(encode("29+3") + [1, 0], separator) == [0, 1, 2]
    assert teacher_forced.digit_kinds(encode("9+1"), separator) == [0, 2]
    assert teacher_forced.digit_kinds(encode("7+123"), separator) == [0, 1, 1, 2]
    references = [encode("59"), encode("01"), encode("423")]
    copies = [encode("29"), encode("99"), encode("723")]  # The longer operand, nothing added.
    kinds = [teacher_forced.digit_kinds(encode(x), separator) for x in ("29+3", "9+1", "7+123")]
    assert teacher_forced.digit_kind_lines(copies, references, kinds) == [
        "  reference length   1-10  both operands 0.00 (43% of digits), one operand 1.00 (43% of digits), "
        "final carry 0.00 (14% of digits)",
        "  all lengths              both operands 0.00 (43% of digits), one operand 1.00 (43% of digits), "
        "final carry 0.00 (14% of digits)"]
    assert teacher_forced.digit_kind_lines(references, references, kinds)[-1].startswith(
        "  all lengths              both operands 1.00")
    # By index: only digit 0 of these sums needs both operands, and the copies get it wrong.
    assert teacher_forced.both_operands_by_index_line(copies, references, kinds) == (
        "  both operands by digit index: 0 0.00")
    longer = [encode("1234+5678"), encode("99+11")]  # 4321 + 8765 = 13086, written 68031; 99 + 11 = 110, 011.
    two_kinds = [teacher_forced.digit_kinds(x, separator) for x in longer]
    sums = [encode("68031"), encode("011")]
    half = [encode("08031"), encode("011")]  # The first digit of the first sum wrong.
    assert teacher_forced.both_operands_by_index_line(half, sums, two_kinds, last=2) == (
        "  both operands by digit index: 0 0.50, 1 1.00, 2+ 1.00")


@pytest.mark.parametrize("lengths", [(7, 7), (3, 9), (9, 3)])
def test_teacher_forced_operand_sums_are_sums_of_the_lengths_asked(lengths):
    """--equal_operands, --operand_lengths: sums whose operands have L1 and L2 digits (the last nonzero), encoded
    as the problem encodes its own, right by integer arithmetic; with --operand_period each operand repeats its
    first P digits; the same sums for the same seed."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    teacher_forced = _load("teacher_forced")
    problem = registry.problem("algorithmic_addition_decimal40")
    decode = problem.feature_encoders()["inputs"].decode

    def text(ids):
        return decode([i for i in ids.tolist() if i > 1])  # Without EOS and padding.

    for period in (0, 3):
        features = teacher_forced.operand_sums(problem, lengths, 20, period=period, seed=period)
        for inputs, targets in zip(features["inputs"], features["targets"]):
            first, second = text(inputs).split("+")
            assert (len(first), len(second)) == lengths and first[-1] != "0" and second[-1] != "0"
            assert int(text(targets)[::-1]) == int(first[::-1]) + int(second[::-1])  # Least significant first.
            assert inputs.tolist()[-1] == targets.tolist()[len(text(targets))] == 1  # EOS ends each.
            for operand in (first, second) if period else ():  # Repeats but for its nonzero last digit.
                assert all(operand[i] == operand[i - period] for i in range(period, len(operand) - 1))
    again = teacher_forced.operand_sums(problem, lengths, 20, period=3, seed=3)
    assert (again["inputs"] == features["inputs"]).all()


def test_teacher_forced_operand_lines_and_flags(capsys):
    """One accuracy per digit index below the shorter operand's length, and the longer operand's other digits
    when the lengths differ; a bad length list is one line and status 2."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer  # pylint: disable=import-outside-toplevel

    teacher_forced = _load("teacher_forced")
    problem = registry.problem("algorithmic_addition_decimal40")
    keras.utils.set_random_seed(3)
    model = trainer.build_model(registry.hparams("transformer_cpu"), problem)
    line = teacher_forced.operands_line(model, problem, (5, 5), 8)
    assert line.startswith("  operands of  5 digits: ") and len(line.split(": ")[1].split()) == 5
    line = teacher_forced.operands_line(model, problem, (3, 25), 8)
    assert line.startswith("  operands of  3 + 25 digits: ") and "; one operand (indices 3-24): " in line
    assert len(line.split(": ")[1].split(";")[0].split()) == 3  # Digits 0-2 need both operands.
    assert len(line.split("by ten: ")[1].split()) == 3  # Indices 3-12, 13-22, 23-24.

    vocab_size = problem.feature_encoders()["targets"].vocab_size

    def oracle(features, training=False):  # Right on every symbol of the sums, wrong on the padding after them.
        targets = np.asarray(features["targets"])
        return np.eye(vocab_size)[np.where(targets == 0, 5, targets)]

    assert teacher_forced.operands_line(oracle, problem, (3, 25), 8).endswith(
        "; one operand (indices 3-24): 1.00, by ten: 1.00 1.00 1.00")
    for flags, message in ((["--equal_operands", "6,x"], "--equal_operands takes comma-separated lengths"),
                           (["--operand_lengths", "6:8,9"], "--operand_lengths takes comma-separated L1:L2"),
                           (["--operand_lengths", "0:8"], "operand lengths must be >= 1")):
        with pytest.raises(SystemExit) as stopped:
            teacher_forced.main(["--output_dir", "unused", *flags])
        assert stopped.value.code == 2 and message in capsys.readouterr().err


def test_length_generalisation_writes_the_section_it_is_given(tmp_path, monkeypatch):
    """A report of other pairs once replaced the main table: --section and --title give it a section of its own."""
    written = []
    monkeypatch.setattr(length_generalisation.common, "replace_section", lambda *a, **k: written.append(a))
    monkeypatch.setattr(length_generalisation.common, "RUN_LOG", str(tmp_path / "benchmark_runs.md"))  # Any code.
    length_generalisation.main(["--tasks", "identity", "--models", "transformer", "--work_dir", str(tmp_path),
                                "--report_only", "--write", "--section", "length_generalisation_sinusoid",
                                "--title", "Copy with sinusoids"])
    length_generalisation.main(["--tasks", "identity", "--models", "transformer", "--work_dir", str(tmp_path),
                                "--report_only", "--write"])
    assert [name for name, _ in written] == ["length_generalisation_sinusoid", "length_generalisation"]
    assert written[0][1].startswith("## Copy with sinusoids\n")
    assert written[1][1].startswith("## Length generalisation (UT paper, Table 4 protocol)\n")


def test_babi_training_time_is_recorded_while_the_run_trains(tmp_path):
    """A run killed with its machine once lost the training time of its whole invocation (the count was written
    only at the end); the clock now writes it as it goes, and the total at the end."""
    run_dir = tmp_path / "set_facts_s1"
    run_dir.mkdir()
    (run_dir / "train_seconds").write_text("10.0\n")  # An earlier invocation's.
    began = time.perf_counter()
    with babi.common.RunClock(str(run_dir), every=0.05) as clock:
        time.sleep(0.5)
        recorded = float((run_dir / "train_seconds").read_text())
        assert 10.2 < recorded <= 10.0 + time.perf_counter() - began  # Written while the block runs.
    assert abs(clock.total - float((run_dir / "train_seconds").read_text())) <= 0.001
    assert 10.5 <= clock.total <= 10.0 + time.perf_counter() - began
    assert not (run_dir / "train_seconds.tmp").exists()


def test_babi_training_time_adds_up_over_invocations_and_earlier_seeds_count(tmp_path):
    run_dir = str(tmp_path / "1k" / "set_facts_s1")
    began = time.perf_counter()
    with babi.common.RunClock(run_dir) as first:
        time.sleep(0.2)
    with babi.common.RunClock(run_dir) as second:
        time.sleep(0.1)
    assert 0.2 <= first.total and 0.099 <= second.total - first.total  # Each invocation's time adds up ...
    assert second.total <= time.perf_counter() - began + 0.001  # ... and nothing else.
    for seed, steps in ((1, 800), (2, 800), (3, 400)):
        run = tmp_path / "1k" / f"set_facts_s{seed}"
        run.mkdir(exist_ok=True)
        errors = {task: float(seed) for task in range(1, 21)}
        (run / "result.json").write_text(json.dumps({"hparams_set": "set", "layout": "facts", "seed": seed,
                                                     "train_steps": steps, "eval": errors, "test": errors,
                                                     "train_seconds": 60.0}))
    args = types.SimpleNamespace(work_dir=str(tmp_path / "1k"), train_steps=800, subset="1k", jobs=1)
    # Only runs of the asked models trained to the asked steps: seed 3 stopped at 400 steps.
    found = babi.finished_runs(args, {("set", "facts", "")})
    assert [r["seed"] for r in found] == [1, 2]
    # Read back from JSON, the tasks are numbers again: the table has every task's error, of the best seed.
    table = babi.train_report(found, args, 60.0)
    assert "| qa20 " in table and " nan |" not in table and " 2 (1) |" in table
    assert not babi.finished_runs(args, {("set", "concat", "")})
    # Runs with --hparams overrides are runs and columns of their own.
    assert babi.run_name("set", "facts", 2, "relu_dropout=0.3,attention_dropout=0.2") == (
        "set_facts_relu_dropout_0.3_attention_dropout_0.2_s2")
    changed = tmp_path / "1k" / "set_facts_relu_dropout_0.3_s1"
    changed.mkdir()
    (changed / "result.json").write_text((tmp_path / "1k" / "set_facts_s2" / "result.json").read_text().replace(
        '"seed": 2', '"seed": 1, "hparams": "relu_dropout=0.3"'))
    assert [r["seed"] for r in babi.finished_runs(args, {("set", "facts", "relu_dropout=0.3")})] == [1]
    both = babi.train_report(
        babi.finished_runs(args, {("set", "facts", ""), ("set", "facts", "relu_dropout=0.3")}), args, 1)
    assert "`set` (facts, relu_dropout=0.3)" in both and " 2 (1) |" in both
    # Repeated --hparams: every model trains every variant (none given: the sets as they are).
    assert babi.planned_runs("a:facts,b:concat", ["", "relu_dropout=0.3"], "1") == [
        ("a", "facts", 1, ""), ("a", "facts", 1, "relu_dropout=0.3"), ("b", "concat", 1, ""),
        ("b", "concat", 1, "relu_dropout=0.3")]
    assert babi.planned_runs("a:facts", None, "1,2") == [("a", "facts", 1, ""), ("a", "facts", 2, "")]
    # A task trained alone: the decoder reports only its overall line; its problem, its row only, and no
    # joint-training rows of the paper beside it.
    assert babi.task_errors("answer_accuracy = 0.4260  error = 57.40%  (1000 questions)\n", 16) == {16: 57.4}
    joint = "answer_accuracy = 0.9  error = 10.00%  (2 questions)\n  qa1   accuracy = 1.0000  error = 0.00%\n"
    assert babi.task_errors(joint + "  qa2   accuracy = 0.8000  error = 20.00%\n") == {1: 0.0, 2: 20.0}
    alone = types.SimpleNamespace(**vars(args), single_task=3)
    assert babi.tasks_name(alone) == "single_task3" and babi.story_facts("facts", alone) == 130
    for run in found:
        run["test"], run["eval"] = {3: run["test"][3]}, {3: run["eval"][3]}
    table = babi.train_report(found, alone, 60.0)
    assert "| qa3 " in table and "| qa2 " not in table and "Table 1" not in table
    assert "(1k, qa3 alone)" in table and "`babi_qa_<layout>_single_task3_1k`" in table and "last 130 facts" in table


def test_babi_task_curves_pick_evenly_spaced_checkpoints_the_last_included(tmp_path):
    for step in range(1000, 12001, 1000):
        (tmp_path / f"ckpt-{step}.index").write_text("")
        (tmp_path / f"ckpt-{step}.data-00000-of-00001").write_text("")
    (tmp_path / "ckpt-13000.index").write_text("")  # Beyond the table's steps.
    assert babi.checkpoint_steps(str(tmp_path), 12000, count=4) == [1000, 5000, 8000, 12000]
    assert babi.checkpoint_steps(str(tmp_path), 3500) == [1000, 2000, 3000]
    assert babi.checkpoint_steps(str(tmp_path), 500) == []


def test_babi_fact_order_swaps_the_entities_of_relational_facts_and_measures_the_embeddings():
    from t2t_relpos.layers.fact_embedding import FactEmbedding  # pylint: disable=import-outside-toplevel
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel

    swap = babi.swapped
    assert swap("The kitchen is north of the hallway .".split()) == tuple(
        "The hallway is north of the kitchen .".split())
    assert swap("The triangle is to the left of the pink rectangle .".split()) == tuple(
        "The pink rectangle is to the left of the triangle .".split())
    assert swap("The chocolate fits inside the box .".split()) == tuple("The box fits inside the chocolate .".split())
    assert swap("Mary went to the kitchen .".split()) is None and swap("Lily is a swan .".split()) is None
    facts = [tuple("The kitchen is north of the hallway .".split()),
             tuple("The box is bigger than the chest .".split())]
    story = babi_text.Example(task=19, story_index=0, story=(facts[0], ("Mary", "went", "to", "the", "kitchen", "."),
                                                           facts[1], facts[0]), question=("Where", "is", "Mary", "?"),
                              answer="kitchen")
    assert babi.relational_facts([story]) == facts  # Distinct, in order; others left out.
    assert babi.run_labels(["r/10k/a_s1@12000", "r/10k/single_task17/b_s1", "r/10k/single_task19/b_s1/"]) == [
        "a_s1", "single_task17/b_s1", "single_task19/b_s1"]
    words = sorted({w for f in facts for w in f} | {"Mary", "Where", "?"})
    encoder = babi_text.BabiInputEncoder(words, "facts")
    for initializer, expected in (("ones", 1.0), ("position_encoding", None)):
        embed = FactEmbedding(encoder.vocab_size, 16, babi_text.FACT_WIDTH, mask_initializer=initializer)
        similarity = babi.swap_similarities(embed, encoder, facts)
        if expected:  # A bag of words: the two facts are one vector.
            np.testing.assert_allclose(similarity, expected, rtol=1e-5)
        else:  # Masks that weigh positions apart tell them apart.
            assert similarity.shape == (2,) and np.all(similarity < 0.999)


def test_babi_report_shows_the_kept_runs_validation_accuracy_and_ponder_time_by_step(tmp_path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    args = types.SimpleNamespace(work_dir=str(tmp_path), train_steps=4000, subset="1k", jobs=1, title="ACT types")
    for seed, accuracy in ((1, 0.5), (2, 0.8)):
        run = tmp_path / babi.run_name("ada", "facts", seed, "act_type=basic")
        run.mkdir()
        errors = {task: 100.0 * (1.0 - accuracy) for task in range(1, 21)}
        (run / "result.json").write_text(json.dumps({
            "hparams_set": "ada", "layout": "facts", "seed": seed, "hparams": "act_type=basic", "train_steps": 4000,
            "eval": errors, "test": errors, "train_seconds": 60.0}))
        with tf.summary.create_file_writer(str(run / "eval")).as_default():
            for step in (500, 1000, 3500):
                tf.summary.scalar("accuracy", accuracy * step / 3500, step=step)
                tf.summary.scalar("encoder_ponder_time", 2.0 + seed, step=step)
    table = babi.train_report(babi.finished_runs(args, {("ada", "facts", "act_type=basic")}), args, 1)
    curves = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[3:-1]] for line in table.splitlines()
              if line.startswith("| `ada` (facts, act_type=basic), seed 2")}  # Only the kept seed's run.
    assert "step 500 | step 1000 | step 1500 | step 2000 | step 2500 | step 3000 | step 3500 | step 4000" in table
    assert curves == {"accuracy": ["0.114", "0.229", "", "", "", "", "0.800", ""],
                      "ponder time": ["4.000", "4.000", "", "", "", "", "4.000", ""]}
    assert "seed 1" not in table and table.startswith("## ACT types\n")


def test_length_generalisation_report_only_trains_nothing_and_names_unfinished_pairs(tmp_path, capsys, monkeypatch):
    done = tmp_path / "identity_transformer_rel"
    done.mkdir()
    (done / "result.json").write_text(json.dumps({"setting": {"train_steps": 10000, "num_samples": 100},
                                                  "result": [0.205, 0.16, 2643.4, None]}))
    (tmp_path / "identity_transformer_rel.log").write_text("step 10000/10000  loss 0.1  accuracy 1  lr 0.01\n"
                                                           + _DECODER_OUTPUT)
    (done / "teacher_forced_100.txt").write_text(f"teacher-forced, {done}/ckpt-10000, eval split\n"
                                                 + _DECODER_OUTPUT.replace("0.0148", "0.5"))
    # Finished with other steps: not this table's; still training: its checkpoint says how far it got.
    other = tmp_path / "reverse_transformer_rel"
    other.mkdir()
    (other / "result.json").write_text(json.dumps({"setting": {"train_steps": 1000, "num_samples": 100},
                                                   "result": [0.1, 0.0, 60.0, None]}))
    (other / "checkpoint").write_text('model_checkpoint_path: "ckpt-1000"\nall_model_checkpoint_paths: "ckpt-1000"\n')
    (tmp_path / "identity_universal_transformer_rel").mkdir()
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    # A run still training: its accuracy so far is in the TensorBoard events the trainer writes as it goes.
    with tf.summary.create_file_writer(str(tmp_path / "reverse_transformer_rel" / "train")).as_default():
        for step, accuracy in ((500, 0.37), (1000, 0.98), (2000, 0.5)):
            tf.summary.scalar("accuracy", accuracy, step=step)
            tf.summary.scalar("loss", 9.0, step=step)
    # The finished pair's curve, recorded as means over windows of 500 steps, up to its 10000 steps.
    with tf.summary.create_file_writer(str(done / "train")).as_default():
        for step, accuracy in ((100, 0.2), (500, 0.4), (600, 0.8), (1000, 1.0), (10500, 0.5)):
            tf.summary.scalar("accuracy", accuracy, step=step)
    argv = ["--tasks", "identity,reverse", "--models", "transformer_rel,universal_transformer_rel",
            "--train_steps", "10000", "--num_samples", "100", "--work_dir", str(tmp_path), "--report_only", "--record"]
    monkeypatch.setattr(length_generalisation.common, "RESULTS", str(tmp_path / "results"))
    assert length_generalisation.main(argv) == 0
    table = capsys.readouterr().out
    # --record: the finished pair's accuracy by length (every bucket of its decoder report), for benchmarks/plots.py.
    (row,) = length_generalisation.common.read_results("length_generalisation")["rows"]
    assert (row["task"], row["model"], row["train_steps"], row["seed"]) == ("copy", "transformer_rel", 10000, 1)
    assert row["buckets"] == {"1-10": {"char": 0.2727, "seq": 0.1}, "11-40": {"char": 0.1399, "seq": 0.0},
                              "201-400": {"char": 0.0148, "seq": 0.0}}
    assert row["teacher_forced_buckets"]["201-400"] == {"char": 0.5, "seq": 0.0}
    assert ((row["char_accuracy"], row["seq_accuracy"], row["train_accuracy"], row["minutes"])
            == (0.205, 0.16, 1.0, 44.1))
    assert row["date"] and row["code"] and row["command"] and row["machine"]
    (curve_row,) = length_generalisation.common.read_results("length_generalisation_curves")["rows"]
    assert (curve_row["model"], curve_row["seed"], curve_row["curve_window"]) == ("transformer_rel", 1, 500)
    assert curve_row["train_accuracy_by_step"] == {"500": 0.3, "1000": 0.9}
    # --record=curves: the curves alone, for pairs whose accuracy is recorded already.
    assert length_generalisation.main(argv[:-1] + ["--record=curves"]) == 0
    assert len(length_generalisation.common.read_results("length_generalisation")["rows"]) == 1
    assert len(length_generalisation.common.read_results("length_generalisation_curves")["rows"]) == 2
    results, curves = table.split("Not finished")
    rows = [line for line in results.splitlines() if line.startswith("| copy") or line.startswith("| reverse")]
    assert len(rows) == 1  # The finished pair only: training accuracy, 11-40, 201-400, char, seq, the paper's.
    assert [c.strip() for c in rows[0].split("|")[2:11]] == ["transformer_rel", "1", "1.00", "0.14", "0.01", "0.50",
                                                             "0.20", "0.16", "0.53 / 0.03"]
    assert ("Not finished (resumable; their latest checkpoints): copy / universal_transformer_rel seed 1 at step 0 "
            "of 10000, reverse / transformer_rel seed 1 at step 1000 of 10000, reverse / universal_transformer_rel "
            "seed 1 at step 0 of 10000.") in table
    assert not (tmp_path / "identity_universal_transformer_rel" / "hparams.json").exists()  # Nothing trained.
    curve = {line.split("|")[2].strip(): [c.strip() for c in line.split("|")[4:-1]] for line in curves.splitlines()
             if line.startswith("| reverse ")}
    assert "step 500 | step 1000 | step 1500 | step 2000 | step 3000" in " ".join(table.split())
    assert curve["transformer_rel"][:5] == ["0.37", "0.98", "", "0.50", ""]
    assert curve["universal_transformer_rel"] == [""] * 12


def test_babi_10k_takes_a_missing_training_file_from_the_1k_set(tmp_path):
    # The public copy of the data has no 10k training file for qa3: the 1k one stands in, the rest is the 10k set.
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel

    data = tmp_path / "babi"
    for folder, tasks in (("en", range(1, 21)), ("en-10k", [t for t in range(1, 21) if t != 3])):
        (data / folder).mkdir(parents=True)
        for task in tasks:
            for split in ("train", "test"):
                (data / folder / f"qa{task}_{babi_text.TASKS[task]}_{split}.txt").write_text(f"{folder} {split}\n")
    (data / "en-10k" / f"qa3_{babi_text.TASKS[3]}_test.txt").write_text("en-10k test\n")
    args = types.SimpleNamespace(data_dir=str(data), subset="10k", work_dir=str(tmp_path / "runs"))
    linked, stand_ins = babi.complete_data_dir(args)
    assert stand_ins == [3]
    read = lambda task, split: open(babi_text.task_file(linked, "10k", task, split), encoding="utf-8").read()
    assert read(3, "train") == "en train\n" and read(3, "test") == "en-10k test\n"
    assert read(1, "train") == "en-10k train\n"
    assert babi.complete_data_dir(args) == (linked, [3])  # A second invocation finds the links there.
    # Complete data, or the 1k subset, is read where it is.
    args.subset = "1k"
    assert babi.complete_data_dir(args) == (str(data), [])
    args.stand_ins = [3]
    assert "taken from the 1k set instead: qa3." in babi.train_report([], types.SimpleNamespace(
        **{**vars(args), "subset": "10k", "train_steps": 1, "jobs": 1}), 1.0)


def _result(bleu, loss=2.0, train_s=600.0):
    signature = "nrefs:1|case:mixed|eff:no|tok:13a|smooth:exp|version:2.6.0"
    return {"bleu": {"13a": (bleu, signature), "intl": (bleu + 0.1, signature.replace("13a", "intl"))},
            "eval": {"loss": loss}, "train_s": train_s, "decode_s": 30.0}


def test_ablation_tables_split_by_paper_table_with_the_reference_in_both():
    results = {"k0": _result(3.0), "k16": _result(31.0, train_s=None), "both": _result(31.0, train_s=None),
               "neither": _result(2.5), "sinusoid": _result(24.9)}
    table2 = ablations.format_table(results, 2).splitlines()
    table3 = ablations.format_table(results, 3).splitlines()
    assert [row.split("|")[1].strip() for row in table2[2:]] == ["k = 0", "k = 16",
                                                                  "sinusoid, no relative (reference)"]
    assert [row.split("|")[1].strip() for row in table3[2:]] == ["a^K and a^V (k = 16)", "neither",
                                                                  "sinusoid, no relative (reference)"]
    k0 = [c.strip() for c in table2[2].split("|")[2:-1]]
    assert k0 == ["3.00", "3.10", "2.000", "12.5", "10.0"]
    assert table2[3].rstrip(" |").endswith("translate_small's")  # Reused run: no training time of its own.


def test_ablation_configurations_change_one_thing_each():
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    base = registry.hparams(ablations.BASE_SET)
    for name, (_, hparams_set, overrides, *_) in ablations.CONFIGS.items():
        changed = registry.hparams(hparams_set).parse(overrides)
        differing = {k for k in base.values() if base.values()[k] != changed.values()[k]}
        if hparams_set == ablations.BASE_SET:
            assert differing == {k.split("=")[0] for k in overrides.split(",") if k}, name
    assert registry.hparams(ablations.BASE_SET).max_relative_position == 16  # The "k16" / "both" run.


def test_ablations_skip_cleanly_without_the_data(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["ablations.py", f"--multi30k={tmp_path}"])
    assert ablations.main() == 0
    assert "skipped, the Multi30k data is not there" in capsys.readouterr().out


def test_step_variant_table_gives_ratios_to_plain_and_relative_over_absolute():
    train_step = _load("train_step")
    names = [f"{m}/{v}" for m in ("absolute", "relative") for v in train_step.VARIANTS]
    seconds = {name: 1.0 + 0.1 * i for i, name in enumerate(names)}  # absolute 1.0 1.1 1.2, relative 1.3 1.4 1.5
    rows = train_step.report_variants([{"shape": "small", "setting": "mixed", "seconds": seconds}], 5.0)
    relative = [c.strip() for c in rows.splitlines()[-1].split("|")[1:-1]]
    assert relative == ["small, mixed", "relative", "1300", "1400", "1.08x", "1500", "1.15x",
                        "1.300 / 1.273 / 1.250"]


def test_step_ratio_pairs_repetitions_and_reports_their_spread():
    common = _load("common")
    # Repetitions 3 and 4 ran under load for both models: pairing cancels it (the ratio of the medians,
    # 1.06 / 1.0, would not).
    absolute, relative = [1.0, 1.0, 2.0, 2.0, 1.0], [1.03, 1.06, 2.1, 2.08, 1.04]
    ratio = common.paired_ratios(relative, absolute)
    assert abs(ratio["median"] - 1.04) < 1e-9
    assert abs(ratio["low"] - 1.04) < 1e-9 and abs(ratio["high"] - 1.05) < 1e-9
    train_step = _load("train_step")
    result = {"shape": "base", "setting": "long", "variant": "plain", "tokens": 8192,
              "seconds": {"absolute": 1.0, "relative": 1.05}, "ratio": ratio,
              "flops": {"relative": 1e11}, "peak_flops": 2e11}
    table = train_step.report([result], 60.0)
    row = [line for line in table.splitlines() if line.startswith("| base, long")][0]
    assert [c.strip() for c in row.split("|")[1:5]] == ["base, long, plain", "1000", "1050", "1.040 (1.040-1.050)"]
    assert table.rstrip().endswith("met.") and "NOT met" not in table
    slow = dict(result, ratio={"median": 1.08, "low": 1.07, "high": 1.09})
    assert "NOT met" in train_step.report([slow], 60.0)


def test_babi_hops_asks_qa16_with_fewer_lookups(tmp_path):
    hops = babi
    from t2t_relpos.problems import babi_text  # pylint: disable=import-outside-toplevel

    lines = ["1 Lily is a frog.", "2 Bernhard is a frog.", "3 Bernhard is green.", "4 Brian is a lion.",
             "5 Brian is white.", "6 Greg is a frog.", "7 What color is Greg?\tgreen\t6 2 3",
             "1 Julius is a swan.", "2 Julius is gray.", "3 Lily is a swan.", "4 Lily is white.",
             "5 Greg is a swan.", "6 What color is Greg?\twhite\t5 3 4"]
    first, second = babi_text.parse(lines, 16)
    assert hops.rewrite(first, 3) == first
    assert hops.rewrite(first, 2).question == ("What", "color", "is", "frog", "?")
    assert hops.rewrite(first, 2).answer == "green"
    # One hop: a person whose colour is stated, not always the last one (story 0: Bernhard, story 1: Lily).
    assert (hops.rewrite(first, 1).question[-2], hops.rewrite(first, 1).answer) == ("Bernhard", "green")
    assert (hops.rewrite(second, 1).question[-2], hops.rewrite(second, 1).answer) == ("Lily", "white")
    # Written back as bAbI text, the rewritten questions parse to the same examples.
    again = babi_text.parse(hops.task_file_text([hops.rewrite(first, 2), hops.rewrite(second, 1)]).splitlines(), 16)
    assert [(e.story, e.question, e.answer) for e in again] == [
        (first.story, ("What", "color", "is", "frog", "?"), "green"), (second.story, hops.rewrite(second, 1).question,
                                                                        "white")]


def test_the_plots_render_from_the_results_files_every_seed_and_the_best_runs(tmp_path, capsys):
    """benchmarks/plots.py draws the report's PNGs from tiny results files; what it picks to draw."""
    plots = _load("plots")
    common = plots.common
    results, out = str(tmp_path / "results"), str(tmp_path / "out")
    errors = {f"qa{t}": float(t) for t in range(1, 21)}

    def bleu(model, seed, score, date):
        return {"model": model, "steps": 1500, "bleu_13a": score, "seed": seed, "date": date, "code": "abc1234"}

    # Rows are appended (what --record does): a later seed joins the earlier rows, which are kept.
    common.record("translate_small", [bleu("rel", 1, 31.0, "2026-11-21"), bleu("abs", 1, 24.9, "2026-11-21")],
                  results)
    common.record("translate_small", [bleu("rel", 2, 29.0, "2026-11-28"), bleu("rel", 3, 28.0, "2026-11-28"),
                                      dict(bleu("rel", 1, 22.0, "2026-11-28"), hparams="max_relative_position=0")],
                  results)
    rows = common.read_results("translate_small", results)["rows"]
    assert plots.bleu_groups(rows) == {"rel": {"2026-11-21": [31.0], "2026-11-28": [29.0, 28.0]},
                                       "abs": {"2026-11-21": [24.9]}}
    babi_rows = [dict(subset="1k", protocol="joint", model="ut", hparams="", train_steps=8000, seed=s,
                      date="2026-11-24", test_error=errors, mean_error=mean, failed=15)
                 for s, mean in ((1, 12.0), (2, 10.5))]
    babi_rows += [dict(babi_rows[0], subset="10k", protocol="curriculum", mean_error=0.6),
                  dict(babi_rows[0], subset="10k", protocol="single_task17", mean_error=0.1,
                       test_error={"qa17": 0.1})]
    common.record("babi", babi_rows, results)
    assert [r["seed"] for r in plots.best_babi_rows(babi_rows, "1k")] == [2]  # The lowest mean test error.
    assert [r["protocol"] for r in plots.best_babi_rows(babi_rows, "10k")] == ["curriculum"]  # Not single tasks.
    lengths = [{"task": "copy", "model": "transformer_rel", "train_steps": steps, "seed": 1, "date": date,
                "buckets": {"11-40": {"char": 1.0, "seq": 0.9}, "201-400": {"char": char}}}
               for steps, char, date in ((1000, 0.1, "2026-11-23"), (10000, 0.2, "2026-11-25"),
                                         (10000, 0.3, "2026-11-26"))]
    common.record("length_generalisation", lengths, results)
    (drawn,) = plots.length_rows(lengths)  # The newest setting's newest row.
    assert drawn["buckets"] == lengths[2]["buckets"] and drawn["seeds"] == [1]
    offsets = "position_start_index=random,max_position_offset=400"
    lengths += [dict(lengths[0], train_steps=2000, hparams=offsets, seed=seed, date="2026-11-27", train_accuracy=acc,
                     buckets={"201-400": {"char": char}}) for seed, char, acc in ((1, 0.9, 1.0), (2, 0.8, 0.98))]
    (drawn,) = plots.length_rows(lengths)  # Two seeds of the newest setting, averaged.
    assert drawn["seeds"] == [1, 2] and abs(drawn["buckets"]["201-400"]["char"] - 0.85) < 1e-9
    assert plots.length_label(drawn) == "relative Transformer + offsets in [0, 400), 2000 steps, seeds 1, 2"
    assert plots.length_label(dict(drawn, model="transformer", hparams=offsets + ",norm_position=pre")) == (
        "Transformer + offsets in [0, 400) (pre-norm), 2000 steps, seeds 1, 2")
    assert plots.length_label(dict(drawn, hparams="num_rec_steps=4")) == (  # Other overrides as they are.
        "relative Transformer (num_rec_steps=4), 2000 steps, seeds 1, 2")
    # A curriculum over the offsets' range is a setting of its own, and its line says so.
    curriculum = dict(lengths[-1], train_steps=12000, offsets_warmup="shared:40@6000", date="2026-11-28")
    (drawn,) = plots.length_rows(lengths + [curriculum])
    assert drawn["seeds"] == [2] and plots.length_label(drawn) == (
        "relative Transformer + offsets in [0, 40) for 6000 steps, then in [0, 400), 12000 steps, seed 2")
    assert plots.length_label(dict(drawn, offsets_warmup="none@14000")) == (  # First without offsets.
        "relative Transformer without offsets for 14000 steps, then offsets in [0, 400), 12000 steps, seed 2")
    lengths.pop()
    lengths.append(dict(lengths[-1], seed=2, train_accuracy=0.3))
    assert plots.length_label(plots.length_rows(lengths)[0]).endswith("; not learned")
    assert plots.date_range(lengths) == "2026-11-23 to 2026-11-27"

    # Training curves: a run recorded again after training on replaces its shorter curve, per setting and seed.
    curve = {"task": "addition", "model": "transformer", "hparams": offsets, "seed": 1, "date": "2026-11-28",
             "curve_window": 500, "train_accuracy_by_step": {"500": 0.1, "1000": 0.3}}
    longer = dict(curve, date="2026-11-29", train_accuracy_by_step={"500": 0.1, "1000": 0.3, "1500": 0.6})
    curves = [curve, dict(curve, seed=2), longer, dict(curve, hparams="", offsets_warmup=None)]
    common.record("length_generalisation_curves", curves, results)
    drawn = plots.curve_rows(curves)
    assert len(drawn) == 3 and longer in drawn and curve not in drawn
    # A run trained again from step 0 (other values at the same steps) is drawn beside the first, not over it,
    # and the legend tells the two apart by their dates.
    again = dict(curve, date="2026-12-01", train_accuracy_by_step={"500": 0.2, "1000": 0.2, "1500": 0.3, "2000": 0.4})
    curves.append(again)
    common.record("length_generalisation_curves", [again], results)
    drawn = plots.curve_rows(curves)
    assert len(drawn) == 4 and longer in drawn and again in drawn
    assert [plots._curve_setting(row, drawn) for row in (longer, again, curves[1])] == [  # pylint: disable=protected-access
        "offsets in [0, 400), run of 2026-11-29", "offsets in [0, 400), run of 2026-12-01", "offsets in [0, 400)"]
    # Decoding: decoding.py's plot from recorded rows of ms per step.
    common.record("decoding", [{"model": model, "search": search, "tokens": tokens, "date": "2026-11-26",
                                "machine": "a CPU", "ms_per_step": {"cached": 0.5, "uncached": 0.01 * tokens}}
                               for model in ("rel64", "ut64") for search in ("greedy", "beam") for tokens in (25, 50)],
                  results)
    assert plots.main(["--results_dir", results, "--out_dir", out]) == 0
    for name in ("length_generalisation.png", "training_curves.png", "babi_tasks.png", "translation_bleu.png",
                 "decoding.png"):
        with open(os.path.join(out, name), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n", name
    # A results file that is not there: one line, status 2, nothing drawn.
    capsys.readouterr()
    assert plots.main(["--only", "babi", "--results_dir", str(tmp_path / "none"), "--out_dir", str(tmp_path)]) == 2
    assert capsys.readouterr().err.startswith("plots: error: no babi.json in ")
    assert not os.path.exists(tmp_path / "babi_tasks.png")


def test_teacher_forced_draws_training_strings_by_seed():
    """--split train: fresh strings of the training distribution, the same for a seed and others for another; the
    endless split needs --num_samples."""
    teacher_forced = _load("teacher_forced")
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    problem = registry.problem("algorithmic_addition_decimal40")

    def inputs(seed):
        return [e["inputs"].tolist() for e in teacher_forced.examples_of(problem, "train", 6, seed).as_numpy_iterator()]

    assert inputs(3) == inputs(3) != inputs(4)
    assert len(inputs(3)) == 6 and max(map(len, inputs(3))) <= 41  # At most 40 symbols and EOS.
    eval_inputs = [e["inputs"].tolist() for e in teacher_forced.examples_of(problem, "eval", 6, 3).as_numpy_iterator()]
    assert eval_inputs == [e["inputs"].tolist() for e in problem.dataset("eval").take(6).as_numpy_iterator()]
    with pytest.raises(SystemExit) as exit_info:
        teacher_forced.main(["--output_dir", "unused", "--split", "train"])
    assert exit_info.value.code == 2


def test_split_text_writes_what_the_decoder_reads_back(tmp_path, capsys):
    """benchmarks/split_text.py: each .src line encodes back to the example's input ids, each .ref line is its sum
    (operands and sum least-significant digit first), the same strings for the same seed."""
    split_text = _load("split_text")
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel

    problem = registry.problem("algorithmic_addition_decimal40")
    prefix = str(tmp_path / "train5")
    assert split_text.main(["--problem", problem.name, "--num_samples", "5", "--seed", "7", "--prefix", prefix]) == 0
    assert "5 examples of algorithmic_addition_decimal40 (train)" in capsys.readouterr().out
    sources = open(prefix + ".src", encoding="utf-8").read().splitlines()
    references = open(prefix + ".ref", encoding="utf-8").read().splitlines()
    examples = list(problem.dataset("train", seed=7).take(5).as_numpy_iterator())
    encode = problem.feature_encoders()["inputs"].encode
    assert [encode(s) + [1] for s in sources] == [e["inputs"].tolist() for e in examples]
    for source, reference in zip(sources, references):
        first, second = source.split("+")
        assert int(reference[::-1]) == int(first[::-1]) + int(second[::-1])
    assert split_text.split_text(problem, "train", 5, seed=7) == (sources, references)
    assert split_text.split_text(problem, "train", 5, seed=8)[0] != sources
    for problem_name, count in (("no_such_problem", "5"), (problem.name, "0")):
        with pytest.raises(SystemExit) as exit_info:
            split_text.main(["--problem", problem_name, "--num_samples", count, "--prefix", prefix])
        assert exit_info.value.code == 2


def test_teacher_forced_measures_the_checkpoint_it_is_given(tmp_path, capsys):
    """--checkpoint_path: an older checkpoint of the run instead of its newest; a run or checkpoint that is not
    there is one line and status 2, not a traceback."""
    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer as trainer_lib  # pylint: disable=import-outside-toplevel

    teacher_forced = _load("teacher_forced")
    hparams = registry.hparams("transformer_cpu").parse("hidden_size=16,filter_size=32,num_heads=2,batch_size=64")
    trainer = trainer_lib.Trainer(registry.problem("algorithmic_addition_decimal40"), hparams, str(tmp_path), seed=1,
                                  checkpoint_every=1, eval_every=0, eval_steps=1, verbose=False)
    trainer.train(2)
    run = ["--output_dir", str(tmp_path), "--split", "train", "--num_samples", "3", "--digit_kinds"]
    capsys.readouterr()
    assert teacher_forced.main(run) is None
    newest = capsys.readouterr().out
    assert newest.startswith(f"teacher-forced, {tmp_path}/ckpt-2, train split (seed 0)\n")
    assert teacher_forced.main(run + ["--checkpoint_path", f"{tmp_path}/ckpt-1"]) is None
    older = capsys.readouterr().out
    assert older.startswith(f"teacher-forced, {tmp_path}/ckpt-1, train split (seed 0)\n")
    assert "both operands by digit index" in older
    missing = [(["--checkpoint_path", f"{tmp_path}/ckpt-9"], f"checkpoint {tmp_path}/ckpt-9 does not exist"),
               (["--output_dir", str(tmp_path / "none")], f"{tmp_path / 'none'} holds no run")]
    for wrong, message in missing:
        with pytest.raises(SystemExit) as exit_info:
            teacher_forced.main(run + wrong)
        assert exit_info.value.code == 2
        assert f"error: {message}" in capsys.readouterr().err


def test_ponder_by_index_averages_each_position_over_the_strings_that_have_it():
    """benchmarks/ponder_by_index.py: the decoder's ponder times by target index and, for an addition, the encoder's
    by index inside each operand (separator, EOS and padding left out), equal to the model's own per-position
    ponder times; a model without ponder times is refused in one line."""
    import keras  # pylint: disable=import-outside-toplevel

    from t2t_relpos import registry  # pylint: disable=import-outside-toplevel
    from t2t_relpos.training import trainer  # pylint: disable=import-outside-toplevel

    ponder = _load("ponder_by_index")
    means = ponder.MeanByIndex(last=2)
    for values in ([1.0, 2.0, 3.0, 5.0], [3.0], [2.0, 4.0]):
        means.add(values)
    assert means.line("x") == "  x: 0 2.00, 1 3.00, 2+ 4.00"

    keras.utils.set_random_seed(2)
    problem = registry.problem("algorithmic_addition_decimal40")
    hparams = registry.hparams("adaptive_universal_transformer_tiny_rel").parse("act_halting_bias_init=-1.0")
    model = trainer.build_model(hparams, problem)
    lines = ponder.ponder_by_index(model, problem, "train", 3, seed=5, batch_size=2, last=40)
    examples = list(ponder.examples_of(problem, "train", 3, 5).as_numpy_iterator())
    separator = problem.base + 2
    first, second, target = [], [], []
    for example in examples:
        inputs = example["inputs"][None]
        times = np.asarray(model(dict(inputs=inputs, targets=example["targets"][None]), return_details=True)[
            "ponder_times"]["decoder"])[0]
        target.append(times[:-1])  # Without EOS.
        source = np.asarray(model.ponder_times(inputs))[0][:-1]
        split_at = example["inputs"].tolist().index(separator)
        first.append(source[:split_at])
        second.append(source[split_at + 1:])
    assert len({round(float(t), 3) for times in first + second for t in times}) > 1  # Positions halt apart.
    for line, label, values in zip(lines, ("decoder, by index in the sum", "encoder, by index in the first operand",
                                           "encoder, by index in the second operand"), (target, first, second)):
        expected = ponder.MeanByIndex(last=40)
        for times in values:
            expected.add(times)
        assert line == expected.line(label)
    with pytest.raises(SystemExit) as exit_info:
        ponder.main(["--output_dir", "unused", "--split", "train"])
    assert exit_info.value.code == 2
