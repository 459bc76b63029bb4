"""Documents: text, Markdown and PDF files a person shared in private, kept whole and found by their passages.

A document is the person's, not a memory: kept as they sent it (redacted), never captured into facts; its
passages are found the way memories are and shown in private replies as data they shared. It sits beside
capture and recall, above forgetting (a forget removes the documents that hold its words).

* ``passages``: a document cut into passages (pure).
* ``book``: the ``documents`` and ``document_passages`` tables, and :class:`DocumentBook`, which keeps, lists,
  removes and searches them.
* ``command``: the ``/docs`` chat command.
* ``prompt_part``: :class:`DocumentsInContext`, the prompt's documents part in a private chat.
* ``tool_part``: :class:`DocumentPassages`, what the ``recall`` tool finds in them in a private chat.
"""

from memory.documents.book import DOCUMENTS_DATA, DOCUMENTS_TOPIC, Document, DocumentBook, PassageHit, document_key
from memory.documents.command import DocsCommand
from memory.documents.passages import Passage, passages
from memory.documents.prompt_part import DocumentsInContext, ranked_passages, render_passages
from memory.documents.tool_part import DocumentPassages

__all__ = [
    "DOCUMENTS_DATA",
    "DOCUMENTS_TOPIC",
    "DocsCommand",
    "Document",
    "DocumentBook",
    "DocumentPassages",
    "DocumentsInContext",
    "Passage",
    "PassageHit",
    "document_key",
    "passages",
    "ranked_passages",
    "render_passages",
]
