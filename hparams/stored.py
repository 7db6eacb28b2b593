"""The hyperparameters of a run, stored in its output directory so later runs and the decoder agree.

`<output_dir>/hparams.json` holds the set name, problem, model and every resolved value, and what else the
run depends on: its vocabularies (sizes and fingerprints, checked by the decoder and on resuming), the
`--usr_dir` modules it was trained with, and the trainer's `--mixed_precision` (checked on resuming);
`<output_dir>/operative_config.gin` holds the same values as a gin file that reproduces them.
tensor2tensor silently mixed a stored run with a different `--hparams_set`; here that is an error.

A stored record is read as carefully as a command line: its values pass the checks `--hparams` gets, so a
hand-edited `hparams.json` is refused in one line that names it, not by a model failing half-built.
"""

import json
import os

import tensorflow as tf

from t2t_relpos import errors, files, registry
from t2t_relpos.hparams import checks, hparams_lib

JSON_NAME = "hparams.json"
GIN_NAME = "operative_config.gin"


def resolve(hparams_set=None, overrides="", gin_files=(), gin_params=()):
    """The set `hparams_set`, then `gin_files`/`gin_params`, then `--hparams` overrides, checked."""
    hp = registry.hparams(hparams_set)
    if gin_files or gin_params:
        name = hp.hparams_set
        hp = hparams_lib.from_gin_files(gin_files, gin_params, base=hp)
        hp.hparams_set = name
    return checks.check(hp.parse(overrides))


def save(output_dir, hp, problem, model, **details):
    """Writes the run description (atomically: a crash never leaves half a file).

    `details` are recorded beside the hparams, e.g. `vocabulary` (see `Problem.vocabulary`) and `usr_dirs`
    (the user modules the run needs), which the decoder checks.
    """
    tf.io.gfile.makedirs(output_dir)
    record = {"hparams_set": hp.hparams_set, "problem": problem, "model": model, "hparams": hp.values(),
              **details}
    _atomic_write(os.path.join(output_dir, JSON_NAME), json.dumps(record, indent=2, sort_keys=True) + "\n")
    _atomic_write(os.path.join(output_dir, GIN_NAME), hp.to_gin())


def load_record(output_dir):
    """The run description of `output_dir` as a dict, or None when it holds no run."""
    path = os.path.join(output_dir, JSON_NAME)
    if not tf.io.gfile.exists(path):
        return None
    with tf.io.gfile.GFile(path) as f:
        try:
            record = json.load(f)
        except json.JSONDecodeError as e:
            raise errors.HParamsError(f"{path} is not valid JSON ({e}); remove it or use a new --output_dir") from None
    if not isinstance(record, dict) or not isinstance(record.get("hparams"), dict):
        # E.g. tensor2tensor's own hparams.json, a flat dict of values.
        raise errors.HParamsError(f"{path} is not a t2t-relpos run's description (it has no 'hparams' entry); "
                                  "use a new --output_dir")
    _check_record(record, path)
    return record


def _check_record(record, path):
    """Raises `HParamsError` naming `path` where an entry of the record (besides the hparams, which `load`
    checks) is not of the form the trainer writes: e.g. a hand-edited vocabulary or precision."""

    def fail(name, wanted):
        raise errors.HParamsError(f"{path}: {name!r} must be {wanted}, got {record[name]!r} (was the file edited? "
                                  "restore it, or use a new --output_dir)")

    for name in ("hparams_set", "problem", "model"):
        if record.get(name) is not None and not isinstance(record[name], str):
            fail(name, "a string")
    for name in ("usr_dirs", "averaged_checkpoints"):
        if name in record and not (isinstance(record[name], list) and all(isinstance(x, str) for x in record[name])):
            fail(name, "a list of strings")
    if record.get("mixed_precision") not in (None, "none", "mixed_float16", "mixed_bfloat16"):
        fail("mixed_precision", "'none', 'mixed_float16' or 'mixed_bfloat16'")
    vocabulary = record.get("vocabulary")
    if vocabulary is not None and not (isinstance(vocabulary, dict) and all(
            isinstance(v, dict) and isinstance(v.get("size"), int)
            and isinstance(v.get("fingerprint", ""), (str, type(None)))
            for v in vocabulary.values())):
        fail("vocabulary", "{feature: {'size': int, 'fingerprint': str or null}}")


def check_vocabulary(output_dir, vocabulary, data_dir=None):
    """Raises `DataError` when `vocabulary` (of the problem read from `data_dir`) is not the run's.

    A model decoded with another vocabulary of the same size would turn out fluent garbage; of another size,
    it would not load. Runs stored before vocabularies were recorded are not checked.
    """
    record = load_record(output_dir) or {}
    difference = vocabulary_difference(record.get("vocabulary"), vocabulary)
    if difference:
        feature, was, now = difference
        where = f"--data_dir={data_dir}" if data_dir else "the problem"
        raise errors.DataError(
            f"{where} has another {feature} vocabulary ({describe(now)}) than the one the run in "
            f"{output_dir} was trained with ({describe(was)}); give the --data_dir it was trained with")


def vocabulary_difference(recorded, vocabulary):
    """The first `(feature, recorded entry, other entry)` where two vocabulary records (`Problem.vocabulary`)
    differ in size or fingerprint; None where they agree (or one of them is unknown)."""
    for feature in sorted(set(recorded or {}) & set(vocabulary or {})):
        was, now = recorded[feature], vocabulary[feature]
        if was["size"] != now["size"] or (was.get("fingerprint") and now.get("fingerprint") and
                                          was["fingerprint"] != now["fingerprint"]):
            return feature, was, now
    return None


