"""simplemma's dictionaries, read in place from a file built once per machine and mapped into memory.

simplemma's read-in-place dictionaries (``StreamMap``) keep each language's decompressed stream and an index of
every 32nd record, which they build by decoding the whole stream in Python on every start: about 3 s for Polish
and 5 s for the five languages the support rules read, holding the interpreter's lock, and about 80 MB of memory
for those five (31 MB of streams, the rest the index as Python objects). Both depend only on the shipped file, so
they are built once and kept with kith's other derived model files (:func:`ground.model_cache.model_cache_dir`,
under ``lemmas/``), one file a language: the index as flat arrays, then the decompressed stream. A start maps
that file into memory (``mmap``) instead of reading it: a look-up reads a few pages of it, and only those are in
the process's memory; :func:`memory.core.text.lemmas` caches what it looked up. A file that does not match the
shipped dictionary or its own digest (another simplemma, a damaged file) is built again; where it cannot be
written, the dictionary is read as simplemma reads it, whole, in memory.
"""

from __future__ import annotations

import hashlib
import logging
import mmap
import os
import struct
from array import array
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ground.model_cache import model_cache_dir
from ground.private_files import write_private_atomically

log = logging.getLogger("kith.memory.lemmas")

MAGIC = b"KITHLEM2"  # bump the digit when the file's layout changes
# The header after MAGIC: the digest of everything after it, the shipped file's digest, then the number of
# blocks and the lengths of the three string tables and of the stream (little-endian).
_HEADER = struct.Struct("<16s16sIIIII")
_DIGEST = 16
_CHUNK = 1 << 20


def default_lemma_cache_dir() -> Path:
    return model_cache_dir() / "lemmas"


def cached_lemmatizer(cache_dir: Path | None = None) -> Any:
    """A simplemma ``Lemmatizer`` over read-in-place dictionaries mapped from files in ``cache_dir``."""
    from simplemma import Lemmatizer
    from simplemma.strategies import DefaultStrategy
    from simplemma.strategies.dictionaries.dictionary_factory import CachingDictionaryFactory

    directory = cache_dir or default_lemma_cache_dir()

    class IndexedStreamFactory(CachingDictionaryFactory):
        def _get_dictionary_uncached(self, lang: str) -> Mapping[str, str]:
            return indexed_stream(lang, directory)

    return Lemmatizer(lemmatization_strategy=DefaultStrategy(dictionary_factory=IndexedStreamFactory()))


def indexed_stream(lang: str, cache_dir: Path) -> Mapping[str, str]:
    """Language ``lang``'s ``StreamMap`` over its file in ``cache_dir``, built there first when it is missing or
    does not match; simplemma's own, in memory, when it cannot be written."""
    from simplemma.__metadata__ import __version__
    from simplemma.strategies.dictionaries.dictionary_factory import DATA_FOLDER, SUPPORTED_LANGUAGES
    from simplemma.strategies.dictionaries.stream_dictionary_factory import StreamMap

    if lang not in SUPPORTED_LANGUAGES:  # simplemma's own check, before any path is made of it
        raise ValueError(f"Unsupported language: {lang}")
    source = hashlib.blake2b((DATA_FOLDER / f"{lang}.plzma").read_bytes(), digest_size=_DIGEST).digest()
    path = cache_dir / f"{lang}-{__version__}.lemmas"
    mapped = _mapped(path, source)
    if mapped is not None:
        return mapped
    stream = StreamMap(lang)  # decodes the whole stream: the slow build
    try:
        write_private_atomically(path, _file_of(stream, source))
    except OSError as exc:  # a read-only or full disk: the next start builds it again
        log.warning("lemma dictionary not cached error=%s", type(exc).__name__)
        return stream
    return _mapped(path, source) or stream


class _Strings:
    """The i-th of a table of byte strings laid out as offsets and one blob (what ``bisect`` needs: len and [i])."""

    __slots__ = ("_blob", "_ends", "_n")

    def __init__(self, ends: memoryview, blob: memoryview) -> None:
        self._ends, self._blob, self._n = ends, blob, len(ends) - 1

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, i: int) -> bytes:
        return bytes(self._blob[self._ends[i]:self._ends[i + 1]])


class _Seeds:
    """``StreamMap._blocks`` from the flat arrays: block i's (offset, previous key, previous value)."""

    __slots__ = ("_keys", "_starts", "_values")

    def __init__(self, starts: memoryview, keys: _Strings, values: _Strings) -> None:
        self._starts, self._keys, self._values = starts, keys, values

    def __len__(self) -> int:
        return len(self._starts)

    def __getitem__(self, i: int) -> tuple[int, bytes, bytes]:
        return self._starts[i], self._keys[i], self._values[i]


