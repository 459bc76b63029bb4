"""The one door to the language model: ``litellm.acompletion`` with timeouts, bounded retries
and fallback models.

litellm is imported lazily (it takes seconds) and only after its local model cost map is
forced, so that importing it makes no network call.
"""

from __future__ import annotations

import asyncio
import base64
import json
import logging
import os
import random
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ground.config import LLMSettings, api_key_from_env
from ground.tunables import LLM_RETRY_BASE_S, LLM_RETRY_MAX_S
from llm.streamed import StreamAssembly

log = logging.getLogger("kith.llm")

HONEST_FAILURE_REPLY = "I can't reach my model right now. Please try again in a moment."

# Told the reply's text so far each time it grows, while the model streams it (a preview, never the reply: the
# reply is what ``complete`` returns). A retry starts the text again from nothing.
TextSink = Callable[[str], None]


class LLMError(Exception):
    """A model call failed. ``kind`` names why, for logs; ``retryable``: another attempt may succeed."""

    def __init__(self, kind: str, detail: str = "", *, retryable: bool = True) -> None:
        super().__init__(f"{kind}: {detail}" if detail else kind)
        self.kind = kind
        self.detail = detail
        self.retryable = retryable


@dataclass(frozen=True, slots=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it

    def parsed_arguments(self) -> dict[str, Any]:
        try:
            value = json.loads(self.arguments or "{}")
        except json.JSONDecodeError:
            return {}
        return value if isinstance(value, dict) else {}


@dataclass(frozen=True, slots=True)
class LLMReply:
    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    model: str = ""
    elapsed_ms: float = 0.0
    usage: dict[str, int] = field(default_factory=dict)


def import_litellm() -> Any:
    """Import litellm with its network-touching defaults switched off."""
    os.environ["LITELLM_LOCAL_MODEL_COST_MAP"] = "True"
    os.environ.setdefault("LITELLM_TELEMETRY", "False")
    import litellm

    litellm.telemetry = False
    litellm.suppress_debug_info = True
    litellm.drop_params = True
    # kith reads no price. litellm prices every call, and for a stream (which carries no usage until its end) it
    # counted the whole prompt's tokens with a tokenizer it loads for that: 41 MB more in the model process
    # and a count over every streamed reply's prompt, for a figure nobody reads.
    litellm.response_cost_calculator = _no_price
    logging.getLogger("LiteLLM").setLevel(logging.WARNING)
    return litellm


def _no_price(**_details: Any) -> None:
    return None


def classify(exc: BaseException) -> tuple[str, bool]:
    """(kind, retryable) for an exception raised by litellm."""
    if isinstance(exc, LLMError):
        return exc.kind, exc.retryable
    name = type(exc).__name__
    if isinstance(exc, asyncio.TimeoutError) or "Timeout" in name:
        return "timeout", True
    if "RateLimit" in name:
        return "rate_limited", True
    if "APIConnectionError" in name or "ServiceUnavailable" in name or "InternalServerError" in name:
        return "unavailable", True
    status = getattr(exc, "status_code", None)
    if isinstance(status, int) and status >= 500:
        return "unavailable", True
    if "Authentication" in name or status in (401, 403):
        return "auth", False
    if "NotFound" in name or status == 404:
        return "model_not_found", False
    if "BadRequest" in name or status == 400:
        return "bad_request", False
    return "error", False


class ModelCalls(Protocol):
    """Somewhere else that makes the litellm call: the model process (``llm.process``)."""

    async def complete(self, kwargs: dict[str, Any], api_key_env: str, timeout_s: float,
                       on_text: TextSink | None = None) -> LLMReply: ...

    async def transcribe(self, kwargs: dict[str, Any], api_key_env: str, timeout_s: float) -> LLMReply: ...

    async def sees_images(self, model: str) -> bool: ...


class LLMClient:
    """Calls the configured model, then each fallback, each with bounded retries.

    With ``calls`` the litellm call itself happens there (the model process); otherwise litellm
    is imported into this process on first use.
    """

    def __init__(self, settings: LLMSettings, *, litellm_module: Any | None = None,
                 calls: ModelCalls | None = None) -> None:
        self.settings = settings
        self._litellm = litellm_module
        self.calls = calls
        self._sight: dict[str, bool] = {}  # by model: whether litellm says it sees images

    @property
    def litellm(self) -> Any:
        if self._litellm is None:
            self._litellm = import_litellm()
        return self._litellm

    async def complete(self, messages: Sequence[dict[str, Any]], *, model: str | None = None,
                       tools: Sequence[dict[str, Any]] | None = None, timeout_s: float | None = None,
                       max_tokens: int | None = None, max_retries: int | None = None,
                       temperature: float | None = None, purpose: str = "reply",
                       on_text: TextSink | None = None) -> LLMReply:
        """The model's answer. With ``on_text`` it is streamed, and ``on_text`` is told its text as it grows."""
        models = [model or self.settings.model] + ([] if model else list(self.settings.fallbacks))
        retries = self.settings.max_retries if max_retries is None else max_retries
        timeout = timeout_s or self.settings.timeout_s

        def call(m: str) -> Awaitable[LLMReply]:
            return self._call(m, messages, tools, timeout, max_tokens, temperature, on_text)

        return await self._retrying(models, retries, purpose, call)

    async def transcribe(self, audio: bytes, filename: str, *, model: str, api_base: str, api_key_env: str,
                         timeout_s: float, max_retries: int | None = None) -> str:
        """The words of ``audio`` (a voice note's bytes), by the transcription ``model``, retried as a model call
        is. The audio goes to the model process whole and is held nowhere else."""
        kwargs: dict[str, Any] = {"model": model, "audio_b64": base64.b64encode(audio).decode("ascii"),
                                  "filename": filename or "voice.ogg", "timeout": timeout_s,
                                  # Retries are ours, bounded and logged (the provider's SDK would add its own).
                                  "num_retries": 0, "max_retries": 0}
        if api_base:
            kwargs["api_base"] = api_base
        retries = self.settings.max_retries if max_retries is None else max_retries

        async def call(_model: str) -> LLMReply:
            if self.calls is not None:
                return await self.calls.transcribe(kwargs, api_key_env, timeout_s)
            return await call_transcription(self.litellm, with_api_key(dict(kwargs), api_key_env), timeout_s)

        return (await self._retrying([model], retries, "transcription", call)).text

    async def sees_images(self) -> bool:
        """Whether the configured model takes images, as litellm's model table says (asked once per model). A model
        litellm does not know is taken not to: set ``[media] vision = true`` for one that does."""
        model = self.settings.model
        if model not in self._sight:
            try:
                if self.calls is not None:
                    self._sight[model] = await self.calls.sees_images(model)
                else:
                    self._sight[model] = model_sees_images(self.litellm, model)
            except Exception as exc:  # asked again next time: a model process still starting, say
                log.warning("vision check failed model=%s error=%s", model, type(exc).__name__)
                return False
        return self._sight[model]

    async def _retrying(self, models: Sequence[str], retries: int, purpose: str,
                        call: Callable[[str], Awaitable[LLMReply]]) -> LLMReply:
        """``call`` for each model in turn, each with up to ``retries`` more attempts after a passing failure."""
        last: LLMError | None = None
        for m in models:
            for attempt in range(retries + 1):
                started = time.perf_counter()
                try:
                    reply = await call(m)
                except Exception as exc:  # litellm raises many types; classify them all
                    kind, retryable = classify(exc)
                    elapsed = (time.perf_counter() - started) * 1000
                    log.warning("llm call failed purpose=%s model=%s attempt=%d kind=%s ms=%.0f",
                                purpose, m, attempt + 1, kind, elapsed)
                    # The model process names the exception it saw; here it is the exception itself.
                    last = LLMError(kind, exc.detail if isinstance(exc, LLMError) else type(exc).__name__,
                                    retryable=retryable)
                    if not retryable:
                        break
                    if attempt < retries:
                        backoff = min(LLM_RETRY_MAX_S, LLM_RETRY_BASE_S * 2**attempt)
                        await asyncio.sleep(backoff * random.uniform(0.5, 1))
                    continue
                log.info("llm call ok purpose=%s model=%s ms=%.0f chars=%d tool_calls=%d", purpose, m,
                         reply.elapsed_ms, len(reply.text), len(reply.tool_calls))
                return reply
        raise last or LLMError("error")

    async def _call(self, model: str, messages: Sequence[dict[str, Any]], tools: Sequence[dict[str, Any]] | None,
                    timeout: float, max_tokens: int | None, temperature: float | None,
                    on_text: TextSink | None = None) -> LLMReply:
        kwargs: dict[str, Any] = {
            "model": model,
            "messages": list(messages),
            "timeout": timeout,
            "max_tokens": max_tokens or self.settings.max_reply_tokens,
            "num_retries": 0,  # retries are ours, bounded and logged
        }
        if self.settings.api_base:
            kwargs["api_base"] = self.settings.api_base
        if tools:
            kwargs["tools"] = list(tools)
        if temperature is not None:
            kwargs["temperature"] = temperature
        if on_text is not None:
            kwargs["stream"] = True
            # The provider's own count at the stream's end (OpenAI's way; litellm drops it for a provider that
            # has none): without it litellm counts the prompt's tokens itself after every streamed reply.
            kwargs["stream_options"] = {"include_usage": True}
        if self.calls is not None:
            return await self.calls.complete(kwargs, self.settings.api_key_env, timeout, on_text)
        return await call_litellm(self.litellm, with_api_key(kwargs, self.settings.api_key_env), timeout, on_text)


def with_api_key(kwargs: dict[str, Any], api_key_env: str) -> dict[str, Any]:
    """``kwargs`` with the key from the environment variable the config names, where there is one."""
    key = api_key_from_env(api_key_env)
    if key:
        kwargs["api_key"] = key
    elif str(kwargs.get("model", "")).startswith("openai/"):
        kwargs["api_key"] = "not-needed"  # OpenAI-compatible local servers ignore it; the client demands one
    return kwargs


def model_sees_images(litellm: Any, model: str) -> bool:
    """litellm's word on whether ``model`` takes images (False for a model its table does not know)."""
    try:
        return bool(litellm.supports_vision(model=model))
    except Exception:  # an unknown provider prefix, say
        return False


async def call_transcription(litellm: Any, kwargs: dict[str, Any], timeout: float) -> LLMReply:
    """One litellm transcription: ``kwargs`` carries the audio as base64 (``audio_b64``) and its ``filename``."""
    started = time.perf_counter()
    kwargs = dict(kwargs)
    try:
        audio = base64.b64decode(kwargs.pop("audio_b64"), validate=True)
    except (KeyError, ValueError):
        raise LLMError("bad_request", "no audio", retryable=False) from None
    filename = str(kwargs.pop("filename", "") or "voice.ogg")
    async with asyncio.timeout(timeout + 1):
        response = await litellm.atranscription(file=(filename, audio), **kwargs)
    text = response.get("text") if isinstance(response, dict) else getattr(response, "text", None)
    if not isinstance(text, str):
        raise LLMError("malformed", "no transcript")
    return LLMReply(text.strip(), (), str(kwargs.get("model", "")), (time.perf_counter() - started) * 1000)


async def call_litellm(litellm: Any, kwargs: dict[str, Any], timeout: float,
                       on_text: TextSink | None = None) -> LLMReply:
    """One litellm call. Streamed (``kwargs["stream"]``), ``on_text`` hears the text as it grows and the reply is
    rebuilt from the chunks (tool calls included, :mod:`llm.streamed`), as one answer would have been."""
    started = time.perf_counter()
    async with asyncio.timeout(timeout + 1):  # unlike wait_for, no extra task per call; the whole stream's time
        response = await litellm.acompletion(**kwargs)
        if kwargs.get("stream"):
            answer = StreamAssembly()
            async for chunk in response:
                if answer.add(chunk) and on_text is not None:
                    on_text(answer.text)
            # litellm ends every stream with a finish reason, its own when the provider's never came (the
            # connection dropped mid-reply); what the provider said is kept apart. A reply cut short is no reply.
            if getattr(response, "received_finish_reason", "unknown") is None:
                raise LLMError("unavailable", "stream ended before the model finished")
            elapsed = (time.perf_counter() - started) * 1000
            calls = tuple(ToolCall(*call) for call in answer.tool_calls)
            return LLMReply(answer.text, calls, str(kwargs["model"]), elapsed, answer.usage)
    elapsed = (time.perf_counter() - started) * 1000
    return _parse_response(response, str(kwargs["model"]), elapsed)


def _parse_response(response: Any, model: str, elapsed_ms: float) -> LLMReply:
    try:
        choice = response.choices[0]
        message = choice.message
    except (AttributeError, IndexError, TypeError):
        raise LLMError("malformed", "no choices") from None
    text = getattr(message, "content", None) or ""
    if not isinstance(text, str):
        raise LLMError("malformed", "content is not text")
    calls = []
    for tc in getattr(message, "tool_calls", None) or []:
        fn = getattr(tc, "function", None)
        calls.append(ToolCall(str(getattr(tc, "id", "") or ""), str(getattr(fn, "name", "") or ""),
                              str(getattr(fn, "arguments", "") or "")))
    usage = {}
    u = getattr(response, "usage", None)
    if u is not None:
        for k in ("prompt_tokens", "completion_tokens", "total_tokens"):
            v = getattr(u, k, None)
            if isinstance(v, int):
                usage[k] = v
    return LLMReply(text, tuple(calls), model, elapsed_ms, usage)
