"""CTranslate2 export: a small trained translation model gives the same greedy and beam outputs through
`ctranslate2.Translator` as through the package's own search, token for token; other architectures score
the same; what CTranslate2 cannot express is refused in one line."""

import numpy as np
import pytest
import tensorflow as tf
from keras import ops

from t2t_relpos import registry
from t2t_relpos.decoding import search
from t2t_relpos.models import Transformer, UniversalTransformer
from test_translate import make_raw

ctranslate2 = pytest.importorskip("ctranslate2", reason="ctranslate2 is not installed (pip install ctranslate2; "
                                  "the test extra installs it)")
from t2t_relpos.decoding import ctranslate2_export  # noqa: E402  pylint: disable=wrong-import-position

EXTRA = 50  # As the sets' extra_length: room for beam search to finish by EOS (see the export's docstring).


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """translate_local on the tests' made-up English-German pairs: (problem, data_dir, encoder, train pairs)."""
    raw = tmp_path_factory.mktemp("raw")
    pairs = make_raw(raw)
    data_dir = str(raw / "data")
    problem = registry.problem("translate_local")
    problem.generate_data(data_dir, str(raw))
    return problem, data_dir, problem.feature_encoders(data_dir)["inputs"], pairs


def build(vocab, **kwargs):
    config = dict(hidden_size=32, filter_size=64, num_heads=4, num_encoder_layers=2, num_decoder_layers=2,
                  layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0,
                  position_encoding="relative", max_relative_position=4, heads_share_relative_embeddings=True)
    config.update(kwargs)
    model = Transformer(vocab, vocab, **config)
    model.build()
    return model


def batch(id_lists):
    out = np.zeros((len(id_lists), max(len(i) for i in id_lists)), np.int32)
    for row, ids in enumerate(id_lists):
        out[row, :len(ids)] = ids
    return out


@pytest.fixture(scope="module")
def trained(corpus):
    """A relative-position Transformer (tables shared by the heads) trained briefly on 20 of the training pairs:
    150 steps of 10 pairs (60 epochs of the 150 pairs took 3x the time). It has learnt to stop: its greedy outputs
    of the test and eval sources end by EOS, and it translates the first training pair."""
    import keras  # pylint: disable=import-outside-toplevel

    problem, data_dir, encoder, pairs = corpus
    keras.utils.set_random_seed(3)
    model = build(encoder.vocab_size)
    steps, batch_size, train = 150, 10, pairs["train"][:20]
    repeat = steps * batch_size // len(train)
    sources = np.tile(batch([encoder.encode(s) + [1] for s, _ in train]), (repeat, 1))
    targets = np.tile(batch([encoder.encode(t) + [1] for _, t in train]), (repeat, 1))
    model.compile(optimizer=keras.optimizers.Adam(5e-3),
                  loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True, ignore_class=0))
    model.fit({"inputs": sources, "targets": targets}, targets, batch_size=batch_size, epochs=1, verbose=0)
    return model


def exported(model, corpus, tmp_path):
    problem, data_dir, _, _ = corpus
    path = ctranslate2_export.export(model, problem, str(tmp_path / "ct2"), data_dir)
    return ctranslate2.Translator(path, device="cpu", compute_type="float32")


def tokens(encoder, text):
    """What a CTranslate2 user feeds: the package's SentencePiece pieces (EOS is added by the model)."""
    return [encoder.piece(i) for i in encoder.encode(text)]


def ids_until_eos(row):
    row = list(row)
    return row[:row.index(1)] if 1 in row else row


def test_greedy_and_beam_outputs_equal_the_package_search(trained, corpus, tmp_path):
    _, _, encoder, pairs = corpus
    translator = exported(trained, corpus, tmp_path)
    texts = [s for s, _ in pairs["test"][:6]] + [s for s, _ in pairs["eval"][:4]]
    sources = [encoder.encode(text) + [1] for text in texts]
    # One batch, each row limited to its own source length + EXTRA (batched rows decode as they do alone).
    limits = [len(source) + EXTRA for source in sources]
    inputs, lengths = batch(sources), np.array(limits, np.int32)
    # In a graph, as the decoder runs them (eager steps took most of this test's time).
    greedy = tf.function(lambda: search.greedy(trained, inputs, max(limits), lengths=lengths), autograph=False)
    beam = tf.function(lambda: search.beam_search(trained, inputs, max(limits), beam_size=4, alpha=0.0,
                                                  lengths=lengths), autograph=False)
    (greedy_ids, _), (beam_ids, _) = greedy(), beam()
    greedy_ids, beam_ids = ops.convert_to_numpy(greedy_ids), ops.convert_to_numpy(beam_ids)
    finished = sum(1 in row for row in greedy_ids)
    for row, (text, max_length) in enumerate(zip(texts, limits)):
        ours = {"greedy": ids_until_eos(greedy_ids[row]), "beam": ids_until_eos(beam_ids[row, 0])}
        for name, beam_size in (("greedy", 1), ("beam", 4)):
            result = translator.translate_batch([tokens(encoder, text)], beam_size=beam_size, length_penalty=0.0,
                                                max_decoding_length=max_length, min_decoding_length=0)[0]
            theirs = [encoder._processor.piece_to_id(p) for p in result.hypotheses[0]]  # pylint: disable=protected-access
            assert theirs == ours[name], (f"{name} on {text!r}: {encoder.decode(theirs)!r} "
                                          f"vs {encoder.decode(ours[name])!r}")
    assert finished >= len(texts) - 2  # The outputs end by EOS, not by the length limit: a real comparison.
    # Translated text, not just ids: the trained model translates a training sentence.
    train_source, train_target = pairs["train"][0]
    result = translator.translate_batch([tokens(encoder, train_source)], beam_size=4)[0]
    assert encoder._processor.decode(result.hypotheses[0])[1:] == train_target  # pylint: disable=protected-access


