"""A loopback fake of the Telegram Bot API, for tests that drive the real python-telegram-bot.

The fake is an aiohttp server on 127.0.0.1 that answers ``/bot<token>/<method>`` the way Telegram
does: the same JSON envelopes, HTTP status codes, error descriptions and update semantics (offset
confirmation, long polling, ``allowed_updates``), so PTB's own validation and exception mapping
run unchanged. Tests steer it through plain methods on :class:`FakeTelegramApi` (``push_text``,
``fail_next``, ``go_away`` ...) and read what the bot did from ``sent``, ``actions`` and friends.

Files people send (``push_voice``, ``push_audio``, ``push_photo``, ``push_document``) are kept with their bytes:
``getFile`` names them and ``/file/bot<token>/<file_path>`` serves them, as Telegram's file server does; every
request to it is recorded in ``downloads``.

Telegram's limits below are facts of the protocol the fake imitates, not tunables of kith: they
are kept apart from ``ground.tunables`` on purpose, so a change to kith's own limits cannot make the
fake agree with a bug.
"""

from __future__ import annotations

import asyncio
import datetime as dtm
import itertools
import json
import re
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest_asyncio
from aiohttp import web
from telegram import Bot

from tests.fakes.loopback import ChangeSignal, serve

# --- Telegram's own limits and defaults -----------------------------------------------------
FAKE_BOT_TOKEN = "7000000001:fake-token-for-kith-tests"
MESSAGE_MAX_UTF16 = 4_096
CAPTION_MAX_UTF16 = 1_024
GET_UPDATES_LIMIT_MAX = 100
UPLOAD_MAX_BYTES = 50 * 1024 * 1024  # sendDocument's multipart limit
GET_FILE_MAX_BYTES = 20 * 1024 * 1024  # "bots can download files of up to 20MB in size" (getFile)
FILE_CHUNK_BYTES = 16 * 1024  # what the file server writes at a time when it streams a file (chunked_files)
FIRST_UPDATE_ID = 1_000
SHUTDOWN_GRACE_S = 0.1  # how long in-flight requests may finish when the fake goes away
DEFAULT_WAIT_S = 5.0
DRAFT_LIFETIME_S = 30.0  # sendMessageDraft: "an ephemeral ... temporary 30-second preview"

JsonDict = dict[str, Any]

_DEFAULT_ALLOWED_UPDATES = frozenset(
    {
        "message", "edited_message", "channel_post", "edited_channel_post", "business_connection",
        "business_message", "edited_business_message", "deleted_business_messages", "inline_query",
        "chosen_inline_result", "callback_query", "shipping_query", "pre_checkout_query",
        "purchased_paid_media", "poll", "poll_answer", "my_chat_member", "chat_join_request",
        "chat_boost", "removed_chat_boost",
    }
)  # everything except chat_member, message_reaction and message_reaction_count, as Telegram does
_CHAT_ACTIONS = frozenset(
    {
        "typing", "upload_photo", "record_video", "upload_video", "record_voice", "upload_voice",
        "upload_document", "choose_sticker", "find_location", "record_video_note", "upload_video_note",
    }
)
_COMMAND_NAME = re.compile(r"[a-z0-9_]{1,32}")
_NOT_MODIFIED = (
    "Bad Request: message is not modified: specified new message content and reply markup are "
    "exactly the same as a current content and reply markup of the message"
)
_CONFLICT_OTHER_POLL = (
    "Conflict: terminated by other getUpdates request; make sure that only one bot instance is running"
)
_CONFLICT_WEBHOOK = (
    "Conflict: can't use getUpdates method while webhook is active; use deleteWebhook to delete the "
    "webhook first"
)
_QUERY_INVALID = "Bad Request: query is too old and response timeout expired or query ID is invalid"
_FILE_TOO_BIG = "Bad Request: file is too big"
_INVALID_FILE_ID = "Bad Request: invalid file_id"
_NGINX_PAGE = (
    "<html>\r\n<head><title>{status} {reason}</title></head>\r\n<body>\r\n<center><h1>{status} {reason}"
    "</h1></center>\r\n<hr><center>nginx/1.18.0</center>\r\n</body>\r\n</html>\r\n"
)


# --- What the fake records ----------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ApiCall:
    """One HTTP request that reached a Bot API method, as decoded by the fake."""

    method: str  # as the client spelled it
    params: JsonDict  # decoded values; uploaded files appear as {"filename": ..., "size": ...}
    content_type: str  # how the client encoded the request
    failed_status: int | None = None  # set when a scripted failure answered it
    at: float = 0.0  # time.monotonic() when it arrived


@dataclass(frozen=True, slots=True)
class RecordedMessage:
    """One accepted sendMessage call."""

    message_id: int
    chat_id: int | str
    text: str  # exactly as the client sent it (HTML markup included)
    visible_text: str  # what the person sees once Telegram parsed the markup
    parse_mode: str | None
    message_thread_id: int | None
    reply_to_message_id: int | None
    reply_markup: JsonDict | None
    entities: tuple[JsonDict, ...]


@dataclass(frozen=True, slots=True)
class RecordedDraft:
    """One accepted sendMessageDraft call: a streamed preview, never a message of the chat."""

    chat_id: int | str
    draft_id: int
    text: str  # exactly as the client sent it ("" shows Telegram's "Thinking..." placeholder)
    visible_text: str  # what the person sees once Telegram parsed the markup
    parse_mode: str | None
    message_thread_id: int | None
    entities: tuple[JsonDict, ...]
    time: float  # the fake's clock (:meth:`FakeTelegramApi.now`) when it arrived


@dataclass(frozen=True, slots=True)
class ChatView:
    """What the person in a chat sees: the bot's sent messages (oldest first) and the live draft, if any."""

    messages: tuple[str, ...]
    draft: str | None  # the visible text of the draft still on screen; None once sent, replaced or expired

    @property
    def text(self) -> str:
        """Everything on screen, messages then draft, one per line: for "no half message left" asserts."""
        return "\n".join([*self.messages, *([self.draft] if self.draft is not None else [])])


@dataclass(frozen=True, slots=True)
class ChatAction:
    chat_id: int | str
    action: str
    message_thread_id: int | None


@dataclass(frozen=True, slots=True)
class SentDocument:
    message_id: int
    chat_id: int | str
    filename: str | None
    content: bytes | None  # None when the client sent a file_id or URL instead of bytes
    mime_type: str | None
    caption: str | None
    message_thread_id: int | None


@dataclass(frozen=True, slots=True)
class CallbackAnswer:
    callback_query_id: str
    text: str | None
    show_alert: bool


@dataclass(frozen=True, slots=True)
class MarkupEdit:
    chat_id: int | str | None
    message_id: int | None
    inline_message_id: str | None
    reply_markup: JsonDict | None


@dataclass(frozen=True, slots=True)
class StoredFile:
    """A file a person sent, as the fake keeps it: what getFile names and the file server serves."""

    file_id: str
    file_unique_id: str
    file_path: str  # relative, as getFile gives it ("voice/file_3.oga")
    data: bytes
    file_size: int  # what Telegram declares: len(data) unless a test declared otherwise


@dataclass(frozen=True, slots=True)
class ScriptedFailure:
    status: int
    retry_after: int = 1
    description: str | None = None


# --- Pure helpers: text length, Telegram's HTML parser, incoming entities -----------------------
def utf16_len(text: str) -> int:
    """Length in UTF-16 code units, the unit every Telegram length and offset is counted in."""
    return len(text.encode("utf-16-le")) // 2


class HtmlParseError(ValueError):
    """Telegram's "can't parse entities" refusal; the message mirrors TDLib's wording."""


@dataclass(slots=True)
class _OpenTag:
    name: str
    start16: int
    attrs: dict[str, str] = field(default_factory=dict)


