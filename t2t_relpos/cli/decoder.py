r"""t2t-relpos-decoder: decode with a trained model (the run's problem, model and hparams are read from
--output_dir).

  t2t-relpos-decoder --output_dir=/tmp/reverse --decode_split=eval > decoded.txt
  t2t-relpos-decoder --output_dir=$HOME/runs/big_rel --decode_from_file=newstest2014.en \
      --decode_to_file=out.de --decode_reference=newstest2014.de \
      --decode_hparams='beam_size=4,alpha=0.6,batch_size=32'
  echo 0123456789 | t2t-relpos-decoder --output_dir=/tmp/reverse --decode_from_file=-
  t2t-relpos-decoder --output_dir=/tmp/reverse --decode_interactive

Stdout carries the outputs only, one line per input line (or per example of --decode_split), unless
--decode_to_file names a file for them; everything else goes to stderr: the checkpoint used, progress,
warnings, and the scores (BLEU with its signature, or accuracy by length or by task) of --decode_split and
--decode_reference. So `... --decode_split=test > out.de` keeps the translations in out.de and shows the
scores, and `... | head` gets translations. A --decode_to_file is written under a temporary name and renamed
when whole: an interrupted decoder leaves an earlier file there as it was.

Inputs are decoded in length-sorted batches (chunk by chunk) and written in their original order; empty
lines give empty outputs; lines longer than max_input_length tokens are truncated with a warning. The input
may be a file, a named pipe or `<(...)`, or stdin ('-').

A language model (a run whose problem has no inputs) continues prompts, one a line (an empty line starts a
document), for at most --decode_length tokens: greedily, by beam search (beam_size, alpha), or sampled
(--decode_hparams='temperature=0.8,top_k=40'). Each continuation is one line, a newline in it written as the
two characters \n. --score_file prints one line of scores of a whole text instead (perplexity, and bits per
character for a character-level problem):

  echo 'ROMEO:' | t2t-relpos-decoder --output_dir=$HOME/runs/shakespeare --data_dir=$HOME/t2t_data \
      --decode_from_file=- --decode_length=200
  t2t-relpos-decoder --output_dir=$HOME/runs/shakespeare --data_dir=$HOME/t2t_data \
      --score_file=test.txt --score_window=256 --score_stride=128
"""

import sys

from absl import flags

from t2t_relpos.cli import common, lm_decode

FLAGS = flags.FLAGS
_PROG = "t2t-relpos-decoder"


def define_flags():
    flags.DEFINE_string("output_dir", None, "The trainer's --output_dir.")
    flags.DEFINE_string("data_dir", None, "The problem's data directory (vocabularies), if it has one.")
    flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (default: the newest in --output_dir).")
    flags.DEFINE_string("decode_hparams", "", "Overrides of beam_size, alpha, batch_size, extra_length, "
                        "return_beams, temperature, top_k, max_input_length, num_samples (with --decode_split: "
                        "only the first N examples), e.g. 'beam_size=4,alpha=0.6'. A language model decodes "
                        "greedily unless beam_size or temperature is given (not the run's beam_size), and reads "
                        "neither extra_length (--decode_length instead) nor return_beams; --score_file reads "
                        "batch_size (windows at a time) only.")
    flags.DEFINE_string("decode_from_file", None, "Source text, one sentence per line ('-': stdin). A language "
                        "model: prompts, one a line (an empty line starts a document), read with the escapes of "
                        "its output (\\n a newline, \\\\ a backslash).")
    flags.DEFINE_string("decode_to_file", "-", "Where outputs go, one per line ('-': stdout), written whole or "
                        "not at all. With return_beams, each line holds 'hypothesis<TAB>score' pairs, best "
                        "first: up to beam_size, fewer where fewer distinct outputs exist. A language model's "
                        "continuations: a newline in one is written as the two characters \\n (a carriage "
                        "return \\r, a backslash \\\\).")
    flags.DEFINE_string("decode_reference", None, "Reference translations, line-aligned with the source: "
                        "reports sacreBLEU (text problems) or char/sequence accuracy (algorithmic problems) on "
                        "stderr.")
    flags.DEFINE_enum("decode_split", None, ["eval", "test"], "Decode the problem's own split; its scores go to "
                      "stderr.")
    flags.DEFINE_boolean("decode_interactive", False, "Type sentences, get translations (a language model: "
                         "prompts, continuations).")
    flags.DEFINE_boolean("jit_compile", False, "Compile the search with XLA.")
    flags.DEFINE_integer("decode_length", lm_decode.DEFAULT_DECODE_LENGTH, "A language model (a problem without "
                         "inputs): the most tokens generated after each prompt; fewer where the model ends the "
                         "document (EOS). Not tensor2tensor's decode_length, which was a length beyond the input's; "
                         "a model with inputs has extra_length in --decode_hparams for that.")
    flags.DEFINE_string("score_file", None, "A language model: score this text ('-': stdin; .gz is read) and "
                        "print one line on stdout: tokens=N nll=... log_perplexity=... perplexity=... (and "
                        "bits_per_character=... for a character-level problem). The text is packed as the "
                        "problem packs its own: documents separated by blank lines, each followed by EOS (the "
                        "tokens include the EOSes).")
    flags.DEFINE_integer("score_window", None, "--score_file: tokens the model reads at a time (default: the run's "
                         "max_length, the windows it trained on).")
    flags.DEFINE_integer("score_stride", None, "--score_file: tokens between the starts of two windows, at most "
                         "--score_window (default: the window, disjoint windows). Each token is scored once; with a "
                         "shorter stride, after the first window with at least window - stride tokens of context.")
    flags.DEFINE_string("decode_ponder_plot", None, "Adaptive Universal Transformer: write a PNG heatmap of the "
                        "ponder time of each source position for the first 16 decoded sources.")
    common.define_usr_dir_flag()


