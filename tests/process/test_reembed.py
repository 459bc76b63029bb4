"""Moving a store to another embedder: every record gets the new vectors, a migration cut short resumes
where it stopped (never embedding a finished record again), and ``bot.py memory reembed`` shows it happen,
says when nothing is left, and refuses without a working embedder."""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import io
import os
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from ground.config import Settings
from kith.app.wiring import build_app
from kith.control.dispatch import run_command
from kith.control.live import LiveParts
from kith.control.operations import run_operation
from kith.control.parts import Console
from kith.operator.memory_cli import add_memory_parser
from kith.operator.progress import ProgressShown, progress_text
from memory.encoders.embedders import EmbedderStatus
from memory.store import reembed
from memory.store.chroma import REBUILD_SUFFIX, VECTOR_KEY, ChromaCollections, Collection, make_client
from memory.store.memory_store import MemoryStore
from memory.store.notes import Note
from memory.store.reembed import Progress
from memory.store.vectors import VectorSource
from tests.fakes.openai_api import FakeOpenAI, hash_embedding
from tests.support.memory import memory_settings, record
from tests.support.paths import ROOT
from tests.support.ports import free_port

MEMORIES = 200
NOTES = 60
TOTAL = MEMORIES + NOTES
FAKE_SPACE = "litellm:openai/fake-embed"  # the fake endpoint's vectors: 64 dimensions
PROBE = "kith embedder probe"


class Words:
    """A deterministic embedder (the fake endpoint's bag of words, in ``dim`` dimensions) that counts what it
    embeds; with ``fail_after`` it fails from that batch on, as an endpoint that went away."""

    def __init__(self, name: str, dim: int, fail_after: int | None = None) -> None:
        self.name = name
        self.dim = dim
        self.fail_after = fail_after
        self.batches = 0
        self.texts: list[str] = []

    def vector(self, text: str) -> list[float]:
        return hash_embedding(text, self.dim)

    def status(self) -> EmbedderStatus:
        return EmbedderStatus(self.name, ready=True, dim=self.dim)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self.fail_after is not None and self.batches >= self.fail_after:
            raise ConnectionError("embedder went away")
        self.batches += 1
        self.texts.extend(texts)
        return [self.vector(t) for t in texts]

    async def close(self) -> None:
        return None


def _settings(tmp_path: Path, fake: FakeOpenAI | None = None, embedder: str = "test") -> Settings:
    base = fake.base_url if fake is not None else f"http://127.0.0.1:{free_port()}/v1"
    return memory_settings(tmp_path, llm_base=base, embedder=embedder, embedder_api_base=base)


def _fake_settings(tmp_path: Path, fake: FakeOpenAI) -> Settings:
    return _settings(tmp_path, fake, embedder="litellm:openai/fake-embed")


async def _open(settings: Settings, embedder: Words | None) -> MemoryStore:
    status = embedder.status() if embedder else EmbedderStatus("none", ready=False, disabled=True)
    return await MemoryStore.open(settings.memory, settings.storage.data_path(), embedder, status)


async def _fill(settings: Settings, embedder: Words, memories: int = MEMORIES, notes: int = NOTES) -> list[str]:
    """A store written under ``embedder``: memories of five people and staged notes; the memory ids."""
    store = await _open(settings, embedder)
    try:
        records = [record(f"p_{i % 5}", f"fact {i} about hobby{i} and town{i % 7}") for i in range(memories)]
        await store.add_memories(records)
        await store.add_notes([Note(record(f"p_{i % 5}", f"note {i} on plan{i}"), conversation="telegram:1")
                               for i in range(notes)])
    finally:
        await store.close()
    return [r.id for r in records]


def _raw(settings: Settings) -> dict[str, dict[str, tuple[dict[str, Any], list[float]]]]:
    """Every stored record as Chroma holds it (metadata, vector), per collection; and which collections exist."""
    client = make_client(settings.memory, settings.storage.data_path())
    out: dict[str, dict[str, tuple[dict[str, Any], list[float]]]] = {}
    for col in client.list_collections():
        page = col.get(include=["metadatas", "embeddings"])
        out[col.name] = {i: (dict(md), [float(x) for x in vec])
                         for i, md, vec in zip(page["ids"], page["metadatas"], page["embeddings"], strict=True)}
    return out


def _in_space(raw: dict[str, dict[str, tuple[dict[str, Any], list[float]]]], space: str) -> int:
    return sum(md.get(VECTOR_KEY) == space for kind in Collection for md, _v in raw.get(kind.value, {}).values())


