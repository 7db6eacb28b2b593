"""WMT14 English-German and English-French (both directions): `wmt14_ende`, `wmt14_deen`, `wmt14_enfr`,
`wmt14_fren`, with the splits of Shaw et al. (2018) and Vaswani et al. (2017): newstest2013 for eval,
newstest2014 for test. The training data is tensorflow-datasets' `wmt14_translate/de-en` (Europarl v7,
CommonCrawl, News Commentary v9: about 4.5M pairs) or `fr-en` (those, the UN corpus and the 10^9 French-English
corpus: about 40M pairs).

Each split is taken from the first of these that is in --tmp_dir (looked up at once, nothing is downloaded
unless asked for):

1. Extracted plain text, one sentence per line, UTF-8, optionally gzipped (".gz" added): for de-en
   `train.de-en.en` + `train.de-en.de` (all training corpora concatenated, line-aligned),
   `newstest2013.de-en.en` + `newstest2013.de-en.de`, `newstest2014.de-en.en` + `newstest2014.de-en.de`;
   for fr-en the same with "fr".
2. The original archives under their published names (tensorflow-datasets' manual_dir names, see
   `ARCHIVES`); their size and SHA-256 are checked and the members needed are extracted to
   `<tmp_dir>/wmt14_extracted/`.
3. A tensorflow-datasets build of `wmt14_translate/<xx>-en` in `<tmp_dir>/tensorflow_datasets`; with
   `allow_download` (the tools' --download flag) it is built there if missing, downloading the archives that
   are not in tmp_dir (`try_download_gcs=False`: from the original sites, not a prepared copy).

When a split has none of these, the error lists the exact files for each way.
"""

import glob
import os
import socket
import threading

from t2t_relpos import errors, registry
from t2t_relpos.data import archives, parallel_text
from t2t_relpos.problems import translate

# The archives, with the sizes and SHA-256 sums tensorflow-datasets registers for them (url_checksums/).
ARCHIVES = {a.filename: a for a in (
    archives.Archive("training-parallel-europarl-v7.tgz",
                     "http://www.statmt.org/wmt13/training-parallel-europarl-v7.tgz", 657632379,
                     "0224c7c710c8a063dfd893b0cc0830202d61f4c75c17eb8e31836103d27d96e7"),
    archives.Archive("training-parallel-commoncrawl.tgz",
                     "http://www.statmt.org/wmt13/training-parallel-commoncrawl.tgz", 918311367,
                     "c7a74e2ea01ac6c920123108627e35278d4ccb5701e15428ffa34de86fa3a9e5"),
    archives.Archive("training-parallel-nc-v9.tgz",
                     "http://www.statmt.org/wmt14/training-parallel-nc-v9.tgz", 80418416,
                     "cb8953f292298e6877ae433c98912b927cb0766b303f4540512ddd286c748485"),
    archives.Archive("training-parallel-un.tgz",
                     "http://www.statmt.org/wmt13/training-parallel-un.tgz", 2365634246,
                     "29141b5c1eba149a94f7a59d3b1a834b2e47fe0f8758d68dcd77a3d3f497ee47"),
    archives.Archive("training-giga-fren.tar",
                     "http://www.statmt.org/wmt10/training-giga-fren.tar", 2595102720,
                     "3ff8319f6919393520559bfbc7ad6a747ec81b3abc7be9993b338d4b017b4d9a"),
    archives.Archive("dev.tgz", "http://data.statmt.org/wmt19/translation-task/dev.tgz", 38654961,
                     "7a7deccf82ebb05ba508dba5eb21356492224e8f630ec4f992132b029b4b25e7"),
)}

# Split -> the parts it concatenates: (archive, member of the xx side, member of the English side), as
# tensorflow-datasets' wmt14_translate reads them ("{xx}" is the other language).
_TRAIN_PARTS = {
    "de": (
        ("training-parallel-europarl-v7.tgz", "training/europarl-v7.{xx}-en.{xx}", "training/europarl-v7.{xx}-en.en"),
        ("training-parallel-commoncrawl.tgz", "commoncrawl.{xx}-en.{xx}", "commoncrawl.{xx}-en.en"),
        ("training-parallel-nc-v9.tgz", "training/news-commentary-v9.{xx}-en.{xx}",
         "training/news-commentary-v9.{xx}-en.en"),
    ),
}
_TRAIN_PARTS["fr"] = _TRAIN_PARTS["de"] + (
    ("training-parallel-un.tgz", "un/undoc.2000.{xx}-en.{xx}", "un/undoc.2000.{xx}-en.en"),
    ("training-giga-fren.tar", "giga-fren.release2.fixed.{xx}.gz", "giga-fren.release2.fixed.en.gz"),
)
_DEV_PARTS = (("dev.tgz", "dev/newstest2013.{xx}", "dev/newstest2013.en"),)
_TEST_PARTS = (("dev.tgz", "dev/newstest2014-{xx}en-src.{xx}.sgm", "dev/newstest2014-{xx}en-ref.en.sgm"),)

