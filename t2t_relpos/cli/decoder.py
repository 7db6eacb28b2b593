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
"""

import sys

from absl import flags

from t2t_relpos.cli import common

FLAGS = flags.FLAGS
_PROG = "t2t-relpos-decoder"


def define_flags():
    flags.DEFINE_string("output_dir", None, "The trainer's --output_dir.")
    flags.DEFINE_string("data_dir", None, "The problem's data directory (vocabularies), if it has one.")
    flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (default: the newest in --output_dir).")
    flags.DEFINE_string("decode_hparams", "", "Overrides of beam_size, alpha, batch_size, extra_length, "
                        "return_beams, temperature, top_k, max_input_length, num_samples (with --decode_split: "
                        "only the first N examples), e.g. 'beam_size=4,alpha=0.6'.")
    flags.DEFINE_string("decode_from_file", None, "Source text, one sentence per line ('-': stdin).")
    flags.DEFINE_string("decode_to_file", "-", "Where outputs go, one per line ('-': stdout), written whole or "
                        "not at all. With return_beams, each line holds 'hypothesis<TAB>score' pairs, best "
                        "first: up to beam_size, fewer where fewer distinct outputs exist.")
    flags.DEFINE_string("decode_reference", None, "Reference translations, line-aligned with the source: "
                        "reports sacreBLEU (text problems) or char/sequence accuracy (algorithmic problems) on "
                        "stderr.")
    flags.DEFINE_enum("decode_split", None, ["eval", "test"], "Decode the problem's own split; its scores go to "
                      "stderr.")
    flags.DEFINE_boolean("decode_interactive", False, "Type sentences, get translations.")
    flags.DEFINE_boolean("jit_compile", False, "Compile the search with XLA.")
    flags.DEFINE_string("decode_ponder_plot", None, "Adaptive Universal Transformer: write a PNG heatmap of the "
                        "ponder time of each source position for the first 16 decoded sources.")
    common.define_usr_dir_flag()


def decode_hparams(hparams):
    """Decoding settings: the run's beam_size/alpha/extra_length, then --decode_hparams, checked."""
    return decode_settings(hparams, FLAGS.decode_hparams, FLAGS.decode_split)


def decode_settings(hparams, overrides, split=None):
    """Decoding settings: `hparams`' beam_size/alpha/extra_length, then `overrides` (as --decode_hparams),
    checked; num_samples only with a `split` (as --decode_split)."""
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors
    from t2t_relpos.decoding import translator
    from t2t_relpos.hparams import HParams

    # Inputs as long as the model was trained on are not truncated (bAbI stories run to 2701 tokens).
    settings = HParams(beam_size=hparams.beam_size, alpha=hparams.alpha, extra_length=hparams.extra_length,
                       batch_size=32, return_beams=False, temperature=0.0, top_k=0,
                       max_input_length=max(1024, hparams.max_length), num_samples=0)
    settings.parse(overrides, "--decode_hparams")
    translator.check_settings(**{name: settings.get(name) for name in (
        "beam_size", "alpha", "extra_length", "batch_size", "max_input_length", "temperature", "top_k")})
    if settings.num_samples < 0:
        raise errors.HParamsError(f"decoding setting 'num_samples' must be >= 0, got {settings.num_samples}")
    if settings.num_samples and not split:  # 0 (the default) is all: only a user's N reaches here.
        raise errors.HParamsError(f"decoding setting 'num_samples' only applies to --decode_split, got "
                                  f"num_samples={settings.num_samples}")
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
    modes = [FLAGS.decode_from_file is not None, FLAGS.decode_split is not None, FLAGS.decode_interactive]
    if sum(modes) != 1:
        raise errors.T2TRelposError("give exactly one of --decode_from_file, --decode_split, "
                                    "--decode_interactive")
    decode_io.check_paths(FLAGS.decode_from_file, FLAGS.decode_reference, FLAGS.decode_to_file,
                          FLAGS.decode_ponder_plot)
    settings = decode_hparams(runs.load_hparams(FLAGS.output_dir))
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


def run(argv=None):
    define_flags()
    common.run(main, _PROG, __doc__, [__name__, common.__name__], argv)


if __name__ == "__main__":
    run()