def decode_hparams(hparams, language_model=False):
    """Decoding settings: the run's beam_size/alpha/extra_length, then --decode_hparams, checked."""
    return decode_settings(hparams, FLAGS.decode_hparams, FLAGS.decode_split, language_model,
                           FLAGS.score_file is not None)


def decode_settings(hparams, overrides, split=None, language_model=False, scoring=False):
    """Decoding settings: `hparams`' beam_size/alpha/extra_length, then `overrides` (as --decode_hparams),
    checked; num_samples only with a `split` (as --decode_split). A `language_model` searches greedily unless
    `overrides` say otherwise (a set's beam_size is for translation) and refuses the settings it does not read
    (`lm_decode.check_settings`; with `scoring`, all but batch_size)."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors
    from t2t_relpos.decoding import translator
    from t2t_relpos.hparams import HParams

    # Inputs as long as the model was trained on are not truncated (bAbI stories run to 2701 tokens).
    settings = HParams(beam_size=1 if language_model else hparams.beam_size, alpha=hparams.alpha,
                       extra_length=hparams.extra_length, batch_size=32, return_beams=False, temperature=0.0,
                       top_k=0, max_input_length=max(1024, hparams.max_length), num_samples=0)
    defaults = HParams(**settings.values())
    settings.parse(overrides, "--decode_hparams")
    translator.check_settings(**{name: settings.get(name) for name in (
        "beam_size", "alpha", "extra_length", "batch_size", "max_input_length", "temperature", "top_k")})
    if settings.num_samples < 0:
        raise errors.HParamsError(f"decoding setting 'num_samples' must be >= 0, got {settings.num_samples}")
    if settings.num_samples and not split:  # 0 (the default) is all: only a user's N reaches here.
        raise errors.HParamsError(f"decoding setting 'num_samples' only applies to --decode_split, got "
                                  f"num_samples={settings.num_samples}")
    if language_model:
        lm_decode.check_settings(settings, defaults, scoring)
    return settings


def _averaging_note(record, hparams):
    """Whether the checkpoint is an average, or a reminder when the set expects one and it is not."""
    averaged = record.get("averaged_checkpoints")
    if averaged:
        return f", the average of {len(averaged)} checkpoints ({averaged[0]} .. {averaged[-1]})"
    if hparams.num_averaged_checkpoints > 1:
        return (f", one checkpoint: {hparams.hparams_set} is meant to be decoded from the average of its last "
                f"{hparams.num_averaged_checkpoints} (t2t-relpos-avg-checkpoints --output_dir={FLAGS.output_dir})")
    return ""


def main(argv):  # pylint: disable=unused-argument
    common.import_tensorflow()
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors
    from t2t_relpos.cli import decode_io
    from t2t_relpos.decoding import translator as translator_lib
    from t2t_relpos.training import runs

    common.import_usr_dir()
    if not FLAGS.output_dir:
        raise errors.T2TRelposError("--output_dir is required")
    modes = [FLAGS.decode_from_file is not None, FLAGS.decode_split is not None, FLAGS.decode_interactive,
             FLAGS.score_file is not None]
    if sum(modes) != 1:
        raise errors.T2TRelposError("give exactly one of --decode_from_file, --decode_split, "
                                    "--decode_interactive, --score_file")
    run_hparams = runs.load_hparams(FLAGS.output_dir)
    problem = runs.load_problem(FLAGS.output_dir)
    language_model = not problem.has_inputs
    lm_decode.check_flags(FLAGS, problem, language_model)
    decode_io.check_paths(FLAGS.decode_from_file, FLAGS.decode_reference, FLAGS.decode_to_file,
                          FLAGS.decode_ponder_plot, FLAGS.score_file)
    settings = decode_hparams(run_hparams, language_model)
    if language_model:
        return _language_model(settings, run_hparams)
    sources = references = None
    if FLAGS.decode_from_file is not None:  # Read (and checked) before the model is loaded.
        sources = decode_io.read_lines(FLAGS.decode_from_file)
        references = (decode_io.read_lines(FLAGS.decode_reference, "--decode_reference")
                      if FLAGS.decode_reference else None)
        if references is not None and len(references) != len(sources):
            raise errors.DataError(f"--decode_reference has {len(references)} lines but the source has "
                                   f"{len(sources)}")
    model, problem, hparams, path = runs.load(FLAGS.output_dir, FLAGS.checkpoint_path, FLAGS.data_dir)
    translator = translator_lib.Translator(
        model, problem, FLAGS.data_dir, beam_size=settings.beam_size, alpha=settings.alpha,
        extra_length=settings.extra_length, batch_size=settings.batch_size,
        max_input_length=settings.max_input_length, temperature=settings.temperature, top_k=settings.top_k,
        jit_compile=FLAGS.jit_compile)
    print(f"Decoding with {path}{_averaging_note(runs.load_record(FLAGS.output_dir), hparams)} "
          f"(beam_size={settings.beam_size}, alpha={settings.alpha})", file=sys.stderr, flush=True)

    if FLAGS.decode_interactive:
        return decode_io.interactive(translator, settings.return_beams)
    if FLAGS.decode_split:
        sources, references = decode_io.split_text(problem, FLAGS.decode_split, FLAGS.data_dir,
                                                   settings.num_samples)
    if FLAGS.decode_ponder_plot and not hasattr(model, "ponder_times"):
        raise errors.T2TRelposError(f"--decode_ponder_plot needs a Universal Transformer; this run's model is "
                                    f"{type(model).__name__}")
    hypotheses = decode_io.decode_to_file(translator, sources, FLAGS.decode_to_file, settings.return_beams)
    if FLAGS.decode_ponder_plot:
        path = decode_io.write_ponder_plot(translator, sources, FLAGS.decode_ponder_plot)
        print(f"Wrote the ponder-time heatmap to {path}", file=sys.stderr, flush=True)
    if references is not None:
        from t2t_relpos.decoding import scoring

        groups = None
        if FLAGS.decode_split and hasattr(problem, "example_groups"):
            groups = problem.example_groups(FLAGS.decode_split, FLAGS.data_dir)[:len(references)]
        for line in scoring.report(problem.decode_metric, hypotheses, references, groups):
            print(line, file=sys.stderr, flush=True)  # Diagnostics: stdout carries the outputs only.
    return 0


def _language_model(settings, run_hparams):
    """The decoder on a language model's run: --score_file, or continuing prompts (see the module docstring)."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos.cli import decode_io
    from t2t_relpos.training import runs

    prompts = ids = None
    if FLAGS.score_file is not None:  # Read (and checked) before the model is loaded.
        window, stride = lm_decode.score_window(FLAGS, run_hparams)
        problem = runs.load_problem(FLAGS.output_dir)
        ids = lm_decode.text_ids(problem, problem.feature_encoders(FLAGS.data_dir)["targets"], FLAGS.score_file)
    elif FLAGS.decode_from_file is not None:
        prompts = [lm_decode.unescape(line) for line in decode_io.read_lines(FLAGS.decode_from_file)]
    model, problem, hparams, path = runs.load(FLAGS.output_dir, FLAGS.checkpoint_path, FLAGS.data_dir)
    note = _averaging_note(runs.load_record(FLAGS.output_dir), hparams)
    if ids is not None:
        what = "stdin" if FLAGS.score_file == "-" else FLAGS.score_file
        print(f"Scoring {what} ({len(ids):,} tokens) with {path}{note} in windows of {window} tokens "
              f"every {stride}", file=sys.stderr, flush=True)
        if window > hparams.max_length:
            print(f"note: the model was trained on windows of {hparams.max_length} tokens (max_length), shorter than "
                  f"--score_window={window}", file=sys.stderr, flush=True)
        result = lm_decode.score(model, ids, window, stride, settings.batch_size, FLAGS.jit_compile)
        print(lm_decode.summary(result, problem.characters), flush=True)
        return 0
    continuer = lm_decode.Continuer(
        model, problem, FLAGS.data_dir, decode_length=FLAGS.decode_length, beam_size=settings.beam_size,
        alpha=settings.alpha, batch_size=settings.batch_size, max_input_length=settings.max_input_length,
        temperature=settings.temperature, top_k=settings.top_k, jit_compile=FLAGS.jit_compile)
    search = (f"temperature={settings.temperature}, top_k={settings.top_k}" if settings.temperature > 0 else
              f"beam_size={settings.beam_size}, alpha={settings.alpha}" if settings.beam_size > 1 else "greedy")
    print(f"Continuing prompts with {path}{note} ({search}, at most {FLAGS.decode_length} tokens)",
          file=sys.stderr, flush=True)
    if FLAGS.decode_interactive:
        return decode_io.interactive(continuer, escaped=True)
    decode_io.continue_to_file(continuer, prompts, FLAGS.decode_to_file)
    return 0


def run(argv=None):
    define_flags()
    common.run(main, _PROG, __doc__, [__name__, common.__name__], argv)


if __name__ == "__main__":
    run()
