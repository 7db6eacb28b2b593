"""What tracing costs: graph ops and seconds to trace each part of a small model into a TensorFlow graph.

    .venv/bin/python benchmarks/trace_cost.py [--reps 3] [--hidden_size 16] [--parts attention,encoder,...]

Every trainer start, evaluation, export and most tests pay for tracing before any step runs (an in-process
`Trainer(...).train(1)` of a 16-wide relative Transformer: about 10 s, nearly all of it tracing). This counts, for
each part, the ops of its `tf.function(..., autograph=False)` graph (all ops and the `Const` ones, which shape
arithmetic and slicing make), and times a fresh trace (the median of `--reps`, each of a new `tf.function`).
Parts: one attention layer (relative, k = 8, padding masks), one Transformer encoder layer, the whole model's
forward pass (2+2 layers, relative), forward + loss + gradient (the training step's trace less the
optimizer's update), and a trainer's training input pipeline (`pipeline.input_dataset` of 8-digit reversal, built
and its first batch taken; its ops are those of the dataset's graph and functions). Run it with the machine
otherwise idle; the op counts do not depend on the load.
"""

import argparse
import collections
import itertools
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("KERAS_BACKEND", "tensorflow")

PARTS = ("attention", "encoder", "forward", "gradient", "pipeline")


def parts(hidden_size, names=PARTS):
    """{name: (function, input signature)} for the parts asked for."""
    # pylint: disable=import-outside-toplevel
    import numpy as np
    import tensorflow as tf

    from t2t_relpos.layers import RelationAwareMultiHeadAttention, TransformerEncoder
    from t2t_relpos.models import Transformer
    from t2t_relpos.training import losses

    states = (tf.TensorSpec([None, None, hidden_size], tf.float32), tf.TensorSpec([None, None], tf.bool))
    ids = ({"inputs": tf.TensorSpec([None, None], tf.int32), "targets": tf.TensorSpec([None, None], tf.int32)},)
    sample = np.zeros((1, 3, hidden_size), "float32")
    out = {}
    if "attention" in names:
        attention = RelationAwareMultiHeadAttention(num_heads=2, key_dim=hidden_size // 2, max_relative_position=8)
        attention(sample)
        out["attention"] = (lambda x, mask: attention(x, query_mask=mask, value_mask=mask), states)
    if "encoder" in names:
        encoder = TransformerEncoder(num_layers=1, hidden_size=hidden_size, num_heads=2, filter_size=2 * hidden_size,
                                     position_encoding="relative", max_relative_position=8)
        encoder(sample)
        out["encoder"] = (lambda x, mask: encoder(x, padding_mask=mask), states)
    if {"forward", "gradient"} & set(names):
        model = Transformer(12, 12, hidden_size=hidden_size, filter_size=2 * hidden_size, num_heads=2,
                            num_encoder_layers=2, num_decoder_layers=2, position_encoding="relative",
                            max_relative_position=8)
        model.build()

        def gradient(batch):
            with tf.GradientTape() as tape:
                logits = model(batch, training=True)
                loss_sum, _, _ = losses.cross_entropy_and_accuracy(logits, batch["targets"], 0.1)
            return tape.gradient(loss_sum, model.trainable_variables)

        if "forward" in names:
            out["forward"] = (lambda batch: model(batch, training=True), ids)
        if "gradient" in names:
            out["gradient"] = (gradient, ids)
    return out


def measure_pipeline(reps):
    """(ops, Const ops, seconds of each rep): each rep builds a new training pipeline and takes its first batch."""
    # pylint: disable=import-outside-toplevel
    import tensorflow as tf

    from t2t_relpos import registry
    from t2t_relpos.data import pipeline
    from t2t_relpos.problems import algorithmic

    hparams = registry.hparams("transformer_cpu_rel").parse("batch_size=512,max_length=16")
    seconds, types = [], None
    for _ in range(reps):
        began = time.perf_counter()
        dataset = pipeline.input_dataset(algorithmic.AlgorithmicReverseDecimal40(train_length=8), hparams, "train",
                                         seed=1)
        next(iter(dataset))
        seconds.append(time.perf_counter() - began)
        graph = tf.compat.v1.GraphDef.FromString(dataset._as_serialized_graph().numpy())  # pylint: disable=protected-access
        nodes = list(graph.node) + [node for function in graph.library.function for node in function.node_def]
        types = collections.Counter(node.op for node in nodes)
    return sum(types.values()), types["Const"], seconds


def measure(fn, signature, reps):
    """(ops, Const ops, trace seconds of each rep): each rep traces a new `tf.function` of `fn`."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel

    seconds, types = [], None
    for _ in range(reps):
        began = time.perf_counter()
        graph = tf.function(fn, autograph=False).get_concrete_function(*signature).graph
        seconds.append(time.perf_counter() - began)
        types = collections.Counter(op.type for op in graph.get_operations())
    return sum(types.values()), types["Const"], seconds


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", 1)[0])
    parser.add_argument("--reps", type=int, default=3, help="fresh traces per part (the median is reported)")
    parser.add_argument("--hidden_size", type=int, default=16)
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {', '.join(PARTS)}")
    args = parser.parse_args(argv)
    names = [n for n in args.parts.split(",") if n]
    unknown = sorted(set(names) - set(PARTS))
    if unknown or args.reps < 1 or args.hidden_size < 2 or args.hidden_size % 2:
        parser.exit(2, f"error: parts must be among {', '.join(PARTS)} (got {', '.join(unknown) or 'none'}), "
                       "--reps >= 1, --hidden_size even and >= 2\n")
    # The first trace pays once for what later ones find cached (AutoGraph's conversions, Keras's and TensorFlow's
    # lookups): it is what a process, such as a trainer, pays.
    print(f"| part | ops | Const | first trace s | trace s (median of {args.reps}) |\n|:--|--:|--:|--:|--:|")
    measured = ((name, lambda fn=fn, signature=signature: measure(fn, signature, args.reps))
                for name, (fn, signature) in parts(args.hidden_size, names).items())
    if "pipeline" in names:
        measured = itertools.chain(measured, [("pipeline", lambda: measure_pipeline(args.reps))])
    for name, run in measured:
        ops, consts, seconds = run()
        print(f"| {name} | {ops} | {consts} | {seconds[0]:.2f} | {statistics.median(seconds):.2f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
