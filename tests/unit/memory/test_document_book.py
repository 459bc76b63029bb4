"""The person's documents: cut into passages, kept once per message, found by words and by meaning, removed whole,
moved on a link, and refused past their limits (issue #35)."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from ground.background import BackgroundTasks
from ground.config import RecallSettings
from ground.db import Database
from ground.tunables import DOCUMENTS_MAX_PER_PERSON
from ground.types import Attachment, AttachmentKind
from media.documents import MARKDOWN, PDF, TEXT, DocumentRefusal, DocumentText, document_kind, read_document
from memory.documents import DocumentBook, passages, ranked_passages, render_passages
from memory.documents import book as documents_book
from memory.encoders.embedders import EmbedderStatus
from memory.forgetting.scrub import Eraser, scan
from memory.store.vectors import VectorSource
from people import directory
from persona.labels import DOCUMENTS_NOTICE, TRUNCATED_FLAG
from tests.support.clock import FakeClock
from tests.support.pdf import pdf_of
from tests.support.recall import ConceptEmbedder

BACKENDS = ("sqlite", "postgres")  # the relational store under test: both (tests/conftest.py)

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
SOURCE = ("telegram", "100", "100:7")


def _source(embedder: ConceptEmbedder | None) -> VectorSource:
    status = (EmbedderStatus("test", ready=True, dim=64) if embedder is not None
              else EmbedderStatus("none", ready=False, disabled=True))
    return VectorSource(embedder, status)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(NOW)


async def _keep(book: DocumentBook, key: str, pages: list[str], *, name: str = "notes.txt", kind: str = TEXT,
                account: str = "telegram:100") -> documents_book.Document | None:
    return await book.keep(key=key, account=account, sender_name="Ana", name=name, kind=kind, pages=pages,
                           source=SOURCE)


# --- passages (pure) ----------------------------------------------------------------------------------
def test_passages_cut_between_paragraphs_and_carry_the_heading_they_sit_under() -> None:
    page = "# Recipes\n\n## Pancakes\n\nTwo eggs and flour.\n\n## Soup\n\nRed lentils and cumin.\n"
    cut = passages([page], markdown=True, size=200, overlap=40)
    assert [(p.heading, p.text) for p in cut] == [
        ("Recipes", "# Recipes"), ("Pancakes", "## Pancakes\n\nTwo eggs and flour."),
        ("Soup", "## Soup\n\nRed lentils and cumin.")]
    assert cut[1].searchable() == "Pancakes\n## Pancakes\n\nTwo eggs and flour."


def test_a_long_paragraph_is_cut_between_sentences_every_word_kept_and_no_passage_too_long() -> None:
    sentences = [f"Sentence number {i} talks about topic {i} at some length here." for i in range(60)]
    text = " ".join(sentences)
    cut = passages([text, "Second page."], markdown=False, size=300, overlap=60)
    assert all(len(p.text) <= 300 + 60 + 1 for p in cut)
    assert cut[-1].page == 2 and cut[0].page == 1
    joined = " ".join(p.text for p in cut)
    for sentence in sentences:  # nothing lost at a cut
        assert sentence in joined
    # A full passage's end begins the next: what falls across a cut keeps its context.
    assert any(cut[0].text.endswith(cut[1].text[:n]) for n in range(20, 61))
    assert "\n\n" not in cut[0].text  # the sentences of one paragraph stay one paragraph


def test_a_word_longer_than_a_passage_is_cut_not_lost() -> None:
    cut = passages(["x" * 950], markdown=False, size=400, overlap=0)
    assert "".join(p.text for p in cut) == "x" * 950


# --- reading a file (pure but for pypdf) ------------------------------------------------------------
@pytest.mark.parametrize(("name", "mime", "kind"), [
    ("recipes.md", "", MARKDOWN), ("notes.TXT", "", TEXT), ("lease.pdf", "", PDF), ("scan", "application/pdf", PDF),
    ("readme", "text/markdown", MARKDOWN), ("notes", "text/plain", TEXT), ("photos.zip", "application/zip", None),
    ("report.docx", "application/octet-stream", None), ("page.html", "text/html", None)])
def test_which_files_are_documents(name: str, mime: str, kind: str | None) -> None:
    assert document_kind(Attachment(AttachmentKind.DOCUMENT, "ref", name, mime)) == kind


def test_text_is_decoded_in_the_encodings_people_use_and_binary_refused() -> None:
    def read(data: bytes) -> DocumentText | DocumentRefusal:
        return read_document(data, TEXT, max_pages=5, max_chars=10_000)

    assert read("zażółć\r\nline".encode()) == DocumentText(TEXT, ("zażółć\nline",))
    assert read("\ufeffwith a mark".encode()) == DocumentText(TEXT, ("with a mark",))
    assert read("utf-16 café".encode("utf-16")) == DocumentText(TEXT, ("utf-16 café",))
    assert read("old café".encode("cp1252")) == DocumentText(TEXT, ("old café",))
    assert read(b"\x00\x01\x02 binary") == DocumentRefusal("unreadable")
    assert read(b"   \n\n ") == DocumentRefusal("empty")
    # What renders as nothing is dropped: a hidden right-to-left override or zero-width text never reaches a prompt.
    assert read("pay\u202e\u200bme".encode()) == DocumentText(TEXT, ("payme",))
    assert read(("word " * 3000).encode()) == DocumentRefusal("too_long", 10_000)


def test_a_pdf_is_read_page_by_page_and_refused_past_its_limits_or_when_broken() -> None:
    data = pdf_of([["First page (with parentheses)"], ["Second page"]])
    read = read_document(data, PDF, max_pages=5, max_chars=10_000)
    assert isinstance(read, DocumentText)
    assert [p.strip() for p in read.pages] == ["First page (with parentheses)", "Second page"]
    assert read_document(data, PDF, max_pages=1, max_chars=10_000) == DocumentRefusal("too_many_pages", 1)
    assert read_document(data[: len(data) // 2], PDF, max_pages=5, max_chars=10_000) == DocumentRefusal("unreadable")
    assert read_document(b"not a pdf at all", PDF, max_pages=5, max_chars=10_000) == DocumentRefusal("unreadable")
    assert read_document(pdf_of([[], []]), PDF, max_pages=5, max_chars=10_000) == DocumentRefusal("empty")


# --- the book ---------------------------------------------------------------------------------------
async def test_a_document_kept_twice_from_the_same_message_is_kept_once(db: Database, clock: FakeClock) -> None:
    book = DocumentBook(db, _source(None), clock, BackgroundTasks())
    first = await _keep(book, "telegram:100:7:0", ["Pancakes need eggs."])
    again = await _keep(book, "telegram:100:7:0", ["Pancakes need eggs."])
    other = await _keep(book, "telegram:100:8:0", ["Soup needs lentils."])
    assert first is not None and again is not None and other is not None
    assert (first.number, again.number, other.number) == (1, 1, 2)
    person = await db.run(directory.person_of, "telegram:100")
    assert [d.number for d in await book.list(str(person))] == [1, 2]


async def test_passages_are_found_by_words_without_an_embedder_and_by_meaning_with_one(
        db: Database, clock: FakeClock) -> None:
    lexical = DocumentBook(db, _source(None), clock, BackgroundTasks())
    doc = await _keep(lexical, "k:1", ["My dog Rex eats twice a day.\n\nThe boiler is serviced in May."])
    assert doc is not None
    hits = await lexical.search(doc.person, "when is the boiler serviced", None, None, 5)
    assert [h.passage.text for h in hits if h.bm25 > 0] == [
        "My dog Rex eats twice a day.\n\nThe boiler is serviced in May."]

    embedder = ConceptEmbedder()
    semantic = DocumentBook(db, _source(embedder), clock, BackgroundTasks(), passage_chars=40, overlap_chars=0)
    doc2 = await _keep(semantic, "k:2", ["My puppy sleeps all day.\n\nInvoices are due in June."], account="t:2")
    assert doc2 is not None
    await semantic.settle()  # embedded after it was kept
    query = "how are my animals"
    [vector] = await embedder.embed([query])
    hits = await semantic.search(doc2.person, query, vector, embedder.name, 5)
    ranked = ranked_passages(hits, RecallSettings(), vector_path=True, min_relevance=0.0)
    assert ranked[0][0].passage.text == "My puppy sleeps all day."  # no shared word: found by meaning
    assert ranked[0][0].cosine is not None


async def test_passages_kept_while_the_embedder_was_down_are_embedded_later_never_on_a_replys_path(
        db: Database, clock: FakeClock) -> None:
    doc = await _keep(DocumentBook(db, _source(None), clock, BackgroundTasks()), "k:1", ["My puppy sleeps all day."])
    assert doc is not None
    embedder = ConceptEmbedder()
    book = DocumentBook(db, _source(embedder), clock, BackgroundTasks())
    [vector] = await embedder.embed(["pets"])
    embedder.gate.clear()  # the embedder is slow now: the search must not wait for it
    first = await asyncio.wait_for(book.search(doc.person, "pets", vector, embedder.name, 5), 2)
    assert [h.cosine for h in first] == []  # found by words only (it shares none): not yet embedded
    embedder.gate.set()
    await book.settle()
    hits = await book.search(doc.person, "pets", vector, embedder.name, 5)
    assert [h.cosine is not None for h in hits] == [True]
    stored = await db.run(lambda c: c.execute(sa.select(documents_book.document_passages.c.space)).scalars().all())
    assert stored == [embedder.name]  # stored, so the next process does not embed them again
    other = DocumentBook(db, _source(embedder), clock, BackgroundTasks())
    embedder.started.clear()
    await other.search(doc.person, "pets", vector, embedder.name, 5)
    await other.settle()
    assert embedder.started == []


async def test_a_long_document_is_embedded_a_few_passages_at_a_time(db: Database, clock: FakeClock) -> None:
    embedder = ConceptEmbedder()
    calls: list[int] = []
    embed = embedder.embed

    async def counted(texts: Sequence[str]) -> list[list[float]]:
        calls.append(len(texts))
        return await embed(texts)

    embedder.embed = counted  # type: ignore[method-assign]
    book = DocumentBook(db, _source(embedder), clock, BackgroundTasks(), passage_chars=40, overlap_chars=0,
                        embed_batch=3)
    doc = await _keep(book, "k:1", ["\n\n".join(f"Paragraph {i} about the garden." for i in range(8))])
    assert doc is not None and doc.passages == 8
    await book.settle()
    assert calls == [3, 3, 2]  # a reply's query embedding waits for one batch at most, never the whole document


async def test_a_search_in_another_process_sees_a_document_removed_or_added(db: Database, clock: FakeClock) -> None:
    ours = DocumentBook(db, _source(None), clock, BackgroundTasks())
    theirs = DocumentBook(db, _source(None), clock, BackgroundTasks())
    doc = await _keep(ours, "k:1", ["The boiler is serviced in May."])
    assert doc is not None
    assert await theirs.search(doc.person, "boiler", None, None, 5)
    assert await ours.remove(doc.person, 1) is not None
    assert await theirs.search(doc.person, "boiler", None, None, 5) == []
    await _keep(ours, "k:2", ["The boiler pressure is 1.5 bar."])
    assert [h.passage.text for h in await theirs.search(doc.person, "boiler", None, None, 5)] == [
        "The boiler pressure is 1.5 bar."]


async def test_a_person_keeps_at_most_so_many_documents(db: Database, clock: FakeClock,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(documents_book, "DOCUMENTS_MAX_PER_PERSON", 2)
    book = DocumentBook(db, _source(None), clock, BackgroundTasks())
    assert await _keep(book, "k:1", ["one"]) is not None
    assert await _keep(book, "k:2", ["two"]) is not None
    assert await _keep(book, "k:3", ["three"]) is None
    assert DOCUMENTS_MAX_PER_PERSON >= 2


async def test_documents_follow_a_linked_person_renumbered_after_their_own(db: Database, clock: FakeClock) -> None:
    book = DocumentBook(db, _source(None), clock, BackgroundTasks())
    a = await _keep(book, "k:1", ["Ana's lease."], account="telegram:1")
    b = await _keep(book, "k:2", ["Ana's recipes."], account="discord:1")
    assert a is not None and b is not None
    moved = await db.run(documents_book.reassign, b.person, a.person)
    assert moved == 1
    assert [(d.number, d.name) for d in await book.list(a.person)] == [(1, "notes.txt"), (2, "notes.txt")]
    assert await book.search(b.person, "recipes", None, None, 5) == []
    assert [h.document.number for h in await book.search(a.person, "recipes", None, None, 5)] == [2]


async def test_a_forget_removes_the_documents_holding_its_words_whole_and_no_other(
        db: Database, clock: FakeClock) -> None:
    book = DocumentBook(db, _source(None), clock, BackgroundTasks())
    lease = await _keep(book, "k:1", ["The flat at Quay Street.", "The deposit is returned in thirty days."],
                        name="lease.pdf", kind=PDF)
    recipes = await _keep(book, "k:2", ["Pancakes need cardamom."], name="recipes.md", kind=MARKDOWN)
    assert lease is not None and recipes is not None
    planned = await db.run(scan, lease.person, Eraser("the deposit is returned in thirty days"), apply=False)
    assert planned.places.documents == 1
    await db.run(scan, lease.person, Eraser("the deposit is returned in thirty days"), apply=True)
    assert [d.name for d in await book.list(lease.person)] == ["recipes.md"]
    assert await db.run(lambda c: c.execute(sa.select(sa.func.count()).select_from(
        documents_book.document_passages)).scalar_one()) == recipes.passages
    by_name = await db.run(scan, lease.person, Eraser("recipes.md"), apply=False)
    assert by_name.places.documents == 1  # a document is also forgotten by its name


# --- the prompt part (pure) ---------------------------------------------------------------------------
async def test_the_part_shows_the_best_passages_quoted_within_its_budget(db: Database, clock: FakeClock) -> None:
    book = DocumentBook(db, _source(None), clock, BackgroundTasks(), passage_chars=120, overlap_chars=0)
    long = " ".join(["The boiler needs a yearly service by a certified engineer."] * 12)
    doc = await _keep(book, "k:1", [long, "Unrelated page about gardens."], name='say "hi".pdf', kind=PDF)
    assert doc is not None
    hits = await book.search(doc.person, "boiler service", None, None, 10)
    ranked = ranked_passages(hits, RecallSettings(), vector_path=False)
    assert ranked and all("gardens" not in h.passage.text for h, _s in ranked)
    part = render_passages(ranked, most=3, total_chars=400)
    assert part.startswith(DOCUMENTS_NOTICE) and len(part) <= 400
    assert '- "say \\"hi\\".pdf" (page 1 of 2): "The boiler' in part  # the name quoted, its quote escaped
    tight = render_passages(ranked, most=3, total_chars=len(DOCUMENTS_NOTICE) + 150)
    assert tight.endswith(TRUNCATED_FLAG) and len(tight) <= len(DOCUMENTS_NOTICE) + 150
    assert render_passages(ranked, most=3, total_chars=len(DOCUMENTS_NOTICE) + 20) == ""


async def test_a_reply_to_someone_who_keeps_no_document_asks_for_no_query_vector(db: Database,
                                                                                 clock: FakeClock) -> None:
    book = DocumentBook(db, _source(ConceptEmbedder()), clock, BackgroundTasks())
    asked: list[str] = []

    async def query_vector() -> tuple[Sequence[float], str] | None:
        asked.append("vector")
        return None

    assert await book.passages_for("p_nobody", "what's new?", 5, query_vector) == []
    assert asked == []
    doc = await _keep(book, "k:1", ["The boiler is serviced in May."])
    assert doc is not None
    await book.settle()
    assert [h.passage.text for h in await book.passages_for(doc.person, "boiler", 5, query_vector)] == [
        "The boiler is serviced in May."]
    assert asked == ["vector"]  # asked once there is a document to compare it with


def test_the_recall_tool_sees_a_passage_with_its_document_page_and_heading_and_long_words_cut() -> None:
    from ground.tunables import RECALL_TOOL_QUOTE_CHARS
    from memory.documents.tool_part import passage_json

    doc = documents_book.Document("d", "p", 3, "report.pdf", PDF, 4, 9000, 20, NOW)
    long = documents_book.PassageHit(doc, passages(["x " * 400], markdown=False, size=2000, overlap=0)[0], None, 1.0)
    found = passage_json(long)
    assert (found["document"], found["number"], found["pages"], found["shared"]) == ("report.pdf", 3, 4, "2026-12-01")
    assert found["truncated"] is True and len(found["words"]) <= RECALL_TOOL_QUOTE_CHARS
    assert "under" not in found  # no heading, no empty key
    one_page = dataclasses.replace(doc, pages=1, kind=MARKDOWN)
    headed = documents_book.PassageHit(one_page, passages(["## Rent\n\nDue on the fifth."], markdown=True, size=400,
                                                          overlap=0)[0], 0.5, 0.0)
    assert passage_json(headed) == {"document": "report.pdf", "number": 3, "under": "Rent",
                                    "words": "## Rent Due on the fifth.", "truncated": False, "shared": "2026-12-01"}