def _assert_all_from(raw: dict[str, Any], embedder: Words | None, space: str, dim: int) -> None:
    """Every record, in both collections, carries the vector ``embedder`` gives its text, tagged ``space``."""
    assert set(raw) == {k.value for k in Collection}  # no rebuild left behind
    assert len(raw["memories"]) == MEMORIES and len(raw["notes"]) == NOTES
    for kind in Collection:
        for md, vector in raw[kind.value].values():
            assert md[VECTOR_KEY] == space and len(vector) == dim
            want = embedder.vector(md["text"]) if embedder else hash_embedding(md["text"])
            assert vector == pytest.approx(want, abs=1e-5)


# --- the migration itself ----------------------------------------------------------------------------------
@pytest.mark.parametrize("new_dim", [8, 16], ids=["same size, in place", "new size, rebuilt"])
async def test_a_store_moves_to_another_embedder_and_recall_uses_the_new_vectors(
    tmp_path: Path, new_dim: int
) -> None:
    settings = _settings(tmp_path)
    ids = await _fill(settings, Words("test-old", 8))
    new = Words("test-new", new_dim)
    chroma = await ChromaCollections.connect(settings.memory, settings.storage.data_path())
    seen: list[Progress] = []
    try:
        assert await chroma.migrate(VectorSource(new, new.status()), seen.append) == TOTAL
    finally:
        await chroma.close()
    assert seen[0] == Progress(0, TOTAL) and seen[-1] == Progress(TOTAL, TOTAL)
    assert [p.done for p in seen] == sorted(p.done for p in seen) and len(seen) > 3  # batch by batch
    assert sorted(new.texts) == sorted(md["text"] for kind in Collection
                                       for md, _v in _raw(settings)[kind.value].values())  # each text once
    _assert_all_from(_raw(settings), new, "test-new", new_dim)

    # The next start with that embedder has nothing left to do, and recall trusts the new cosines.
    again = Words("test-new", new_dim)
    store = await _open(settings, again)
    try:
        assert again.texts == [] and store.vector_source.ready
        target = await store.get_memory(ids[17])
        assert target is not None
        hits = await store.nearest(target.person, await store.vectors([target.text]), 3)
        assert hits[0].record.id == ids[17] and hits[0].trusted and hits[0].cosine == pytest.approx(1.0, abs=1e-4)
    finally:
        await store.close()


@pytest.mark.parametrize("new_dim", [8, 16], ids=["same size, in place", "new size, rebuilt"])
async def test_a_migration_cut_short_resumes_without_embedding_finished_records_again(
    tmp_path: Path, new_dim: int
) -> None:
    settings = _settings(tmp_path)
    await _fill(settings, Words("test-old", 8))
    before = _raw(settings)
    # A start whose embedder fails after two batches: it runs lexical, and keeps what it did.
    failing = Words("test-new", new_dim, fail_after=2)
    store = await _open(settings, failing)
    try:
        assert not store.vector_source.ready and "re-embedding" in store.vector_source.status.reason
        assert len(await store.memories_of("p_0")) == MEMORIES // 5  # every memory still there
    finally:
        await store.close()
    done = len(failing.texts)
    assert done == NOTES + reembed.REEMBED_BATCH  # the notes' batch, then one of memories
    cut = _raw(settings)
    if new_dim == 8:
        assert _in_space(cut, "test-new") == done  # each finished batch carries its new tag
    else:  # the original stays whole until its copy is complete
        assert {i: md for i, (md, _v) in cut["memories"].items()} == {
            i: md for i, (md, _v) in before["memories"].items()}
        assert "notes" + REBUILD_SUFFIX not in cut  # the notes finished and were swapped in
        assert len(cut["memories" + REBUILD_SUFFIX]) == reembed.REEMBED_BATCH

    # The next start carries on: only what was not finished is embedded.
    resumed = Words("test-new", new_dim)
    store = await _open(settings, resumed)
    try:
        assert store.vector_source.ready
    finally:
        await store.close()
    assert len(resumed.texts) == TOTAL - done
    assert not set(resumed.texts) & set(failing.texts)
    _assert_all_from(_raw(settings), resumed, "test-new", new_dim)


