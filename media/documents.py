"""A document's bytes read into its text, page by page: plain text and Markdown decoded, a PDF's text extracted.

Pure but for the CPU it takes (a long PDF takes seconds: the caller runs it off the event loop). What cannot be
read becomes a :class:`DocumentRefusal` naming why, never an exception past this module: a broken or encrypted
PDF, a binary file with a text name, a document past the page or character limit. The text comes back as a
reader sees it (characters that render as nothing dropped: a document is the easiest place to hide words a
person never saw) and with secrets redacted, before anything of it reaches disk.
"""

from __future__ import annotations

import io
import logging
import unicodedata
from dataclasses import dataclass
from pathlib import PurePosixPath

from ground.redaction import redact
from ground.types import Attachment
from ground.visible_text import visible

log = logging.getLogger("kith.media")

TEXT_SUFFIXES = frozenset({".txt", ".text", ".md", ".markdown", ".mdown", ".mkd"})
MARKDOWN_SUFFIXES = frozenset({".md", ".markdown", ".mdown", ".mkd"})
TEXT_MIMES = frozenset({"text/plain", "text/markdown", "text/x-markdown"})
PDF_MIME = "application/pdf"

# Kinds of document, as :class:`DocumentText` names them.
TEXT, MARKDOWN, PDF = "text", "markdown", "pdf"


@dataclass(frozen=True, slots=True)
class DocumentText:
    """A document's text: one string per page (a text file is one page), already redacted."""

    kind: str  # TEXT, MARKDOWN or PDF
    pages: tuple[str, ...]

    @property
    def chars(self) -> int:
        return sum(len(p) for p in self.pages)


@dataclass(frozen=True, slots=True)
class DocumentRefusal:
    """Why a document is not kept: ``reason`` is one of the names below, ``limit`` the limit it passed."""

    reason: str  # "not_supported", "unreadable", "encrypted", "too_many_pages", "too_long", "empty"
    limit: int = 0


def document_kind(attachment: Attachment) -> str | None:
    """TEXT, MARKDOWN or PDF for a file kith can keep as a document, by its name or, failing that, its type; else
    None."""
    suffix = PurePosixPath(attachment.name.lower()).suffix
    mime = attachment.mime.lower().split(";")[0].strip()
    if suffix == ".pdf" or (not suffix and mime == PDF_MIME) or (mime == PDF_MIME and suffix not in TEXT_SUFFIXES):
        return PDF
    if suffix in MARKDOWN_SUFFIXES or mime in ("text/markdown", "text/x-markdown"):
        return MARKDOWN
    if suffix in TEXT_SUFFIXES or (mime in TEXT_MIMES and suffix in ("", ".txt")):
        return TEXT
    return None


def read_document(data: bytes, kind: str, *, max_pages: int, max_chars: int) -> DocumentText | DocumentRefusal:
    """``data`` (a document of ``kind``) as its text, or why it cannot be kept."""
    if kind == PDF:
        pages = _pdf_pages(data, max_pages)
        if isinstance(pages, DocumentRefusal):
            return pages
    else:
        text = _decoded(data)
        if text is None:
            return DocumentRefusal("unreadable")
        pages = [text]
    cleaned = tuple(_clean(p) for p in pages)
    total = sum(len(p) for p in cleaned)
    if total > max_chars:
        return DocumentRefusal("too_long", max_chars)
    if not any(p.strip() for p in cleaned):
        return DocumentRefusal("empty")
    return DocumentText(kind, tuple(redact(p) for p in cleaned))


def _decoded(data: bytes) -> str | None:
    """A text file's bytes as text: UTF-8 (with or without its mark), UTF-16 with its mark, else Windows-1252 for
    an old file; None for bytes that are no text at all (a binary file named .txt)."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        try:
            return data.decode("utf-16")
        except UnicodeDecodeError:
            return None
    if b"\x00" in data[:8192]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    text = data.decode("cp1252", errors="replace")
    # Mostly undecodable: not a text in any encoding kith guesses.
    return None if text.count("\ufffd") > max(8, len(text) // 100) else text


def _clean(text: str) -> str:
    """Composed Unicode, one kind of line break, no characters that render as nothing, no control characters."""
    text = unicodedata.normalize("NFC", text.replace("\r\n", "\n").replace("\r", "\n"))
    text = visible(text)
    return "".join(c for c in text if c in "\n\t" or unicodedata.category(c) != "Cc")


def _pdf_pages(data: bytes, max_pages: int) -> list[str] | DocumentRefusal:
    # pypdf is loaded the first time a PDF is read: a kith nobody sends a PDF never pays for it.
    from pypdf import PdfReader
    from pypdf.errors import PyPdfError

    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted:
            try:
                opened = reader.decrypt("")  # many PDFs are "encrypted" with an empty password, only to lock edits
            except Exception:
                opened = 0
            if not opened:
                return DocumentRefusal("encrypted")
        count = len(reader.pages)
        if count > max_pages:
            return DocumentRefusal("too_many_pages", max_pages)
        return [page.extract_text() or "" for page in reader.pages]
    except (PyPdfError, ValueError, KeyError, TypeError, AttributeError, IndexError, OSError,
            RecursionError, AssertionError, ZeroDivisionError) as exc:
        # pypdf raises many kinds on a broken file; each of them means the same to the person.
        log.info("pdf unreadable error=%s", type(exc).__name__)
        return DocumentRefusal("unreadable")