def check_precision(output_dir, mixed_precision):
    """Raises `HParamsError` when the run in `output_dir` was trained with `--mixed_precision=mixed_float16` and
    this one is not, or the other way round: its optimizer is wrapped in loss scaling, so the checkpoints
    differ. (float32 and mixed_bfloat16 share their checkpoints: a run may switch between them.) Runs stored
    before the precision was recorded are not checked here; their checkpoints then refuse to load."""
    recorded = (load_record(output_dir) or {}).get("mixed_precision")
    asked = mixed_precision or "none"
    if recorded and recorded != asked and "mixed_float16" in (recorded, asked):
        raise errors.HParamsError(
            f"{output_dir} holds a run trained with --mixed_precision={recorded}, not {asked} (mixed_float16's "
            f"checkpoints hold the loss scale too); resume with --mixed_precision={recorded}, or use a new "
            "--output_dir")


def describe(vocab):
    """A vocabulary record's entry in a message: `12 ids, sha256:0123456789ab`."""
    fingerprint = vocab.get("fingerprint")
    return f"{vocab['size']} ids" + (f", {fingerprint[:19]}" if fingerprint else "")


def load(output_dir):
    """Returns `(hparams, problem, model)` stored in `output_dir`, or None when it holds no run."""
    record = load_record(output_dir)
    if record is None:
        return None
    from t2t_relpos.hparams import defaults  # pylint: disable=import-outside-toplevel

    hp = defaults.default_hparams()
    try:
        for name, value in record["hparams"].items():
            if name in hp:
                hp.set_hparam(name, value)
            else:  # A field added by a user's module: keep it.
                hp.add_hparam(name, value)
        checks.check(hp)  # As --hparams would be: a value no model can use fails here, not half-way into one.
    except errors.HParamsError as e:
        raise errors.HParamsError(f"{os.path.join(output_dir, JSON_NAME)}: {e} (was the file edited? restore it, "
                                  "or use a new --output_dir)") from None
    hp.hparams_set = record.get("hparams_set")
    return hp, record.get("problem"), record.get("model")


def resolve_for_run(output_dir, hparams_set=None, overrides="", gin_files=(), gin_params=(),
                    problem=None, model=None):
    """The hyperparameters, problem and model of a (new or resumed) run in `output_dir`.

    A new directory needs `hparams_set` and `problem`. A directory with a stored run reloads it; asking for a
    different set, problem or model, or overriding a stored value with another, is an error that names the
    difference, instead of silently mixing two configurations.
    """
    stored = load(output_dir) if output_dir else None
    if stored is None:
        from t2t_relpos.training import checkpoints  # pylint: disable=import-outside-toplevel

        if output_dir and checkpoints.listed(output_dir):
            raise errors.HParamsError(f"{output_dir} holds checkpoints but no hparams.json, so not a run of "
                                      "t2t-relpos-trainer that it could resume; use a new --output_dir")
        if not hparams_set:
            raise errors.HParamsError("--hparams_set is required for a new run")
        hp = resolve(hparams_set, overrides, gin_files, gin_params)
        return hp, problem, model or hp.model

    stored_hp, stored_problem, stored_model = stored
    where = f"{output_dir} holds a run of"
    if hparams_set and hparams_set != stored_hp.hparams_set:
        raise errors.HParamsError(
            f"{where} --hparams_set={stored_hp.hparams_set}, not {hparams_set}; "
            "use a new --output_dir or drop --hparams_set to resume")
    if problem and stored_problem and problem != stored_problem:
        raise errors.HParamsError(f"{where} --problem={stored_problem}, not {problem}; use a new --output_dir")
    if model and stored_model and model != stored_model:
        raise errors.HParamsError(f"{where} --model={stored_model}, not {model}; use a new --output_dir")
    if overrides or gin_files or gin_params:
        requested = resolve(stored_hp.hparams_set, overrides, gin_files, gin_params)
        # Only what this command sets: a value the stored run overrode and this command leaves alone is not a
        # conflict (comparing whole sets once blamed it, "learning_rate=0.5 (asked 2.0)", on a command that
        # never named it). But everything it sets, by every route: each field `--hparams` names and each one
        # its gin files (with what they include) and bindings bind, compared with the stored run. (Comparing
        # a gin file's values with the set's let `hidden_size = 128` resume a run made at 64, at 64.)
        asked = hparams_lib.override_names(overrides) | set(hparams_lib.gin_bindings(gin_files, gin_params))
        changed = [n for n in requested.diff(stored_hp) if n in requested and n in asked]
        if changed:
            details = ", ".join(f"{n}={stored_hp.get(n)!r} (asked {requested.get(n)!r})" for n in changed)
            raise errors.HParamsError(
                f"{where} different hparams: {details}; use a new --output_dir to change them")
    return stored_hp, stored_problem or problem, stored_model or model


def _atomic_write(path, text):
    """Writes `path` whole or not at all: a full disk leaves the earlier file and no temporary beside it."""
    if "://" not in path:
        with files.atomic_write(path, what="the run's description") as f:
            f.write(text)
        return
    tmp = path + ".tmp"
    with tf.io.gfile.GFile(tmp, "w") as f:
        f.write(text)
    tf.io.gfile.rename(tmp, path, overwrite=True)
