"""Translation through the command-line tools: datagen, trainer --generate_data/--export, decoder with BLEU, and
the one-line error of a WMT run on a machine without the data."""

import json
import subprocess
import sys
import time

import pytest

from test_cli import assert_usage_error, call_tool, run_tool
from test_translate import make_raw

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")


def test_datagen_prepares_once(tmp_path):
    make_raw(tmp_path)
    args = ("--problem=translate_local", f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={tmp_path}")
    first = run_tool("t2t-relpos-datagen", *args)
    assert first.returncode == 0, first.stderr
    assert "translate_local: prepared in" in first.stderr and "train 150, eval 13, test 11 pairs" in first.stderr
    second = call_tool("t2t-relpos-datagen", *args)  # In this process: the first run was the process.
    assert second.returncode == 0 and "already prepared" in second.stderr


def test_wmt_without_data_fails_at_once_with_the_file_list(tmp_path):
    began = time.perf_counter()
    result = call_tool("t2t-relpos-trainer", "--problem=wmt14_ende", "--hparams_set=transformer_big_rel",
                       f"--data_dir={tmp_path / 'data'}", f"--tmp_dir={tmp_path}", f"--output_dir={tmp_path / 'run'}",
                       "--generate_data")
    assert_usage_error(result, "no WMT14 de-en data for train, eval, test", "training-parallel-europarl-v7.tgz",
                       "dev.tgz", "newstest2014.de-en.de", "--download")
    assert time.perf_counter() - began < 60  # Start-up (TensorFlow import) only: no network, no retries.


RELOAD = """
import json, sys
sys.modules["t2t_relpos"] = None  # The SavedModel must load and run without this package.
import tensorflow as tf
import tensorflow_text  # Registers the SentencePiece ops the SavedModel uses.
translate = tf.saved_model.load(sys.argv[1]).signatures["serving_default"]
out = translate(tf.constant(json.loads(sys.argv[2])))
print(json.dumps([t.decode() for t in out["outputs"].numpy().tolist()]))
"""


def test_train_decode_with_bleu_and_export(tmp_path):
    make_raw(tmp_path)
    run, data_dir = tmp_path / "run", tmp_path / "data"
    trained = run_tool("t2t-relpos-trainer", "--problem=translate_local", "--hparams_set=transformer_cpu_rel",
                       "--hparams=batch_size=256,max_length=40,beam_size=2,extra_length=8", f"--data_dir={data_dir}",
                       f"--tmp_dir={tmp_path}", f"--output_dir={run}", "--generate_data", "--train_steps=10",
                       "--checkpoint_every=10", "--eval_steps=1", "--export", timeout=400)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert "Final evaluation: accuracy" in trained.stdout and "Exported a SavedModel" in trained.stdout

    # The decoder in this process (test_cli.call_tool): the trainer above was the fresh process.
    decoded = call_tool("t2t-relpos-decoder", f"--output_dir={run}", f"--data_dir={data_dir}", "--decode_split=test",
                        f"--decode_to_file={tmp_path / 'out.txt'}", "--decode_hparams=beam_size=1")
    assert decoded.returncode == 0, decoded.stderr
    assert "BLEU = " in decoded.stderr and "tok:13a" in decoded.stderr and "tok:intl" in decoded.stderr  # Not outputs.
    assert len((tmp_path / "out.txt").read_text(encoding="utf-8").split("\n")) == 11 + 1

    no_data_dir = call_tool("t2t-relpos-decoder", f"--output_dir={run}", "--decode_split=test")
    assert_usage_error(no_data_dir, "translate_local needs --data_dir")

    texts = ["the small dog runs over the green bridge 5", "", " Größe  déjà ", "   "]
    reloaded = subprocess.run([sys.executable, "-c", RELOAD, str(run / "export" / "10"), json.dumps(texts)],
                              capture_output=True, text=True, timeout=300, check=False)
    assert reloaded.returncode == 0, reloaded.stderr
    outputs = json.loads(reloaded.stdout.strip().splitlines()[-1])
    assert len(outputs) == 4 and outputs[1] == outputs[3] == "" and all(isinstance(o, str) for o in outputs)
