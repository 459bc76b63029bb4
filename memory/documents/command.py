"""``/docs``: the person's documents listed, and one removed (``/docs forget N``).

Documents are private: in a group chat ``/docs`` answers with a pointer to the private chat instead of the list.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ground.types import ChatKind, InboundMessage, OutboundMessage, reply_to
from memory.documents.book import Document, DocumentBook

USAGE = "Usage: /docs (list your documents) · /docs forget N (remove document N, whole)"
KINDS = {"text": "text", "markdown": "Markdown", "pdf": "PDF"}


@dataclass(frozen=True, slots=True)
class DocsRequest:
    action: str  # "list" or "forget"
    number: int | None = None
    error: str = ""


def parse_docs_args(args: str) -> DocsRequest:
    head, _, rest = args.strip().partition(" ")
    action = head.lower()
    if action in ("", "list"):
        return DocsRequest("list")
    if action in ("forget", "remove", "delete"):
        number = rest.strip().lstrip("#")
        if not number.isdigit():
            return DocsRequest("forget", error="Which document? Give its number, e.g. /docs forget 2.")
        return DocsRequest("forget", int(number))
    return DocsRequest(action, error=USAGE)


def size_label(document: Document) -> str:
    kind = KINDS.get(document.kind, document.kind)
    if document.kind == "pdf":
        return f"{kind}, {document.pages} page{'s' if document.pages != 1 else ''}"
    return f"{kind}, {document.chars:,} characters"


def render_list(documents: Sequence[Document]) -> str:
    if not documents:
        return ("You haven't shared any documents with me. Send me a text, Markdown or PDF file here and I'll keep "
                "it, and look in it when you ask.")
    lines = ["Your documents (kept private to you; I look in them when you ask):"]
    lines += [f"#{d.number} {d.name} ({size_label(d)}, shared {d.created_at:%Y-%m-%d})" for d in documents]
    lines.append("/docs forget N removes one; /forget <words> removes any document holding them.")
    return "\n".join(lines)


class DocsCommand:
    """``/docs``: a handler with the ChatCommands signature ``(message, args) -> OutboundMessage | None``."""

    description = "your documents: list, or forget one"

    def __init__(self, book: DocumentBook) -> None:
        self.book = book

    async def __call__(self, message: InboundMessage, args: str) -> OutboundMessage | None:
        if message.chat_kind is ChatKind.GROUP:
            return reply_to(message, "Documents are private: send me /docs in a direct message.")
        request = parse_docs_args(args)
        if request.error:
            return reply_to(message, request.error)
        person = await self.book.person_of(message.account, message.sender_name)
        if request.action == "forget" and request.number is not None:
            removed = await self.book.remove(person, request.number)
            if removed is None:
                return reply_to(message, f"You have no document #{request.number}. /docs lists them.")
            return reply_to(message, f"Removed #{removed.number} {removed.name}: its text and every passage of it "
                                     "are gone.")
        return reply_to(message, render_list(await self.book.list(person)))