# Split -> the plain-text name (before ".<pair>.<language>") and tensorflow-datasets' split.
_PLAIN_NAMES = {"train": "train", "eval": "newstest2013", "test": "newstest2014"}
_TFDS_SPLITS = {"train": "train", "eval": "validation", "test": "test"}
_DOWNLOAD_SIZES = {"de": "about 1.7 GB", "fr": "about 6.6 GB"}
_PROBE_HOST = ("www.statmt.org", 80)


def network_reachable(address=_PROBE_HOST, timeout=3.0):
    """Whether a TCP connection to `address` opens within `timeout` seconds (name lookup included)."""
    opened = []

    def probe():
        try:
            socket.create_connection(address, timeout=timeout).close()
            opened.append(True)
        except OSError:
            pass

    thread = threading.Thread(target=probe, daemon=True)
    thread.start()
    thread.join(timeout)
    return bool(opened)


class Wmt14Translate(translate.TranslateProblem):
    """WMT14 between English and `other_language` (see the module docstring for where the data comes from).

    Attributes:
        other_language: "de" or "fr": the pair is `<other>-en`, as tensorflow-datasets names it.
    """

    other_language = "de"

    @property
    def pair(self):
        return f"{self.other_language}-en"

    def raw_sources(self, tmp_dir, splits, settings):
        del settings
        if not tmp_dir:
            raise errors.DataError(f"{self.name} needs --tmp_dir: " + self._missing_help("TMP_DIR", splits))
        sources = {}
        for split in splits:
            source = self._plain_source(tmp_dir, split) or self._archive_source(tmp_dir, split)
            if source is not None:
                sources[split] = source
        missing = [s for s in splits if s not in sources]
        if not missing:
            return sources
        prepared = glob.glob(os.path.join(self._tfds_dir(tmp_dir), "wmt14_translate", self.pair, "*",
                                          "dataset_info.json"))
        if not prepared:
            if not self.allow_download:
                raise errors.DataError(f"{self.name}: no WMT14 {self.pair} data for {', '.join(missing)} in "
                                       f"{tmp_dir}; " + self._missing_help(tmp_dir, missing))
            if not network_reachable():
                raise errors.DataError(f"{self.name}: --download was given but {_PROBE_HOST[0]} cannot be reached; "
                                       "download the files where it can be and " + self._missing_help(tmp_dir, missing))
        for split in missing:
            sources[split] = translate.RawSource(f"tensorflow-datasets wmt14_translate/{self.pair} "
                                                 f"{_TFDS_SPLITS[split]}", self._tfds_pairs(tmp_dir, split))
        return sources

    # -- the three ways ----------------------------------------------------------------------------------
    def _plain_names(self, split):
        return {lang: f"{_PLAIN_NAMES[split]}.{self.pair}.{lang}" for lang in (self.other_language, "en")}

    def _plain_source(self, tmp_dir, split):
        found = {}
        for lang, name in self._plain_names(split).items():
            paths = [p for p in (os.path.join(tmp_dir, name + gz) for gz in ("", ".gz")) if os.path.isfile(p)]
            if len(paths) > 1:
                raise errors.DataError(f"both {paths[0]} and {paths[1]} exist; keep one")
            if paths:
                found[lang] = paths[0]
        if not found:
            return None
        if len(found) == 1:
            (lang, path), = found.items()
            partner = self._plain_names(split)[self._other(lang)]
            raise errors.DataError(f"{path} has no partner: {os.path.join(tmp_dir, partner)} (or .gz) is missing")
        return self._source_of([(found[self.other_language], found["en"])])

    def _parts(self, split):
        parts = {"train": _TRAIN_PARTS[self.other_language], "eval": _DEV_PARTS, "test": _TEST_PARTS}[split]
        xx = self.other_language
        return [(name, member_xx.format(xx=xx), member_en.format(xx=xx)) for name, member_xx, member_en in parts]

    def _archive_source(self, tmp_dir, split):
        parts = self._parts(split)
        paths = {name: os.path.join(tmp_dir, name) for name, _, _ in parts}
        if not all(os.path.isfile(p) and os.path.getsize(p) == ARCHIVES[n].size for n, p in paths.items()):
            return None  # The error lists each archive as found, missing or of the wrong size.
        out_dir = os.path.join(tmp_dir, "wmt14_extracted")

        def files():
            for name, member_xx, member_en in parts:
                extracted = archives.extract_members(paths[name], ARCHIVES[name], [member_xx, member_en],
                                                     os.path.join(out_dir, name))
                yield extracted[member_xx], extracted[member_en]

        description = " + ".join(f"{name}:{xx}|{en}" for name, xx, en in parts)
        return self._source_of(files, description, raw_files=tuple(paths.values()))

    def _tfds_dir(self, tmp_dir):
        return os.path.join(tmp_dir, "tensorflow_datasets")

    def _tfds_pairs(self, tmp_dir, split):
        def pairs():
            import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel  # Slow; only here.

            builder = tfds.builder(f"wmt14_translate/{self.pair}", data_dir=self._tfds_dir(tmp_dir))
            if not builder.is_prepared():
                try:
                    builder.download_and_prepare(
                        download_dir=os.path.join(tmp_dir, "downloads"),
                        download_config=tfds.download.DownloadConfig(manual_dir=tmp_dir, try_download_gcs=False))
                except Exception as e:  # pylint: disable=broad-except  # The network's, tfds' checksums, ...
                    reason = (str(e).strip().splitlines() or [""])[0][:300]
                    raise errors.DataError(
                        f"{self.name}: --download was given but the download failed ({type(e).__name__}: {reason}); "
                        "get the files another way and " + self._missing_help(tmp_dir, [split])) from None
            for example in builder.as_dataset(split=_TFDS_SPLITS[split]).as_numpy_iterator():
                yield (example[self.source_language].decode("utf-8"),
                       example[self.target_language].decode("utf-8"))

        return pairs

    # -- helpers -----------------------------------------------------------------------------------------
    def _other(self, lang):
        return "en" if lang == self.other_language else self.other_language

    def _source_of(self, files, description=None, raw_files=None):
        """A RawSource over (xx file, en file) pairs, in this problem's direction.

        Args:
            files: A list of (xx path, en path), or a callable yielding them (archives extract on the way).
            description: For messages (default: the file names).
            raw_files: The files read, for the source's fingerprint (default: those of a list `files`).
        """
        to_english = self.target_language == "en"

        def pairs():
            for path_xx, path_en in (files() if callable(files) else files):
                for text_xx, text_en in parallel_text.aligned_pairs(path_xx, path_en):
                    yield (text_xx, text_en) if to_english else (text_en, text_xx)

        if description is None:
            description = " + ".join(f"{xx}|{en}" for xx, en in files)
        if raw_files is None:
            raw_files = () if callable(files) else tuple(path for pair in files for path in pair)
        return translate.RawSource(description, pairs, tuple(raw_files))

    def _missing_help(self, tmp_dir, splits):
        """Every file that would provide `splits`, in each of the ways; the download too, unless it was asked for
        (`allow_download`: the message says why it did not happen)."""
        uses = {}
        for split in splits:
            for name, _, _ in self._parts(split):
                uses.setdefault(name, []).append(split)
        lines = [f"put either (a) the original archives in {tmp_dir} (size and SHA-256 are checked):"]
        for name, used_by in uses.items():
            path = os.path.join(tmp_dir, name)
            state = "missing" if not os.path.isfile(path) else (
                "found" if os.path.getsize(path) == ARCHIVES[name].size else "wrong size")
            lines.append(f"    {name}  [{state}; for {', '.join(used_by)}]  {ARCHIVES[name].url}")
        lines.append(f"  or (b) extracted text in {tmp_dir}, one sentence per line, UTF-8, optionally gzipped (.gz):")
        for split in splits:
            names = self._plain_names(split)
            lines.append(f"    {names['en']} + {names[self.other_language]}  [{split}]")
        if not self.allow_download:
            lines.append(f"  or (c) pass --download to build tensorflow-datasets' wmt14_translate/{self.pair} in "
                         f"{self._tfds_dir(tmp_dir)} ({_DOWNLOAD_SIZES[self.other_language]} from statmt.org)")
        elif tmp_dir == "TMP_DIR":  # No --tmp_dir: the download needs one too.
            lines.append(f"  or (c) give --tmp_dir with --download: it builds tensorflow-datasets' wmt14_translate/"
                         f"{self.pair} in {self._tfds_dir(tmp_dir)} ({_DOWNLOAD_SIZES[self.other_language]} from "
                         "statmt.org)")
        return "\n".join(lines)


@registry.register_problem("wmt14_ende")
class Wmt14Ende(Wmt14Translate):
    """WMT14 English -> German."""

    other_language, source_language, target_language = "de", "en", "de"


@registry.register_problem("wmt14_deen")
class Wmt14Deen(Wmt14Translate):
    """WMT14 German -> English."""

    other_language, source_language, target_language = "de", "de", "en"


@registry.register_problem("wmt14_enfr")
class Wmt14Enfr(Wmt14Translate):
    """WMT14 English -> French."""

    other_language, source_language, target_language = "fr", "en", "fr"


@registry.register_problem("wmt14_fren")
class Wmt14Fren(Wmt14Translate):
    """WMT14 French -> English."""

    other_language, source_language, target_language = "fr", "fr", "en"