@pytest.mark.parametrize("kwargs", [
    dict(position_encoding="sinusoid", norm_position="pre", shared_embedding_and_softmax_weights=False),
    dict(position_encoding="relative", max_relative_position=0, norm_position="pre", relative_values=False),
    dict(position_encoding="none", norm_epsilon=1e-3),
], ids=["sinusoid_prenorm_untied", "relative_k0_keys_only", "none"])
def test_other_architectures_score_and_decode_the_same(kwargs, corpus, tmp_path):
    _, _, encoder, pairs = corpus
    model = build(encoder.vocab_size, **kwargs)
    translator = exported(model, corpus, tmp_path)
    texts = [s for s, _ in pairs["test"][:3]]
    targets = [t for _, t in pairs["test"][:3]]
    scored = translator.score_batch([tokens(encoder, s) for s in texts], [tokens(encoder, t) for t in targets])
    for source, target, result in zip(texts, targets, scored):
        features = {"inputs": np.array([encoder.encode(source) + [1]]),
                    "targets": np.array([encoder.encode(target) + [1]])}
        log_probs = ops.convert_to_numpy(search._log_probs(model(features)))[0]  # pylint: disable=protected-access
        want = log_probs[np.arange(features["targets"].shape[1]), features["targets"][0]]
        np.testing.assert_allclose(result.log_probs, want, atol=2e-4, rtol=1e-4)
    source = encoder.encode(texts[0]) + [1]
    ours = ops.convert_to_numpy(search.greedy(model, np.array([source], np.int32), 8)[0])[0]
    result = translator.translate_batch([tokens(encoder, texts[0])], beam_size=1, max_decoding_length=8,
                                        min_decoding_length=0)[0]
    theirs = [encoder._processor.piece_to_id(p) for p in result.hypotheses[0]]  # pylint: disable=protected-access
    assert theirs == ids_until_eos(ours)


@pytest.mark.parametrize("make, reason", [
    (lambda v: build(v, heads_share_relative_embeddings=False), "relation tables per head"),
    (lambda v: build(v, position_encoding="both"), "position_encoding 'both'"),
    (lambda v: UniversalTransformer(v, v, hidden_size=16, filter_size=32, num_heads=2, num_rec_steps=2),
     "no Universal Transformer"),
], ids=["per_head_tables", "both_positions", "universal_transformer"])
def test_unsupported_models_are_refused_in_one_line(make, reason, corpus, tmp_path):
    problem, data_dir, encoder, _ = corpus
    model = make(encoder.vocab_size)
    with pytest.raises(ctranslate2_export.UnsupportedModelError, match=reason) as raised:
        ctranslate2_export.export(model, problem, str(tmp_path / "ct2"), data_dir)
    assert "\n" not in str(raised.value)
    assert not (tmp_path / "ct2").exists()
    # The trainer's check before training (`--export`) says the same, with no weights trained.
    with pytest.raises(ctranslate2_export.UnsupportedModelError, match=reason):
        ctranslate2_export.check_exportable(model, problem, data_dir)


def test_trainer_and_export_tool_write_a_ctranslate2_model(tmp_path):
    from test_cli import call_tool, run_tool  # pylint: disable=import-outside-toplevel

    make_raw(tmp_path)
    run, data_dir = tmp_path / "run", tmp_path / "data"
    trained = run_tool("t2t-relpos-trainer", "--problem=translate_local", "--hparams_set=transformer_cpu_rel",
                       "--hparams=batch_size=256,max_length=40,heads_share_relative_embeddings=true",
                       f"--data_dir={data_dir}", f"--tmp_dir={tmp_path}", f"--output_dir={run}", "--generate_data",
                       "--train_steps=2", "--checkpoint_every=2", "--schedule=train", "--export",
                       "--export_format=ctranslate2", timeout=400)
    assert trained.returncode == 0, trained.stdout + trained.stderr
    assert f"Exported a CTranslate2 model to {run / 'export_ctranslate2' / '2'}" in trained.stdout
    # The export tool in this process (test_cli.call_tool): the trainer above was the fresh process.
    again = call_tool("t2t-relpos-export", f"--output_dir={run}", f"--data_dir={data_dir}",
                      "--export_format=ctranslate2", f"--export_dir={tmp_path / 'ct2'}")
    assert again.returncode == 0, again.stderr
    encoder = registry.problem("translate_local").feature_encoders(str(data_dir))["inputs"]
    outputs = []
    for path in (run / "export_ctranslate2" / "2", tmp_path / "ct2"):
        assert {"model.bin", "config.json", "shared_vocabulary.json", "sentencepiece.model"} <= set(
            p.name for p in path.iterdir())
        translator = ctranslate2.Translator(str(path), device="cpu")
        result = translator.translate_batch([tokens(encoder, "the small dog runs")], beam_size=2,
                                            max_decoding_length=5)
        outputs.append(result[0].hypotheses[0])
    assert outputs[0] == outputs[1]
