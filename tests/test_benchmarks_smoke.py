"""The attention benchmark at a tiny length: its results, table and verdict, and its naive layer's correctness."""

import argparse
import os

import pytest

from benchmark_scripts import BENCHMARKS
from benchmark_scripts import load as _load

attention = _load("attention")
common = attention.common


def test_measure_tiny_length_gives_every_configuration_and_a_table():
    results = {16: attention.measure(16, reps=1, memory_reps=1, min_sample_s=0.0)}
    assert set(results[16]) == set(attention.CONFIGS)
    for config, result in results[16].items():
        assert set(result) == {"time_s", "memory_bytes", "memory_min", "memory_max"}, config
        assert result["time_s"] > 0, config
        assert 0 < result["memory_min"] <= result["memory_bytes"] <= result["memory_max"], config
    table = attention.format_table(results).splitlines()
    assert len(table) == 2 + len(attention.CONFIGS)
    assert all(line.count("|") == 8 for line in table)
    standard = [cell.strip() for cell in table[2].split("|")]
    assert standard[3] == "standard (keras MHA)" and standard[5] == standard[7] == "1.00x"
    verdict = attention.verdict(results)
    assert verdict.startswith("Targets (issue 3) at n = 16")
    assert verdict.count("\n- ") == 3 and "not measured" not in verdict


def test_verdict_uses_the_estimate_of_a_skipped_naive_run():
    measured = {"time_s": 1.0, "memory_bytes": 100 * attention.MIB, "memory_min": 0, "memory_max": 0}
    skipped = attention._naive_skipped(2048, "test")  # pylint: disable=protected-access
    results = {2048: {"standard": measured, "relative_per_head": dict(measured, memory_bytes=130 * attention.MIB),
                      "relative_shared": measured, "naive": skipped}}
    verdict = attention.verdict(results).splitlines()
    assert verdict[1].endswith("1.30x, MISSED") and verdict[2].endswith("1.00x, met")
    assert "(estimate, not measured), met" in verdict[3]
    estimate = attention.naive_estimate_bytes(2048) / attention.GIB
    assert f"not measured: test; estimated ~{estimate:.1f} GiB" in attention.format_table(results)


def test_naive_layer_matches_ours():
    attention.check_naive_matches()


def test_naive_check_catches_reversed_relative_positions(monkeypatch):
    clipped = attention.relative_labels
    monkeypatch.setattr(attention, "relative_labels", lambda n, k: 2 * k - clipped(n, k))
    with pytest.raises(AssertionError, match="differ in output"):
        attention.check_naive_matches()


def test_replace_section_replaces_in_place_and_appends(tmp_path, monkeypatch):
    monkeypatch.setattr(common, "code_version", lambda: "abc1234")
    path = tmp_path / "benchmark_runs.md"
    path.write_text("# Title\n\n<!-- BEGIN a -->\nold\n<!-- END a -->\n\nafter\n")
    common.replace_section("a", "new", path=str(path))
    common.replace_section("b", "second", path=str(path))
    assert path.read_text() == ("# Title\n\n<!-- BEGIN a -->\nnew\n\nRan on commit abc1234.\n<!-- END a -->\n\n"
                                "after\n\n<!-- BEGIN b -->\nsecond\n\nRan on commit abc1234.\n<!-- END b -->\n")


def test_write_goes_to_the_studies_run_log_not_the_report():
    """The report is edited by hand (tests/test_report.py); a --write appended a generated section to it."""
    assert common.RUN_LOG == os.path.join(common.REPO, "docs", "studies", "benchmark_runs.md")
    with open(common.RUN_LOG, encoding="utf-8") as f:
        assert f.read().startswith("# Benchmark runs\n")


def _git(repo, *args):
    import subprocess  # pylint: disable=import-outside-toplevel

    return subprocess.run(["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.com",
                           "-c", "commit.gpgsign=false", *args], check=True, capture_output=True, text=True).stdout


