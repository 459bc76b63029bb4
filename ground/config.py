"""Typed, validated settings read from TOML.

Every key has a default here, or in the channel package whose section it is (numbers from
:mod:`ground.tunables`), and is documented in ``config.example.toml``. Loading is strict: an unknown
key, a wrong type or a missing required value raises :class:`ConfigError` with one line naming the
file and the key. Secrets never live in the file: the file names environment variables (``api_key_env``).
"""

from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeVar

from ground import tunables as t


class ConfigError(Exception):
    """The configuration cannot be used; the message is one line naming the file and the key."""


def api_key_from_env(api_key_env: str) -> str | None:
    """The model's API key from the variable ``[llm] api_key_env`` names; None when it names none."""
    return os.environ.get(api_key_env) if api_key_env else None


@dataclass(frozen=True)
class LLMSettings:
    model: str = "ollama/llama3.2"
    api_base: str = "http://localhost:11434"
    api_key_env: str = ""  # e.g. "OPENAI_API_KEY"; empty for a local model that needs no key
    timeout_s: float = t.LLM_TIMEOUT_S
    max_retries: int = t.LLM_MAX_RETRIES
    fallbacks: list[str] = field(default_factory=list)
    max_reply_tokens: int = t.LLM_MAX_REPLY_TOKENS
    summary_model: str = ""  # cheap model for thread summaries; empty = `model`
    # Make the litellm calls from a child process (llm.worker), on another core than the chats.
    separate_process: bool = True

    def api_key(self) -> str | None:
        return api_key_from_env(self.api_key_env)


@dataclass(frozen=True)
class PersonaExample:
    user: str
    reply: str


@dataclass(frozen=True)
class PersonaSettings:
    name: str = "Kith"
    attitude: str = "warm, curious and honest; a friend who listens more than it lectures"
    teasing: str = "light, never at the person's expense"
    language: str = "reply in the language the person writes in"
    extra: str = ""  # free text appended to the card
    examples: list[PersonaExample] = field(default_factory=list)


@dataclass(frozen=True)
class StorageSettings:
    data_dir: str = "~/.local/share/kith"
    database_url: str = ""  # empty = SQLite file `kith.db` under data_dir

    def data_path(self) -> Path:
        return Path(os.path.expanduser(self.data_dir))

    def exports_path(self) -> Path:
        """Where the terminal chat saves a reply's file (an /export); forget reaches the files there too."""
        return self.data_path() / "exports"

    def resolved_database_url(self) -> str:
        return self.database_url or f"sqlite:///{self.data_path() / 'kith.db'}"


@dataclass(frozen=True)
class HistorySettings:
    window_messages: int = t.HISTORY_WINDOW_MESSAGES
    summary_trigger_messages: int = t.SUMMARY_TRIGGER_MESSAGES
    summary_batch_messages: int = t.SUMMARY_BATCH_MESSAGES


@dataclass(frozen=True)
class BudgetSettings:
    """Character budget of each prompt part; their sum bounds every prompt."""

    persona_chars: int = t.BUDGET_PERSONA_CHARS
    pinned_chars: int = t.BUDGET_PINNED_CHARS
    recall_chars: int = t.BUDGET_RECALL_CHARS
    goals_chars: int = t.BUDGET_GOALS_CHARS
    documents_chars: int = t.BUDGET_DOCUMENTS_CHARS
    summary_chars: int = t.BUDGET_SUMMARY_CHARS
    recent_chars: int = t.BUDGET_RECENT_CHARS
    message_chars: int = t.BUDGET_MESSAGE_CHARS
    message_item_chars: int = t.BUDGET_MESSAGE_ITEM_CHARS


@dataclass(frozen=True)
class MemorySettings:
    # Where memories and their vectors live: "chroma" (embedded, or the server at chroma_url), "database" (tables in
    # kith's own database beside everything else), or "auto": the database when it is a server (PostgreSQL) or already
    # holds memories, else Chroma (memory.store.placement)
    store: Literal["auto", "chroma", "database"] = "auto"
    chroma_url: str = ""  # empty = embedded Chroma under data_dir/chroma; "http://host:port" = a Chroma server
    # "onnx:all-MiniLM-L6-v2" (offline), "onnx:<model directory>", "chroma-default",
    # "sentence-transformers:<model or path>", "litellm:<embedding model>" or "none"
    embedder: str = "onnx:all-MiniLM-L6-v2"
    embedder_api_base: str = ""  # for litellm embedders; empty = [llm] api_base
    # A directory holding a BERT cross-encoder checkpoint that reorders recall's top candidates; empty = none
    reranker: str = ""
    capture: bool = True
    capture_model: str = ""  # cheap model for capture and consolidation; empty = [llm] model
    capture_timeout_s: float = t.CAPTURE_TIMEOUT_S
    max_memories_per_run: int = t.MAX_MEMORIES_PER_RUN
    max_memory_chars: int = t.MAX_MEMORY_CHARS
    merge_threshold: float = t.MERGE_THRESHOLD
    conflict_threshold: float = t.CONFLICT_THRESHOLD
    gate_candidates: int = t.GATE_CANDIDATES
    notes_retention_days: int = t.NOTES_RETENTION_DAYS
    consolidation_hour: int = t.CONSOLIDATION_HOUR
    consolidation_chunk_chars: int = t.CONSOLIDATION_CHUNK_CHARS
    entailment_model: str = ""  # a local NLI cross-encoder's directory: a further check of receipts; empty = off
    entailment_threshold: float = t.ENTAILMENT_THRESHOLD


