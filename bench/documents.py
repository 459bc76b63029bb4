"""A document's indexing rate, in pages per second, with the default embedder (issue #35).

    HF_HUB_OFFLINE=1 .venv/bin/python -m bench.documents [--data PATH] [--pages 200] [--embedder SPEC]

Builds one PDF of ``--pages`` pages of prose (about 2,000 characters each, a printed page's worth) and keeps it as
kith keeps a document a person sent: the text read from the PDF (pypdf), redacted, cut into passages, each
embedded, all written to a fresh database. Prints the pages per second of each step (the person is answered once
the text is kept; the passages are embedded after, in the background) and of the whole, then the
time to search the kept passages (one query's lexical and vector lookup, the query already embedded) at the
median and 95th percentile. The prose is LoCoMo's dialogue (``--data``, the conversations' turns in order), or any
directory of .txt/.md files; it is text to index, not questions to answer: nothing is tuned on it.
Nothing is asserted; it prints figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import percentile
from ground.background import BackgroundTasks
from ground.config import MemorySettings, Settings
from ground.db import Database
from kith.app.schema import create_schema
from media.documents import PDF, DocumentText, read_document
from memory.documents import DocumentBook
from memory.encoders.embedders import open_embedder
from memory.store.vectors import VectorSource
from tests.support.clock import FakeClock
from tests.support.pdf import pdf_of

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_DATA = ROOT.parent / "shared" / "bench-data" / "locomo7.json"
PAGE_CHARS = 2_000
LINE_CHARS = 90


def prose(path: Path) -> str:
    """Running text from ``path``: LoCoMo's turns in order, or every .txt/.md file of a directory."""
    if path.is_dir():
        return "\n\n".join(p.read_text(encoding="utf-8", errors="replace")
                           for p in sorted(path.rglob("*")) if p.suffix in (".txt", ".md"))
    data = json.loads(path.read_text(encoding="utf-8"))
    turns: list[str] = []
    for sample in data:
        conversation = sample["conversation"]
        for key in sorted((k for k in conversation if k.startswith("session_") and not k.endswith("date_time")),
                          key=lambda k: int(k.split("_")[1])):
            turns.extend(f"{t['speaker']}: {t['text']}" for t in conversation[key])
    return "\n".join(turns)


def pages_of(text: str, count: int) -> list[list[str]]:
    """``count`` pages of about PAGE_CHARS each, as lines a PDF draws (the text repeated if it is short)."""
    words = text.encode("latin-1", errors="replace").decode("latin-1").split()
    if not words:
        raise SystemExit("no text in the data")
    pages: list[list[str]] = []
    at = 0
    while len(pages) < count:
        lines, line, used = [], "", 0
        while used < PAGE_CHARS:
            word = words[at % len(words)]
            at += 1
            if len(line) + 1 + len(word) > LINE_CHARS:
                lines.append(line)
                used += len(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
        pages.append(lines)
    return pages


async def run(data: Path, pages: int, embedder_spec: str, searches: int) -> None:
    settings = Settings(memory=MemorySettings(embedder=embedder_spec))
    embedder, status = await open_embedder(settings)
    print(f"embedder: {status.line()}")
    pdf = pdf_of(pages_of(prose(data), pages))
    print(f"document: one PDF of {pages} pages, {len(pdf) / 1024:.0f} KB")
    with tempfile.TemporaryDirectory() as tmp:
        db = Database(f"sqlite:///{tmp}/kith.db")
        create_schema(db)
        try:
            started = time.perf_counter()
            read = await asyncio.to_thread(read_document, pdf, PDF, max_pages=pages, max_chars=10 * PAGE_CHARS * pages)
            extracted = time.perf_counter()
            assert isinstance(read, DocumentText), read
            book = DocumentBook(db, VectorSource(embedder, status), FakeClock(), BackgroundTasks())
            kept = await book.keep(key="bench:1", account="bench:1", sender_name="Bench", name="bench.pdf",
                                   kind=read.kind, pages=read.pages, source=("bench", "1", "1"))
            stored = time.perf_counter()
            await book.settle()
            done = time.perf_counter()
            assert kept is not None
            read_s, keep_s, embed_s, total_s = extracted - started, stored - extracted, done - stored, done - started
            print(f"text read (pypdf, redaction): {read_s:.2f} s, {pages / read_s:.1f} pages/s, "
                  f"{read.chars:,} characters")
            print(f"kept and searchable by words (passages, database): {keep_s:.2f} s, {pages / keep_s:.1f} pages/s; "
                  "the person is answered here")
            print(f"embedded after, in the background: {embed_s:.2f} s, {pages / embed_s:.1f} pages/s, "
                  f"{kept.passages} passages ({kept.passages / embed_s:.1f}/s)")
            print(f"indexing rate, whole: {pages / total_s:.1f} pages/s ({total_s:.2f} s for {pages} pages)")
            queries = [" ".join(line.split()[:6]) for page in pages_of(prose(data), searches) for line in page[:1]]
            vectors = await VectorSource(embedder, status).vectors(queries)
            await book.search(kept.person, queries[0], vectors.values[0], vectors.space, 12)  # builds the index
            timings = []
            for query, vector in zip(queries, vectors.values, strict=True):
                began = time.perf_counter()
                await book.search(kept.person, query, vector, vectors.space, 12)
                timings.append((time.perf_counter() - began) * 1000)
            print(f"search over {kept.passages} passages ({len(timings)} queries): p50 "
                  f"{statistics.median(timings):.1f} ms, p95 {percentile(timings, 95):.1f} ms")
        finally:
            db.close()
            if embedder is not None:
                await embedder.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", default=str(DEFAULT_DATA))
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--embedder", default=MemorySettings().embedder)
    parser.add_argument("--searches", type=int, default=100)
    args = parser.parse_args()
    asyncio.run(run(Path(args.data), args.pages, args.embedder, args.searches))


if __name__ == "__main__":
    main()
