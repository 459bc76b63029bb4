"""Records, turns, settings, model answers and the memory service that the memory test modules build alike."""

from __future__ import annotations

import dataclasses
import json
import secrets
from collections.abc import AsyncIterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest_asyncio

from ground.config import LLMSettings, MemorySettings, Settings, StorageSettings
from ground.db import Database
from llm.client import LLMClient
from memory.core.records import MemoryCandidate, MemoryKind, MemoryRecord, Scope, Source, Status
from memory.encoders.embedders import Vector
from memory.service import MemoryService
from people import directory, history
from tests.fakes.openai_api import FakeOpenAI
from tests.support.clock import T0, FakeClock


def memory_settings(
    tmp_path: Path, *, llm_base: str = "http://127.0.0.1:9/v1", chroma_url: str = "", **memory: object
) -> Settings:
    """Settings for memory under ``tmp_path``: no embedder unless asked, and a model address that answers nothing."""
    ms = dataclasses.replace(MemorySettings(embedder="none", chroma_url=chroma_url), **memory)  # type: ignore[arg-type]
    return Settings(
        llm=LLMSettings(model="openai/fake-model", api_base=llm_base, timeout_s=5.0, max_retries=0),
        storage=StorageSettings(data_dir=str(tmp_path / "data")),
        memory=ms,
    )


@pytest_asyncio.fixture
async def service(tmp_path: Path, db: Database, fake_llm: FakeOpenAI, clock: FakeClock
                  ) -> AsyncIterator[MemoryService]:
    """The memory service over the test's database (``memory_settings``), its model the fake one, its clock the
    test's; closed after the test. A module that imports it names its parameters ``service``."""
    settings = memory_settings(tmp_path, llm_base=fake_llm.base_url)
    opened = await MemoryService.open(settings, db, LLMClient(settings.llm), clock=clock)
    yield opened
    await opened.close()


def record(
    person: str,
    text: str,
    *,
    evidence: Sequence[str] | None = None,
    kind: MemoryKind = MemoryKind.FACT,
    memory_id: str | None = None,
    when: datetime = T0,
    status: Status = Status.ACTIVE,
    scope: Scope = Scope.DM,
) -> MemoryRecord:
    """A stored memory as the store keeps it, for tests that write to the store past the gate."""
    return MemoryRecord(
        id=memory_id or "m_" + secrets.token_hex(6),
        person=person,
        kind=kind,
        text=text,
        evidence=tuple(evidence or (text,)),
        sources=(Source("console", "ana", "m" + secrets.token_hex(3), when),),
        scope=scope,
        status=status,
        created_at=when,
        updated_at=when,
    )


def said_memory(memory_id: str, person: str, label: str, quote: str, sentence: str, *, when: datetime = T0,
                platform: str = "telegram", kind: MemoryKind = MemoryKind.FACT) -> MemoryRecord:
    """A memory as capture leaves it: ``label`` the extractor's, ``quote`` and ``sentence`` the person's words."""
    return MemoryRecord(id=memory_id, person=person, kind=kind, text=label, evidence=(quote,),
                        evidence_sentences=(sentence,), sources=(Source(platform, "c1", memory_id + "-said", when),),
                        scope=Scope.DM, created_at=when, updated_at=when)


def memory_section(system: str) -> str:
    """A reply prompt's stored-data part: from the notice that heads it to its end."""
    return system[system.index("The sections below marked as stored data"):]


def candidate(
    text: str,
    *,
    evidence: Sequence[str] | None = None,
    kind: MemoryKind = MemoryKind.FACT,
    message: str = "m1",
    corrects: str | None = None,
    importance: float = 0.5,
    when: datetime = T0,
) -> MemoryCandidate:
    """A memory as capture proposes it to the gate: Ana's, from a DM, quoting itself unless told otherwise."""
    return MemoryCandidate(
        kind=kind,
        text=text,
        evidence=tuple(evidence or (text,)),
        importance=importance,
        corrects=corrects,
        sources=(Source("console", "ana", message, when),),
        scope=Scope.DM,
    )


async def say(
    db: Database,
    account: str,
    text: str,
    *,
    name: str = "",
    chat_id: str = "ana",
    conversation: str = "console:ana",
    group: bool = False,
    when: datetime = T0,
    forwarded: bool = False,
) -> tuple[str, int]:
    """Record a user turn the way the core does (a forward as no one's words); returns (person, message id)."""
    person = await db.run(directory.resolve, account, name or account.split(":")[-1].title(), when)
    message_id = await db.run(
        history.append,
        conversation=conversation,
        role="user",
        author=account,
        person=None if forwarded else person,
        platform=account.split(":")[0],
        chat_id=chat_id,
        text=text,
        created_at=when,
        chat_kind="group" if group else "dm",
        platform_message_id="pm" + secrets.token_hex(4),
    )
    return person, message_id


async def reply(
    db: Database,
    text: str,
    *,
    chat_id: str = "ana",
    conversation: str = "console:ana",
    group: bool = False,
    when: datetime = T0,
) -> int:
    """Record kith's answer the way the core does; returns its message id."""
    return await db.run(
        history.append,
        conversation=conversation,
        role="assistant",
        author="kith",
        platform="console",
        chat_id=chat_id,
        text=text,
        created_at=when,
        chat_kind="group" if group else "dm",
    )


def answer(*memories: dict[str, Any]) -> str:
    """The capture model's reply naming ``memories``, as the fake LLM should send it."""
    return json.dumps({"memories": list(memories)})


def fact(text: str, evidence: str | list[str], **extra: Any) -> dict[str, Any]:
    """One fact in a capture model's reply."""
    return {"kind": "fact", "text": text, "evidence": evidence, **extra}


ELSEWHERE = [0.0, 0.0, 1.0]
POSTGRES = [1.0, 0.0, 0.0]


class TableEmbedder:
    """A controlled embedder: chosen texts get chosen vectors, so the cosine between them is exact.

    It stands in for a sentence model, which cannot be loaded on this offline machine, in the one
    place only meaning can decide: "I moved to SQLite" shares no word with "I use Postgres", so
    the lexical layer calls it new; a real embedder puts both near "databases".
    """

    def __init__(self, table: dict[str, Vector], name: str = "test-table") -> None:
        self.table = table
        self.name = name
        self.fail = False
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[Vector]:
        self.calls += 1
        if self.fail:
            raise ConnectionError("embedder went away")
        return [self.table.get(t, ELSEWHERE) for t in texts]

    async def close(self) -> None:
        return None
