"""t2t-relpos-avg-checkpoints: average a run's last checkpoints into a new checkpoint.

  t2t-relpos-avg-checkpoints --output_dir=$HOME/runs/big_rel --num_last=20
  t2t-relpos-decoder --output_dir=$HOME/runs/big_rel/averaged --data_dir=$HOME/t2t_data --decode_split=test

Writes <output_dir>/averaged (or --averaged_dir) with the averaged weights and the run's hparams, so the
decoder can read it as a run directory. --checkpoints=a,b,c averages exactly those checkpoints instead.
"""

import os

from absl import flags

from t2t_relpos.cli import common

FLAGS = flags.FLAGS


def define_flags():
    flags.DEFINE_string("output_dir", None, "The trainer's --output_dir.")
    flags.DEFINE_integer("num_last", None, "Average the newest N checkpoints (default: the run's "
                         "num_averaged_checkpoints, e.g. 20 for the big sets).", lower_bound=1)
    flags.DEFINE_list("checkpoints", [], "Explicit checkpoint paths to average instead, separated by commas (a blank "
                      "name, as from a trailing comma, is refused). A name other than ckpt-<step> is numbered by the "
                      "step stored in it.")
    flags.DEFINE_string("averaged_dir", None, "Where the result goes (default: <output_dir>/averaged).")
    flags.DEFINE_string("data_dir", None, "The problem's data directory (vocabularies), if it has one.")
    common.define_usr_dir_flag()


def main(argv):  # pylint: disable=unused-argument
    common.import_tensorflow()
    # pylint: disable=import-outside-toplevel
    from t2t_relpos import errors
    from t2t_relpos.hparams import stored
    from t2t_relpos.training import averaging, checkpoints, runs

    common.import_usr_dir()
    if not FLAGS.output_dir:
        raise errors.T2TRelposError("--output_dir is required")
    num_last = FLAGS.num_last or runs.load_hparams(FLAGS.output_dir).num_averaged_checkpoints
    named = FLAGS.checkpoints
    if named:
        averaging.check_named(named)
    paths = named or averaging.last_checkpoints(FLAGS.output_dir, num_last)
    target = FLAGS.averaged_dir or os.path.join(FLAGS.output_dir, "averaged")
    averaging.check_target(FLAGS.output_dir, target)  # Before the work, which the target would refuse.
    checkpoints.step_of(paths[-1])  # The average's number: one it cannot have is refused before the work too.
    for path in paths:  # A checkpoint of another run's vocabulary would be averaged into garbage without a word.
        runs.check_checkpoint_vocabulary(FLAGS.output_dir, path)
    earlier = (stored.load_record(target) or {}).get("averaged_checkpoints")
    # The newest, where none are named: picked again (as the averaged ones are) if a running trainer deletes them.
    model, _, _, _ = runs.load(FLAGS.output_dir, paths[-1] if named else None, FLAGS.data_dir)
    if named:
        averaging.average(model, paths)
    else:
        paths = averaging.average_last(model, FLAGS.output_dir, num_last)
    saved = averaging.write_averaged(model, FLAGS.output_dir, paths, target)
    replaced = f", replacing the average of {', '.join(earlier)}" if earlier else ""
    print(f"Averaged {len(paths)} checkpoints ({os.path.basename(paths[0])} .. {os.path.basename(paths[-1])}) "
          f"into {saved}{replaced}")
    return 0


def run(argv=None):
    define_flags()
    common.run(main, "t2t-relpos-avg-checkpoints", __doc__, [__name__, common.__name__], argv)


if __name__ == "__main__":
    run()
