"""`languagemodel_shakespeare_characters`: character-level Tiny Shakespeare, split as nanoGPT splits it.

Copy `tinyshakespeare.txt.gz` (Karpathy's char-rnn corpus, public at github.com/karpathy/char-rnn as
data/tinyshakespeare/input.txt; gzipped or not, and nanoGPT's name `input.txt` is read too) into --tmp_dir, then

    t2t-relpos-datagen --problem=languagemodel_shakespeare_characters --data_dir=DATA --tmp_dir=RAW
"""

import os
import zlib

from t2t_relpos import errors, registry
from t2t_relpos.problems import languagemodel, problem


def read_text(path):
    """The whole of a (possibly gzipped) UTF-8 file as it is (line ends kept), without a leading byte-order mark.

    Raises:
        DataError: in one line naming the file: missing, unreadable, damaged gzip data, invalid UTF-8.
    """
    import gzip  # pylint: disable=import-outside-toplevel

    from t2t_relpos.data import parallel_text  # pylint: disable=import-outside-toplevel

    try:
        with parallel_text.open_binary(path) as f:
            data = f.read()
    except EOFError:
        raise errors.DataError(f"{path}: the gzip data ends early (a truncated copy or download?)") from None
    except (zlib.error, gzip.BadGzipFile) as e:
        raise errors.DataError(f"{path}: not readable as gzip ({e}); a name ending in .gz must hold gzip "
                               "data") from None
    except OSError as e:
        raise errors.DataError(f"{path}: cannot be read: {e.strerror or e}") from None
    if data.startswith(parallel_text.UTF8_BOM):
        data = data[len(parallel_text.UTF8_BOM):]
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise errors.DataError(f"{path}: not valid UTF-8 (byte {data[e.start]:#04x} at offset {e.start:,})") from None


SHAKESPEARE_FILES = ("tinyshakespeare.txt.gz", "tinyshakespeare.txt", "input.txt")
# nanoGPT's split of Tiny Shakespeare: the first 90% of the characters train, the rest evaluates.
SHAKESPEARE_TRAIN_SHARE = 0.9


@registry.register_problem("languagemodel_shakespeare_characters")
class LanguagemodelShakespeareCharacters(languagemodel.CharacterLanguageModel):
    """Character-level Tiny Shakespeare, split 90/10 as nanoGPT does.

    Karpathy's char-rnn corpus, 1.1M characters, in nanoGPT's `shakespeare_char` split: the first 90% of the
    characters for training, the last 10% for eval; test is the same last 10% (the corpus has no third part).
    The name is ours: tensor2tensor had no such problem.

    The whole text is one document, not split at blank lines (they separate its speeches); each split's part
    ends in EOS. datagen reads `tinyshakespeare.txt.gz` (or `tinyshakespeare.txt`, or nanoGPT's name
    `input.txt`) from --tmp_dir: a copy of github.com/karpathy/char-rnn's data/tinyshakespeare/input.txt.
    """

    def documents_of_text(self, text):
        """The whole text is one document (its blank lines separate speeches)."""
        return [text] if text else []

    def raw_texts(self, tmp_dir, required=True):
        path = languagemodel.find_file(tmp_dir, SHAKESPEARE_FILES) if tmp_dir and os.path.isdir(tmp_dir) else None
        if path is None:
            if not required:
                return {}
            raise errors.DataError(
                f"{self.name}: no tinyshakespeare.txt.gz in --tmp_dir ({tmp_dir or 'not given'}); copy "
                "tinyshakespeare.txt.gz there (public: github.com/karpathy/char-rnn, "
                "data/tinyshakespeare/input.txt, gzipped or not)")

        def part(split):
            text = read_text(path)
            cut = int(len(text) * SHAKESPEARE_TRAIN_SHARE)
            return iter([text[:cut] if split == "train" else text[cut:]])

        return {split: languagemodel.RawText(path, lambda split=split: part(split), (path,))
                for split in problem.SPLITS}