@dataclass(frozen=True)
class RecallSettings:
    pinned_max: int = t.PINNED_MAX
    max_items: int = t.RECALL_MAX_ITEMS
    item_chars: int = t.RECALL_ITEM_CHARS
    vector_weight: float = t.RECALL_VECTOR_WEIGHT
    bm25_weight: float = t.RECALL_BM25_WEIGHT
    half_life_days: float = t.RECALL_HALF_LIFE_DAYS
    # A memory said next to a strong match in the same chat gets this share of its score (0: off) ...
    neighbour_share: float = t.RECALL_NEIGHBOUR_SHARE
    neighbour_width: int = t.RECALL_NEIGHBOUR_WIDTH  # ... being one of this many on either side ...
    neighbour_gap_minutes: float = t.RECALL_NEIGHBOUR_GAP_MINUTES  # ... said at most this long apart
    date_boost: float = t.RECALL_DATE_BOOST  # a query naming a time lifts what was said then (1: off)
    # A memory whose relation in the person's graph touches a being the query names (or the best candidates'
    # relations touch) gets this share of the best score among the others about that being (0: off) ...
    graph_share: float = t.RECALL_GRAPH_SHARE
    graph_hops: int = t.RECALL_GRAPH_HOPS  # ... those beings (1), and the beings one relation away (2) ...
    graph_from_best: int = t.RECALL_GRAPH_FROM_BEST  # ... of this many best candidates (0: names in the query only)
    graph_relations: int = t.RECALL_GRAPH_RELATIONS  # relations that brought memories in, shown with them
    importance_weight: float = t.RECALL_IMPORTANCE_WEIGHT
    use_credit: float = t.RECALL_USE_CREDIT
    use_credit_cap: float = t.RECALL_USE_CREDIT_CAP
    embed_budget_ms: int = t.RECALL_EMBED_BUDGET_MS
    rerank_top: int = t.RECALL_RERANK_TOP  # with [memory] reranker: how many of the best it rescores ...
    rerank_budget_ms: int = t.RECALL_RERANK_BUDGET_MS  # ... within this long, else recall's own order stands
    tool_max_items: int = t.RECALL_TOOL_MAX_ITEMS


@dataclass(frozen=True)
class DeliverySettings:
    max_attempts: int = t.SEND_MAX_ATTEMPTS
    backoff_base_s: float = t.SEND_BACKOFF_BASE_S
    backoff_max_s: float = t.SEND_BACKOFF_MAX_S
    debounce_ms: int = t.DEBOUNCE_MS
    typing_refresh_s: float = t.TYPING_REFRESH_S
    typing_delay_s: float = t.TYPING_DELAY_S
    outbox_sweep_s: float = t.OUTBOX_SWEEP_S  # 0: only at start
    sent_retention_days: float = t.OUTBOX_SENT_RETENTION_DAYS  # delivered replies kept this long, then pruned
    # Platforms whose replies are shown as they grow, in private chats: Telegram as a draft, Discord and Slack as
    # one message edited as it grows.
    stream: list[str] = field(default_factory=lambda: ["telegram", "discord", "slack"])
    stream_gap_s: float = t.STREAM_GAP_S
    stream_give_up_s: float = t.STREAM_GIVE_UP_S


