"""Hparams: the named gin sets carry the paper's values; overrides are type-checked; runs store them."""

import json

import pytest
import tensorflow as tf

from t2t_relpos import errors, registry
from t2t_relpos.hparams import HParams, stored

SETS = ("transformer_base", "transformer_big", "transformer_base_rel", "transformer_big_rel",
        "transformer_big_rel_enfr", "transformer_tiny", "transformer_tiny_rel")


@pytest.mark.parametrize("name", SETS)
def test_every_set_loads(name):
    hp = registry.hparams(name)
    assert hp.hparams_set == name
    assert hp.hidden_size % hp.num_heads == 0


def test_base_has_the_papers_values():
    hp = registry.hparams("transformer_base")
    assert (hp.num_encoder_layers, hp.num_decoder_layers, hp.hidden_size, hp.num_heads) == (6, 6, 512, 8)
    assert hp.hidden_size // hp.num_heads == 64
    assert hp.filter_size == 1024
    assert hp.layer_prepostprocess_dropout == 0.1
    assert (hp.optimizer_adam_beta1, hp.optimizer_adam_beta2, hp.optimizer_adam_epsilon) == (0.9, 0.98, 1e-9)
    assert hp.learning_rate_schedule == "noam" and hp.learning_rate_warmup_steps == 4000
    assert hp.label_smoothing == 0.1
    assert hp.batch_size == 4096 and hp.train_steps == 100000
    assert (hp.beam_size, hp.alpha) == (4, 0.6)
    assert hp.position_encoding == "sinusoid"


def test_big_inherits_base_and_overrides():
    hp = registry.hparams("transformer_big")
    assert (hp.hidden_size, hp.num_heads, hp.filter_size) == (1024, 16, 4096)
    assert hp.hidden_size // hp.num_heads == 64
    assert hp.layer_prepostprocess_dropout == 0.3
    assert hp.train_steps == 300000 and hp.num_averaged_checkpoints == 20
    assert hp.learning_rate_warmup_steps == 4000  # inherited from base


def test_relative_sets():
    base = registry.hparams("transformer_base_rel")
    assert base.position_encoding == "relative"  # no absolute signal
    assert base.max_relative_position == 16 and not base.heads_share_relative_embeddings
    assert base.relative_keys and base.relative_values
    assert base.hidden_size == 512
    big = registry.hparams("transformer_big_rel")
    assert big.position_encoding == "relative"
    assert big.max_relative_position == 8 and big.heads_share_relative_embeddings
    assert big.hidden_size == 1024 and big.layer_prepostprocess_dropout == 0.3
    assert registry.hparams("transformer_big_rel_enfr").layer_prepostprocess_dropout == 0.1


def test_tiny_sets_are_tensor2tensors():
    """transformer_tiny is tensor2tensor's: transformer_base_v3 (pre-norm, FFN 2048, beta2 0.997, lr 2.0 x the
    noam schedule with 8000 warm-up steps) with 2 layers of width 128, FFN 512, 4 heads."""
    v3 = registry.hparams("transformer_base_v3")
    assert (v3.norm_position, v3.hidden_size, v3.filter_size, v3.num_heads) == ("pre", 512, 2048, 8)
    assert (v3.layer_prepostprocess_dropout, v3.attention_dropout, v3.relu_dropout) == (0.1, 0.1, 0.1)
    assert (v3.optimizer_adam_beta2, v3.learning_rate, v3.learning_rate_warmup_steps) == (0.997, 2.0, 8000)
    for name in ("transformer_tiny", "transformer_tiny_rel"):
        hp = registry.hparams(name)
        assert hp.num_encoder_layers == hp.num_decoder_layers == 2
        assert (hp.norm_position, hp.hidden_size, hp.filter_size, hp.num_heads) == ("pre", 128, 512, 4)
        assert (hp.learning_rate, hp.learning_rate_warmup_steps) == (2.0, 8000)
    assert registry.hparams("transformer_tiny_rel").position_encoding == "relative"


def test_cpu_sets_are_small_and_quick():
    for name in ("transformer_cpu", "transformer_cpu_rel"):
        hp = registry.hparams(name)
        assert hp.num_encoder_layers == hp.num_decoder_layers == 2
        assert (hp.hidden_size, hp.filter_size, hp.learning_rate_warmup_steps) == (64, 256, 400)
    assert registry.hparams("transformer_cpu_rel").position_encoding == "relative"


