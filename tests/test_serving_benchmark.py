"""benchmarks/serving.py without training: it skips cleanly without the data, and reads speed and BLEU right."""

import importlib.util
import os
import subprocess
import sys

_PATH = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "benchmarks", "serving.py")
_SPEC = importlib.util.spec_from_file_location("benchmark_serving", _PATH)
bench = importlib.util.module_from_spec(_SPEC)
sys.path.insert(0, os.path.dirname(_PATH))
_SPEC.loader.exec_module(bench)


def test_skips_cleanly_without_the_data(tmp_path):
    result = subprocess.run([sys.executable, _PATH, f"--multi30k={tmp_path}", f"--work_dir={tmp_path / 'w'}"],
                            capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr
    assert "skipped" in result.stdout and "test_2016_flickr.en.gz" in result.stdout
    assert not os.path.exists(tmp_path / "w")


def test_table_gives_sentences_per_second_of_the_median_pass_and_the_range():
    seconds = {"ours, graph": [2.0, 4.0, 3.0], "CTranslate2 int8": [0.5, 1.0, 0.4]}
    table = bench.format_table(seconds, {"ours, graph": 30.0, "CTranslate2 int8": 29.5}, count=100)
    rows = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]] for line in table.splitlines()[2:]}
    assert rows["ours, graph"] == ["33.3", "25.0-50.0", "1.00x", "30.00"]
    assert rows["CTranslate2 int8"] == ["200.0", "100.0-250.0", "6.00x", "29.50"]