_HTML_TAGS = frozenset(
    {"a", "b", "strong", "i", "em", "s", "strike", "del", "u", "ins", "tg-spoiler", "tg-emoji", "span",
     "pre", "code", "blockquote"}
)
_TAG_ENTITY = {
    "b": "bold", "strong": "bold", "i": "italic", "em": "italic", "s": "strikethrough",
    "strike": "strikethrough", "del": "strikethrough", "u": "underline", "ins": "underline",
    "tg-spoiler": "spoiler", "span": "spoiler", "code": "code", "pre": "pre",
}
_NAMED_HTML_ENTITIES = {"lt": "<", "gt": ">", "amp": "&", "quot": '"'}
_HTML_SPACE = frozenset(" \t\r\n\v\f")
_HTML_ENTITY = re.compile(r"&(?:#x([0-9a-fA-F]{1,6})|#([0-9]{1,7})|([a-zA-Z]+));?")


def _byte_offset(text: str, index: int) -> int:
    return len(text[:index].encode("utf-8"))


def _decode_entity(text: str, index: int) -> tuple[str, int]:
    """Decode one ``&...;`` at ``index``; TDLib keeps an unknown entity as a literal ampersand."""
    match = _HTML_ENTITY.match(text, index)
    if match is None:
        return "&", index + 1
    hex_code, dec_code, name = match.groups()
    if name is not None:
        decoded = _NAMED_HTML_ENTITIES.get(name)
        return (decoded, match.end()) if decoded is not None else ("&", index + 1)
    code = int(hex_code, 16) if hex_code is not None else int(dec_code)
    if code == 0 or code > 0x10FFFF or 0xD800 <= code <= 0xDFFF:
        return "&", index + 1
    return chr(code), match.end()


def _decode_entities(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        if raw[i] == "&":
            decoded, i = _decode_entity(raw, i)
            out.append(decoded)
        else:
            out.append(raw[i])
            i += 1
    return "".join(out)


def _parse_attributes(text: str, index: int, tag: str, tag_begin: int) -> tuple[dict[str, str], int]:
    """Parse a start tag's attributes from ``index``; returns them and the index of its ``>``."""
    attrs: dict[str, str] = {}
    n = len(text)
    unclosed = HtmlParseError(f"Unclosed start tag at byte offset {_byte_offset(text, tag_begin)}")
    while True:
        while index < n and text[index] in _HTML_SPACE:
            index += 1
        if index >= n:
            raise unclosed
        if text[index] == ">":
            return attrs, index
        name_end = index
        while name_end < n and text[name_end] not in _HTML_SPACE and text[name_end] not in "=>":
            name_end += 1
        name = text[index:name_end].lower()
        if not name:
            raise HtmlParseError(
                f'Empty attribute name in the tag "{tag}" at byte offset {_byte_offset(text, tag_begin)}'
            )
        index = name_end
        while index < n and text[index] in _HTML_SPACE:
            index += 1
        if index >= n:
            raise unclosed
        if text[index] != "=":
            if tag == "blockquote" and name == "expandable":
                attrs[name] = ""
                continue
            raise HtmlParseError(
                f'Expected equal sign in declaration of an attribute of the tag "{tag}" at byte offset '
                f"{_byte_offset(text, tag_begin)}"
            )
        index += 1
        while index < n and text[index] in _HTML_SPACE:
            index += 1
        if index >= n:
            raise unclosed
        if text[index] in "'\"":
            quote = text[index]
            value_end = text.find(quote, index + 1)
            if value_end < 0:
                raise unclosed
            attrs[name] = _decode_entities(text[index + 1 : value_end])
            index = value_end + 1
        else:
            token_begin = index
            while index < n and (text[index].isalnum() or text[index] in ".-"):
                index += 1
            if index >= n:
                raise unclosed
            if text[index] not in _HTML_SPACE and text[index] != ">":
                raise HtmlParseError(
                    f"Unexpected end of name token at byte offset {_byte_offset(text, token_begin)}"
                )
            attrs[name] = text[token_begin:index].lower()


def _entity_for(tag: _OpenTag, end16: int) -> JsonDict | None:
    length = end16 - tag.start16
    if length <= 0:
        return None  # Telegram drops empty entities
    entity: JsonDict = {"offset": tag.start16, "length": length}
    if tag.name == "a":
        url = tag.attrs.get("href", "")
        if not url:
            return None
        entity.update(type="text_link", url=url)
    elif tag.name == "tg-emoji":
        emoji_id = tag.attrs.get("emoji-id", "")
        if not emoji_id:
            return None
        entity.update(type="custom_emoji", custom_emoji_id=emoji_id)
    elif tag.name == "blockquote":
        entity["type"] = "expandable_blockquote" if "expandable" in tag.attrs else "blockquote"
    else:
        entity["type"] = _TAG_ENTITY[tag.name]
        if tag.name == "code" and tag.attrs.get("class", "").startswith("language-"):
            entity["language"] = tag.attrs["class"].removeprefix("language-")
    return entity


def parse_html(text: str) -> tuple[str, list[JsonDict]]:
    """Parse ``parse_mode=HTML`` text into (visible text, entities) the way Telegram (TDLib) does.

    Only ``<`` is strict: any tag Telegram does not support, an unclosed or mismatched tag raises
    :class:`HtmlParseError`; ``&`` that starts no known entity and a bare ``>`` are kept as text.
    """
    out: list[str] = []
    pos16 = 0
    stack: list[_OpenTag] = []
    entities: list[JsonDict] = []
    i, n = 0, len(text)
    while i < n:
        char = text[i]
        if char == "&":
            decoded, i = _decode_entity(text, i)
            out.append(decoded)
            pos16 += utf16_len(decoded)
            continue
        if char != "<":
            out.append(char)
            pos16 += 2 if ord(char) > 0xFFFF else 1
            i += 1
            continue
        begin = i
        i += 1
        if i < n and text[i] == "/":
            if not stack:
                raise HtmlParseError(f"Unexpected end tag at byte offset {_byte_offset(text, begin)}")
            name_end = i + 1
            while name_end < n and text[name_end] not in _HTML_SPACE and text[name_end] != ">":
                name_end += 1
            end_name = text[i + 1 : name_end].lower()
            while name_end < n and text[name_end] in _HTML_SPACE:
                name_end += 1
            if name_end >= n or text[name_end] != ">":
                raise HtmlParseError(f"Unclosed end tag at byte offset {_byte_offset(text, begin)}")
            open_tag = stack.pop()
            if end_name and end_name != open_tag.name:
                raise HtmlParseError(
                    f'Unmatched end tag at byte offset {_byte_offset(text, begin)}, expected '
                    f'"</{open_tag.name}>", found "</{end_name}>"'
                )
            entity = _entity_for(open_tag, pos16)
            if entity is not None:
                entities.append(entity)
            i = name_end + 1
            continue
        name_end = i
        while name_end < n and text[name_end] not in _HTML_SPACE and text[name_end] != ">":
            name_end += 1
        if name_end >= n:
            raise HtmlParseError(f"Unclosed start tag at byte offset {_byte_offset(text, begin)}")
        tag = text[i:name_end].lower()
        if tag not in _HTML_TAGS:
            raise HtmlParseError(f'Unsupported start tag "{tag}" at byte offset {_byte_offset(text, begin)}')
        attrs, close = _parse_attributes(text, name_end, tag, begin)
        if tag == "span" and attrs.get("class") != "tg-spoiler":
            raise HtmlParseError(
                f'Tag "span" must have class "tg-spoiler" at byte offset {_byte_offset(text, begin)}'
            )
        stack.append(_OpenTag(tag, pos16, attrs))
        i = close + 1
    if stack:
        raise HtmlParseError(f"Can't find end tag corresponding to start tag {stack[-1].name}")
    entities.sort(key=lambda e: (e["offset"], -e["length"]))
    return "".join(out), entities


_INCOMING_ENTITY = re.compile(
    r"(?P<bot_command>(?<![\w/])/[A-Za-z0-9_]{1,64}(?:@[A-Za-z0-9_]{3,32})?)"
    r"|(?P<mention>(?<![\w@])@[A-Za-z0-9_]{5,32}\b)"
    r"|(?P<url>https?://[^\s<>\"]+)"
)


def incoming_entities(text: str) -> list[JsonDict]:
    """The entities Telegram attaches to a person's plain message: /commands, @mentions, links."""
    entities: list[JsonDict] = []
    for match in _INCOMING_ENTITY.finditer(text):
        kind = match.lastgroup or "url"
        entities.append(
            {"type": kind, "offset": utf16_len(text[: match.start()]), "length": utf16_len(match.group())}
        )
    return entities


# --- Requests and errors -------------------------------------------------------------------------
class ApiError(Exception):
    """A refusal the fake answers with Telegram's error envelope."""

    def __init__(self, status: int, description: str, parameters: JsonDict | None = None) -> None:
        super().__init__(description)
        self.status = status
        self.description = description
        self.parameters = parameters


@dataclass(frozen=True, slots=True)
class _Reply:
    """A success that carries Telegram's optional ``description`` (the webhook methods do)."""

    result: Any
    description: str


class _Params:
    """Request parameters with Telegram's typing rules.

    PTB sends ``application/x-www-form-urlencoded`` where strings travel raw and every other value
    is JSON-encoded; other clients send a JSON body. Like Telegram, the fake decides a field's type
    by the field, not by the encoding.
    """

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = dict(raw)

    def _value(self, name: str) -> Any:
        value = self.raw.get(name)
        return None if value == "" else value

    def get_str(self, name: str) -> str | None:
        value = self._value(name)
        return None if value is None else str(value)

    def get_int(self, name: str) -> int | None:
        value = self._value(name)
        if value is None or isinstance(value, int):
            return value
        try:
            return int(str(value))
        except ValueError:
            raise ApiError(400, f"Bad Request: invalid {name} specified") from None

    def get_float(self, name: str) -> float | None:
        value = self._value(name)
        if value is None or isinstance(value, int | float):
            return value
        try:
            return float(str(value))
        except ValueError:
            raise ApiError(400, f"Bad Request: invalid {name} specified") from None

    def get_bool(self, name: str) -> bool:
        value = self._value(name)
        if isinstance(value, str):
            return value.lower() in ("true", "1")
        return bool(value)

    def get_json(self, name: str) -> Any:
        value = self._value(name)
        if not isinstance(value, str):
            return value
        try:
            return json.loads(value)
        except ValueError:
            raise ApiError(400, f"Bad Request: can't parse {name} JSON object") from None

    def chat_id(self) -> int | str:
        value = self._value("chat_id")
        if value is None:
            raise ApiError(400, "Bad Request: chat_id is empty")
        if isinstance(value, int):
            return value
        text = str(value)
        if text.startswith("@"):
            return text
        try:
            return int(text)
        except ValueError:
            raise ApiError(400, "Bad Request: chat not found") from None


def _envelope_error(status: int, description: str, parameters: JsonDict | None = None) -> web.Response:
    body: JsonDict = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return web.json_response(body, status=status)


def _scripted_response(failure: ScriptedFailure) -> web.Response:
    if failure.status >= 500:
        # Telegram's front end answers gateway failures with nginx's HTML page, not JSON.
        reason = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable",
                  504: "Gateway Time-out"}.get(failure.status, "Server Error")
        page = _NGINX_PAGE.format(status=failure.status, reason=reason)
        return web.Response(status=failure.status, text=page, content_type="text/html")
    if failure.status == 429:
        description = failure.description or f"Too Many Requests: retry after {failure.retry_after}"
        return _envelope_error(429, description, {"retry_after": failure.retry_after})
    defaults = {400: "Bad Request", 401: "Unauthorized", 403: "Forbidden: bot was blocked by the user",
                404: "Not Found", 409: _CONFLICT_OTHER_POLL}
    description = failure.description or defaults.get(failure.status, "Error")
    return _envelope_error(failure.status, description)


