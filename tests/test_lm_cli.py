"""A language model through the tools: a tiny character-level run (trained, with its SavedModel, by the trainer)
continues prompts in the decoder and in the export as `generation.generate` does, scores a text as
`lm_scoring.score_ids` does, and refuses flags that make no sense for it in one line."""

import json
import os

import numpy as np
import pytest

from t2t_relpos.cli import lm_decode
from test_cli import assert_usage_error, call_tool, run_tool

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")

# Documents of a few lines, separated by blank lines (several, or of white space only, count as one).
DOCUMENTS = ["the cat sat on the mat\na dog ran far away", "the dog sat on the log\na cat ran home"]
PROMPTS = ["the", "", "a dog", "the c", r"on the mat\na"]  # An empty prompt starts a document; \n a newline.
LENGTH = 12


@pytest.fixture(scope="module")
def lm_run(tmp_path_factory):
    """(run directory, data directory) of `languagemodel_local_characters` trained 40 steps on DOCUMENTS, with
    the trainer's export (greedy, `DEFAULT_DECODE_LENGTH` tokens) at export/40."""
    root = tmp_path_factory.mktemp("lm")
    raw = root / "raw"
    raw.mkdir()
    (raw / "train.txt").write_text("\n\n  \n".join(DOCUMENTS * 20) + "\n", encoding="utf-8")
    (raw / "dev.txt").write_text("\n\n".join(DOCUMENTS) + "\n", encoding="utf-8")
    run, data = root / "run", root / "data"
    result = run_tool("t2t-relpos-trainer", "--problem=languagemodel_local_characters",
                      "--hparams_set=transformer_lm_cpu_rel",
                      "--hparams=hidden_size=32,filter_size=64,num_heads=2,num_decoder_layers=1,max_length=32,"
                      "batch_size=256,learning_rate_warmup_steps=20,learning_rate=1.0,max_relative_position=8",
                      f"--output_dir={run}", f"--data_dir={data}", f"--tmp_dir={raw}", "--generate_data",
                      "--train_steps=40", "--schedule=train", "--export", timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "Exported a SavedModel" in result.stdout, result.stdout
    return str(run), str(data)


@pytest.fixture(scope="module")
def loaded(lm_run):
    """(model, problem, targets encoder) of the run, loaded in this process."""
    from t2t_relpos.training import runs  # pylint: disable=import-outside-toplevel

    model, problem, _, _ = runs.load(lm_run[0], None, lm_run[1])
    return model, problem, problem.feature_encoders(lm_run[1])["targets"]


def decode(lm_run, *args, stdin=None):
    return call_tool("t2t-relpos-decoder", f"--output_dir={lm_run[0]}", f"--data_dir={lm_run[1]}", *args,
                     stdin=stdin)


def as_text(encoder, prompt, continuation):
    """A continuation's text as it reads after its prompt (ids)."""
    return encoder.decode(prompt + continuation)[len(encoder.decode(prompt)):]


def expected_continuations(loaded, prompts, max_new_tokens, **settings):
    """`generation.generate`'s continuations of the text prompts, as text that follows its prompt."""
    from t2t_relpos.decoding import generation  # pylint: disable=import-outside-toplevel

    model, _, encoder = loaded
    ids = [encoder.encode(lm_decode.unescape(p)) for p in prompts]
    found = generation.generate(model, ids, max_new_tokens, **settings)
    return [as_text(encoder, p, c) for p, (c, _) in zip(ids, found)]


@pytest.fixture(scope="module")
def greedy(loaded):
    """(prompt ids, `generation.generate`'s greedy continuations of PROMPTS, `DEFAULT_DECODE_LENGTH` tokens at
    most): the first N tokens of each are its greedy continuation of N tokens."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    from t2t_relpos.decoding import generation  # pylint: disable=import-outside-toplevel

    model, _, encoder = loaded
    ids = [encoder.encode(lm_decode.unescape(p)) for p in PROMPTS]
    compiled = tf.function(generation.continue_prompts, reduce_retracing=True, autograph=False)
    found = generation.generate(model, ids, lm_decode.DEFAULT_DECODE_LENGTH, search_fn=compiled)
    return ids, [continuation for continuation, _ in found]


def test_escapes_round_trip():
    text = "a\nb\\n\r\\c\td"
    assert "\n" not in lm_decode.escape(text) and "\r" not in lm_decode.escape(text)
    assert lm_decode.unescape(lm_decode.escape(text)) == text
    assert lm_decode.unescape(r"C:\temp\x") == r"C:\temp\x"  # Other backslashes stay.


def test_prompts_file_gives_greedy_continuations_one_a_line(lm_run, loaded, greedy, tmp_path):
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("\n".join(PROMPTS) + "\n", encoding="utf-8")
    out = tmp_path / "out.txt"
    result = decode(lm_run, f"--decode_from_file={prompts}", f"--decode_to_file={out}", f"--decode_length={LENGTH}")
    assert result.returncode == 0, result.stderr
    assert not result.stdout and "greedy, at most 12 tokens" in result.stderr
    lines = out.read_text(encoding="utf-8").split("\n")
    assert len(lines) == len(PROMPTS) + 1 and lines[-1] == ""
    expected = [as_text(loaded[2], p, c[:LENGTH]) for p, c in zip(*greedy)]
    assert lines[:-1] == [lm_decode.escape(text) for text in expected]
    assert all(len(lm_decode.unescape(line)) <= LENGTH for line in lines)
    assert any(lines[:-1]), lines  # A trained model says something.


def test_beam_search_and_sampling(lm_run, loaded):
    beam = decode(lm_run, "--decode_from_file=-", "--decode_length=6", "--decode_hparams=beam_size=2,alpha=0.6",
                  stdin=PROMPTS[2] + "\n")
    assert beam.returncode == 0, beam.stderr
    assert "beam_size=2, alpha=0.6" in beam.stderr
    assert beam.stdout == lm_decode.escape(expected_continuations(loaded, PROMPTS[2:3], 6, beam_size=2,
                                                                  alpha=0.6)[0]) + "\n"
    sampled = decode(lm_run, "--decode_from_file=-", "--decode_length=6", "--decode_hparams=temperature=1.0,top_k=3",
                     stdin="\n".join(PROMPTS[:3]) + "\n")
    assert sampled.returncode == 0, sampled.stderr
    lines = sampled.stdout.split("\n")
    assert len(lines) == 4 and all(len(lm_decode.unescape(line)) <= 6 for line in lines)


def test_score_file_prints_one_line_of_score_ids(lm_run, loaded, tmp_path):
    """The text is packed as the problem packs its own: dev.txt scored through --score_file is the eval split
    datagen wrote, token for token."""
    from t2t_relpos.decoding import lm_scoring  # pylint: disable=import-outside-toplevel

    model, problem, _ = loaded
    text = tmp_path / "text.txt"
    text.write_text("\n\n".join(DOCUMENTS) + "\n", encoding="utf-8")
    result = decode(lm_run, f"--score_file={text}", "--score_window=16", "--score_stride=8")
    assert result.returncode == 0, result.stderr
    assert result.stdout.count("\n") == 1, result.stdout
    scores = dict(item.split("=") for item in result.stdout.split())
    assert list(scores) == ["tokens", "nll", "log_perplexity", "perplexity", "bits_per_character"]
    ids = problem.tokens("eval", lm_run[1])
    assert int(scores["tokens"]) == len(ids) == sum(len(d) + 1 for d in DOCUMENTS)
    reference = lm_scoring.score_ids(lm_scoring.model_scorer(model), ids, 16, 8)
    assert float(scores["nll"]) == pytest.approx(reference["nll"], abs=1e-3)
    assert float(scores["log_perplexity"]) == pytest.approx(reference["log_perplexity"], abs=1e-5)
    assert float(scores["perplexity"]) == pytest.approx(reference["perplexity"], abs=1e-3)
    assert float(scores["bits_per_character"]) == pytest.approx(reference["bits_per_token"], abs=1e-5)
    # Disjoint windows of the run's max_length by default.
    default = decode(lm_run, "--score_file=-", stdin="\n\n".join(DOCUMENTS) + "\n")
    assert default.returncode == 0, default.stderr
    assert "windows of 32 tokens every 32" in default.stderr
    expected = lm_scoring.score_ids(lm_scoring.model_scorer(model), ids, 32)
    assert float(default.stdout.split()[1].split("=")[1]) == pytest.approx(expected["nll"], abs=1e-3)


@pytest.fixture(scope="module")
def run_with_inputs(lm_run, tmp_path_factory):
    """A run directory whose record names a problem with inputs (no checkpoint: the flags are refused first)."""
    directory = tmp_path_factory.mktemp("translation_run")
    with open(os.path.join(lm_run[0], "hparams.json"), encoding="utf-8") as f:
        record = json.load(f)
    record.update(problem="algorithmic_reverse_decimal40", vocabulary={})
    (directory / "hparams.json").write_text(json.dumps(record), encoding="utf-8")
    return str(directory)


@pytest.mark.parametrize("args, fragment", [
    (["--score_file=TEXT", "--score_window=4", "--score_stride=8"], "--score_stride=8 is longer than the window (4)"),
    (["--score_file=TEXT", "--score_window=0"], "--score_window must be >= 1"),
    (["--score_file=EMPTY"], "has no text to score"),
    (["--score_file=MISSING"], "does not exist"),
    (["--score_file=TEXT", "--decode_hparams=beam_size=2"], "'beam_size' does not apply to --score_file"),
    (["--score_file=TEXT", "--decode_length=5"], "--decode_length applies to continuing prompts"),
    (["--score_file=TEXT", "--decode_to_file=OUT"], "--score_file prints its one line of scores on stdout"),
    (["--decode_from_file=TEXT", "--score_stride=3"], "--score_stride applies to --score_file"),
    (["--decode_from_file=TEXT", "--decode_reference=TEXT"], "a language model's continuations have none"),
    (["--decode_from_file=TEXT", "--decode_length=0"], "--decode_length must be >= 1"),
    (["--decode_from_file=TEXT", "--decode_hparams=extra_length=3"], "'extra_length' is for models with inputs"),
    (["--decode_from_file=TEXT", "--decode_hparams=return_beams=true"], "'return_beams' is not available"),
    (["--decode_from_file=TEXT", "--decode_hparams=temperature=1.0,beam_size=2"], "needs beam_size=1"),
    (["--decode_split=eval"], "is a language model: its splits have no sources to decode"),
    (["--score_file=TEXT", "--decode_interactive"], "give exactly one of"),
    (["INPUTS", "--score_file=TEXT"], "--score_file scores a text with a language model; "
                                      "algorithmic_reverse_decimal40 has inputs"),
    (["INPUTS", "--decode_from_file=TEXT", "--decode_length=20"], "algorithmic_reverse_decimal40 has inputs"),
])
def test_bad_input_is_one_line_and_status_2(lm_run, run_with_inputs, tmp_path, args, fragment):
    paths = {"TEXT": tmp_path / "text.txt", "EMPTY": tmp_path / "empty.txt", "MISSING": tmp_path / "missing.txt",
             "OUT": tmp_path / "out.txt"}
    paths["TEXT"].write_text("the cat\n", encoding="utf-8")
    paths["EMPTY"].write_text("\n  \n", encoding="utf-8")
    args = [f"{flag}={paths.get(value, value)}" if value else flag
            for flag, _, value in (arg.partition("=") for arg in args)]
    if args[0] == "INPUTS":
        result = call_tool("t2t-relpos-decoder", f"--output_dir={run_with_inputs}", *args[1:])
    else:
        result = decode(lm_run, *args)
    assert_usage_error(result, fragment)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not result.stdout and not paths["OUT"].exists()


def test_saved_model_continues_prompts_as_generate_does(lm_run, loaded, greedy, tmp_path):
    """The trainer's export (greedy, 100 tokens) on a batch of prompts of different lengths, reloaded; and the
    export tool's, with its search from --decode_hparams and --decode_length."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    prompts = [lm_decode.unescape(p) for p in PROMPTS]
    serve = tf.saved_model.load(os.path.join(lm_run[0], "export", "40")).signatures["serving_default"]
    out = serve(tf.constant(prompts))
    outputs = [t.decode("utf-8") for t in out["outputs"].numpy().tolist()]
    assert outputs == [as_text(loaded[2], p, c) for p, c in zip(*greedy)]
    assert out["scores"].shape == (len(PROMPTS),) and np.all(out["scores"].numpy() <= 0)

    export_dir = tmp_path / "sampled"
    result = call_tool("t2t-relpos-export", f"--output_dir={lm_run[0]}", f"--data_dir={lm_run[1]}",
                       f"--export_dir={export_dir}", "--decode_length=5", "--decode_hparams=temperature=1.0,top_k=3")
    assert result.returncode == 0, result.stderr
    sample = tf.saved_model.load(str(export_dir)).signatures["serving_default"]
    texts = [t.decode("utf-8") for t in sample(tf.constant(prompts))["outputs"].numpy().tolist()]
    assert len(texts) == len(prompts) and all(len(t) <= 5 for t in texts), texts


@pytest.mark.parametrize("args, fragment", [
    (["--decode_hparams=extra_length=3"], "'extra_length' is for models with inputs"),
    (["--decode_length=0"], "--decode_length must be >= 1"),
    (["--decode_hparams=batch_size=4"], "'batch_size' is not read by a language model's SavedModel"),
    (["--export_format=ctranslate2", "--decode_length=9"], "a CTranslate2 model is given its search"),
    (["--export_format=ctranslate2"], "has no CTranslate2 export here"),
])
def test_export_refuses_settings_it_cannot_use(lm_run, tmp_path, args, fragment):
    result = call_tool("t2t-relpos-export", f"--output_dir={lm_run[0]}", f"--data_dir={lm_run[1]}",
                       f"--export_dir={tmp_path / 'x'}", *args)
    assert_usage_error(result, fragment)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "x").exists()