def test_overrides_are_typed():
    hp = registry.hparams("transformer_tiny").parse(
        "hidden_size=128,layer_prepostprocess_dropout=0,relative_keys=false,position_encoding=both")
    assert hp.hidden_size == 128 and isinstance(hp.layer_prepostprocess_dropout, float)
    assert hp.relative_keys is False and hp.position_encoding == "both"


@pytest.mark.parametrize("overrides, pattern", [
    ("hidden_size=x", r"'hidden_size' expects an int, got 'x'"),
    ("hidden_size=1.5", r"'hidden_size' expects an int"),
    ("relative_keys=maybe", r"'relative_keys' expects a bool"),
    ("label_smoothing=high", r"'label_smoothing' expects a float"),
    ("position_encoding=absolute", r"'position_encoding' must be one of 'sinusoid', 'relative'"),
    ("hidden_size", r"malformed --hparams item 'hidden_size': expected name=value"),
])
def test_bad_overrides_name_the_field(overrides, pattern):
    with pytest.raises(errors.HParamsError, match=pattern):
        registry.hparams("transformer_big_rel").parse(overrides)


def test_a_field_set_twice_is_refused():
    with pytest.raises(errors.HParamsError, match="'hidden_size' is set twice"):
        registry.hparams("transformer_tiny").parse("hidden_size=64,num_heads=4,hidden_size=128")


@pytest.mark.parametrize("overrides, pattern", [
    ("num_heads=0", r"'num_heads' must be >= 1, got 0"),
    ("num_heads=-4", r"'num_heads' must be >= 1, got -4"),
    ("hidden_size=64,num_heads=5", r"'num_heads' \(5\) must divide 'hidden_size' \(64\)"),
    ("max_relative_position=-1", r"'max_relative_position' must be >= 0, got -1"),
    ("layer_prepostprocess_dropout=1.5", r"'layer_prepostprocess_dropout' must be in \[0, 1\)"),
    ("beam_size=0", r"'beam_size' must be >= 1"),
    # Accepted before: -1 trained by gradient ascent, NaN saved a checkpoint of NaNs and then crashed.
    ("learning_rate=-1", r"'learning_rate' must be > 0, got -1.0"),
    ("learning_rate=nan", r"'learning_rate' must be a finite number, got nan"),
    ("label_smoothing=nan", r"'label_smoothing' must be a finite number"),
    ("optimizer_adam_beta2=1.0", r"'optimizer_adam_beta2' must be in \[0, 1\)"),
    ("act_loss_weight=-0.5", r"'act_loss_weight' must be >= 0"),
])
def test_resolved_hparams_that_cannot_build_a_model_name_the_field(overrides, pattern):
    with pytest.raises(errors.HParamsError, match=pattern):
        stored.resolve("transformer_tiny_rel", overrides)


def test_heads_need_not_divide_the_width_with_explicit_head_depths():
    hp = stored.resolve("transformer_tiny_rel", "hidden_size=64,num_heads=5,attention_key_channels=8,"
                        "attention_value_channels=8")
    assert hp.num_heads == 5


@pytest.mark.parametrize("name", registry.list_hparams())
def test_every_registered_set_passes_the_checks(name):
    from t2t_relpos.hparams import checks  # pylint: disable=import-outside-toplevel

    checks.check(registry.hparams(name))


def test_unknown_field_lists_close_names():
    with pytest.raises(errors.UnknownNameError, match=r"unknown hparam 'hiden_size'; did you mean 'hidden_size'"):
        registry.hparams("transformer_big_rel").parse("hiden_size=3")


def test_attribute_errors_and_assignment_checks():
    hp = HParams(a=1, b="x", c=[1, 2])
    hp.a = 3
    with pytest.raises(errors.HParamsError):
        hp.a = "three"
    with pytest.raises(AttributeError, match="did you mean 'a'"):
        _ = hp.aa
    assert hp.parse("c=[3,4,5]").c == [3, 4, 5]


def test_gin_params_and_files_pass_through(tmp_path):
    extra = tmp_path / "extra.gin"
    extra.write_text("hparams.num_heads = 2\n")
    hp = stored.resolve("transformer_tiny", "hidden_size=32", [str(extra)], ["hparams.filter_size = 48"])
    assert (hp.num_heads, hp.filter_size, hp.hidden_size) == (2, 48, 32)
    assert hp.hparams_set == "transformer_tiny"