def _update_kind(update: Mapping[str, Any]) -> str:
    return next((key for key in update if key != "update_id"), "unknown")


# --- The server ----------------------------------------------------------------------------------
class FakeTelegramApi:
    """The fake Bot API server plus the control surface tests use from the same event loop."""

    def __init__(
        self,
        token: str = FAKE_BOT_TOKEN,
        *,
        bot_username: str = "kith_test_bot",
        bot_first_name: str = "Kith",
        strict_chats: bool = True,
    ) -> None:
        self.token = token
        self.strict_chats = strict_chats  # unknown chat_id → "chat not found", as Telegram answers
        self.bot_user: JsonDict = {
            "id": int(token.split(":", 1)[0]),
            "is_bot": True,
            "first_name": bot_first_name,
            "username": bot_username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
            "can_connect_to_business": False,
            "has_main_web_app": False,
        }
        self.calls: list[ApiCall] = []
        self.sent: list[RecordedMessage] = []
        self.actions: list[ChatAction] = []
        self.documents: list[SentDocument] = []
        self.callback_answers: list[CallbackAnswer] = []
        self.markup_edits: list[MarkupEdit] = []
        self.drafts: list[RecordedDraft] = []
        self.commands: list[JsonDict] = []
        self.commands_scope: JsonDict | None = None
        self.webhook_url = ""
        self._runner: web.AppRunner | None = None
        self._port = 0
        self._pending: list[JsonDict] = []
        self._update_ids = itertools.count(FIRST_UPDATE_ID)
        self._callback_ids = itertools.count(1)
        self._file_serials = itertools.count(1)
        self._files: dict[str, StoredFile] = {}  # by file_id
        self._files_by_path: dict[str, StoredFile] = {}
        self._download_failures: deque[int] = deque()
        self.downloads: list[str] = []  # the path after the token of every request to the file server
        self.chunked_files = False  # serve files without Content-Length, in chunks, as a proxy may
        self._allowed_updates = _DEFAULT_ALLOWED_UPDATES
        self._poll_generation = 0
        self._failures: dict[str, deque[ScriptedFailure]] = {}
        self._odd_answers: dict[str, deque[object]] = {}
        self._slow_answers: dict[str, deque[float]] = {}
        self._refusals: dict[str, ScriptedFailure] = {}
        self._live_drafts: dict[tuple[int | str, int | None], RecordedDraft] = {}
        self._clock_offset = 0.0
        self._chats: dict[int | str, JsonDict] = {}
        self._users: dict[int, JsonDict] = {}
        self._messages: dict[tuple[int | str, int], JsonDict] = {}
        self._next_message_id: dict[int | str, int] = {}
        self._open_callback_queries: set[str] = set()
        self._signal = ChangeSignal()
        self._methods: dict[str, Callable[[_Params], Awaitable[Any]]] = {
            "getme": self._get_me,
            "getupdates": self._get_updates,
            "sendmessage": self._send_message,
            "sendmessagedraft": self._send_message_draft,
            "sendchataction": self._send_chat_action,
            "setmycommands": self._set_my_commands,
            "getmycommands": self._get_my_commands,
            "deletemycommands": self._delete_my_commands,
            "deletewebhook": self._delete_webhook,
            "setwebhook": self._set_webhook,
            "getwebhookinfo": self._get_webhook_info,
            "answercallbackquery": self._answer_callback_query,
            "editmessagereplymarkup": self._edit_message_reply_markup,
            "senddocument": self._send_document,
            "getfile": self._get_file,
        }

    # -- lifecycle ------------------------------------------------------------------------------
    async def start(self) -> None:
        """Listen on 127.0.0.1: a fresh port the first time, the same port on every later start."""
        app = web.Application(client_max_size=UPLOAD_MAX_BYTES)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_route("GET", "/file/bot{token}/{path:.+}", self._serve_file)
        app.router.add_route("*", "/{tail:.*}", self._not_found)
        # handler_cancellation: a client that hangs up on a long poll ends it, as on Telegram.
        runner = await serve(app, self._port, shutdown_timeout=SHUTDOWN_GRACE_S, handler_cancellation=True)
        self._port = runner.addresses[0][1]
        self._runner = runner

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def go_away(self) -> None:
        """Simulate Telegram becoming unreachable: stop listening and drop every open connection.

        Pending updates stay queued, as on the real server; :meth:`come_back` resumes on the same port.
        """
        await self.stop()

    async def come_back(self) -> None:
        await self.start()

    @property
    def running(self) -> bool:
        return self._runner is not None

    async def __aenter__(self) -> FakeTelegramApi:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def base_url(self) -> str:
        """What to hand PTB's ``base_url``: PTB appends the token, then ``/<method>``."""
        return f"{self.url}/bot"

    @property
    def base_file_url(self) -> str:
        return f"{self.url}/file/bot"

    def method_url(self, method: str) -> str:
        return f"{self.base_url}{self.token}/{method}"

    # -- scripting -----------------------------------------------------------------------------
    def fail_next(
        self, method: str, status: int = 429, retry_after: int = 1, description: str | None = None
    ) -> None:
        """Queue one failure for the next call of ``method``; several calls queue several failures.

        429 carries ``parameters.retry_after``; 5xx answers with nginx's HTML page like Telegram's
        front end; other statuses use Telegram's JSON error envelope with ``description``.
        """
        failure = ScriptedFailure(status=status, retry_after=retry_after, description=description)
        self._failures.setdefault(method.lower(), deque()).append(failure)

    def fail_next_download(self, status: int = 502) -> None:
        """The next request to the file server fails with ``status`` (5xx: nginx's HTML page, as Telegram's)."""
        self._download_failures.append(status)

    def answer_next_oddly(self, method: str, result: object) -> None:
        """The next call of ``method`` gets ``{"ok": true, "result": result}``: a result of a shape the Bot
        API never gives, as a broken proxy or server might."""
        self._odd_answers.setdefault(method.lower(), deque()).append(result)

    def answer_slowly(self, method: str, delay_s: float) -> None:
        """The next call of ``method`` is carried out at once (a message is sent) but answered only after
        ``delay_s``, as Telegram under load can; a client that hangs up first never hears the answer."""
        self._slow_answers.setdefault(method.lower(), deque()).append(delay_s)

    def refuse(self, method: str, status: int = 404, description: str | None = None) -> None:
        """Every call of ``method`` fails, until :meth:`accept`: a server that does not offer it at all.

        The default is what Telegram answers for a method it does not know (404 ``Not Found``, PTB's
        ``EndPointNotFound``), as a Bot API server older than the method would; ``status=400`` with a
        ``description`` such as ``"Bad Request: TEXTDRAFT_PEER_INVALID"`` refuses it as Telegram refuses a
        draft to a peer it will not preview in. :meth:`fail_next` failures queued for it come first.
        """
        self._refusals[method.lower()] = ScriptedFailure(status=status, description=description)

    def accept(self, method: str) -> None:
        """Undo :meth:`refuse`."""
        self._refusals.pop(method.lower(), None)

    def now(self) -> float:
        """The fake's clock: ``time.monotonic()`` plus whatever :meth:`advance_clock` added."""
        return time.monotonic() + self._clock_offset

    def advance_clock(self, seconds: float) -> None:
        """Move the fake's clock on, as if ``seconds`` had passed: drafts older than 30 s vanish."""
        self._clock_offset += seconds
        self._notify()

    def live_draft(self, chat_id: int | str, message_thread_id: int | None = None) -> RecordedDraft | None:
        """The draft the person in ``chat_id`` sees right now, or None: none was streamed, a message to the
        chat replaced it, or it is older than Telegram's 30 s preview."""
        draft = self._live_drafts.get((chat_id, message_thread_id))
        if draft is None or self.now() - draft.time >= DRAFT_LIFETIME_S:
            return None
        return draft

    def drafts_to(self, chat_id: int | str) -> list[RecordedDraft]:
        """Every draft update streamed to ``chat_id``, oldest first."""
        return [d for d in self.drafts if d.chat_id == chat_id]

    def seen_in(self, chat_id: int | str, message_thread_id: int | None = None) -> ChatView:
        """What the person in ``chat_id`` sees: the bot's sent messages (as parsed) and the live draft."""
        draft = self.live_draft(chat_id, message_thread_id)
        return ChatView(tuple(self.texts_to(chat_id)), None if draft is None else draft.visible_text)

    async def wait_until(self, predicate: Callable[[], bool], timeout: float = DEFAULT_WAIT_S) -> None:
        """Wait until ``predicate()`` holds; it is re-checked after every request the fake handles."""
        await self._signal.wait_until(predicate, timeout)

    async def wait_for_sent(self, n: int, timeout: float = DEFAULT_WAIT_S) -> list[RecordedMessage]:
        """Wait until at least ``n`` messages were sent; returns all sent so far."""
        try:
            await self.wait_until(lambda: len(self.sent) >= n, timeout)
        except TimeoutError:
            raise TimeoutError(
                f"expected {n} sent messages within {timeout} s, got {len(self.sent)}"
            ) from None
        return list(self.sent)

    def texts_to(self, chat_id: int | str) -> list[str]:
        """What was sent to ``chat_id``, as its person sees it, oldest first."""
        return [m.visible_text for m in self.sent if m.chat_id == chat_id]

    def _notify(self) -> None:
        self._signal.notify()

    # -- chats, users and messages ---------------------------------------------------------------
    def add_chat(
        self,
        chat_id: int,
        chat_type: str = "private",
        *,
        title: str | None = None,
        first_name: str | None = None,
        username: str | None = None,
        is_forum: bool = False,
    ) -> JsonDict:
        """Make a chat known to the fake (pushed updates do this implicitly) and return its JSON."""
        chat = self._chats.get(chat_id)
        if chat is None:
            chat = {"id": chat_id, "type": chat_type}
            if chat_type == "private":
                chat["first_name"] = first_name or f"User{chat_id}"
            else:
                chat["title"] = title or f"Group {abs(chat_id)}"
            if username:
                chat["username"] = username
            self._chats[chat_id] = chat
        if is_forum and chat["type"] == "supergroup":
            chat["is_forum"] = True
        return chat

    def _user(self, user_id: int, first_name: str | None = None, username: str | None = None) -> JsonDict:
        if user_id == self.bot_user["id"]:
            return {k: self.bot_user[k] for k in ("id", "is_bot", "first_name", "username")}
        user = self._users.get(user_id)
        if user is None:
            user = {"id": user_id, "is_bot": False, "first_name": first_name or f"User{user_id}",
                    "language_code": "en"}
            self._users[user_id] = user
        if username:
            user["username"] = username
        return dict(user)

    def _new_message_id(self, chat_id: int | str) -> int:
        message_id = self._next_message_id.get(chat_id, 1)
        self._next_message_id[chat_id] = message_id + 1
        return message_id

    def _reply_snapshot(self, chat_id: int | str, message_id: int) -> JsonDict | None:
        stored = self._messages.get((chat_id, message_id))
        if stored is None:
            return None
        return {k: v for k, v in stored.items() if k != "reply_to_message"}  # Telegram nests one level

    def _build_message(
        self,
        chat: JsonDict,
        sender: JsonDict,
        *,
        message_thread_id: int | None = None,
        reply_to_message_id: int | None = None,
        date: int | None = None,
        **content: Any,
    ) -> JsonDict:
        message: JsonDict = {
            "message_id": self._new_message_id(chat["id"]),
            "from": sender,
            "chat": dict(chat),
            "date": int(time.time()) if date is None else date,
        }
        if message_thread_id is not None:
            message["message_thread_id"] = message_thread_id
            if chat.get("is_forum"):
                message["is_topic_message"] = True
        reply = None if reply_to_message_id is None else self._reply_snapshot(chat["id"], reply_to_message_id)
        from_person = sender["id"] != self.bot_user["id"]
        if reply is None and message_thread_id is not None and chat.get("is_forum") and from_person:
            # In a forum topic Telegram makes a plain message "reply" to the topic's creation message.
            reply = {
                "message_id": message_thread_id,
                "from": sender,
                "chat": dict(chat),
                "date": message["date"],
                "message_thread_id": message_thread_id,
                "forum_topic_created": {"name": f"Topic {message_thread_id}", "icon_color": 7322096},
                "is_topic_message": True,
            }
        if reply is not None:
            message["reply_to_message"] = reply
        message.update({k: v for k, v in content.items() if v is not None})
        self._messages[(chat["id"], message["message_id"])] = message
        return message

    def _incoming_chat(
        self, chat_id: int, from_id: int, chat_type: str, first_name: str | None, username: str | None,
        chat_title: str | None, message_thread_id: int | None,
    ) -> tuple[JsonDict, JsonDict]:
        sender = self._user(from_id, first_name, username)
        if chat_type == "private":
            chat = self.add_chat(chat_id, "private", first_name=sender["first_name"], username=username)
        else:
            chat = self.add_chat(chat_id, chat_type, title=chat_title, is_forum=message_thread_id is not None)
        return chat, sender

    # -- pushing updates ---------------------------------------------------------------------------
    def push_update(self, update: Mapping[str, Any]) -> JsonDict:
        """Queue a raw Update (``update_id`` is assigned when missing); returns what was queued.

        Like Telegram, an update whose kind the bot excluded via ``allowed_updates`` is never queued.
        """
        queued = dict(update)
        queued.setdefault("update_id", next(self._update_ids))
        if _update_kind(queued) in self._allowed_updates:
            self._pending.append(queued)
            self._pending.sort(key=lambda u: u["update_id"])
        self._notify()
        return queued

    def push_text(
        self,
        chat_id: int,
        from_id: int,
        text: str,
        chat_type: str = "private",
        *,
        first_name: str | None = None,
        username: str | None = None,
        chat_title: str | None = None,
        message_thread_id: int | None = None,
        reply_to_message_id: int | None = None,
        date: int | None = None,
    ) -> JsonDict:
        """A person's text message, with Telegram's entities for /commands, @mentions and links.

        ``reply_to_message_id`` embeds the stored message (the bot's own included) as
        ``reply_to_message``; ``message_thread_id`` in a supergroup makes the chat a forum and the
        message a topic message.
        """
        chat, sender = self._incoming_chat(
            chat_id, from_id, chat_type, first_name, username, chat_title, message_thread_id
        )
        message = self._build_message(
            chat, sender, message_thread_id=message_thread_id, reply_to_message_id=reply_to_message_id,
            date=date, text=text, entities=incoming_entities(text) or None,
        )
        return self.push_update({"message": message})

    def push_edited_text(self, chat_id: int, message_id: int, text: str) -> JsonDict:
        """The author edited an earlier pushed message; Telegram resends it whole with ``edit_date``."""
        stored = self._messages[(chat_id, message_id)]
        edited = {k: v for k, v in stored.items() if k != "entities"}
        edited.update(text=text, edit_date=int(time.time()))
        if entities := incoming_entities(text):
            edited["entities"] = entities
        self._messages[(chat_id, message_id)] = edited
        return self.push_update({"edited_message": edited})

    def push_sticker(
        self,
        chat_id: int,
        from_id: int,
        emoji: str = "👍",
        chat_type: str = "private",
        *,
        chat_title: str | None = None,
        message_thread_id: int | None = None,
    ) -> JsonDict:
        chat, sender = self._incoming_chat(
            chat_id, from_id, chat_type, None, None, chat_title, message_thread_id
        )
        serial = next(self._file_serials)
        sticker = {
            "file_id": f"CAACAgIAAxkBAAI{serial:06d}", "file_unique_id": f"AgAD{serial:06d}",
            "width": 512, "height": 512, "is_animated": False, "is_video": False, "type": "regular",
            "emoji": emoji, "set_name": "KithTestStickers", "file_size": 23_456,
        }
        message = self._build_message(chat, sender, message_thread_id=message_thread_id, sticker=sticker)
        return self.push_update({"message": message})

    def push_media(
        self,
        chat_id: int,
        from_id: int,
        kind: str,
        chat_type: str = "private",
        *,
        caption: str | None = None,
        media_group_id: str | None = None,
        chat_title: str | None = None,
        reply_to_message_id: int | None = None,
    ) -> JsonDict:
        """A person's message holding ``kind`` ("voice", "photo", "video_note", "document", "location",
        "contact", "audio", "video", "animation", "sticker" without an emoji), shaped as Telegram sends each;
        ``caption`` only where Telegram allows one, ``media_group_id`` for an item of an album."""
        chat, sender = self._incoming_chat(chat_id, from_id, chat_type, None, None, chat_title, None)
        serial = next(self._file_serials)
        file = {"file_id": f"AgACAgIAAxkBAAI{serial:06d}", "file_unique_id": f"AQAD{serial:06d}"}
        contents: dict[str, Any] = {
            "voice": {**file, "duration": 4, "mime_type": "audio/ogg", "file_size": 12_345},
            "audio": {**file, "duration": 181, "performer": "Band", "title": "Song", "mime_type": "audio/mpeg",
                      "file_size": 4_123_456},
            "video_note": {**file, "length": 384, "duration": 6, "file_size": 345_678},
            "video": {**file, "width": 1280, "height": 720, "duration": 12, "mime_type": "video/mp4",
                      "file_size": 2_345_678},
            "photo": [{**file, "file_unique_id": f"AQAD{serial:06d}{size}", "width": size, "height": size,
                       "file_size": size * 90} for size in (90, 320, 800)],
            "document": {**file, "file_name": "notes.pdf", "mime_type": "application/pdf", "file_size": 56_789},
            "location": {"latitude": 52.520008, "longitude": 13.404954},
            "contact": {"phone_number": "+4930123456", "first_name": "Lena", "user_id": 4242},
            "sticker": {**file, "width": 512, "height": 512, "is_animated": False, "is_video": False,
                        "type": "custom_emoji", "custom_emoji_id": f"5{serial:018d}"},
        }
        content: dict[str, Any] = {}
        if kind == "animation":  # Telegram sends a GIF as a document too, for clients that predate animations
            gif = {**file, "width": 320, "height": 240, "duration": 3, "file_name": "wave.mp4",
                   "mime_type": "video/mp4", "file_size": 98_765}
            content = {"animation": gif, "document": {k: gif[k] for k in ("file_id", "file_unique_id", "file_name",
                                                                             "mime_type", "file_size")}}
        else:
            content = {kind: contents[kind]}
        message = self._build_message(
            chat, sender, reply_to_message_id=reply_to_message_id, caption=caption,
            caption_entities=(incoming_entities(caption) or None) if caption else None,
            media_group_id=media_group_id, **content,
        )
        return self.push_update({"message": message})

    def add_file(self, data: bytes, folder: str, extension: str, *, declared_size: int | None = None) -> StoredFile:
        """Keep ``data`` as a file Telegram holds (``folder``/file_N.``extension``, as Telegram lays them out).

        ``declared_size`` is the size Telegram states for it (in the message and in getFile) instead of
        ``len(data)``: past :data:`GET_FILE_MAX_BYTES` getFile refuses it ("file is too big") without the test
        allocating that much; below the real length it makes a file that grows past what was announced.
        """
        serial = next(self._file_serials)
        stored = StoredFile(
            file_id=f"AwACAgIAAxkBAAI{serial:06d}", file_unique_id=f"AgADfile{serial:06d}",
            file_path=f"{folder}/file_{serial}.{extension}", data=data,
            file_size=len(data) if declared_size is None else declared_size,
        )
        self._files[stored.file_id] = stored
        self._files_by_path[stored.file_path] = stored
        return stored

    def push_voice(
        self, chat_id: int, from_id: int, data: bytes, duration: int = 3, caption: str | None = None,
        chat_type: str = "private", *, declared_size: int | None = None, **where: Any,
    ) -> JsonDict:
        """A person's voice note holding ``data`` (OGG/Opus to Telegram); ``where``: as :meth:`push_file`'s."""
        stored = self.add_file(data, "voice", "oga", declared_size=declared_size)
        voice = {**_file_json(stored), "duration": duration, "mime_type": "audio/ogg"}
        return self.push_file(chat_id, from_id, {"voice": voice}, caption, chat_type, **where)

    def push_audio(
        self, chat_id: int, from_id: int, data: bytes, duration: int = 181, caption: str | None = None,
        chat_type: str = "private", *, file_name: str | None = "song.mp3", mime_type: str = "audio/mpeg",
        declared_size: int | None = None, **where: Any,
    ) -> JsonDict:
        """A person's audio file (music, a recording sent as a file) holding ``data``."""
        stored = self.add_file(data, "music", "mp3", declared_size=declared_size)
        audio = {**_file_json(stored), "duration": duration, "performer": "Band", "title": "Song",
                 "mime_type": mime_type}
        if file_name is not None:
            audio["file_name"] = file_name
        return self.push_file(chat_id, from_id, {"audio": audio}, caption, chat_type, **where)

    def push_photo(
        self, chat_id: int, from_id: int, data: bytes, caption: str | None = None, chat_type: str = "private",
        *, width: int = 1280, height: int = 960, declared_size: int | None = None, **where: Any,
    ) -> JsonDict:
        """A person's photo: ``data`` is its largest size; Telegram's smaller thumbnails come first, each a
        file of its own with other bytes, so a client that fetched the wrong size gets the wrong bytes."""
        sizes = []
        for side in (90, 320):
            thumb = self.add_file(f"thumbnail {side}px".encode(), "photos", "jpg")
            scale = side / max(width, height)
            sizes.append({**_file_json(thumb), "width": round(width * scale), "height": round(height * scale)})
        stored = self.add_file(data, "photos", "jpg", declared_size=declared_size)
        sizes.append({**_file_json(stored), "width": width, "height": height})
        return self.push_file(chat_id, from_id, {"photo": sizes}, caption, chat_type, **where)

    def push_document(
        self, chat_id: int, from_id: int, data: bytes, caption: str | None = None, chat_type: str = "private",
        *, file_name: str | None = "notes.pdf", mime_type: str | None = "application/pdf",
        declared_size: int | None = None, **where: Any,
    ) -> JsonDict:
        """A person's file sent as a file (an image sent uncompressed too: give its ``mime_type``)."""
        extension = (file_name or "file").rpartition(".")[2] or "bin"
        stored = self.add_file(data, "documents", extension, declared_size=declared_size)
        document = {**_file_json(stored)}
        if file_name is not None:
            document["file_name"] = file_name
        if mime_type is not None:
            document["mime_type"] = mime_type
        return self.push_file(chat_id, from_id, {"document": document}, caption, chat_type, **where)

    def push_file(
        self, chat_id: int, from_id: int, content: JsonDict, caption: str | None = None, chat_type: str = "private",
        *, chat_title: str | None = None, reply_to_message_id: int | None = None, media_group_id: str | None = None,
    ) -> JsonDict:
        """A person's message carrying ``content`` (``{"voice": {...}}``...), with its caption and the caption's
        entities as Telegram sends them."""
        chat, sender = self._incoming_chat(chat_id, from_id, chat_type, None, None, chat_title, None)
        message = self._build_message(
            chat, sender, reply_to_message_id=reply_to_message_id, caption=caption,
            caption_entities=(incoming_entities(caption) or None) if caption else None,
            media_group_id=media_group_id, **content,
        )
        return self.push_update({"message": message})

    def push_new_chat_members(
        self, chat_id: int, from_id: int, member_ids: list[int], chat_type: str = "group",
        chat_title: str | None = None,
    ) -> JsonDict:
        """A service message: ``from_id`` added ``member_ids`` (the bot's id yields the bot's user)."""
        chat, sender = self._incoming_chat(chat_id, from_id, chat_type, None, None, chat_title, None)
        members = [self._user(member_id) for member_id in member_ids]
        message = self._build_message(chat, sender, new_chat_members=members)
        return self.push_update({"message": message})

    def push_callback_query(
        self, chat_id: int, from_id: int, data: str, message_id: int | None = None
    ) -> JsonDict:
        """A person pressed an inline button; ``message_id`` names the bot message carrying it."""
        sender = self._user(from_id)
        chat = self._chats.get(chat_id) or self.add_chat(chat_id)
        message = None if message_id is None else self._messages.get((chat_id, message_id))
        if message is None:
            message = self._build_message(chat, self._user(self.bot_user["id"]), text="…")
        query_id = str(4_000_000_000_000_000_000 + next(self._callback_ids))
        self._open_callback_queries.add(query_id)
        query = {
            "id": query_id, "from": sender, "message": message,
            "chat_instance": str(abs(chat_id) * 7_919 % 10**18), "data": data,
        }
        return self.push_update({"callback_query": query})

    @property
    def pending_updates(self) -> list[JsonDict]:
        """Updates not yet confirmed by an ``offset`` (what Telegram would still deliver)."""
        return list(self._pending)

    # -- HTTP entry points -------------------------------------------------------------------------
    async def _serve_file(self, request: web.Request) -> web.StreamResponse:
        """Telegram's file server: ``/file/bot<token>/<file_path>``, the bytes as they are."""
        path = request.match_info["path"]
        self.downloads.append(path)
        self._notify()
        if request.match_info["token"] != self.token:
            return _envelope_error(401, "Unauthorized")
        if self._download_failures:
            return _scripted_response(ScriptedFailure(status=self._download_failures.popleft()))
        stored = self._files_by_path.get(path)
        if stored is None:
            return _envelope_error(404, "Not Found")
        if not self.chunked_files:
            return web.Response(body=stored.data, content_type="application/octet-stream")
        response = web.StreamResponse(headers={"Content-Type": "application/octet-stream"})
        response.enable_chunked_encoding()
        await response.prepare(request)
        for start in range(0, len(stored.data), FILE_CHUNK_BYTES):
            await response.write(stored.data[start:start + FILE_CHUNK_BYTES])
        await response.write_eof()
        return response

    async def _not_found(self, request: web.Request) -> web.Response:
        return _envelope_error(404, "Not Found")

    async def _read_params(self, request: web.Request) -> tuple[JsonDict, str]:
        params: JsonDict = dict(request.query)
        content_type = request.content_type
        if content_type == "application/json":
            try:
                body = await request.json() if request.can_read_body else {}
            except ValueError:
                raise ApiError(400, "Bad Request: can't parse JSON request body") from None
            if not isinstance(body, dict):
                raise ApiError(400, "Bad Request: request body must be a JSON object")
            params.update(body)
        elif request.can_read_body:
            form = await request.post()
            for name, value in form.items():
                params[name] = value
        return params, content_type

    async def _handle(self, request: web.Request) -> web.Response:
        if request.match_info["token"] != self.token:
            # Telegram's answer to a well-formed but unknown token.
            return _envelope_error(401, "Unauthorized")
        method = request.match_info["method"]
        try:
            raw, content_type = await self._read_params(request)
        except ApiError as error:
            return _envelope_error(error.status, error.description, error.parameters)
        key = method.lower()  # Bot API method names are case-insensitive
        failures = self._failures.get(key)
        if failures:
            failure = failures.popleft()
            self._record_call(method, raw, content_type, failure.status)
            return _scripted_response(failure)
        refusal = self._refusals.get(key)
        if refusal is not None:
            self._record_call(method, raw, content_type, refusal.status)
            return _scripted_response(refusal)
        self._record_call(method, raw, content_type, None)
        odd = self._odd_answers.get(key)
        if odd:
            return web.json_response({"ok": True, "result": odd.popleft()})
        handler = self._methods.get(key)
        if handler is None:
            return _envelope_error(404, "Not Found")
        try:
            outcome = await handler(_Params(raw))
        except ApiError as error:
            return _envelope_error(error.status, error.description, error.parameters)
        finally:
            self._notify()
        slow = self._slow_answers.get(key)
        if slow:
            await asyncio.sleep(slow.popleft())
        if isinstance(outcome, _Reply):
            body = {"ok": True, "result": outcome.result, "description": outcome.description}
            return web.json_response(body)
        return web.json_response({"ok": True, "result": outcome})

    def _record_call(self, method: str, raw: JsonDict, content_type: str, failed_status: int | None) -> None:
        params = {
            name: {"filename": value.filename, "size": _file_size(value)} if isinstance(value, web.FileField)
            else value
            for name, value in raw.items()
        }
        self.calls.append(ApiCall(method, params, content_type, failed_status, time.monotonic()))

    # -- Bot API methods ---------------------------------------------------------------------------
    async def _get_me(self, params: _Params) -> JsonDict:
        return dict(self.bot_user)

    async def _get_updates(self, params: _Params) -> list[JsonDict]:
        if self.webhook_url:
            raise ApiError(409, _CONFLICT_WEBHOOK)
        offset = params.get_int("offset") or 0
        limit = min(max(params.get_int("limit") or GET_UPDATES_LIMIT_MAX, 1), GET_UPDATES_LIMIT_MAX)
        timeout = max(params.get_float("timeout") or 0.0, 0.0)
        allowed = params.get_json("allowed_updates")
        if allowed is not None:
            self._allowed_updates = frozenset(allowed) if allowed else _DEFAULT_ALLOWED_UPDATES
        if offset > 0:
            self._pending = [u for u in self._pending if u["update_id"] >= offset]
        elif offset < 0:
            self._pending = self._pending[offset:]
        # A newer getUpdates ends any long poll still waiting, as Telegram does.
        self._poll_generation += 1
        generation = self._poll_generation
        self._notify()
        deadline = asyncio.get_running_loop().time() + timeout
        while True:
            if self._pending:
                return self._pending[:limit]
            if generation != self._poll_generation:
                raise ApiError(409, _CONFLICT_OTHER_POLL)
            remaining = deadline - asyncio.get_running_loop().time()
            if remaining <= 0:
                return []
            if not await self._signal.wait(remaining):
                return []

    def _require_chat(self, params: _Params) -> JsonDict:
        chat_id = params.chat_id()
        if isinstance(chat_id, str):
            chat = next((c for c in self._chats.values() if f"@{c.get('username')}" == chat_id), None)
        else:
            chat = self._chats.get(chat_id)
        if chat is not None:
            return chat
        if self.strict_chats or isinstance(chat_id, str):
            raise ApiError(400, "Bad Request: chat not found")
        return self.add_chat(chat_id, "private" if chat_id > 0 else "supergroup")

    def _render(self, text: str, parse_mode: str | None, entities: Any) -> tuple[str, list[JsonDict]]:
        mode = (parse_mode or "").lower()
        if mode == "html":
            try:
                return parse_html(text)
            except HtmlParseError as error:
                raise ApiError(400, f"Bad Request: can't parse entities: {error}") from None
        if mode in ("", "markdown", "markdownv2"):
            return text, list(entities or [])  # Markdown is passed through unvalidated
        raise ApiError(400, f"Bad Request: unsupported parse_mode {parse_mode!r}")

    def _reply_target(self, params: _Params, chat_id: int | str) -> int | None:
        reply_parameters = params.get_json("reply_parameters") or {}
        message_id = reply_parameters.get("message_id") or params.get_int("reply_to_message_id")
        if message_id is None:
            return None
        allow_missing = bool(reply_parameters.get("allow_sending_without_reply")) or params.get_bool(
            "allow_sending_without_reply"
        )
        if (chat_id, message_id) not in self._messages:
            if allow_missing:
                return None
            raise ApiError(400, "Bad Request: message to be replied not found")
        return int(message_id)

    async def _send_message(self, params: _Params) -> JsonDict:
        chat = self._require_chat(params)
        text = params.get_str("text")
        if text is None:
            raise ApiError(400, "Bad Request: message text is empty")
        parse_mode = params.get_str("parse_mode")
        visible, entities = self._render(text, parse_mode, params.get_json("entities"))
        if not visible.strip():
            raise ApiError(400, "Bad Request: message text is empty")
        if utf16_len(visible) > MESSAGE_MAX_UTF16:
            raise ApiError(400, "Bad Request: message is too long")
        thread_id = params.get_int("message_thread_id")
        reply_to = self._reply_target(params, chat["id"])
        markup = params.get_json("reply_markup")
        # The message takes the place of the chat's streamed preview, as the docs' "you must call
        # sendMessage with the complete message to persist it" implies.
        self._live_drafts.pop((chat["id"], thread_id), None)
        message = self._build_message(
            chat, self._user(self.bot_user["id"]), message_thread_id=thread_id, reply_to_message_id=reply_to,
            text=visible, entities=entities or None,
            reply_markup=markup if isinstance(markup, dict) and "inline_keyboard" in markup else None,
        )
        self.sent.append(
            RecordedMessage(
                message_id=message["message_id"], chat_id=chat["id"], text=text, visible_text=visible,
                parse_mode=parse_mode, message_thread_id=thread_id, reply_to_message_id=reply_to,
                reply_markup=markup, entities=tuple(entities),
            )
        )
        return message

    async def _send_message_draft(self, params: _Params) -> bool:
        """sendMessageDraft (Bot API 9.3, open to every bot since 9.5/10.0): a preview in a private chat.

        Refusals: a non-private chat answers ``TEXTDRAFT_PEER_INVALID`` as Telegram does; ``draft_id`` 0 or
        missing answers the fake's "invalid draft_id" (Telegram's wording is undocumented); the text is
        parsed exactly as sendMessage parses it, so markup sendMessage refuses is refused here too. An
        empty text is accepted: Telegram shows its "Thinking..." placeholder.
        """
        chat = self._require_chat(params)
        if chat.get("type") != "private":
            raise ApiError(400, "Bad Request: TEXTDRAFT_PEER_INVALID")
        draft_id = params.get_int("draft_id")
        if not draft_id:
            raise ApiError(400, "Bad Request: invalid draft_id specified")
        text = params.get_str("text") or ""
        parse_mode = params.get_str("parse_mode")
        visible, entities = self._render(text, parse_mode, params.get_json("entities"))
        if utf16_len(visible) > MESSAGE_MAX_UTF16:
            raise ApiError(400, "Bad Request: message is too long")
        thread_id = params.get_int("message_thread_id")
        draft = RecordedDraft(
            chat_id=chat["id"], draft_id=draft_id, text=text, visible_text=visible, parse_mode=parse_mode,
            message_thread_id=thread_id, entities=tuple(entities), time=self.now(),
        )
        self.drafts.append(draft)
        self._live_drafts[(chat["id"], thread_id)] = draft
        return True

    async def _send_chat_action(self, params: _Params) -> bool:
        chat = self._require_chat(params)
        action = params.get_str("action")
        if action not in _CHAT_ACTIONS:
            raise ApiError(400, "Bad Request: wrong parameter action in request")
        self.actions.append(ChatAction(chat["id"], action, params.get_int("message_thread_id")))
        return True

    async def _set_my_commands(self, params: _Params) -> bool:
        commands = params.get_json("commands")
        if not isinstance(commands, list) or len(commands) > 100:
            raise ApiError(400, "Bad Request: commands must be a list of at most 100 commands")
        for command in commands:
            name = str(command.get("command", ""))
            description = str(command.get("description", ""))
            if not _COMMAND_NAME.fullmatch(name):
                raise ApiError(400, "Bad Request: BOT_COMMAND_INVALID")
            if not 1 <= len(description) <= 256:
                raise ApiError(400, "Bad Request: BOT_COMMAND_DESCRIPTION_INVALID")
        self.commands = [{"command": c["command"], "description": c["description"]} for c in commands]
        self.commands_scope = params.get_json("scope")
        return True

    async def _get_my_commands(self, params: _Params) -> list[JsonDict]:
        return list(self.commands)

    async def _delete_my_commands(self, params: _Params) -> bool:
        self.commands = []
        return True

    async def _delete_webhook(self, params: _Params) -> _Reply:
        if params.get_bool("drop_pending_updates"):
            self._pending.clear()
        had_webhook, self.webhook_url = bool(self.webhook_url), ""
        return _Reply(True, "Webhook was deleted" if had_webhook else "Webhook is already deleted")

    async def _set_webhook(self, params: _Params) -> _Reply:
        url = params.get_str("url") or ""
        if url and not url.startswith("https://"):
            raise ApiError(400, "Bad Request: bad webhook: An HTTPS URL must be provided for webhook")
        if params.get_bool("drop_pending_updates"):
            self._pending.clear()
        allowed = params.get_json("allowed_updates")
        if allowed is not None:
            self._allowed_updates = frozenset(allowed) if allowed else _DEFAULT_ALLOWED_UPDATES
        self.webhook_url = url
        return _Reply(True, "Webhook was set" if url else "Webhook was deleted")

    async def _get_webhook_info(self, params: _Params) -> JsonDict:
        info: JsonDict = {
            "url": self.webhook_url,
            "has_custom_certificate": False,
            "pending_update_count": len(self._pending),
        }
        if self.webhook_url:
            info.update(max_connections=40, ip_address="127.0.0.1")
        return info

    async def _answer_callback_query(self, params: _Params) -> bool:
        query_id = params.get_str("callback_query_id") or ""
        if query_id not in self._open_callback_queries:
            raise ApiError(400, _QUERY_INVALID)
        self._open_callback_queries.discard(query_id)
        answer = CallbackAnswer(query_id, params.get_str("text"), params.get_bool("show_alert"))
        self.callback_answers.append(answer)
        return True

    async def _edit_message_reply_markup(self, params: _Params) -> JsonDict | bool:
        markup = params.get_json("reply_markup") or None
        inline_id = params.get_str("inline_message_id")
        if inline_id is not None:
            self.markup_edits.append(MarkupEdit(None, None, inline_id, markup))
            return True
        chat = self._require_chat(params)
        message_id = params.get_int("message_id")
        if message_id is None:
            raise ApiError(400, "Bad Request: message identifier is not specified")
        stored = self._messages.get((chat["id"], message_id))
        if stored is None:
            raise ApiError(400, "Bad Request: message to edit not found")
        if stored["from"]["id"] != self.bot_user["id"]:
            raise ApiError(400, "Bad Request: message can't be edited")
        if stored.get("reply_markup") == markup:
            raise ApiError(400, _NOT_MODIFIED)
        edited = {k: v for k, v in stored.items() if k != "reply_markup"}
        if markup is not None:
            edited["reply_markup"] = markup
        edited["edit_date"] = int(time.time())
        self._messages[(chat["id"], message_id)] = edited
        self.markup_edits.append(MarkupEdit(chat["id"], message_id, None, markup))
        return edited

    async def _get_file(self, params: _Params) -> JsonDict:
        stored = self._files.get(params.get_str("file_id") or "")
        if stored is None:
            raise ApiError(400, _INVALID_FILE_ID)
        if stored.file_size > GET_FILE_MAX_BYTES:
            raise ApiError(400, _FILE_TOO_BIG)
        return {**_file_json(stored), "file_path": stored.file_path}

    async def _send_document(self, params: _Params) -> JsonDict:
        chat = self._require_chat(params)
        document = params.raw.get("document")
        if document is None or document == "":
            raise ApiError(400, "Bad Request: there is no document in the request")
        caption = params.get_str("caption")
        visible_caption, caption_entities = (None, [])
        if caption is not None:
            visible_caption, caption_entities = self._render(
                caption, params.get_str("parse_mode"), params.get_json("caption_entities")
            )
            if utf16_len(visible_caption) > CAPTION_MAX_UTF16:
                raise ApiError(400, "Bad Request: message caption is too long")
        serial = next(self._file_serials)
        if isinstance(document, web.FileField):
            content = document.file.read()
            filename, mime_type = document.filename, document.content_type
        else:
            content, filename, mime_type = None, None, None
        file_json = {
            "file_id": f"BQACAgIAAxkBAAI{serial:06d}", "file_unique_id": f"AgADdoc{serial:06d}",
            "file_name": filename, "mime_type": mime_type,
            "file_size": None if content is None else len(content),
        }
        thread_id = params.get_int("message_thread_id")
        message = self._build_message(
            chat, self._user(self.bot_user["id"]), message_thread_id=thread_id,
            reply_to_message_id=self._reply_target(params, chat["id"]),
            document={k: v for k, v in file_json.items() if v is not None},
            caption=visible_caption, caption_entities=caption_entities or None,
        )
        self.documents.append(
            SentDocument(message["message_id"], chat["id"], filename, content, mime_type, caption, thread_id)
        )
        return message


