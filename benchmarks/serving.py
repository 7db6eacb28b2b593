"""Serving speed: Multi30k test_2016_flickr translated with beam 4 by the package's decoder and by CTranslate2.

    .venv/bin/python benchmarks/serving.py [--run_dir RUN] [--steps 1500] [--reps 5] [--write]

Systems, timed in one process on the same sentences: the package's `Translator` as a TensorFlow graph and
compiled by XLA, and the model exported to CTranslate2 (`t2t_relpos.decoding.ctranslate2_export`) run in float32
and in int8 (weights quantized when the model is loaded). Each repetition translates the whole test set once
with every system, in an order rotated from one repetition to the next, so drifting load hits all alike; the
table gives sentences per second from the median pass, the spread (fastest and slowest pass) and sacreBLEU
(13a, detokenized) of each system's output.

The model: --run_dir (a trainer's output directory for translate_local on Multi30k, relation tables shared by
the heads or absolute positions), else one trained here like `translate_small.py` does (`transformer_cpu_rel`
with `heads_share_relative_embeddings=true`, --steps steps, in --work_dir). Without the Multi30k files it prints
why and exits 0. Search settings: beam 4; the package's GNMT length penalty with alpha (0.6), CTranslate2's
`length_penalty=alpha` (its own normalisation, length ** alpha), so their outputs can differ in a few sentences.
"""

import argparse
import gzip
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # Before TensorFlow is imported (in `systems`).
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # noqa: E402  pylint: disable=wrong-import-position
import translate_small  # noqa: E402  pylint: disable=wrong-import-position

HPARAMS_SET = "transformer_cpu_rel"
HPARAMS = "heads_share_relative_embeddings=true"  # CTranslate2 has one relation table per layer, not per head.


def read_test(multi30k, count):
    """(English sources, German references) of test_2016_flickr, the first `count` (0: all)."""
    def lines(lang):
        with gzip.open(os.path.join(multi30k, f"test_2016_flickr.{lang}.gz"), "rt", encoding="utf-8") as f:
            return [line.rstrip("\n") for line in f]
    sources, references = lines("en"), lines("de")
    return (sources[:count], references[:count]) if count else (sources, references)


def train(args, data_dir, log):
    """Trains the model (resuming a finished run does nothing) and returns its run directory."""
    run_dir = os.path.join(args.work_dir, "serving_" + HPARAMS_SET)
    translate_small.run_tool("t2t-relpos-trainer", [
        "--problem=translate_local", f"--hparams_set={HPARAMS_SET}", f"--hparams={HPARAMS}",
        f"--data_dir={data_dir}", f"--output_dir={run_dir}", f"--train_steps={args.steps}",
        f"--checkpoint_every={args.steps}", f"--eval_every={args.steps}", f"--log_every={args.log_every}",
        "--seed=1"], log)
    return run_dir


def systems(args, run_dir, data_dir):
    """{name: translate(list of str) -> list of str} for the package's decoder and CTranslate2."""
    # pylint: disable=import-outside-toplevel
    import ctranslate2
    import sentencepiece

    from t2t_relpos.decoding import ctranslate2_export
    from t2t_relpos.decoding.translator import Translator
    from t2t_relpos.training import checkpoints, runs

    model, problem, _, path = runs.load(run_dir, data_dir=data_dir)
    export_dir = os.path.join(run_dir, "export_ctranslate2", str(checkpoints.step_of(path)))
    if not os.path.isfile(os.path.join(export_dir, "model.bin")):
        ctranslate2_export.export(model, problem, export_dir, data_dir)
    pieces = sentencepiece.SentencePieceProcessor(model_file=os.path.join(export_dir, "sentencepiece.model"))
    found = {}
    for name, jit in (("ours, graph", False), ("ours, XLA", True)):
        found[name] = Translator(model, problem, data_dir, beam_size=args.beam_size, alpha=args.alpha,
                                 batch_size=args.batch_size, jit_compile=jit).translate
    threads = os.cpu_count() or 1
    for name, compute_type in (("CTranslate2 float32", "float32"), ("CTranslate2 int8", "int8")):
        translator = ctranslate2.Translator(export_dir, device="cpu", compute_type=compute_type, inter_threads=1,
                                            intra_threads=threads)

        def translate(texts, translator=translator):
            # The package's SentencePiece convention: one leading space added, and removed from the output.
            tokens = [pieces.encode(" " + t, out_type=str) if t else [] for t in texts]
            results = translator.translate_batch(tokens, beam_size=args.beam_size, length_penalty=args.alpha,
                                                 max_batch_size=args.batch_size, min_decoding_length=0)
            return [_strip_space(pieces.decode(r.hypotheses[0])) for r in results]
        found[name] = translate
    return found, path