@pytest.fixture(name="checkout")
def _checkout(tmp_path, monkeypatch):
    """A tiny git checkout standing in for the repository: code, a results file, a study, all committed."""
    repo = tmp_path / "repo"
    for name, text in {"t2t_relpos/layer.py": "x = 1\n", "hparams/sets.gin": "a = 1\n",
                       "benchmarks/results/b.json": "{}\n", "benchmarks/README.md": "# B\n",
                       "docs/studies/benchmark_runs.md": "# Benchmark runs\n"}.items():
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        (repo / name).write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "first")
    monkeypatch.setattr(common, "REPO", str(repo))
    monkeypatch.setattr(common, "RUN_LOG", str(repo / "docs" / "studies" / "benchmark_runs.md"))
    monkeypatch.setattr(common, "RESULTS", str(repo / "benchmarks" / "results"))
    return repo


def test_write_and_record_refuse_uncommitted_code(checkout, capsys):
    """A figure names the commit its code ran on: once the log said "<sha> + uncommitted changes", which names none."""
    head = _git(checkout, "rev-parse", "--short", "HEAD").strip()
    # What the scripts write, and pages about the results, are not code.
    (checkout / "benchmarks" / "results" / "b.json").write_text('{"rows": []}\n')
    (checkout / "benchmarks" / "README.md").write_text("# B, edited\n")
    (checkout / "benchmarks" / "plot.png").write_text("png")
    assert common.code_version() == head
    common.replace_section("a", "the table")
    assert f"the table\n\nRan on commit {head}.\n" in (checkout / "docs" / "studies" / "benchmark_runs.md").read_text()
    common.record("b", [{"x": 1}])
    capsys.readouterr()

    for change in (lambda: (checkout / "t2t_relpos" / "layer.py").write_text("x = 2\n"),  # Changed.
                   lambda: (checkout / "hparams" / "new.gin").write_text("b = 2\n")):  # New, not yet added.
        _git(checkout, "checkout", "-q", "--", "t2t_relpos")
        for leftover in (checkout / "hparams").glob("new.gin"):
            leftover.unlink()
        change()
        assert common.code_version() == head + " + uncommitted changes"
        log, results = (checkout / "docs" / "studies" / "benchmark_runs.md").read_text(), common.read_results("b")
        for write in (lambda: common.replace_section("a", "other"), lambda: common.record("b", [{"x": 2}]),
                      lambda: common.refuse_uncommitted_writes(argparse.Namespace(write=True, record=False))):
            with pytest.raises(SystemExit) as refused:
                write()
            err = capsys.readouterr().err
            assert refused.value.code == 2 and err.startswith("error: --") and err.count("\n") == 1, err
            assert "uncommitted changes (" in err and str(checkout) not in err
        assert (checkout / "docs" / "studies" / "benchmark_runs.md").read_text() == log
        assert common.read_results("b") == results
    # Measuring without --write or --record, and writing outside the repository (a test's files), still run.
    common.refuse_uncommitted_writes(argparse.Namespace(write=False, record=False))
    outside = checkout.parent / "elsewhere.md"
    common.replace_section("a", "t", path=str(outside))
    assert "+ uncommitted changes" in outside.read_text()


def test_a_script_refuses_write_before_it_measures(monkeypatch, capsys):
    monkeypatch.setattr(common, "code_version", lambda: "abc1234 + uncommitted changes")
    monkeypatch.setattr(common, "code_changes", lambda: ["t2t_relpos/layer.py"])
    monkeypatch.setattr(common, "run_worker", lambda *a, **k: pytest.fail("measured before refusing"))
    with pytest.raises(SystemExit) as refused:
        attention.main(["--lengths", "16", "--write"])
    assert refused.value.code == 2
    assert capsys.readouterr().err == (
        "error: --write refused: the code has uncommitted changes (t2t_relpos/layer.py); commit them first, so that "
        "docs/studies/benchmark_runs.md names the commit its figures ran on (without --write a run measures and "
        "prints only)\n")


