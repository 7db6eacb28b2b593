"""The decoder's language-model modes, for a run whose problem has no inputs: continuing prompts
(--decode_from_file, --decode_interactive) and scoring a whole text (--score_file).

A prompt is text encoded with the problem's targets encoder, without EOS; the model continues it for at most
--decode_length tokens, or until it ends the document (EOS). A continuation is written on one line: a newline in
it is written as the two characters `\\n` (a carriage return `\\r`, a backslash `\\\\`), and a prompt line is read
with the same escapes, so that an output can be given back as a prompt.
"""

import os
import re

from t2t_relpos import errors

# Tokens generated after each prompt when --decode_length is not given (the decoder and the SavedModel export).
DEFAULT_DECODE_LENGTH = 100

_ESCAPES = {"\\": "\\\\", "\n": "\\n", "\r": "\\r"}
_UNESCAPES = {"\\\\": "\\", "\\n": "\n", "\\r": "\r"}
_ESCAPED = re.compile(r"\\[\\nr]")


def escape(text):
    """`text` on one line: backslash, newline and carriage return as `\\\\`, `\\n` and `\\r`.

    >>> print(escape("a\\nb\\\\c"))
    a\\nb\\\\c
    """
    return "".join(_ESCAPES.get(c, c) for c in text)


def unescape(line):
    """What `escape` wrote, as text again; any other backslash is kept as it is.

    >>> unescape(r"ROMEO:\\nBut soft") == "ROMEO:\\nBut soft"
    True
    >>> unescape(r"C:\\temp \\\\n") == "C:\\\\temp \\\\n"
    True
    """
    return _ESCAPED.sub(lambda m: _UNESCAPES[m.group(0)], line)


class Continuer:
    """Text prompts in, text continuations out, with a decoder-only model (`generation.generate`).

    Prompts are grouped by length (none is forced through another's), each group searched by one compiled
    `generation.continue_prompts`.

    Args:
        model: A built decoder-only model (a language model's run, `runs.load`).
        problem: Its problem (without inputs): the targets encoder.
        data_dir: Where the problem's vocabulary lives.
        decode_length: Tokens generated after each prompt, at most (fewer where the model ends the document).
        beam_size, alpha: 1 for greedy search (or sampling); more for beam search with that length penalty.
        batch_size: Prompts per search.
        max_input_length: A longer prompt keeps its last `max_input_length` tokens.
        temperature, top_k: Sample when temperature > 0 (beam_size 1).
        seed: Seed of the sampling (None: a new one each run).
        jit_compile: Compile the search with XLA.
    """

    def __init__(self, model, problem, data_dir=None, decode_length=DEFAULT_DECODE_LENGTH, beam_size=1, alpha=0.0,
                 batch_size=32, max_input_length=1024, temperature=0.0, top_k=0, seed=None, jit_compile=False):
        # pylint: disable=import-outside-toplevel
        import keras
        import tensorflow as tf

        from t2t_relpos.decoding import generation, search

        self.encoder = problem.feature_encoders(data_dir)["targets"]
        if getattr(model, "target_vocab_size", None) not in (None, self.encoder.vocab_size):
            raise errors.DataError(f"the model's vocabulary has {model.target_vocab_size} ids but the problem's "
                                   f"encoder has {self.encoder.vocab_size}: the model was not made for this problem "
                                   "(or this data_dir's vocabulary)")
        search.check_arguments(beam_size, alpha, temperature, top_k, self.encoder.vocab_size)
        if beam_size > 1:
            search.check_length_penalty(alpha, decode_length)
        self.model = model
        self.decode_length = decode_length
        self.beam_size, self.alpha = beam_size, alpha
        self.batch_size = batch_size
        self.max_input_length = max_input_length
        self.temperature, self.top_k = temperature, top_k
        self._seed = keras.random.SeedGenerator(seed) if temperature > 0 else None
        self._generate = generation.generate
        self._search = tf.function(generation.continue_prompts, reduce_retracing=True, jit_compile=jit_compile,
                                   autograph=False)

    def encode(self, text):
        """The prompt's ids (no EOS), and whether it was cut to its last `max_input_length` tokens."""
        ids = list(self.encoder.encode(text))
        if len(ids) > self.max_input_length:
            return ids[-self.max_input_length:], True
        return ids, False

    def continue_ids(self, prompts):
        """A list of prompt id lists -> a list of `(continuation ids without EOS, log-probability)`."""
        return self._generate(self.model, prompts, self.decode_length, beam_size=self.beam_size, alpha=self.alpha,
                              temperature=self.temperature, top_k=self.top_k, seed=self._seed,
                              batch_size=self.batch_size, search_fn=self._search)

    def decode(self, prompt, continuation):
        """The text of `continuation` as it reads after `prompt` (both id lists): decoded with the prompt, then
        the prompt's text taken off, so that a subword vocabulary keeps the space a piece starts with."""
        alone = self.encoder.decode(continuation)
        if not prompt:
            return alone
        before = self.encoder.decode(prompt)
        whole = self.encoder.decode(list(prompt) + list(continuation))
        return whole[len(before):] if whole.startswith(before) else alone

    def translate(self, texts, return_beams=False):
        """The `Translator`'s interface (for the decoder's interactive loop): each text's continuation, or with
        `return_beams` a list of one `(continuation, score)` pair per text."""
        prompts = [self.encode(text)[0] for text in texts]
        found = self.continue_ids(prompts)
        pairs = [[(self.decode(prompt, ids), score)] for prompt, (ids, score) in zip(prompts, found)]
        return pairs if return_beams else [pair[0][0] for pair in pairs]


