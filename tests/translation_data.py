"""Small made-up parallel text for the translation tests: English with German and French, written by the tests
into temporary directories (no downloads, no real corpora)."""

import gzip
import io
import os
import random
import tarfile

ENGLISH = ("the small dog runs over the green bridge", "a girl plays in the water with her brother",
           "two men are cooking in a big kitchen", "the old woman reads a book near the window",
           "children eat ice cream in the summer", "a man rides a bicycle through the city")
GERMAN = ("der kleine Hund läuft über die grüne Brücke", "ein Mädchen spielt im Wasser mit ihrem Bruder",
          "zwei Männer kochen in einer großen Küche", "die alte Frau liest ein Buch am Fenster",
          "Kinder essen im Sommer Eis", "ein Mann fährt mit dem Fahrrad durch die Straßen der Stadt")
FRENCH = ("le petit chien court sur le pont vert", "une fille joue dans l'eau avec son frère",
          "deux hommes cuisinent dans une grande cuisine", "la vieille femme lit un livre près de la fenêtre",
          "les enfants mangent une glace en été", "un homme fait du vélo à travers la ville, déjà très animée")

# Text that a careless vocabulary would not give back as written: umlauts, ß, accents (precomposed and
# combining), ligatures, typographic quotes and dashes, leading/trailing/double spaces, a tab, a no-break
# space, and characters the vocabulary never saw (spelled with byte pieces).
HARD_TEXT = ("Größe, Übermaß und Spaß – „Straße“ über Äpfel", "  zwei  Leerzeichen\tund ein Tab ",
             "« Ça déjà ! » — élève, cœur, naïve, Noël", "e\u0301te\u0301 (combining) vs été",
             "ﬁn ﬂ ＡＢＣ (ligatures, full width)", "no\u00a0break", " leading", "trailing  ", "",
             "Ærø ÿ 𝄞 漢字 🙂 ŒUVRE")


def sentences(language_words, count, seed):
    """`count` sentences mixing the words of the given sentences (deterministic for the seed)."""
    rng = random.Random(seed)
    words = " ".join(language_words).split()
    return [" ".join(rng.choice(words) for _ in range(rng.randint(2, 9))) for _ in range(count)]


def pairs(count, seed, other=GERMAN):
    """(English, other) pairs: one or two aligned sentences and a number, copied (so every pair is distinct
    and there is something to learn)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        chosen = [rng.randrange(len(ENGLISH)) for _ in range(rng.randint(1, 2))]
        number = rng.randrange(1000)
        out.append((" ".join(ENGLISH[i] for i in chosen) + f" {number}",
                    " ".join(other[i] for i in chosen) + f" {number}"))
    return out


def write_lines(path, lines):
    data = "".join(line + "\n" for line in lines).encode("utf-8")
    if str(path).endswith(".gz"):
        data = gzip.compress(data, mtime=0)
    os.makedirs(os.path.dirname(str(path)), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def sgm(lines, lang):
    body = "".join(f'<seg id="{i}">{line}</seg>\n' for i, line in enumerate(lines, 1))
    return f'<srcset setid="newstest2014" srclang="any">\n<doc sysid="ref" docid="d" origlang="{lang}">\n' \
           f"<p>\n{body}</p>\n</doc>\n</srcset>\n"


def write_tar(path, members):
    """A tar archive (gzipped if `path` ends in .tgz) with `members`: {name: bytes}."""
    mode = "w:gz" if str(path).endswith((".tgz", ".gz")) else "w"
    with tarfile.open(path, mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return str(path)
