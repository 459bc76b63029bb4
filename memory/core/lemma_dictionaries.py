"""simplemma's dictionaries, read in place and opened in milliseconds from a block index built once per machine.

simplemma's read-in-place dictionaries (``StreamMap``) keep each language's decompressed stream and an index of
every 32nd record, which they build by decoding the whole stream in Python on every start: about 3 s for Polish
and 5 s for the five languages the support rules read, holding the interpreter's lock. The index depends only on
the shipped file, so it is built once and kept with kith's other derived model files
(:func:`ground.model_cache.model_cache_dir`, under ``lemmas/``), written with :mod:`marshal` (plain data: ints
and bytes, no code runs on reading it). A later start decompresses the stream (a tenth of a second) and reads the
index. A cached index that does not match its stream (another simplemma, a damaged file) is built again.
"""

from __future__ import annotations

import hashlib
import logging
import marshal
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ground.model_cache import model_cache_dir
from ground.private_files import write_private_atomically

log = logging.getLogger("kith.memory.lemmas")

INDEX_FORMAT = 1  # bump when what is cached changes


def default_lemma_cache_dir() -> Path:
    return model_cache_dir() / "lemmas"


def cached_lemmatizer(cache_dir: Path | None = None) -> Any:
    """A simplemma ``Lemmatizer`` over read-in-place dictionaries whose block index comes from ``cache_dir``."""
    from simplemma import Lemmatizer
    from simplemma.strategies import DefaultStrategy
    from simplemma.strategies.dictionaries.dictionary_factory import CachingDictionaryFactory

    directory = cache_dir or default_lemma_cache_dir()

    class IndexedStreamFactory(CachingDictionaryFactory):
        def _get_dictionary_uncached(self, lang: str) -> Mapping[str, str]:
            return indexed_stream(lang, directory)

    return Lemmatizer(lemmatization_strategy=DefaultStrategy(dictionary_factory=IndexedStreamFactory()))


def indexed_stream(lang: str, cache_dir: Path) -> Mapping[str, str]:
    """Language ``lang``'s ``StreamMap``, its index read from ``cache_dir`` or built and cached there."""
    from simplemma.__metadata__ import __version__
    from simplemma.strategies.dictionaries import frontcode
    from simplemma.strategies.dictionaries.dictionary_factory import _read_decompressed
    from simplemma.strategies.dictionaries.stream_dictionary_factory import StreamMap

    data = _read_decompressed(lang)
    digest = hashlib.blake2b(data, digest_size=16).hexdigest()
    path = cache_dir / f"{lang}-{__version__}-f{INDEX_FORMAT}.index"
    index = _read_index(path, digest)
    if index is None:
        stream = StreamMap(lang)  # decodes the whole stream: the slow build
        _write_index(path, digest, stream)
        return stream
    stream = StreamMap.__new__(StreamMap)
    stream._data = data
    stream._rev, stream._count, stream._pos = frontcode._read_header(data)
    stream._firsts, stream._blocks = index
    return stream


def _read_index(path: Path, digest: str) -> tuple[list[bytes], list[tuple[int, bytes, bytes]]] | None:
    try:
        stored = marshal.loads(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, EOFError, ValueError, TypeError) as exc:
        log.warning("lemma index unreadable, rebuilding path_len=%d error=%s", len(str(path)), type(exc).__name__)
        return None
    if not (isinstance(stored, tuple) and len(stored) == 3 and stored[0] == digest):
        return None
    return list(stored[1]), list(stored[2])


def _write_index(path: Path, digest: str, stream: Any) -> None:
    try:
        write_private_atomically(path, marshal.dumps((digest, tuple(stream._firsts), tuple(stream._blocks))))
    except OSError as exc:  # a read-only or full disk: the next start builds it again
        log.warning("lemma index not cached error=%s", type(exc).__name__)