def test_the_command_line_shows_paths_inside_the_repository_relative_to_it(monkeypatch):
    monkeypatch.setattr(common.sys, "executable", os.path.join(common.REPO, ".venv", "bin", "python"))
    inside = os.path.join(common.REPO, "data")
    monkeypatch.setattr(common.sys, "argv", [os.path.join(common.REPO, "benchmarks", "babi.py"), "train",
                                             "--work_dir", os.path.join(common.REPO, "benchmarks", "runs", "b"),
                                             f"--data_dir={inside}", "--out", "/elsewhere/x"])
    assert common.command_line() == (".venv/bin/python benchmarks/babi.py train --work_dir benchmarks/runs/b "
                                     "--data_dir=data --out /elsewhere/x")
    assert common.shown_path("runs/x") == "runs/x"


_STOPPED_SCRIPT = '''
import concurrent.futures, sys
sys.path.insert(0, sys.argv[1])
import common
common.stop_tools_on_termination()
TOOL = """
import os, pathlib, signal, sys, time
here = pathlib.Path(sys.argv[1])
def stop(signum, frame):
    time.sleep(0.5)  # A trainer saving its checkpoint.
    (here / "stopped").write_text(str(signum))
    sys.exit(1)
signal.signal(signal.SIGTERM, stop)
(here / sys.argv[2]).write_text(str(os.getpid()))
time.sleep(120)
"""
with concurrent.futures.ThreadPoolExecutor(1) as pool:
    futures = [pool.submit(common.run_python, "-c", TOOL, sys.argv[2], name, log=sys.argv[2] + "/log")
               for name in ("first", "second")]
    futures[0].result()
'''


def test_a_terminated_script_stops_its_tools_and_starts_no_more(tmp_path):
    """SIGTERM to a benchmark script (not to its process group): the tool running gets it and the script waits for
    it to stop, the queued one never starts, status 143. Before, the script died alone and its trainers trained on,
    holding their run directories' locks against the same command run again."""
    import signal  # pylint: disable=import-outside-toplevel
    import subprocess  # pylint: disable=import-outside-toplevel
    import sys  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    script = tmp_path / "script.py"
    script.write_text(_STOPPED_SCRIPT)
    parent = subprocess.Popen([sys.executable, str(script), BENCHMARKS, str(tmp_path)])
    deadline = time.monotonic() + 60
    while not (tmp_path / "first").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert (tmp_path / "first").exists()
    parent.send_signal(signal.SIGTERM)
    assert parent.wait(timeout=60) == 128 + signal.SIGTERM
    assert (tmp_path / "stopped").read_text() == str(int(signal.SIGTERM))  # Stopped before the script ended.
    assert not (tmp_path / "second").exists()
    with pytest.raises(ProcessLookupError):
        os.kill(int((tmp_path / "first").read_text()), 0)


decoding = _load("decoding")


def test_decoding_measure_tiny_length_cached_equals_uncached(tmp_path, monkeypatch):
    # measure() itself raises if greedy cached, uncached and search.greedy_full_prefix disagree.
    # The one-buffer path (caches of all the tokens from the start) must decode the same tokens as the growing one,
    # whose caches grow once on the way (at 32 positions). One layer a side: what is checked is the benchmark's
    # machinery and the paths' agreement, and the six searches trace (and the eager baseline runs) in half the time.
    hparams_set, overrides, description = decoding.MODELS["rel64"]
    monkeypatch.setitem(decoding.MODELS, "rel64", (hparams_set, dict(overrides, num_encoder_layers=1,
                                                                      num_decoder_layers=1), description))
    result = decoding.measure("rel64", lengths=(34,), paths=("cached", "one_buffer", "uncached"), reps=1,
                              min_sample_s=0.0)
    assert set(result) == {"model", "description", "parameters", "times", "cpu_times", "agreement", "ponder_steps"}
    assert result["parameters"] > 0 and result["ponder_steps"] is None
    assert set(result["times"]) == {34} and set(result["times"][34]) == set(decoding.SEARCHES)
    for search_name, by_path in result["times"][34].items():
        assert set(by_path) == {"cached", "one_buffer", "uncached"}, search_name
        assert all(seconds > 0 for seconds in by_path.values()), search_name
    assert result["agreement"][34] == {"greedy": 1.0, "beam": 1.0}
    table = decoding.format_table({"rel64": result}).splitlines()
    assert len(table) == 2 + len(decoding.SEARCHES)
    assert all(line.count("|") == 14 for line in table)
    assert "not measured" in decoding.verdict({"rel64": result})  # No run at TARGET_LENGTH tokens.
    decoding.plot({"rel64": result}, str(tmp_path / "decoding.png"))
    assert os.listdir(tmp_path) == ["decoding.png"]


