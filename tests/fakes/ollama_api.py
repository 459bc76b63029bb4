"""A loopback Ollama: ``GET /api/tags`` lists the models it was given, ``POST /api/chat`` answers for those and
says "not found" (404) for any other, as Ollama does before ``ollama pull``."""

from __future__ import annotations

from typing import Any

from aiohttp import web

from tests.fakes.loopback import serve


class FakeOllama:
    def __init__(self, models: tuple[str, ...] = ()) -> None:
        self.models = list(models)  # as Ollama names them, e.g. "llama3.2:latest"
        self.chats: list[dict[str, Any]] = []
        self.tag_requests = 0
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self) -> FakeOllama:
        app = web.Application()
        app.router.add_get("/api/tags", self._tags)
        app.router.add_post("/api/chat", self._chat)
        self._runner = await serve(app, 0)
        self.port = self._runner.addresses[0][1]
        return self

    async def stop(self) -> None:
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def __aenter__(self) -> FakeOllama:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    def _knows(self, name: str) -> bool:
        return name in self.models or f"{name}:latest" in self.models

    async def _tags(self, _request: web.Request) -> web.Response:
        self.tag_requests += 1
        return web.json_response({"models": [{"name": m, "model": m, "size": 2_019_393_189} for m in self.models]})

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.chats.append(body)
        if not self._knows(str(body.get("model"))):
            return web.json_response({"error": f"model '{body.get('model')}' not found"}, status=404)
        return web.json_response({"model": body["model"], "message": {"role": "assistant", "content": "ok"},
                                  "done": True, "done_reason": "stop"})
