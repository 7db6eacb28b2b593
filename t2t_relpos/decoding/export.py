"""Export a trained model as a SavedModel that maps source text to output text, tokenization included.

The SavedModel needs TensorFlow only (and tensorflow-text for SentencePiece vocabularies):

    t2t-relpos-trainer --output_dir=/tmp/reverse ... --export      # -> /tmp/reverse/export/<step>

    import tensorflow as tf
    translate = tf.saved_model.load("/tmp/reverse/export/1000").signatures["serving_default"]
    translate(tf.constant(["0123456789"]))["outputs"]              # -> [b"9876543210"]

The signature takes a batch of strings `[B]` and returns `outputs` (strings `[B]`) and `scores` (float32
`[B]`: the log-probability, length-normalised under beam search). Decoding stops at EOS or at the text's own
source length + `extra_length` tokens, whatever else is in the batch (as in `t2t-relpos-decoder`).
"""

import os

import tensorflow as tf

from t2t_relpos.decoding import search
from t2t_relpos.problems.problem import EOS_ID


class ServingModule(tf.Module):
    """A model, its tokenizers and its search settings, with a `translate` function to save.

    Args:
        model: A trained model with `encode` / `init_cache` / `decode_step`.
        problem: Its `Problem` (the encoders provide `graph_tokenizer()`).
        data_dir: The problem's vocabulary directory, if any.
        beam_size, alpha, extra_length: The search (beam_size 1: greedy).
        max_input_length: Longer sources are cut to this many tokens (EOS included).
    """

    def __init__(self, model, problem, data_dir=None, beam_size=4, alpha=0.6, extra_length=50,
                 max_input_length=1024):
        super().__init__(name="serving")
        search.ensure_built(model)  # Before `translate` is traced.
        self.model = model
        self.input_tokenizer, self.target_tokenizer = check_exportable(problem, data_dir)
        self.beam_size = beam_size
        self.alpha = alpha
        self.extra_length = extra_length
        self.max_input_length = max_input_length

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")], autograph=False)
    def translate(self, texts):
        """strings `[B]` -> {"outputs": strings `[B]`, "scores": float32 `[B]`}."""
        ids = self.input_tokenizer.tokenize(texts)[:, :self.max_input_length - 1]
        eos = tf.fill([ids.nrows(), 1], tf.constant(EOS_ID, ids.dtype))
        inputs = tf.concat([ids, eos], axis=1).to_tensor()
        max_length = tf.shape(inputs)[1] + self.extra_length
        lengths = search.decode_lengths(inputs, self.extra_length)  # Per text, as the decoder does.
        if self.beam_size > 1:
            out, scores = search.beam_search(self.model, inputs, max_length, self.beam_size, self.alpha, lengths)
            out, scores = out[:, 0], scores[:, 0]
        else:
            out, scores = search.greedy(self.model, inputs, max_length, lengths=lengths)
        # An empty (or all-whitespace) text translates to an empty text.
        empty = tf.logical_or(tf.equal(ids.row_lengths(), 0), tf.equal(tf.strings.strip(texts), ""))
        outputs = tf.where(empty, "", self.target_tokenizer.detokenize(out))
        return {"outputs": outputs, "scores": tf.where(empty, 0.0, scores)}


def check_exportable(problem, data_dir=None):
    """The problem's in-graph (input, target) tokenizers, or `T2TRelposError` (one line) where it has none: the
    SavedModel maps text to text. The trainer calls it before training when it is to export afterwards."""
    encoders = problem.feature_encoders(data_dir)
    return encoders["inputs"].graph_tokenizer(), encoders["targets"].graph_tokenizer()


def export(model, problem, export_dir, data_dir=None, **settings):
    """Writes the SavedModel of `ServingModule(model, problem, data_dir, **settings)` to `export_dir`."""
    module = ServingModule(model, problem, data_dir, **settings)
    tf.io.gfile.makedirs(os.path.dirname(os.path.abspath(export_dir)))
    tf.saved_model.save(module, export_dir, signatures={"serving_default": module.translate})
    return export_dir