def _strip_space(text):
    return text[1:] if text.startswith(" ") else text


def measure(found, sources, references, reps):
    """Per system: seconds of each whole-test-set pass (interleaved), and BLEU of its output."""
    import sacrebleu  # pylint: disable=import-outside-toplevel

    outputs = {name: translate(sources) for name, translate in found.items()}  # Warm-up (tracing, XLA) too.
    samples = common.interleaved_samples({name: (lambda t=t: t(sources)) for name, t in found.items()},
                                         {"wall": time.perf_counter}, reps=reps, warmup=0, min_sample_s=0.0)
    bleu = {name: sacrebleu.corpus_bleu(out, [references]).score for name, out in outputs.items()}
    return samples["wall"], bleu


def format_table(seconds, bleu, count):
    names = list(seconds)
    base = statistics.median(seconds[names[0]])
    rows = []
    for name in names:
        median = statistics.median(seconds[name])
        rows.append([name, f"{count / median:.1f}",
                     f"{count / max(seconds[name]):.1f}-{count / min(seconds[name]):.1f}",
                     f"{base / median:.2f}x", f"{bleu[name]:.2f}"])
    return common.markdown_table(["system", "sentences/s (median)", "range over passes", f"vs {names[0]}",
                                  "BLEU 13a"], rows)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    translate_small.add_shared_flags(parser, log_every=100)
    parser.add_argument("--run_dir", default=None, help="A trained translate_local run on Multi30k to use "
                        "(default: train one in --work_dir).")
    parser.add_argument("--reps", type=int, default=5, help="Timed passes over the test set per system.")
    parser.add_argument("--batch_size", type=int, default=32, help="Sentences per batch, every system.")
    args = parser.parse_args()
    common.refuse_uncommitted_writes(args)
    absent = translate_small.missing_files(args.multi30k)
    if absent:
        print(f"serving: skipped, the Multi30k data is not there (missing {', '.join(absent)}); "
              "pass --multi30k=<folder of train/val/test_2016_flickr .en.gz/.de.gz>")
        return 0
    began = time.perf_counter()
    log = []
    data_dir = translate_small.prepare_data(args, log)
    run_dir = args.run_dir or train(args, data_dir, log)
    sources, references = read_test(args.multi30k, args.decode_samples)
    found, checkpoint = systems(args, run_dir, data_dir)
    seconds, bleu = measure(found, sources, references, args.reps)
    # "\x20\x20" at a line's end: Markdown's line break (two spaces, which editors strip).
    text = f"""## Serving: the package's decoder vs CTranslate2 (Multi30k test_2016_flickr, beam {args.beam_size})

`{common.command_line()}` — {common.today()}, took {(time.perf_counter() - began) / 60:.0f} min.\x20\x20
Machine: {common.machine_description()}.

{len(sources)} sentences of test_2016_flickr, batches of {args.batch_size}, beam {args.beam_size}, length
penalty {args.alpha} (GNMT's for the package, CTranslate2's own for CTranslate2); checkpoint
`{os.path.relpath(checkpoint)}`. Each pass translates every sentence; {args.reps} passes per system, interleaved.
CTranslate2 runs on {os.cpu_count()} threads (intra_threads), TensorFlow with its defaults.

{format_table(seconds, bleu, len(sources))}
"""
    print(text)
    if args.write:
        common.replace_section("serving", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