def _file_json(stored: StoredFile) -> JsonDict:
    return {"file_id": stored.file_id, "file_unique_id": stored.file_unique_id, "file_size": stored.file_size}


def _file_size(upload: web.FileField) -> int:
    position = upload.file.tell()
    upload.file.seek(0, 2)
    size = upload.file.tell()
    upload.file.seek(position)
    return size


@pytest_asyncio.fixture
async def telegram_api() -> AsyncIterator[FakeTelegramApi]:
    """A started :class:`FakeTelegramApi` on a fresh loopback port, stopped after the test."""
    api = FakeTelegramApi()
    await api.start()
    try:
        yield api
    finally:
        await api.stop()


def ptb_bot(api: FakeTelegramApi) -> Bot:
    """python-telegram-bot's ``Bot`` pointed at ``api`` (use it as ``async with``)."""
    return Bot(api.token, base_url=api.base_url, base_file_url=api.base_file_url)


def retry_seconds(retry_after: int | float | dtm.timedelta) -> float:
    """A ``RetryAfter``'s wait in seconds: PTB 22 gives an int (with a deprecation warning) unless PTB_TIMEDELTA
    opts into a timedelta."""
    return retry_after.total_seconds() if isinstance(retry_after, dtm.timedelta) else float(retry_after)