def test_decoding_reorder_cost_times_the_beam_search_with_and_without_its_cache_reorder():
    from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

    with decoding.without_reorder():
        caches = {"key": object()}
        assert search._reorder_caches(caches, None) is caches  # pylint: disable=protected-access
    result = decoding.measure_reorder_cost("rel64", lengths=(3, 2, 5), reps=1, min_sample_s=0.0)
    assert set(result["ms_per_step"]) == {"wall", "cpu"}
    for by_variant in result["ms_per_step"].values():
        assert set(by_variant) == {"reorder", "no_reorder"}
        assert all(set(ms) == {2, 5} and min(ms.values()) > 0 for ms in by_variant.values())
    table = decoding.format_reorder_cost([result, {"model": "ut64", "error": "killed"}]).splitlines()
    assert len(table) == 2 + 2 + 1 and table[2].startswith("| rel64 ") and table[2].count("x)") == 2
    assert "error: killed" in table[-1]


def test_decoding_adaptive_universal_transformer_cached_equals_uncached_and_reports_ponder_steps():
    result = decoding.measure("aut64", lengths=(3,), paths=("cached", "uncached"), reps=1, min_sample_s=0.0)
    assert result["agreement"][3] == {"greedy": 1.0, "beam": 1.0}
    ponder = result["ponder_steps"]
    # ACT: at least one step and at most act_max_steps (4) per position; N + R is never a whole number here.
    assert set(ponder) == {"encoder", "decoder"} and all(1.0 < v <= 4.0 for v in ponder.values())
    line = decoding.format_ponder({"aut64": result, "rel64": {"model": "rel64", "ponder_steps": None}})
    assert line.count("`aut64` encoder") == 1 and "rel64" not in line


def test_decoding_output_check_catches_disagreement_and_early_stops():
    import numpy as np  # pylint: disable=import-outside-toplevel

    ids = np.full((2, 3), 5)
    assert decoding._check_outputs(  # pylint: disable=protected-access
        {"greedy": {"cached": ids, "uncached": ids}, "beam": {"cached": ids[:, None], "uncached": ids[:, None]}},
        3) == {"greedy": 1.0, "beam": 1.0}
    other = ids.copy()
    other[0, 2] = 6
    with pytest.raises(AssertionError, match="greedy paths disagree"):
        decoding._check_outputs({"greedy": {"cached": ids, "uncached": other}}, 3)  # pylint: disable=protected-access
    assert decoding._check_outputs(  # pylint: disable=protected-access
        {"beam": {"cached": ids, "uncached": other}}, 3) == {"beam": 5 / 6}
    other[1, 1] = decoding.EOS_ID
    with pytest.raises(AssertionError, match="not 3 real tokens"):
        decoding._check_outputs({"greedy": {"cached": ids, "uncached": other}}, 3)  # pylint: disable=protected-access


trace_cost = _load("trace_cost")


def test_trace_cost_counts_a_layers_graph_ops_and_times_fresh_traces(capsys):
    fn, signature = trace_cost.parts(8, ["attention"])["attention"]
    ops, consts, seconds = trace_cost.measure(fn, signature, reps=2)
    assert 0 < consts < ops and len(seconds) == 2 and min(seconds) > 0
    assert trace_cost.main(["--parts", "attention", "--reps", "1", "--hidden_size", "8"]) == 0
    row = capsys.readouterr().out.splitlines()[-1]
    assert row.startswith(f"| attention | {ops} | {consts} | ")  # The same graph: the counts do not vary.
    ops, consts, seconds = trace_cost.measure_pipeline(reps=1)
    assert 0 < consts < ops and len(seconds) == 1
    assert trace_cost.main(["--parts", "pipeline", "--reps", "1"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].startswith(f"| pipeline | {ops} | {consts} | ")
    with pytest.raises(SystemExit, match="2"):
        trace_cost.main(["--parts", "attention,nothing"])
    assert "error: parts must be among" in capsys.readouterr().err
