"""`languagemodel_local` and `languagemodel_local_characters`: language models of your own text.

Put the text in --tmp_dir under these names (UTF-8; any of them may be gzipped, `.txt.gz`):

    train.txt    the training text: required
    dev.txt      the eval split: required (evaluation during training)
    test.txt     the test split: optional

Documents are separated by blank lines (lines empty or of white space only; several count as one); the lines
of a document are joined by newlines, which are part of its text. Each document is followed by EOS in the
stream that is cut into windows (see `t2t_relpos.problems.languagemodel`). Then

    t2t-relpos-datagen --problem=languagemodel_local --data_dir=DATA --tmp_dir=RAW

and train with `--data_dir=DATA`: only datagen reads tmp_dir. `languagemodel_local` trains a SentencePiece
vocabulary on the lines of train.txt (its settings in `<tmp_dir>/languagemodel_local.json`, e.g.
`{"vocab_size": 8000}`); `languagemodel_local_characters` has one id per character of train.txt, and a
character of dev.txt or test.txt that train.txt lacks is the unknown id (datagen says how many there were).
For several corpora, use one data_dir each, or register named subclasses (each reads its own settings file).
"""

import os

from t2t_relpos import errors, registry
from t2t_relpos.problems import languagemodel

# Split -> the name of its raw file in --tmp_dir (`<name>.txt` or `<name>.txt.gz`).
FILE_NAMES = {"train": "train", "eval": "dev", "test": "test"}


class LocalText(languagemodel.LanguageModelProblem):
    """Your own text in --tmp_dir: `train.txt` and `dev.txt`, and optionally `test.txt`, each possibly gzipped
    (`.txt.gz`); UTF-8, documents separated by blank lines (lines empty or of white space only), the lines of a
    document joined by newlines."""

    def raw_texts(self, tmp_dir, required=True):
        if not tmp_dir or not os.path.isdir(tmp_dir):
            if not required:
                return {}
            where = "not given" if not tmp_dir else f"not a directory: {tmp_dir}"
            raise errors.DataError(f"{self.name} reads its text from --tmp_dir, which is {where}; "
                                   + self._layout_help(tmp_dir or "TMP_DIR"))
        from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

        sources, missing = {}, []
        for split, name in FILE_NAMES.items():
            path = languagemodel.find_file(tmp_dir, [f"{name}.txt", f"{name}.txt.gz"])
            if path:
                read = lambda path=path: languagemodel.documents_of(parallel_text.read_lines(path))
                sources[split] = languagemodel.RawText(path, read, (path,))
            elif required and split in self.required_splits:
                missing.append(f"{name}.txt")
        if missing:
            raise errors.DataError(f"{self.name}: no {' or '.join(missing)} in {tmp_dir}; "
                                   + self._layout_help(tmp_dir))
        return sources

    def _layout_help(self, tmp_dir):
        return (f"put train.txt and dev.txt (and optionally test.txt), UTF-8 text with documents separated by "
                f"blank lines, each possibly gzipped (.txt.gz), in {tmp_dir}")


@registry.register_problem("languagemodel_local")
class LanguagemodelLocal(LocalText, languagemodel.SentencePieceLanguageModel):
    """A language model of your own text with a SentencePiece vocabulary.

    The files are `LocalText`'s; the settings, in `<tmp_dir>/languagemodel_local.json`, those of
    `SentencePieceLanguageModel`.
    """


@registry.register_problem("languagemodel_local_characters")
class LanguagemodelLocalCharacters(LocalText, languagemodel.CharacterLanguageModel):
    """A character-level language model of your own text.

    The files are `LocalText`'s; the vocabulary is the characters of train.txt, newlines inside a document
    included.
    """