async def test_a_rebuild_resumed_after_a_lexical_start_brings_back_nothing_forgotten(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    ids = await _fill(settings, Words("test-old", 8))
    store = await _open(settings, Words("test-new", 16, fail_after=3))  # notes and two batches of memories copied
    await store.close()
    copied = list(_raw(settings)["memories" + REBUILD_SUFFIX])
    # Then a start without the embedder forgets one copied memory and corrects another.
    lexical = await _open(settings, None)
    try:
        forgotten = await lexical.get_memory(copied[0])
        assert forgotten is not None
        await lexical.delete_memories([copied[0]])
        corrected = await lexical.get_memory(copied[1])
        assert corrected is not None
        await lexical.replace_memory(dataclasses.replace(corrected, text="fact corrected: sailing in Gdynia"))
    finally:
        await lexical.close()
    # The unfinished copy may wait for the new embedder for good: what was deleted is out of it already.
    waiting = _raw(settings)["memories" + REBUILD_SUFFIX]
    assert copied[0] not in waiting and copied[1] in waiting
    assert all(md["text"] != forgotten.text for md, _v in waiting.values())

    resumed = Words("test-new", 16)
    store = await _open(settings, resumed)
    try:
        assert await store.get_memory(copied[0]) is None  # forgotten stays forgotten
        assert len(await store.get_memories(ids)) == MEMORIES - 1
        hits = await store.nearest(corrected.person, await store.vectors(["sailing in Gdynia"]), 1)
        assert hits[0].record.id == copied[1] and hits[0].record.revision == 2 and hits[0].trusted
    finally:
        await store.close()
    assert "fact corrected: sailing in Gdynia" in resumed.texts
    assert len(resumed.texts) == MEMORIES - 2 * reembed.REEMBED_BATCH + 1 + 1  # the rest, the correction, query


# --- bot.py memory reembed ---------------------------------------------------------------------------------
def _run(settings: Settings, env_err: io.StringIO | None = None) -> tuple[int, str, str]:
    parser = argparse.ArgumentParser(prog="bot.py")
    add_memory_parser(parser.add_subparsers(dest="command"))
    out, err = io.StringIO(), env_err or io.StringIO()
    code = run_command(settings, "memory.reembed", parser.parse_args(["memory", "reembed"]), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _embedded(fake: FakeOpenAI, since: int = 0) -> list[str]:
    return [t for body in fake.embedding_requests[since:] for t in body["input"] if t != PROBE]


async def test_the_command_shows_progress_then_says_nothing_is_left(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = _fake_settings(tmp_path, fake_llm)
    await _fill(settings, Words("test-old", 8))
    fake_llm.embed_delay_s = 0.05
    monkeypatch.setattr("kith.operator.progress.PROGRESS_LINE_EVERY_S", 0.1)
    code, out, err = await asyncio.to_thread(_run, settings)
    assert code == 0, err
    lines = err.splitlines()
    assert lines[0] == f"kith: re-embedding {TOTAL} records into {FAKE_SPACE}"
    progress = [line for line in lines[1:] if line.startswith("kith: ") and "/260 records" in line]
    assert progress and all("%" in line and "/s" in line and "ETA" in line for line in progress)
    assert out.startswith(f"re-embedded {TOTAL} records into {FAKE_SPACE} in ")
    assert sorted(_embedded(fake_llm)) == sorted(
        md["text"] for kind in Collection for md, _v in _raw(settings)[kind.value].values())
    _assert_all_from(_raw(settings), None, FAKE_SPACE, 64)

    seen = len(fake_llm.embedding_requests)
    code, out, err = await asyncio.to_thread(_run, settings)
    assert (code, out, err) == (0, f"nothing to do: all {TOTAL} stored records have vectors from {FAKE_SPACE}\n", "")
    assert _embedded(fake_llm, seen) == []


@pytest.mark.parametrize("why", ["down", "none"])
async def test_without_a_working_embedder_it_refuses_in_one_line_and_changes_nothing(
    tmp_path: Path, why: str
) -> None:
    settings = _settings(tmp_path)
    await _fill(settings, Words("test-old", 8))
    before = _raw(settings)
    # "down": an embeddings endpoint nothing listens on; "none": no embedder configured.
    embedder = "litellm:openai/fake-embed" if why == "down" else "none"
    code, out, err = await asyncio.to_thread(_run, dataclasses.replace(
        settings, memory=dataclasses.replace(settings.memory, embedder=embedder)))
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert err.startswith("kith: cannot re-embed, nothing changed: embedder ")
    assert ("fake-embed" in err and "failed" in err) if why == "down" else "lexical (BM25) by configuration" in err
    assert _raw(settings) == before


async def test_a_running_bot_says_what_is_left_and_changes_nothing(
    tmp_path: Path, fake_llm: FakeOpenAI, make_settings: Any
) -> None:
    settings = _fake_settings(tmp_path, fake_llm)
    app = await build_app(make_settings(fake_llm, memory=settings.memory), warm_llm=False)
    try:
        assert app.memory is not None and app.memory.status.ready
        fake_llm.embed_status = 500  # a write while the endpoint fails gets a hashed vector
        await app.memory.store.add_memory(record("p_ana", "Ana plays the cello"))

        async def reembed_in_bot() -> tuple[int, str, str]:
            out, err = io.StringIO(), io.StringIO()
            code = await run_operation(LiveParts(app), "memory.reembed", {}, Console(out, err))
            return code, out.getvalue(), err.getvalue()

        code, out, err = await reembed_in_bot()
        assert code == 1 and out == ""
        assert err == (f"kith: the running bot has 1 records without a vector from {FAKE_SPACE}: it re-embeds "
                       "them when it next starts, or stop it and run this again\n")
        assert _in_space(_raw(settings), "hash") == 1  # the bot's store is its own: not touched

        fake_llm.embed_status = 200
        await app.memory.store.delete_memories([m.id for m in await app.memory.store.memories_of("p_ana")])
        await app.memory.store.add_memory(record("p_ana", "Ana plays the viola"))
        assert await reembed_in_bot() == (0, f"nothing to do: the running bot has every record's vector from "
                                             f"{FAKE_SPACE}\n", "")
    finally:
        await app.close()


async def test_a_migration_killed_mid_way_continues_where_it_was(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    """The real command, in a process of its own, SIGKILLed mid-rebuild; run again, it embeds only the rest."""
    settings = _fake_settings(tmp_path, fake_llm)
    await _fill(settings, Words("test-old", 8))  # 8 dimensions: the fake's 64 need a rebuild
    before = _raw(settings)
    cfg = tmp_path / "kith.toml"
    cfg.write_text(f'[llm]\nmodel = "openai/fake-model"\napi_base = "{fake_llm.base_url}"\n'
                   f'[storage]\ndata_dir = "{settings.storage.data_path()}"\n'
                   f'[memory]\nembedder = "litellm:openai/fake-embed"\n', encoding="utf-8")
    fake_llm.embed_delay_s = 0.1
    started = time.monotonic()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, str(ROOT / "bot.py"), "--config", str(cfg), "memory", "reembed", cwd=str(ROOT),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE, env=dict(os.environ))
    try:
        # The probe, then a batch per request: once the fifth is asked for, the notes and two batches of
        # memories are written.
        while len(fake_llm.embedding_requests) < 5:
            assert proc.returncode is None and time.monotonic() - started < 30, "it never got going"
            await asyncio.sleep(0.01)
        proc.send_signal(signal.SIGKILL)
    finally:
        await proc.wait()
    assert proc.returncode == -signal.SIGKILL
    cut = _raw(settings)
    assert {i: md for i, (md, _v) in cut["memories"].items()} == {i: md for i, (md, _v) in before["memories"].items()}
    copied = len(cut.get("memories" + REBUILD_SUFFIX, {}))
    finished = NOTES + copied
    assert copied >= 2 * reembed.REEMBED_BATCH

    seen = len(fake_llm.embedding_requests)
    fake_llm.embed_delay_s = 0.0
    code, _out, err = await asyncio.to_thread(_run, settings)
    assert code == 0, err
    assert err.startswith(f"kith: re-embedding {TOTAL - finished} records into {FAKE_SPACE}\n")
    assert len(_embedded(fake_llm, seen)) == TOTAL - finished
    _assert_all_from(_raw(settings), None, FAKE_SPACE, 64)


# --- how progress is shown ---------------------------------------------------------------------------------
class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_reads_as_done_total_rate_and_time_left() -> None:
    assert progress_text(1_234, 5_000, 4.0) == "1,234/5,000 records  25%  308/s  ETA 0:12"
    assert progress_text(0, 5_000, 0.0).endswith("0/s  ETA -:--")
    assert progress_text(10, 100_000, 1.0).endswith("ETA 2:46:39")


def test_a_terminal_gets_one_live_bar_and_a_log_gets_a_line_every_few_seconds() -> None:
    now = [0.0]
    terminal = Terminal()
    bar = ProgressShown(terminal, clock=lambda: now[0], redraw_s=0.1)
    for done in range(0, 1_001, 10):  # a batch every 10 ms
        bar.update(done, 1_000)
        now[0] += 0.01
    bar.finish()
    drawn = terminal.getvalue()
    assert drawn.endswith("\n") and drawn.count("\n") == 1  # one line, redrawn in place
    assert 8 <= drawn.count("\r") <= 13  # about every 0.1 s, not every batch
    assert drawn.rstrip("\n").rsplit("\r", 1)[1].endswith("1,000/1,000 records  100%  1,000/s  ETA 0:00")
    assert "\x1b[" in drawn and "━" in drawn  # rich's bar, in the terminal's colours

    now[0] = 0.0
    log = io.StringIO()
    lines = ProgressShown(log, clock=lambda: now[0], every_s=5.0)
    for done in range(0, 1_001, 10):  # a batch every 0.2 s: 20 s in all
        lines.update(done, 1_000)
        now[0] += 0.2
    lines.finish()
    shown = log.getvalue().splitlines()
    assert len(shown) == 3 and "\r" not in log.getvalue()  # at 5, 10 and 15 s; the caller says it finished
    assert shown[0].startswith("kith: 250/1,000 records  25%  50/s  ETA 0:15")