def _tables(n: int, sizes: tuple[int, int, int], stream_len: int) -> tuple[int, int]:
    """Where the stream starts in the file (a page boundary, as ``mmap`` wants) and the file's whole length."""
    index_end = len(MAGIC) + _HEADER.size + 4 * (n + 3 * (n + 1)) + sum(sizes)
    stream_at = -(-index_end // mmap.ALLOCATIONGRANULARITY) * mmap.ALLOCATIONGRANULARITY
    return stream_at, stream_at + stream_len


def _file_of(stream: Any, source: bytes) -> bytes:
    """The file for a built ``StreamMap``: header, the block index as flat arrays, the stream page-aligned."""
    firsts: list[bytes] = stream._firsts
    starts = array("I", (b[0] for b in stream._blocks))
    tables = [firsts, [b[1] for b in stream._blocks], [b[2] for b in stream._blocks]]
    ends: list[array[int]] = []
    for table in tables:
        offsets, at = array("I", [0]), 0
        for item in table:
            at += len(item)
            offsets.append(at)
        ends.append(offsets)
    blobs = [b"".join(table) for table in tables]
    data: bytes = stream._data
    sizes = (len(blobs[0]), len(blobs[1]), len(blobs[2]))
    stream_at, _ = _tables(len(firsts), sizes, len(data))
    index = b"".join([starts.tobytes(), *(e.tobytes() for e in ends), *blobs])
    head_rest = struct.pack("<16sIIIII", source, len(firsts), *sizes, len(data))
    before_stream = len(MAGIC) + _DIGEST + len(head_rest) + len(index)
    body = head_rest + index + bytes(stream_at - before_stream) + data
    return MAGIC + hashlib.blake2b(body, digest_size=_DIGEST).digest() + body


def _page_by_page(fd: int, *maps: mmap.mmap) -> None:
    """Let a look-up bring in only the page it reads. Reading the file (its digest, or its writing) leaves it in the
    page cache in large folios, and a fault maps a whole folio: 2 MB at a time on ext4, so a few hundred look-ups
    mapped nearly all of it. Dropped from the cache, and mapped for random access, each fault reads one page."""
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    if hasattr(mmap, "MADV_RANDOM"):
        for mapped in maps:
            mapped.madvise(mmap.MADV_RANDOM)


def _mapped(path: Path, source: bytes) -> Mapping[str, str] | None:
    """The ``StreamMap`` mapped from ``path``; None when it is missing, damaged, or built from another file."""
    from simplemma.strategies.dictionaries import frontcode
    from simplemma.strategies.dictionaries.stream_dictionary_factory import StreamMap

    try:
        with path.open("rb") as file:
            head = file.read(len(MAGIC) + _HEADER.size)
            if len(head) < len(MAGIC) + _HEADER.size or head[:len(MAGIC)] != MAGIC:
                return None
            digest, stored_source, n, *sizes, stream_len = _HEADER.unpack_from(head, len(MAGIC))
            stream_at, length = _tables(n, (sizes[0], sizes[1], sizes[2]), stream_len)
            if stored_source != source or path.stat().st_size != length:
                return None
            # The digest is read through the file, not the mapping: only the pages look-ups touch become ours.
            check = hashlib.blake2b(head[len(MAGIC) + _DIGEST:], digest_size=_DIGEST)
            while chunk := file.read(_CHUNK):
                check.update(chunk)
            if check.digest() != digest:
                return None
            whole = mmap.mmap(file.fileno(), 0, access=mmap.ACCESS_READ)
            data = mmap.mmap(file.fileno(), stream_len, access=mmap.ACCESS_READ, offset=stream_at)
            _page_by_page(file.fileno(), whole, data)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        log.warning("lemma dictionary unreadable, rebuilding path_len=%d error=%s", len(str(path)),
                    type(exc).__name__)
        return None
    view = memoryview(whole)
    at = len(MAGIC) + _HEADER.size
    starts = view[at:at + 4 * n].cast("I")
    at += 4 * n
    ends = []
    for _ in range(3):
        ends.append(view[at:at + 4 * (n + 1)].cast("I"))
        at += 4 * (n + 1)
    blobs = []
    for size in sizes:
        blobs.append(view[at:at + size])
        at += size
    mapped = StreamMap.__new__(StreamMap)
    mapped._data = data
    mapped._rev, mapped._count, mapped._pos = frontcode._read_header(data)
    firsts = _Strings(ends[0], blobs[0])
    mapped._firsts = firsts
    mapped._blocks = _Seeds(starts, _Strings(ends[1], blobs[1]), _Strings(ends[2], blobs[2]))
    return mapped
