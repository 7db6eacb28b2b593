"""Export a trained model as a SavedModel that maps source text to output text, tokenization included.

The SavedModel needs TensorFlow only (and tensorflow-text for SentencePiece vocabularies):

    t2t-relpos-trainer --output_dir=/tmp/reverse ... --export      # -> /tmp/reverse/export/<step>

    import tensorflow as tf
    translate = tf.saved_model.load("/tmp/reverse/export/1000").signatures["serving_default"]
    translate(tf.constant(["0123456789"]))["outputs"]              # -> [b"9876543210"]

The signature takes a batch of strings `[B]` and returns `outputs` (strings `[B]`) and `scores` (float32
`[B]`: the log-probability, length-normalised under beam search). Decoding stops at EOS or at the text's own
source length + `extra_length` tokens, whatever else is in the batch (as in `t2t-relpos-decoder`).

A language model (a problem without inputs) exports the same signature for prompts: `inputs` are prompts
(`""` starts a document), `outputs` their continuations, at most `max_new_tokens` tokens, ended early where the
model ends the document (EOS); `scores` their log-probabilities (`LanguageModelServing`). The search (greedy,
sampling or beam) and its settings are fixed when it is exported:

    generate = tf.saved_model.load("/tmp/shakespeare/export/2000").signatures["serving_default"]
    generate(tf.constant(["ROMEO:", ""]))["outputs"]                 # -> two continuations
"""

import os

import keras
import tensorflow as tf

from t2t_relpos import errors
from t2t_relpos.decoding import generation, search
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


class LanguageModelServing(tf.Module):
    """A decoder-only model (a language model), its tokenizer and its search settings, with a `continue_text`
    function to save: prompts in, continuations out (`generation.continue_prompts` in the graph).

    A batch's prompts may differ in length: the shorter ones' continuations start while the longer ones are
    still being written into the cache (the forcing of `generation`), and each continuation is what the prompt
    alone would get. Beam search (whose length penalty would count the forced tokens) searches one prompt at a
    time.

    Args:
        model: A trained decoder-only model (`decoder_only`).
        problem: Its problem, without inputs (its targets encoder provides `graph_tokenizer()`).
        data_dir: The problem's vocabulary directory, if any.
        max_new_tokens: The longest continuation, in tokens.
        beam_size, alpha: 1 for greedy search (or sampling); more for beam search with that length penalty.
        temperature, top_k: Sample when temperature > 0 (beam_size 1); each call draws anew.
        seed: The sampling's first seed (None: a random one).
        max_input_length: A longer prompt keeps its last `max_input_length` tokens.
    """

    def __init__(self, model, problem, data_dir=None, max_new_tokens=100, beam_size=1, alpha=0.0, temperature=0.0,
                 top_k=0, seed=None, max_input_length=1024):
        super().__init__(name="serving")
        if not getattr(model, "decoder_only", False):
            raise errors.T2TRelposError(f"{type(model).__name__} reads inputs: a language model's export needs a "
                                        "decoder-only model")
        search.check_arguments(beam_size, alpha, temperature, top_k, getattr(model, "target_vocab_size", None))
        if not isinstance(max_new_tokens, int) or max_new_tokens < 1:
            raise errors.HParamsError(f"max_new_tokens must be an integer >= 1, got {max_new_tokens!r}")
        search.ensure_built(model)  # Before `continue_text` is traced.
        self.model = model
        self.target_tokenizer = check_exportable(problem, data_dir)[1]
        self.max_new_tokens = max_new_tokens
        self.beam_size, self.alpha = beam_size, alpha
        self.temperature, self.top_k = temperature, top_k
        self.max_input_length = max_input_length
        # Made here, outside the traced function; its state is a variable of the SavedModel, advanced by each call.
        self.seed_generator = keras.random.SeedGenerator(seed) if temperature > 0 else None
        self.seed_state = self.seed_generator.state if self.seed_generator is not None else None

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string, name="inputs")], autograph=False)
    def continue_text(self, texts):
        """prompts `[B]` -> {"outputs": continuations `[B]`, "scores": float32 `[B]`}."""
        prompts = self.target_tokenizer.tokenize(texts)
        prompts = prompts[:, -self.max_input_length:].to_tensor()  # [B, P], right-padded with PAD.
        if self.beam_size > 1:
            def one(row):
                prompt = row[None, :tf.math.count_nonzero(row, dtype=tf.int32)]
                ids, scores = generation.continue_prompts(self.model, prompt, self.max_new_tokens, self.beam_size,
                                                          self.alpha)
                return ids[0, 0], scores[0, 0]

            out, scores = tf.map_fn(one, prompts, fn_output_signature=(
                tf.TensorSpec([self.max_new_tokens], tf.int32), tf.TensorSpec([], tf.float32)))
        else:
            out, scores = generation.continue_prompts(self.model, prompts, self.max_new_tokens,
                                                      temperature=self.temperature, top_k=self.top_k,
                                                      seed=self.seed_generator)
            out, scores = out[:, 0], scores[:, 0]
        # The continuation as it reads after its prompt: the text of both, less the prompt's (a subword
        # vocabulary's first piece of a word starts with its space, which it drops at the start of a text).
        alone = self.target_tokenizer.detokenize(out)
        whole = self.target_tokenizer.detokenize(tf.concat([prompts, out], axis=1))  # Padding is skipped.
        before = self.target_tokenizer.detokenize(prompts)
        length = tf.strings.length(before)
        follows = tf.equal(tf.strings.substr(whole, tf.zeros_like(length), length), before)
        rest = tf.strings.substr(whole, length, tf.strings.length(whole) - length)
        return {"outputs": tf.where(follows, rest, alone), "scores": scores}


def check_exportable(problem, data_dir=None):
    """The problem's in-graph (input, target) tokenizers (input None for a problem without inputs), or
    `T2TRelposError` (one line) where it has none: the SavedModel maps text to text. The trainer calls it before
    training when it is to export afterwards."""
    encoders = problem.feature_encoders(data_dir)
    inputs = encoders["inputs"].graph_tokenizer() if "inputs" in encoders else None
    return inputs, encoders["targets"].graph_tokenizer()


def export(model, problem, export_dir, data_dir=None, **settings):
    """Writes the SavedModel of `ServingModule(model, problem, data_dir, **settings)` to `export_dir`, or for a
    problem without inputs (a language model) of `LanguageModelServing`."""
    if getattr(problem, "has_inputs", True):
        module = ServingModule(model, problem, data_dir, **settings)
        function = module.translate
    else:
        module = LanguageModelServing(model, problem, data_dir, **settings)
        function = module.continue_text
    tf.io.gfile.makedirs(os.path.dirname(os.path.abspath(export_dir)))
    tf.saved_model.save(module, export_dir, signatures={"serving_default": function})
    return export_dir
