"""A character vocabulary: every character of a training text is one id, whitespace and newlines included.

Ids: 0 = PAD, 1 = EOS, 2 = UNK (a character the training text did not have: text of another split, or a prompt),
then the characters in code point order from 3. The vocabulary is stored as a JSON list of its characters
(`save` / `load`), so that a newline or a tab is stored as safely as a letter.

Example:

>>> encoder = CharacterEncoder(characters_of(["to be,\\nor not"]))
>>> encoder.vocab_size
12
>>> encoder.encode("be not\\n")
[6, 7, 4, 8, 9, 11, 3]
>>> encoder.decode(encoder.encode("be not\\n"))
'be not\\n'
>>> encoder.decode(encoder.encode("bet?"))
'bet�'
"""

import hashlib
import json

from t2t_relpos import errors
from t2t_relpos.problems import problem

UNK_ID = problem.NUM_RESERVED_IDS
FIRST_ID = UNK_ID + 1
# What UNK decodes to: Unicode's replacement character, so that decoded text shows where something was lost.
UNK_TEXT = "\ufffd"


def characters_of(texts):
    """The distinct characters of `texts` (an iterable of str), in code point order."""
    found = set()
    for text in texts:
        found.update(text)
    return sorted(found)


class CharacterEncoder(problem.TextEncoder):
    """Text <-> ids one character at a time; a character outside the vocabulary is `UNK_ID`.

    Args:
        characters: The vocabulary: distinct one-character strings, in id order (ids from `FIRST_ID`).
    """

    def __init__(self, characters):
        characters = tuple(characters)
        if any(not isinstance(c, str) or len(c) != 1 for c in characters) or len(set(characters)) != len(
                characters):
            raise ValueError(f"a character vocabulary is distinct one-character strings, got {characters!r}")
        self.characters = characters
        self._ids = {c: FIRST_ID + i for i, c in enumerate(characters)}

    @property
    def vocab_size(self):
        return FIRST_ID + len(self.characters)

    def encode(self, text):
        return [self._ids.get(c, UNK_ID) for c in text]

    def unknown(self, text):
        """How many characters of `text` are not in the vocabulary, and which (sorted)."""
        missing = [c for c in text if c not in self._ids]
        return len(missing), sorted(set(missing))

    def decode(self, ids):
        out = []
        for i in problem.strip_ids(ids):
            if not UNK_ID <= i < self.vocab_size:
                raise ValueError(f"id {i} is outside the vocabulary of size {self.vocab_size}")
            out.append(UNK_TEXT if i == UNK_ID else self.characters[i - FIRST_ID])
        return "".join(out)

    def fingerprint(self):
        return "sha256:" + hashlib.sha256(_serialised(self.characters)).hexdigest()

    def graph_tokenizer(self):
        from t2t_relpos.data import graph_text  # pylint: disable=import-outside-toplevel  # Imports TensorFlow.

        return graph_text.CharacterTokenizer(self.characters)

    def save(self, path):
        """Writes the vocabulary to `path` (JSON), whole or not at all."""
        from t2t_relpos.data import preparation  # pylint: disable=import-outside-toplevel

        with preparation.written(path, "the character vocabulary") as partial:
            with open(partial, "wb") as f:
                f.write(_serialised(self.characters))

    @classmethod
    def load(cls, path):
        """The vocabulary `save` wrote to `path`; a missing, unreadable or malformed file is a `DataError`."""
        try:
            with open(path, "rb") as f:
                characters = json.loads(f.read().decode("utf-8"))
            return cls(characters)
        except FileNotFoundError:
            raise errors.DataError(f"no vocabulary at {path}") from None
        except OSError as e:
            raise errors.DataError(f"cannot read the vocabulary {path}: {e.strerror or e}") from None
        except (ValueError, TypeError) as e:
            raise errors.DataError(f"{path} is not a character vocabulary (a JSON list of characters): "
                                   f"{str(e).splitlines()[0]}") from None


def _serialised(characters):
    return (json.dumps(list(characters), ensure_ascii=True) + "\n").encode("ascii")