def test_gin_binding_of_unknown_field_is_named():
    with pytest.raises(errors.UnknownNameError, match="'num_head'; did you mean 'num_heads'"):
        stored.resolve("transformer_tiny", gin_params=["hparams.num_head = 2"])


def test_a_gin_error_is_one_line():
    # gin's own message runs over three lines (the error, where, the binding quoted).
    with pytest.raises(errors.HParamsError) as raised:
        stored.resolve("transformer_tiny", gin_params=["other.x = 3"])
    assert "No configurable matching 'other'" in str(raised.value) and "other.x = 3" in str(raised.value)
    assert "\n" not in str(raised.value)


def test_gin_round_trip():
    hp = registry.hparams("transformer_big_rel").parse("hidden_size=256")
    from t2t_relpos.hparams import hparams_lib

    again = hparams_lib.gin_bindings(bindings=hp.to_gin().splitlines()[1:])
    assert again == hp.values()


def test_save_and_reload(tmp_path):
    hp = stored.resolve("transformer_tiny_rel", "hidden_size=96")
    stored.save(str(tmp_path), hp, "algorithmic_reverse_decimal40", "transformer")
    record = json.loads((tmp_path / "hparams.json").read_text())
    assert record["hparams_set"] == "transformer_tiny_rel" and record["hparams"]["hidden_size"] == 96
    assert "hparams.hidden_size = 96" in (tmp_path / "operative_config.gin").read_text()
    again, problem, model = stored.resolve_for_run(str(tmp_path))
    assert again == hp and again.hparams_set == "transformer_tiny_rel"
    assert (problem, model) == ("algorithmic_reverse_decimal40", "transformer")
    # Repeating the same request is fine.
    stored.resolve_for_run(str(tmp_path), "transformer_tiny_rel", "hidden_size=96")


def test_a_run_stored_before_a_field_existed_keeps_the_behaviour_it_was_trained_with(tmp_path):
    """adaptive_universal_transformer_tiny now runs tensor2tensor's ACT (act_type 'basic'); a run of it stored
    before act_type existed was trained with the original ACT and must reload with it ('copy', the default),
    not with the set's new value."""
    assert registry.hparams("adaptive_universal_transformer_tiny").act_type == "basic"
    stored.save(str(tmp_path), stored.resolve("adaptive_universal_transformer_tiny"), "p", "universal_transformer")
    record = json.loads((tmp_path / "hparams.json").read_text())
    del record["hparams"]["act_type"]
    (tmp_path / "hparams.json").write_text(json.dumps(record))
    again, _, _ = stored.resolve_for_run(str(tmp_path))
    assert again.act_type == "copy" and again.recurrence_type == "act"


def test_the_adaptive_sets_run_tensor2tensors_act():
    """tensor2tensor's adaptive sets and the bAbI ones run its ACT ('basic'); the CPU sets keep 'copy'."""
    for name in ("adaptive_universal_transformer_tiny", "adaptive_universal_transformer_base_rel",
                 "adaptive_universal_transformer_babi", "adaptive_universal_transformer_babi_rel"):
        assert registry.hparams(name).act_type == "basic", name
    assert registry.hparams("adaptive_universal_transformer_cpu_rel").act_type == "copy"
    for name in ("adaptive_universal_transformer_cpu_matched", "adaptive_universal_transformer_cpu_matched_rel"):
        assert registry.hparams(name).act_type == "basic", name


@pytest.mark.parametrize("transformer, universal", [("transformer_cpu", "universal_transformer_cpu_matched"),
                                                    ("transformer_cpu_rel", "universal_transformer_cpu_matched_rel")])
def test_the_matched_universal_transformers_have_the_transformers_parameters(transformer, universal):
    """The paper compares a UT and a Transformer of equal parameter counts (§3.5): the *_matched sets recur for
    transformer_cpu's layer count and are widened to its parameters (within 3% at a 4000-piece vocabulary)."""
    def parameters(name, **overrides):
        hp = registry.hparams(name).override(**overrides)
        model = registry.model(hp.model).from_hparams(hp, 4000, 4000)
        model.build()
        return model.count_params()

    base, ut = registry.hparams(transformer), registry.hparams(universal)
    assert ut.num_rec_steps == base.num_encoder_layers == base.num_decoder_layers
    assert ut.act_max_steps == 2 * ut.num_rec_steps and ut.position_encoding == base.position_encoding
    assert (ut.batch_size, ut.learning_rate, ut.learning_rate_warmup_steps) == (
        base.batch_size, base.learning_rate, base.learning_rate_warmup_steps)
    target = parameters(transformer)
    for name in (universal, "adaptive_" + universal):
        assert abs(parameters(name) / target - 1.0) < 0.03, name
    # Not by accident: the same UT at transformer_cpu's width has a third fewer.
    assert parameters(universal, hidden_size=64, filter_size=256) < 0.8 * target