def check_flags(values, problem, language_model):
    """Refuses, in one line, the decoder's flags that make no sense for the run's kind of problem (`values`: the
    parsed flags)."""
    name = problem.name
    given = lambda flag: values[flag].present
    if values.decode_length < 1:
        raise errors.T2TRelposError(f"--decode_length must be >= 1 (tokens generated after each prompt), got "
                                    f"{values.decode_length}")
    for flag in ("score_window", "score_stride"):
        if given(flag) and values.score_file is None:
            raise errors.T2TRelposError(f"--{flag} applies to --score_file (scoring a text), which is not given")
    if not language_model:
        if values.score_file is not None:
            raise errors.T2TRelposError(f"--score_file scores a text with a language model; {name} has inputs "
                                        "(decode it with --decode_from_file or --decode_split)")
        if given("decode_length"):
            raise errors.T2TRelposError(f"--decode_length is the length of a language model's continuations; {name} "
                                        "has inputs: its outputs may be extra_length tokens longer than their "
                                        "source (--decode_hparams='extra_length=N')")
        return
    refused = {
        "decode_split": f"{name} is a language model: its splits have no sources to decode; continue prompts with "
                        "--decode_from_file, or measure it on a text with --score_file",
        "decode_reference": "--decode_reference scores outputs against reference translations; a language model's "
                            "continuations have none (measure the model on a text with --score_file)",
        "decode_ponder_plot": "--decode_ponder_plot plots the ponder time of a source's positions; a language model "
                              "reads no source",
    }
    for flag, message in refused.items():
        if values[flag].value not in (None, False):
            raise errors.T2TRelposError(message)
    if values.score_file is not None:
        if given("decode_length"):
            raise errors.T2TRelposError("--decode_length applies to continuing prompts, not to --score_file")
        if values.decode_to_file != "-":
            raise errors.T2TRelposError("--score_file prints its one line of scores on stdout; --decode_to_file is "
                                        "for continuations")


def check_settings(settings, defaults, scoring):
    """Refuses the --decode_hparams a language model's decoding does not read (`settings` differs from
    `defaults` in them): extra_length (--decode_length instead) and return_beams; with `scoring`, all but
    batch_size."""
    changed = settings.diff(defaults)
    if scoring:
        for name in changed:
            if name != "batch_size":
                raise errors.HParamsError(f"decoding setting {name!r} does not apply to --score_file (only "
                                          "batch_size, the windows scored at a time, does)")
        return
    if "extra_length" in changed:
        raise errors.HParamsError("decoding setting 'extra_length' is for models with inputs; a language model "
                                  "generates --decode_length tokens after each prompt")
    if "return_beams" in changed:
        raise errors.HParamsError("decoding setting 'return_beams' is not available for a language model: each "
                                  "prompt gets its best continuation")


def score_window(values, hparams):
    """(window, stride) of --score_file: --score_window (default: the run's max_length) and --score_stride
    (default: the window), checked."""
    window = values.score_window if values.score_window is not None else hparams.max_length
    stride = values.score_stride if values.score_stride is not None else window
    for flag, value in (("--score_window", window), ("--score_stride", stride)):
        if value < 1:
            raise errors.T2TRelposError(f"{flag} must be >= 1 (tokens), got {value}")
    if stride > window:
        raise errors.T2TRelposError(f"--score_stride={stride} is longer than the window ({window}): the tokens "
                                    "between two windows would never be scored")
    return window, stride


def text_ids(problem, encoder, path):
    """The ids of the text at `path` as `problem` packs its text (`LanguageModelProblem.text_ids`: each
    document encoded and followed by EOS). `path` may be a file (gzipped where its name ends in .gz), a named
    pipe or `<(...)`, or stdin ('-').

    Raises:
        DataError: the text cannot be read, is not UTF-8, or holds no text.
    """
    from t2t_relpos.problems import languagemodel_shakespeare  # pylint: disable=import-outside-toplevel

    if path != "-" and os.path.isfile(path):
        text = languagemodel_shakespeare.read_text(path)
    else:  # Stdin, a pipe: read as it comes, once.
        text = _read_stream(path)
    ids = problem.text_ids(text, encoder)
    if not len(ids):
        raise errors.DataError(f"--score_file={path} has no text to score")
    return ids


def _read_stream(path):
    """The text of stdin ('-') or of a file that is not a regular one (a pipe), UTF-8, without a byte-order
    mark."""
    # pylint: disable=import-outside-toplevel
    import sys

    from t2t_relpos.data import parallel_text

    try:
        if path == "-":
            data = sys.stdin.buffer.read()
        else:
            with open(path, "rb") as f:
                data = f.read()
    except OSError as e:
        raise errors.DataError(f"cannot read --score_file={path}: {e.strerror or e}") from None
    if data.startswith(parallel_text.UTF8_BOM):
        data = data[len(parallel_text.UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.DataError(f"--score_file={path}: not valid UTF-8 (byte {data[e.start]:#04x} at offset "
                               f"{e.start:,})") from None


def score(model, ids, window, stride, batch_size=32, jit_compile=False):
    """`lm_scoring.score_ids` of the text's `ids` with the model, in windows of `window` every `stride` tokens."""
    from t2t_relpos.decoding import lm_scoring  # pylint: disable=import-outside-toplevel

    return lm_scoring.score_ids(lm_scoring.model_scorer(model, jit_compile), ids, window, stride, batch_size)


def summary(result, characters):
    """The one line --score_file prints: `tokens=N nll=... log_perplexity=... perplexity=...`, and
    `bits_per_character=...` for a character-level problem (EOS, one token a document, counts as one)."""
    line = (f"tokens={result['tokens']} nll={result['nll']:.4f} log_perplexity={result['log_perplexity']:.6f} "
            f"perplexity={result['perplexity']:.4f}")
    if characters:
        line += f" bits_per_character={result['bits_per_token']:.6f}"
    return line