@dataclass(frozen=True)
class HeartbeatSettings:
    enabled: bool = True
    every_minutes: int = t.HEARTBEAT_EVERY_MINUTES
    # Local "HH:MM-HH:MM"; a range past midnight ("22:00-06:00") wraps. Proactive turns happen inside it only.
    active_hours: str = f"{t.HEARTBEAT_ACTIVE_START_HOUR:02d}:00-{t.HEARTBEAT_ACTIVE_END_HOUR:02d}:00"
    timezone: str = ""  # IANA name, e.g. "Europe/Warsaw"; empty = the machine's
    token_budget: int = t.HEARTBEAT_TOKEN_BUDGET  # prompt plus answer of one proactive turn, in tokens
    retry_base_s: float = t.HEARTBEAT_RETRY_BASE_S
    retry_max_s: float = t.HEARTBEAT_RETRY_MAX_S
    max_retries: int = t.HEARTBEAT_MAX_RETRIES
    busy_defer_s: float = t.HEARTBEAT_BUSY_DEFER_S
    decay_weekday: str = t.DECAY_WEEKDAY  # mon..sun
    decay_stale_days: int = t.DECAY_STALE_DAYS
    sensitive_words: list[str] = field(default_factory=list)  # extra words or names decay never retires


@dataclass(frozen=True)
class MediaSettings:
    """Files people send ([media]). With no transcription model a voice note keeps its honest line."""

    # A litellm transcription model ("openai/whisper-1", "groq/whisper-large-v3", or "openai/<name>" with
    # transcription_api_base for any OpenAI-compatible server, a local Whisper server keeping audio on the machine).
    transcription_model: str = ""
    transcription_api_base: str = ""  # "" = the provider's own
    transcription_api_key_env: str = ""  # e.g. "GROQ_API_KEY"; empty for a local server that needs no key
    transcription_timeout_s: float = t.TRANSCRIPTION_TIMEOUT_S
    voice_max_bytes: int = t.VOICE_MAX_BYTES
    voice_max_seconds: float = t.VOICE_MAX_SECONDS
    # Photos shown to the model with their caption, for that turn only: "auto" asks litellm whether the model sees
    # images; true or false decides. What an image shows is never remembered (those are not the person's words).
    vision: bool | str = "auto"
    image_max_bytes: int = t.IMAGE_MAX_BYTES
    # Text, Markdown and PDF files sent in a private chat are kept whole as the person's documents: passages of
    # them recalled (labelled as data they shared) in later private replies; /docs lists them. false: the honest line.
    documents: bool = True
    document_max_bytes: int = t.DOCUMENT_MAX_BYTES
    document_max_pages: int = t.DOCUMENT_MAX_PAGES
    document_max_chars: int = t.DOCUMENT_MAX_CHARS

    def transcribes(self) -> bool:
        return bool(self.transcription_model)


def check_media(settings: Settings) -> None:
    """[media]'s limits are positive (a section check, so the loader names the file)."""
    media = settings.media
    if isinstance(media.vision, str) and media.vision != "auto":
        raise ValueError(f'media.vision: "auto", true or false, not {media.vision!r}')
    for key in ("voice_max_bytes", "voice_max_seconds", "transcription_timeout_s", "image_max_bytes",
                "document_max_bytes", "document_max_pages", "document_max_chars"):
        if getattr(media, key) <= 0:
            raise ValueError(f"media.{key}: must be greater than 0")


@dataclass(frozen=True)
class WebSettings:
    """The memory room, a local web page the running bot serves ([web]; kith.web)."""

    enabled: bool = False
    # 127.0.0.1 keeps the page on this machine. Any other address needs tls_cert and tls_key, or the bot starts it
    # with a loud warning: the page shows every person's memories.
    host: str = "127.0.0.1"
    port: int = t.WEB_PORT
    tls_cert: str = ""  # a PEM certificate file; with tls_key, the page is served over HTTPS
    tls_key: str = ""  # its PEM private key file


def check_web(settings: Settings) -> None:
    """[web]'s port is a port, and TLS is both files or neither (a section check, so the loader names the file)."""
    web = settings.web
    if not 0 < web.port < 65536:
        raise ValueError(f"web.port: a TCP port from 1 to 65535, not {web.port}")
    if bool(web.tls_cert) != bool(web.tls_key):
        raise ValueError("web.tls_cert and web.tls_key: set both (HTTPS) or neither")


@dataclass(frozen=True)
class Settings:
    """Every section but the platforms' own. A platform's section (``[telegram]``...) lives in its channel
    package and the wiring's subclass of this adds it as a field: the loader builds the class it is given,
    so it names no platform."""

    llm: LLMSettings = field(default_factory=LLMSettings)
    persona: PersonaSettings = field(default_factory=PersonaSettings)
    storage: StorageSettings = field(default_factory=StorageSettings)
    history: HistorySettings = field(default_factory=HistorySettings)
    budget: BudgetSettings = field(default_factory=BudgetSettings)
    memory: MemorySettings = field(default_factory=MemorySettings)
    recall: RecallSettings = field(default_factory=RecallSettings)
    delivery: DeliverySettings = field(default_factory=DeliverySettings)
    heartbeat: HeartbeatSettings = field(default_factory=HeartbeatSettings)
    media: MediaSettings = field(default_factory=MediaSettings)
    web: WebSettings = field(default_factory=WebSettings)
    # [policy.<platform>] tables, validated by the policy package (a check the wiring passes to load_settings)
    policy: dict[str, Any] = field(default_factory=dict)
    source: str = "<defaults>"  # the file these settings came from, for messages


