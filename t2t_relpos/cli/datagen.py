"""t2t-relpos-datagen: prepare a problem's data (vocabulary, TFRecord shards) in --data_dir.

  t2t-relpos-datagen --problem=wmt14_ende --data_dir=$HOME/t2t_data --tmp_dir=$HOME/t2t_tmp [--download]
  t2t-relpos-datagen --problem=translate_local --data_dir=$HOME/my_data --tmp_dir=$HOME/my_corpus

Idempotent: finished files are kept, an interrupted run resumes; a second datagen on the same --data_dir
waits for the first and then finds the data ready. Raw data is read from --tmp_dir (the
problem's docstring lists the files); with --download, what is missing there may be downloaded. Problems
generated on the fly (the algorithmic tasks) need no preparation.
"""

from absl import flags

from t2t_relpos.cli import common

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("problem", None, "Registered problem name.")
    flags.DEFINE_string("data_dir", None, "Where prepared data goes.")
    flags.DEFINE_string("tmp_dir", None, "Where raw downloads or manually placed source files are.")
    common.define_download_flag()
    common.define_usr_dir_flag()


def main(argv):  # pylint: disable=unused-argument
    common.import_tensorflow()
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors, registry
    from t2t_relpos.data import preparation

    common.import_usr_dir()
    if not FLAGS.problem:
        raise errors.T2TRelposError("--problem is required")
    problem = registry.problem(FLAGS.problem)
    problem.allow_download = FLAGS.download
    preparation.prepare(problem, FLAGS.data_dir, FLAGS.tmp_dir)
    return 0


def run(argv=None):
    define_flags()
    common.run(main, "t2t-relpos-datagen", __doc__, [__name__, common.__name__], argv)


if __name__ == "__main__":
    run()
