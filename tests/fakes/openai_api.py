"""A loopback OpenAI-compatible server, scripted per test.

Serves POST /v1/chat/completions (plain and streaming), POST /v1/embeddings and GET /v1/models
on 127.0.0.1. Tests queue replies (text, tool calls, HTTP errors, delays, malformed bodies);
with nothing queued it answers through ``default`` (an echo of the last user message).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web


@dataclass
class Scripted:
    text: str | None = None
    tool_calls: list[dict[str, Any]] | None = None
    status: int = 200
    delay_s: float = 0.0
    raw_body: str | None = None  # sent as-is (malformed JSON and the like)
    headers: dict[str, str] = field(default_factory=dict)
    # A streamed answer's pace: this many characters a chunk, this long between chunks (a model's token rate).
    chunk_chars: int = 8
    chunk_delay_s: float = 0.0
    cut_after_chunks: int | None = None  # the connection drops after this many chunks (a stream cut short)


def echo_reply(request: dict[str, Any]) -> str:
    users = [m for m in request.get("messages", []) if m.get("role") == "user"]
    last = users[-1]["content"] if users else ""
    if isinstance(last, list):
        last = " ".join(p.get("text", "") for p in last if isinstance(p, dict))
    return f"echo: {last}"


def hash_embedding(text: str, dims: int = 64) -> list[float]:
    """A deterministic bag-of-words embedding: texts sharing words point the same way."""
    vec = [0.0] * dims
    for word in re.findall(r"\w+", text.lower()):
        h = int.from_bytes(hashlib.blake2b(word.encode(), digest_size=4).digest(), "big")
        vec[h % dims] += 1.0 if (h >> 8) & 1 else -1.0
    norm = math.sqrt(sum(v * v for v in vec)) or 1.0
    return [v / norm for v in vec]


class FakeOpenAI:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []  # each chat request's Authorization header
        self.embedding_requests: list[dict[str, Any]] = []
        self.queue: list[Scripted] = []
        self.default: Callable[[dict[str, Any]], str] = echo_reply
        self.route: Callable[[dict[str, Any]], Scripted | None] | None = None
        self.embed_delay_s = 0.0
        self.embed_status = 200
        # Transcriptions (POST /v1/audio/transcriptions, multipart): each request as (model, filename, audio), and
        # what the next ones answer: a text, or an HTTP status to fail with; with none queued, "transcript of
        # <filename>: <the audio's bytes as UTF-8>" (tests send text as the "audio", so the words are theirs).
        self.transcription_requests: list[tuple[str, str, bytes]] = []
        self.transcripts: list[str | int] = []
        self.transcription_delays: list[float] = []  # seconds the next transcriptions wait before answering
        self.required_key: str | None = None  # set: a chat request without "Bearer <it>" is refused (401)
        self._runner: web.AppRunner | None = None
        self.port = 0

    # --- scripting -----------------------------------------------------------------
    def reply(self, text: str, **kw: Any) -> None:
        self.queue.append(Scripted(text=text, **kw))

    def tool_call(self, name: str, arguments: dict[str, Any], *, text: str | None = None) -> None:
        self.queue.append(Scripted(text=text, tool_calls=[{
            "id": f"call_{len(self.queue)}_{name}", "type": "function",
            "function": {"name": name, "arguments": json.dumps(arguments)}}]))

    def fail(self, status: int, *, times: int = 1, retry_after: float | None = None) -> None:
        headers = {"retry-after": str(retry_after)} if retry_after is not None else {}
        for _ in range(times):
            self.queue.append(Scripted(status=status, headers=headers))

    def hang(self, seconds: float) -> None:
        self.queue.append(Scripted(text="too late", delay_s=seconds))

    def malformed(self, body: str = '{"choices": [ {"message": ') -> None:
        self.queue.append(Scripted(raw_body=body))

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    # --- server ----------------------------------------------------------------------
    async def start(self) -> FakeOpenAI:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self._chat)
        app.router.add_post("/chat/completions", self._chat)
        app.router.add_post("/v1/embeddings", self._embeddings)
        app.router.add_post("/embeddings", self._embeddings)
        app.router.add_get("/v1/models", self._models)
        app.router.add_post("/v1/audio/transcriptions", self._transcribe)
        app.router.add_post("/audio/transcriptions", self._transcribe)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _models(self, _request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "fake", "object": "model"}]})

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.requests.append(body)
        self.authorizations.append(request.headers.get("Authorization"))
        if self.required_key is not None and request.headers.get("Authorization") != f"Bearer {self.required_key}":
            return web.json_response({"error": {"message": "Incorrect API key provided",
                                                "type": "invalid_request_error", "code": "invalid_api_key"}},
                                     status=401)
        script = None
        if self.route is not None:
            script = self.route(body)
        if script is None:
            script = self.queue.pop(0) if self.queue else Scripted(text=self.default(body))
        if script.delay_s:
            await asyncio.sleep(script.delay_s)
        if script.status != 200:
            return web.json_response(
                {"error": {"message": f"scripted {script.status}", "type": "server_error", "code": script.status}},
                status=script.status, headers=script.headers)
        if script.raw_body is not None:
            return web.Response(text=script.raw_body, content_type="application/json")
        model = body.get("model", "fake")
        message: dict[str, Any] = {"role": "assistant", "content": script.text}
        finish = "stop"
        if script.tool_calls:
            message["tool_calls"] = script.tool_calls
            finish = "tool_calls"
        if body.get("stream"):
            usage = bool((body.get("stream_options") or {}).get("include_usage"))
            return await self._stream(request, model, script, finish, usage=usage)
        return web.json_response({
            "id": f"chatcmpl-{len(self.requests)}", "object": "chat.completion", "created": int(time.time()),
            "model": model, "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}})

    async def _stream(self, request: web.Request, model: str, script: Scripted, finish: str, *,
                      usage: bool) -> web.StreamResponse:
        """As OpenAI streams: a role chunk, the text in pieces, each tool call's id and name once and then its
        arguments in pieces under its index, the finish reason, and (asked with ``stream_options.include_usage``)
        a last chunk with no choices and the usage."""
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)

        async def send(delta: dict[str, Any] | None, reason: str | None = None,
                       **extra: Any) -> None:
            chunk = {"id": "chatcmpl-s", "object": "chat.completion.chunk", "created": int(time.time()),
                     "model": model, "choices": [] if delta is None else
                     [{"index": 0, "delta": delta, "finish_reason": reason}], **extra}
            await resp.write(f"data: {json.dumps(chunk)}\n\n".encode())

        await send({"role": "assistant", "content": ""})
        text = script.text or ""
        step = max(1, script.chunk_chars)
        for n, i in enumerate(range(0, len(text), step)):
            if script.cut_after_chunks is not None and n >= script.cut_after_chunks:
                if request.transport is not None:
                    request.transport.close()
                return resp
            if n and script.chunk_delay_s:
                await asyncio.sleep(script.chunk_delay_s)
            await send({"content": text[i:i + step]})
        for index, call in enumerate(script.tool_calls or ()):
            function = call.get("function", {})
            arguments = str(function.get("arguments", ""))
            await send({"tool_calls": [{"index": index, "id": call.get("id"), "type": "function",
                                        "function": {"name": function.get("name"), "arguments": ""}}]})
            for i in range(0, len(arguments), step):
                await send({"tool_calls": [{"index": index, "function": {"arguments": arguments[i:i + step]}}]})
        await send({}, finish)
        if usage:
            await send(None, usage={"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15})
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    async def _transcribe(self, request: web.Request) -> web.Response:
        form = await request.post()
        upload = form.get("file")
        if not isinstance(upload, web.FileField):
            return web.json_response({"error": {"message": "file is required"}}, status=400)
        audio = upload.file.read()
        name = upload.filename or ""
        self.transcription_requests.append((str(form.get("model", "")), name, audio))
        if self.transcription_delays:
            await asyncio.sleep(self.transcription_delays.pop(0))
        answer = self.transcripts.pop(0) if self.transcripts else (
            f"transcript of {name}: {audio.decode('utf-8', errors='replace')}")
        if isinstance(answer, int):
            return web.json_response({"error": {"message": f"scripted {answer}", "type": "server_error"}},
                                     status=answer)
        return web.json_response({"text": answer})

    async def _embeddings(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.embedding_requests.append(body)
        if self.embed_delay_s:
            await asyncio.sleep(self.embed_delay_s)
        if self.embed_status != 200:
            return web.json_response({"error": {"message": "scripted"}}, status=self.embed_status)
        inputs = body.get("input", [])
        if isinstance(inputs, str):
            inputs = [inputs]
        data = [{"object": "embedding", "index": i, "embedding": hash_embedding(str(t))}
                for i, t in enumerate(inputs)]
        return web.json_response({"object": "list", "data": data, "model": body.get("model", "fake"),
                                  "usage": {"prompt_tokens": 1, "total_tokens": 1}})


async def _serve(reply: str) -> None:
    server = await FakeOpenAI().start()
    server.default = lambda _request: reply
    print(server.port, flush=True)
    await asyncio.Event().wait()


if __name__ == "__main__":  # a standalone instant model for benchmarks: prints its port, serves until killed
    import sys

    from ground import loop

    # On kith's own loop: the fake's CPU shares the benchmark's cores with kith, and a real model server
    # would not take any of it.
    loop.run(_serve(sys.argv[1] if len(sys.argv) > 1 else "ok"))
