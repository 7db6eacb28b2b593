r"""t2t-relpos-export: export a trained run for serving.

  t2t-relpos-export --output_dir=$HOME/runs/ende --data_dir=$HOME/t2t_data                              # SavedModel
  t2t-relpos-export --output_dir=$HOME/runs/ende --data_dir=$HOME/t2t_data --export_format=ctranslate2

saved_model (TF Serving, or tf.saved_model.load without this package): text in, text out, tokenization and
search in the graph, written to <output_dir>/export/<step>. ctranslate2: a CTranslate2 model directory with the
SentencePiece model beside it, written to <output_dir>/export_ctranslate2/<step>; Transformers with absolute or
relative positions (relation tables shared by the heads), not Universal Transformers.

The SavedModel's search is the run's (beam_size, alpha, extra_length) unless --decode_hparams says otherwise. A
language model's (a problem without inputs; saved_model only) maps prompts to continuations of at most
--decode_length tokens, greedily unless --decode_hparams gives beam_size or temperature (and top_k), e.g.
--decode_hparams='temperature=0.8,top_k=40' to sample:

  t2t-relpos-export --output_dir=$HOME/runs/shakespeare --data_dir=$HOME/t2t_data --decode_length=200
"""

import os

from absl import flags

from t2t_relpos import errors
from t2t_relpos.cli import common, lm_decode

FLAGS = flags.FLAGS
FORMATS = ("saved_model", "ctranslate2")
_SUBDIRS = {"saved_model": "export", "ctranslate2": "export_ctranslate2"}


def define_format_flag():
    flags.DEFINE_enum("export_format", "saved_model", list(FORMATS), "saved_model: a TensorFlow SavedModel "
                      "mapping text to text; ctranslate2: a CTranslate2 model directory for fast CPU/GPU inference.")


def define_flags():
    flags.DEFINE_string("output_dir", None, "The trainer's --output_dir.")
    flags.DEFINE_string("data_dir", None, "The problem's data directory (vocabularies), if it has one.")
    flags.DEFINE_string("checkpoint_path", None, "A specific checkpoint (default: the newest in --output_dir).")
    flags.DEFINE_string("export_dir", None, "Where the export goes (default: <output_dir>/export/<step> for "
                        "saved_model, <output_dir>/export_ctranslate2/<step> for ctranslate2).")
    flags.DEFINE_string("decode_hparams", "", "The SavedModel's search, fixed in it: overrides of beam_size, "
                        "alpha, extra_length and max_input_length, e.g. 'beam_size=4,alpha=0.6'; a language model "
                        "also takes temperature and top_k (sampling), not extra_length.")
    flags.DEFINE_integer("decode_length", lm_decode.DEFAULT_DECODE_LENGTH, "A language model's SavedModel: the most "
                         "tokens it generates after each prompt.")
    define_format_flag()
    common.define_usr_dir_flag()


def export_settings(problem, hparams, overrides="", decode_length=lm_decode.DEFAULT_DECODE_LENGTH):
    """The SavedModel's search settings (keyword arguments of `t2t_relpos.decoding.export.export`): the run's
    beam_size, alpha and extra_length, then `overrides` (as --decode_hparams), checked as the decoder checks
    them; a problem without inputs (a language model) greedy unless they say otherwise, with `decode_length`.
    Settings the SavedModel does not read are refused (`HParamsError`)."""
    from t2t_relpos.cli import decoder  # pylint: disable=import-outside-toplevel

    language_model = not problem.has_inputs
    settings = decoder.decode_settings(hparams, overrides, language_model=language_model)
    defaults = decoder.decode_settings(hparams, "", language_model=language_model)
    unread = ["batch_size", "return_beams"] + ([] if language_model else ["temperature", "top_k"])
    for name in settings.diff(defaults):
        if name in unread:
            what = "a language model's SavedModel" if language_model else "the SavedModel (it searches, not samples)"
            raise errors.HParamsError(f"decoding setting {name!r} is not read by {what}")
    chosen = {name: settings.get(name) for name in ("beam_size", "alpha", "max_input_length")}
    if language_model:
        if not isinstance(decode_length, int) or decode_length < 1:
            raise errors.HParamsError(f"--decode_length must be >= 1 (tokens generated after each prompt), got "
                                      f"{decode_length}")
        if settings.beam_size > 1:
            from t2t_relpos.decoding import search  # pylint: disable=import-outside-toplevel

            search.check_length_penalty(settings.alpha, decode_length)
        return {**chosen, "max_new_tokens": decode_length, "temperature": settings.temperature,
                "top_k": settings.top_k}
    return {**chosen, "extra_length": settings.extra_length}