def test_a_resumed_run_is_compared_only_on_what_the_command_sets(tmp_path):
    stored.save(str(tmp_path), stored.resolve("transformer_tiny_rel", "filter_size=256"), "p", "transformer")
    # Refused before, as "filter_size=256 (asked 512)", though the command says nothing of filter_size.
    again, _, _ = stored.resolve_for_run(str(tmp_path), overrides="hidden_size=128")
    assert again.filter_size == 256
    with pytest.raises(errors.HParamsError, match=r"different hparams: filter_size=256 \(asked 512\); use"):
        stored.resolve_for_run(str(tmp_path), overrides="hidden_size=128,filter_size=512")
    with pytest.raises(errors.HParamsError, match=r"filter_size=256 \(asked 300\)"):
        stored.resolve_for_run(str(tmp_path), gin_params=["hparams.filter_size = 300"])


def test_a_different_set_for_a_stored_run_is_refused(tmp_path):
    stored.save(str(tmp_path), stored.resolve("transformer_tiny_rel"), "p", "transformer")
    with pytest.raises(errors.HParamsError, match="--hparams_set=transformer_tiny_rel, not transformer_tiny"):
        stored.resolve_for_run(str(tmp_path), "transformer_tiny")
    with pytest.raises(errors.HParamsError, match=r"hidden_size=128 \(asked 80\)"):
        stored.resolve_for_run(str(tmp_path), hparams_set=None, overrides="hidden_size=80")
    with pytest.raises(errors.HParamsError, match="--problem=p, not q"):
        stored.resolve_for_run(str(tmp_path), problem="q")


def test_new_run_needs_a_set(tmp_path):
    with pytest.raises(errors.HParamsError, match="--hparams_set is required"):
        stored.resolve_for_run(str(tmp_path))


def test_the_readme_and_docs_are_true_to_the_sets():
    """Gin bindings shown in the README and the docs name real fields, and the sets table's transformer_base
    row (docs/guide/models_and_hparams.md) has the set's shape."""
    import pathlib  # pylint: disable=import-outside-toplevel
    import re  # pylint: disable=import-outside-toplevel

    from t2t_relpos.hparams import defaults  # pylint: disable=import-outside-toplevel

    root = pathlib.Path(__file__).resolve().parent.parent
    known = defaults.default_hparams()
    for path in [root / "README.md", *sorted((root / "docs").glob("**/*.md"))]:
        for name in re.findall(r"hparams\.(\w+) =", path.read_text(encoding="utf-8")):
            assert name in known, f"{path.relative_to(root)} binds hparams.{name}, which does not exist"
    sets_page = (root / "docs" / "guide" / "models_and_hparams.md").read_text(encoding="utf-8")
    row = re.search(r"^\| `transformer_base` \|.*$", sets_page, re.MULTILINE).group(0)
    hp = registry.hparams("transformer_base")
    for fact in (f"d {hp.hidden_size}", f"FFN {hp.filter_size}", f"{hp.num_heads} heads"):
        assert fact in row, (fact, row)


@pytest.mark.parametrize("text", ['{"hidden_size": 512, "num_heads": 8}', "{}", "[1, 2]"])
def test_a_run_description_that_is_not_ours_is_one_error(tmp_path, text):
    # tensor2tensor writes a flat hparams.json into its output directory; reading one was a KeyError.
    (tmp_path / "hparams.json").write_text(text)
    with pytest.raises(errors.HParamsError, match="is not a t2t-relpos run's description"):
        stored.resolve_for_run(str(tmp_path), "transformer_tiny_rel")


def test_checkpoints_without_a_run_description_are_not_taken_for_a_new_run(tmp_path):
    # They were restored into whatever model the command asked for (or ended in a traceback).
    tf.train.Checkpoint(v=tf.Variable(1.0)).save(str(tmp_path / "ckpt"))
    with pytest.raises(errors.HParamsError, match="holds checkpoints but no hparams.json"):
        stored.resolve_for_run(str(tmp_path), "transformer_tiny_rel", problem="p")
