"""`translate_local`: a translation problem on your own parallel text.

Put the text in --tmp_dir under these names (UTF-8; any of them may be gzipped, with ".gz" added):

    train.src + train.tgt    line-aligned files: line i of train.tgt translates line i of train.src
    train.tsv                or one file of "source<TAB>target" lines
    dev.src + dev.tgt        (or dev.tsv) the eval split: required (evaluation during training)
    test.src + test.tgt      (or test.tsv) the test split: optional (`t2t-relpos-decoder --decode_split=test`)

or name the files yourself, with any settings of `translate.TranslateProblem`, in
`<tmp_dir>/translate_local.json` (relative paths are relative to tmp_dir):

    {"train": ["corpus/train.en.gz", "corpus/train.de.gz"], "dev": "valid.en-de.tsv",
     "test": ["test.en", "test.de"], "vocab_size": 8000}

then `t2t-relpos-datagen --problem=translate_local --data_dir=DATA --tmp_dir=RAW` and train with
`--data_dir=DATA`. Only datagen reads tmp_dir; training and decoding need only data_dir.

The problem's configuration lives with its raw data, not in hparams or flags, because problems are created by
name (`registry.problem("translate_local")`) and the trainer, decoder and datagen must all agree on it; once
prepared, data_dir holds everything (shards, vocabulary, `translate_local.datagen.json` with the settings).
For several corpora, use one data_dir each, or register named subclasses (each reads `<tmp_dir>/<its name>.json`):

    @registry.register_problem
    class TranslateMedicalEnDe(translate_local.TranslateLocal):
        pass
"""

import os

from t2t_relpos import errors, files, registry
from t2t_relpos.data import parallel_text
from t2t_relpos.problems import translate

# Split -> the name of its files in tmp_dir and in the settings file.
FILE_NAMES = {"train": "train", "eval": "dev", "test": "test"}


@registry.register_problem("translate_local")
class TranslateLocal(translate.TranslateProblem):
    """Translation of the user's own parallel text (see the module docstring for the files)."""

    required_splits = ("train", "eval")
    source_language = "source"
    target_language = "target"

    def extra_setting_names(self):
        return tuple(FILE_NAMES.values())

    def raw_sources(self, tmp_dir, splits, settings):
        if not tmp_dir or not os.path.isdir(tmp_dir):
            raise errors.DataError(f"{self.name} reads its text from --tmp_dir, which is "
                                   f"{'not given' if not tmp_dir else f'not a directory: {tmp_dir}'}; "
                                   + self._layout_help(tmp_dir or "TMP_DIR"))
        sources, missing = {}, []
        for split in splits:
            name = FILE_NAMES[split]
            source = (self._configured(tmp_dir, name, settings[name]) if name in settings
                      else self._by_name(tmp_dir, name))
            if source is not None:
                sources[split] = source
            elif split in self.required_splits:
                missing.append(name)
        if missing:
            raise errors.DataError(f"{self.name}: no {' or '.join(missing)} data in {tmp_dir}; "
                                   + self._layout_help(tmp_dir))
        return sources

    def _layout_help(self, tmp_dir):
        return (f"put train.src + train.tgt (line-aligned) or train.tsv (source<TAB>target), dev.* likewise "
                f"and optionally test.*, each possibly gzipped (.gz), in {tmp_dir}, or list your files in "
                f"{os.path.join(tmp_dir, self.name + '.json')}, e.g. "
                '{"train": ["train.en", "train.de"], "dev": "dev.tsv", "vocab_size": 8000}')

    def _configured(self, tmp_dir, name, value):
        """The source named in the settings file: a TSV path or a [source path, target path] list."""
        where = self.settings_path(tmp_dir)
        if isinstance(value, str):
            paths = [value]
        elif isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
            paths = list(value)
        else:
            raise errors.DataError(f"{where}: {name!r} must be a TSV path or a [source, target] pair of paths, "
                                   f"got {value!r}")
        paths = [os.path.join(tmp_dir, os.path.expanduser(p)) for p in paths]
        for path in paths:
            reason = files.not_a_file(path)
            if reason:
                raise errors.DataError(f"{where} names a {name} file that {reason}: {path}")
        return _source(paths)

    @staticmethod
    def _by_name(tmp_dir, name):
        """The files `<name>.src` + `<name>.tgt` or `<name>.tsv` (each possibly .gz), or None."""

        def find(suffix):
            names = [os.path.join(tmp_dir, f"{name}.{suffix}{gz}") for gz in ("", ".gz")]
            for path in names:  # There, but not a file: not to be reported missing.
                reason = files.not_a_file(path) if os.path.lexists(path) else None
                if reason:
                    raise errors.DataError(f"{path} {reason}; datagen reads the raw data from regular files")
            found = [p for p in names if os.path.isfile(p)]
            if len(found) > 1:
                raise errors.DataError(f"both {found[0]} and {found[1]} exist; keep one")
            return found[0] if found else None

        src, tgt, tsv = find("src"), find("tgt"), find("tsv")
        if (src or tgt) and tsv:
            raise errors.DataError(f"{tmp_dir} has both {name}.tsv and {name}.src/.tgt; keep one form")
        if bool(src) != bool(tgt):
            have, lack = (src, f"{name}.tgt") if src else (tgt, f"{name}.src")
            raise errors.DataError(f"{have} has no partner: {os.path.join(tmp_dir, lack)} (or .gz) is missing")
        if tsv:
            return _source([tsv])
        return _source([src, tgt]) if src else None


def _source(paths):
    if len(paths) == 1:
        return translate.RawSource(paths[0], lambda: parallel_text.tsv_pairs(paths[0]), tuple(paths))
    return translate.RawSource(" + ".join(paths), lambda: parallel_text.aligned_pairs(*paths), tuple(paths))