def check_export(model, problem, data_dir, export_format):
    """Raises a one-line `T2TRelposError` where `write_export` would refuse `model` or `problem`: called before
    training, so that `--export` of a model that cannot be exported fails in seconds, not after the run."""
    # pylint: disable=import-outside-toplevel
    if export_format == "ctranslate2":
        from t2t_relpos.decoding import ctranslate2_export

        ctranslate2_export.check_exportable(model, problem, data_dir)
    else:
        from t2t_relpos.decoding import export

        export.check_exportable(problem, data_dir)
        if not problem.has_inputs and not getattr(model, "decoder_only", False):
            raise errors.T2TRelposError(f"{problem.name} has no inputs: it needs a decoder-only model (a "
                                        f"language model), not {type(model).__name__} reading inputs")


class TargetTaken(errors.T2TRelposError):
    """The export's directory is a file or is not empty."""


def write_export(model, problem, hparams, output_dir, step, data_dir, export_format, export_dir=None,
                 elsewhere="name another --export_dir", settings=None):
    """Exports `model` in `export_format` (see the module docstring); returns the directory written. A
    SavedModel searches with `settings` (`export_settings`; default: the run's).

    The export is written under a temporary name beside its directory and renamed when whole: TensorFlow
    Serving takes a new numbered directory under `export/` for a model to load, and a rerun refuses a directory
    that is not empty (`TargetTaken`: "remove it or `elsewhere`", what the calling tool offers instead). A
    failure (a full disk) leaves nothing behind, in one line.
    """
    # pylint: disable=import-outside-toplevel
    import sys

    from t2t_relpos import files
    from t2t_relpos.training import checkpoints

    path = export_dir or os.path.join(output_dir, _SUBDIRS[export_format], str(step))
    _check_target(path, elsewhere)  # A directory there is empty: the rename replaces it.
    what = "the SavedModel" if export_format == "saved_model" else "the CTranslate2 model"
    with files.atomic_directory(path, what) as tmp:
        try:
            if export_format == "ctranslate2":
                from t2t_relpos.decoding import ctranslate2_export

                ctranslate2_export.export(model, problem, tmp, data_dir)
            else:
                from t2t_relpos.decoding import export

                export.export(model, problem, tmp, data_dir, **(settings or export_settings(problem, hparams)))
        except checkpoints.STORAGE_ERRORS as e:  # TensorFlow's (OSError is atomic_directory's).
            raise checkpoints.storage_error(e, what, path) from None
        except OSError as e:  # Named by the final path, not the temporary one.
            raise files.storage_error(e, what, path) from None
    if export_format == "saved_model" and checkpoints.read_as_pattern(path):
        print(f"warning: TensorFlow reads the path of a SavedModel's variables as a glob pattern, and {path} holds "
              "* ? [ or \\: load it through a path without them (e.g. a symbolic link)", file=sys.stderr, flush=True)
    return path


def _check_target(path, elsewhere):
    """Raises `TargetTaken` unless `path` is new or an empty directory: a SavedModel written into a folder of the
    user's mixes with what is there, and one written over an earlier export replaces it without a word."""
    if os.path.exists(path) and not os.path.isdir(path):
        raise TargetTaken(f"{path} is a file, not a directory to export into; remove it or {elsewhere}")
    if os.path.isdir(path) and os.listdir(path):
        raise TargetTaken(f"{path} exists and is not empty; remove it or {elsewhere}")


def main(argv):  # pylint: disable=unused-argument
    common.import_tensorflow()
    from t2t_relpos.training import checkpoints, runs  # pylint: disable=import-outside-toplevel

    common.import_usr_dir()
    if not FLAGS.output_dir:
        raise errors.T2TRelposError("--output_dir is required")
    # A checkpoint named otherwise than ckpt-<step> is numbered by the step stored in it, or refused before the work.
    step = checkpoints.step_of(FLAGS.checkpoint_path) if FLAGS.checkpoint_path else None
    settings = None
    if FLAGS.export_format == "saved_model":  # Checked before the model is loaded.
        problem = runs.load_problem(FLAGS.output_dir)
        if FLAGS["decode_length"].present and problem.has_inputs:
            raise errors.T2TRelposError(f"--decode_length is the length of a language model's continuations; "
                                        f"{problem.name} has inputs (extra_length in --decode_hparams sets how "
                                        "much longer than its source an output may be)")
        settings = export_settings(problem, runs.load_hparams(FLAGS.output_dir), FLAGS.decode_hparams,
                                   FLAGS.decode_length)
    elif FLAGS.decode_hparams or FLAGS["decode_length"].present:
        raise errors.T2TRelposError("--decode_hparams and --decode_length set the SavedModel's search; a "
                                    "CTranslate2 model is given its search when it is used")
    model, problem, hparams, path = runs.load(FLAGS.output_dir, FLAGS.checkpoint_path, FLAGS.data_dir)
    step = checkpoints.step_of(path) if step is None else step
    written = write_export(model, problem, hparams, FLAGS.output_dir, step, FLAGS.data_dir, FLAGS.export_format,
                           FLAGS.export_dir, settings=settings)
    print(f"Exported {os.path.basename(path)} as {FLAGS.export_format} to {written}", flush=True)
    return 0


def run(argv=None):
    define_flags()
    common.run(main, "t2t-relpos-export", __doc__, [__name__, common.__name__], argv)


if __name__ == "__main__":
    run()