SectionCheck = Callable[[Settings], None]  # raises ValueError naming the key; the loader adds the file
AnySettings = TypeVar("AnySettings", bound=Settings)


def load_settings(path: str | os.PathLike[str] | None, shape: type[AnySettings],
                  checks: Sequence[SectionCheck] = (), *, require_environment: bool = True) -> AnySettings:
    """Read and validate a TOML file as ``shape`` (Settings or a subclass); ``None`` gives its defaults, which
    config.example.toml documents.

    The loader checks types and keys against ``shape``'s fields; the value rules of a feature's section (a
    policy's patterns, the heartbeat's hours) belong to that feature, which the wiring passes in as ``checks``.
    ``require_environment=False`` accepts a variable the file names being unset (``bot.py setup`` is there to set it).
    """
    if path is None:
        return shape()
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{p}: config file not found") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{p}: not valid TOML: {exc}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{p}: cannot read: {exc}") from None
    settings: AnySettings = _build(shape, {k: v for k, v in raw.items()}, file=str(p), prefix="")
    settings = dataclasses.replace(settings, source=str(p))
    for check in checks:
        try:
            check(settings)
        except ValueError as exc:
            raise ConfigError(f"{settings.source}: {exc}") from None
    if require_environment:
        check_environment(settings)
    return settings


def check_environment(settings: Settings) -> None:
    """Every environment variable the config names must be set."""
    for key, env in (("llm.api_key_env", settings.llm.api_key_env),
                     ("media.transcription_api_key_env", settings.media.transcription_api_key_env)):
        if env and not os.environ.get(env):
            raise ConfigError(f"{settings.source}: {key}: environment variable {env} is not set")


def _build(cls: type, data: Any, *, file: str, prefix: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{file}: {prefix.rstrip('.') or '<top>'}: expected a table")
    hints = typing.get_type_hints(cls)
    names = {f.name: f for f in dataclasses.fields(cls) if f.name != "source"}
    for key in data:
        if key not in names:
            raise ConfigError(f"{file}: {prefix}{key}: unknown key")
    kwargs: dict[str, Any] = {}
    for name, f in names.items():
        key = f"{prefix}{name}"
        if name in data:
            kwargs[name] = _coerce(hints[name], data[name], file=file, key=key)
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{file}: {key}: required value missing")
    return cls(**kwargs)


def _coerce(tp: Any, value: Any, *, file: str, key: str) -> Any:
    origin = typing.get_origin(tp)
    if dataclasses.is_dataclass(tp):
        return _build(tp, value, file=file, prefix=f"{key}.")
    if origin in (types.UnionType, typing.Union):
        errors = []
        for arm in typing.get_args(tp):
            if arm is type(None):
                continue
            try:
                return _coerce(arm, value, file=file, key=key)
            except ConfigError as exc:
                errors.append(str(exc))
        raise ConfigError(errors[0] if errors else f"{file}: {key}: bad value")
    if origin is Literal:
        allowed = typing.get_args(tp)
        if value not in allowed:
            raise ConfigError(f"{file}: {key}: expected one of {', '.join(map(repr, allowed))}, got {value!r}")
        return value
    if origin is list:
        (item,) = typing.get_args(tp)
        if not isinstance(value, list):
            raise ConfigError(f"{file}: {key}: expected a list, got {_tname(value)}")
        return [_coerce(item, v, file=file, key=f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise ConfigError(f"{file}: {key}: expected a table, got {_tname(value)}")
        return dict(value)
    if tp is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{file}: {key}: expected true or false, got {_tname(value)}")
        return value
    if tp is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{file}: {key}: expected an integer, got {_tname(value)}")
        return value
    if tp is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{file}: {key}: expected a number, got {_tname(value)}")
        return float(value)
    if tp is str:
        if not isinstance(value, str):
            raise ConfigError(f"{file}: {key}: expected a string, got {_tname(value)}")
        return value
    raise ConfigError(f"{file}: {key}: unsupported setting type {tp}")


def _tname(value: Any) -> str:
    return {bool: "a boolean", int: "an integer", float: "a number", str: "a string", list: "a list",
            dict: "a table"}.get(type(value), type(value).__name__)
