"""The page's pure rules: the headers every answer carries, paging, and which memories a page may show.

No I/O: :mod:`kith.web.routes` applies them, and the unit tests check them without a server.
"""

from __future__ import annotations

from dataclasses import dataclass

# No script at all, styles from the page's own origin only, forms posting back to it only, never framed.
CONTENT_SECURITY_POLICY = ("default-src 'none'; style-src 'self'; img-src 'self'; form-action 'self'; "
                           "frame-ancestors 'none'; base-uri 'none'")

SECURITY_HEADERS: dict[str, str] = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    # The login link carries its token: no page's address is ever sent on to anyone.
    "Referrer-Policy": "no-referrer",
    # Personal data: no copy in a shared cache or the browser's back-forward store.
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


@dataclass(frozen=True, slots=True)
class Paged:
    """One page of a listing: which page (1-based, clamped to those there are), of how many, and its slice."""

    page: int
    pages: int
    total: int
    start: int
    stop: int

    @property
    def previous(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next(self) -> int | None:
        return self.page + 1 if self.page < self.pages else None


def paged(total: int, requested: int, size: int) -> Paged:
    """Page ``requested`` of ``total`` items, ``size`` a page; a page past the end is the last."""
    pages = max(1, -(-total // size))
    page = min(max(requested, 1), pages)
    start = (page - 1) * size
    return Paged(page, pages, total, start, min(start + size, total))


def page_number(text: str | None) -> int:
    """A ``?page=`` value as a page number; anything that is not a positive number is page 1."""
    try:
        return max(1, int(text or "1"))
    except ValueError:
        return 1


def may_show(memory_person: str, page_person: str | None) -> bool:
    """Whether a page about ``page_person`` (None: a page about no one, the overview or people) may show a memory
    of ``memory_person``.

    A memory said in a private chat is shown only on its own person's page; so is a shared one, so no page ever
    shows one person's words beside another's.
    """
    return page_person is not None and memory_person == page_person


def is_loopback(host: str) -> bool:
    """Whether ``host`` (an address to bind) keeps the page on this machine."""
    return host in ("127.0.0.1", "::1", "localhost") or host.startswith("127.")


def allowed_hosts(bind_host: str) -> list[str] | None:
    """The Host headers a page bound to ``bind_host`` answers; None: any.

    On loopback only this machine's own names, so a site that points a name of its own at 127.0.0.1 (DNS rebinding)
    is refused before any page runs. Bound to another address the operator reaches it by a name kith cannot know.
    """
    if not is_loopback(bind_host):
        return None
    return sorted({"127.0.0.1", "localhost", "::1", bind_host})
