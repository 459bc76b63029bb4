"""The page's routes (Starlette), its templates (Jinja2) and its guard: a session for every page, a form token
for every post, the security headers on every answer.

Signing in: ``/login?token=…`` spends the single-use token (:class:`kith.web.door.Door`) and answers with an
HttpOnly, SameSite=Strict session cookie and a redirect to the overview, so the token leaves the address bar.
Every post carries the session's CSRF token; a post without it, or a request without a session, is refused and
changes nothing. After a change the page redirects (post, redirect, get) and shows what the command said once.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2
from starlette.applications import Starlette
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route
from starlette.templating import Jinja2Templates

from ground.tunables import WEB_FORM_MAX_BYTES, WEB_PAGE_SIZE, WEB_SEARCH_LIMIT, WEB_SESSION_TTL_S
from kith.web import views
from kith.web.actions import Actions
from kith.web.door import COOKIE, Door, Session
from kith.web.rules import SECURITY_HEADERS, page_number

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from kith.control.parts import Parts
    from kith.web.bot import Bot

log = logging.getLogger("kith.web")

HERE = Path(__file__).parent
Handler = Callable[[Request, Session], Awaitable[Response]]
MAX_FIELDS = 16  # the page's largest form has six


class Headers:
    """Every answer, a refusal included, carries :data:`kith.web.rules.SECURITY_HEADERS`."""

    def __init__(self, inner: ASGIApp) -> None:
        self.inner = inner
        self.raw = [(k.lower().encode(), v.encode()) for k, v in SECURITY_HEADERS.items()]

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.inner(scope, receive, send)
            return

        async def with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *self.raw]
            await send(message)

        await self.inner(scope, receive, with_headers)


def build_routes(app: Bot, parts: Parts, door: Door, one_writer: asyncio.Lock, *, secure: bool,
                 hosts: list[str] | None = None, clock: Callable[[], float] = time.monotonic) -> ASGIApp:
    """The page's ASGI app over a running bot; ``hosts``: the Host headers it answers (None: any)."""
    # Every value escaped, whatever a template's name: a memory's words are anyone's.
    templates = Jinja2Templates(env=jinja2.Environment(loader=jinja2.FileSystemLoader(HERE / "templates"),
                                                       autoescape=True))
    css = (HERE / "static" / "kith.css").read_bytes()
    actions = Actions(app, parts, one_writer)
    notices: dict[str, str] = {}  # session -> what the last change said, shown once by the next page

    def render(request: Request, session: Session, template: str, status: int = 200, **context: Any) -> Response:
        notice = notices.pop(session.key, "")
        return templates.TemplateResponse(request, template, {"csrf": session.csrf, "notice": notice, **context},
                                          status_code=status)

    async def answered(request: Request, work: Awaitable[Response]) -> Response:
        """``work``'s page; a failure is one line here and its type in the log, never a traceback holding a
        person's words."""
        try:
            return await work
        except Exception as exc:
            log.error("web page failed path=%s error=%s", request.url.path, type(exc).__name__)
            return refused(500, f"the page failed in the bot ({type(exc).__name__}); see the bot's log")

    def refused(status: int, why: str) -> Response:
        return PlainTextResponse(f"{why}\n", status_code=status)

    def page(handler: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            session = door.session(request.cookies.get(COOKIE), clock())
            if session is None:
                return refused(401, "not signed in: open the link `bot.py web url` prints")
            return await answered(request, handler(request, session))
        return guarded

    def form(handler: Callable[[Request, Session, dict[str, str]], Awaitable[Response]]
             ) -> Callable[[Request], Awaitable[Response]]:
        async def guarded(request: Request) -> Response:
            session = door.session(request.cookies.get(COOKIE), clock())
            if session is None:
                return refused(401, "not signed in: open the link `bot.py web url` prints")
            length = request.headers.get("content-length", "")
            if not length.isdigit():
                return refused(411, "a form's length must be given")
            if int(length) > WEB_FORM_MAX_BYTES:
                return refused(413, "the form is too large")
            form_data = await request.form(max_files=0, max_fields=MAX_FIELDS, max_part_size=WEB_FORM_MAX_BYTES)
            fields = {k: v for k, v in form_data.items() if isinstance(v, str)}
            if not door.form_ok(session, fields.get("csrf")):
                return refused(403, "this form did not come from this page: nothing changed")
            return await answered(request, handler(request, session, fields))
        return guarded

    def back(session: Session, to: str, said: str) -> Response:
        notices[session.key] = said
        return RedirectResponse(to, status_code=303)

    async def login(request: Request) -> Response:
        signed = door.redeem(request.query_params.get("token", ""), clock())
        if signed is None:
            return refused(401, "this sign-in link was used already or has expired: `bot.py web url` prints a new one")
        response = RedirectResponse("/", status_code=303)
        response.set_cookie(COOKIE, signed.cookie, max_age=int(WEB_SESSION_TTL_S), httponly=True, samesite="strict",
                            secure=secure, path="/")
        return response

    async def logout(request: Request, session: Session, _fields: dict[str, str]) -> Response:
        door.end(request.cookies.get(COOKIE))
        notices.pop(session.key, None)
        response = PlainTextResponse("signed out\n")
        response.delete_cookie(COOKIE, path="/")
        return response

    async def stylesheet(_request: Request) -> Response:
        return Response(css, media_type="text/css")

    async def overview(request: Request, session: Session) -> Response:
        return render(request, session, "overview.html", view=await views.overview(app, parts))

    async def people(request: Request, session: Session) -> Response:
        return render(request, session, "people.html", view=await views.people(app))

    async def approve(_request: Request, session: Session, fields: dict[str, str]) -> Response:
        done = await actions.approve(fields.get("code", ""))
        return back(session, "/people", done.message)

    async def revoke(_request: Request, session: Session, fields: dict[str, str]) -> Response:
        done = await actions.revoke(fields.get("account", ""))
        said = done.message.replace("revoked", "denied", 1) if fields.get("deny") and done.ok else done.message
        return back(session, "/people", said)

    async def link(_request: Request, session: Session, fields: dict[str, str]) -> Response:
        done = await actions.link(fields.get("account", ""), fields.get("to", ""))
        return back(session, "/people#people", done.message)

    async def unlink(_request: Request, session: Session, fields: dict[str, str]) -> Response:
        done = await actions.unlink(fields.get("account", ""))
        return back(session, "/people#people", done.message)

    def of_person(handler: Callable[..., Awaitable[Response]]) -> Callable[..., Awaitable[Response]]:
        """``handler`` given the person the path names, once the bot knows them; a page saying so otherwise. For a
        page ``(request, session, person)``, for a form ``(request, session, person, fields)``."""
        async def checked(request: Request, session: Session, *fields: dict[str, str]) -> Response:
            person = request.path_params["person"]
            if not await views.known(app, person):
                return render(request, session, "missing.html", status=404, person=person)
            return await handler(request, session, person, *fields)
        return checked

    async def person_page(request: Request, session: Session, person: str) -> Response:
        view = await views.person_page(app, person, page_number(request.query_params.get("page")), WEB_PAGE_SIZE,
                                       every=request.query_params.get("every") == "1")
        return render(request, session, "person.html", view=view)

    async def settle(request: Request, session: Session, person: str, fields: dict[str, str]) -> Response:
        done = await actions.settle(person, fields.get("first", ""), fields.get("second", ""),
                                    fields.get("answer", ""))
        return back(session, f"/person/{person}#conflicts", done.message)

    async def pin(request: Request, session: Session, person: str, fields: dict[str, str]) -> Response:
        memory_id = fields.get("memory", "")
        done = await actions.pin(person, memory_id, fields.get("pinned") == "1")
        return back(session, f"/person/{person}?page={page_number(fields.get('page'))}#m-{memory_id}", done.message)

    async def label(request: Request, session: Session, person: str, fields: dict[str, str]) -> Response:
        memory_id = fields.get("memory", "")
        done = await actions.relabel(person, memory_id, fields.get("label", ""))
        return back(session, f"/person/{person}?page={page_number(fields.get('page'))}#m-{memory_id}", done.message)

    async def export(request: Request, session: Session, person: str) -> Response:
        done = await actions.export(person)
        if not done.ok:
            return refused(500, done.message or "the export failed")
        return Response(done.data, media_type="application/json", headers={
            "Content-Disposition": f'attachment; filename="kith-export-{person}.json"'})

    async def graph(request: Request, session: Session, person: str) -> Response:
        done = await actions.graph_svg(person)
        if not done.ok:
            return refused(404, done.message or "no drawing")
        return Response(done.data, media_type="image/svg+xml")

    async def forget(request: Request, session: Session, person: str) -> Response:
        words = " ".join(request.query_params.get("words", "").split())
        plan = await actions.plan_forget(person, words) if words else None
        name = await views.name_of(app, person)
        previews = []
        if plan is not None:
            previews = [views.shown(plan.previews[i], name, unreviewed=i in plan.unreviewed)
                        for i in [*plan.memory_ids, *plan.note_ids, *plan.receipt_ids] if i in plan.previews]
        return render(request, session, "forget.html", person=person, name=name, words=words, plan=plan,
                      previews=previews, expect=" ".join(plan.key()) if plan is not None else "")

    async def forget_confirmed(request: Request, session: Session, person: str, fields: dict[str, str]) -> Response:
        done = await actions.forget(person, fields.get("words", ""), fields.get("expect", "").split())
        return back(session, f"/person/{person}", done.message)

    async def search(request: Request, session: Session, person: str) -> Response:
        query = " ".join(request.query_params.get("q", "").split())
        found = await views.search(app, person, query, WEB_SEARCH_LIMIT) if query else None
        return render(request, session, "search.html", person=person, name=await views.name_of(app, person),
                      query=query, found=found)

    routes = [
        Route("/login", login),
        Route("/logout", form(logout), methods=["POST"]),
        Route("/static/kith.css", stylesheet),
        Route("/", page(overview)),
        Route("/people", page(people)),
        Route("/pairing/approve", form(approve), methods=["POST"]),
        Route("/pairing/revoke", form(revoke), methods=["POST"]),
        Route("/people/link", form(link), methods=["POST"]),
        Route("/people/unlink", form(unlink), methods=["POST"]),
        Route("/person/{person}", page(of_person(person_page))),
        Route("/person/{person}/settle", form(of_person(settle)), methods=["POST"]),
        Route("/person/{person}/pin", form(of_person(pin)), methods=["POST"]),
        Route("/person/{person}/label", form(of_person(label)), methods=["POST"]),
        Route("/person/{person}/export", page(of_person(export))),
        Route("/person/{person}/graph.svg", page(of_person(graph))),
        Route("/person/{person}/forget", page(of_person(forget))),
        Route("/person/{person}/forget", form(of_person(forget_confirmed)), methods=["POST"]),
        Route("/person/{person}/search", page(of_person(search))),
    ]
    page = Starlette(routes=routes)
    if hosts is not None:
        page.add_middleware(TrustedHostMiddleware, allowed_hosts=hosts, www_redirect=False)
    return Headers(page)
