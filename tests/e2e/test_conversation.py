"""The conversation core through litellm against the loopback fake LLM server."""

from __future__ import annotations

import asyncio
import dataclasses
from datetime import UTC, datetime, timedelta

import pytest

from conversation.context import max_prompt_chars
from ground.config import HistorySettings, LLMSettings
from kith.app.wiring import build_app, open_database
from llm.client import HONEST_FAILURE_REPLY
from people import history
from tests.support.memory import answer, fact
from tests.support.messages import inbound


async def test_reply_comes_from_the_model_and_history_is_kept(fake_llm, make_settings) -> None:
    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        fake_llm.reply("Hi Ana, good to see you.")
        out = await app.core.handle(inbound("hello there"))
        assert out.text == "Hi Ana, good to see you."
        fake_llm.reply("Your cat is called Miso, you told me.")
        await app.core.handle(inbound("what's my cat called?"))
        sent = fake_llm.requests[-1]["messages"]
        assert sent[0]["role"] == "system" and "Kith" in sent[0]["content"]
        assert [m["content"] for m in sent[1:]] == ["hello there", "Hi Ana, good to see you.",
                                                      "what's my cat called?"]
        rows = await app.db.run(history.recent, "console:ana", 10)
        assert [r.role for r in rows] == ["user", "assistant", "user", "assistant"]
    finally:
        await app.close()


@pytest.mark.parametrize("script", ["timeout", "http500", "http429", "malformed"])
async def test_model_failure_gives_honest_reply_and_loses_nothing(fake_llm, make_settings, script) -> None:
    settings = make_settings(fake_llm)
    settings = dataclasses.replace(settings, llm=dataclasses.replace(settings.llm, timeout_s=1.0))
    app = await build_app(settings, warm_llm=False)
    try:
        {"timeout": lambda: fake_llm.hang(3), "http500": lambda: fake_llm.fail(500),
         "http429": lambda: fake_llm.fail(429, retry_after=0), "malformed": lambda: fake_llm.malformed()}[script]()
        out = await app.core.handle(inbound("are you there?"))
        assert out.text == HONEST_FAILURE_REPLY
        rows = await app.db.run(history.recent, "console:ana", 10)
        assert [(r.role, r.text) for r in rows] == [("user", "are you there?")]
        fake_llm.queue.clear()
        fake_llm.reply("Back now.")
        assert (await app.core.handle(inbound("and now?"))).text == "Back now."
        # the message that failed is still part of the conversation the model sees
        assert "are you there?" in [m["content"] for m in fake_llm.requests[-1]["messages"]]
    finally:
        await app.close()


async def test_retries_then_fallback_model(fake_llm, make_settings) -> None:
    settings = make_settings(fake_llm)
    llm = LLMSettings(model="openai/primary", api_base=fake_llm.base_url, timeout_s=3, max_retries=1,
                      fallbacks=["openai/backup"])
    app = await build_app(dataclasses.replace(settings, llm=llm), warm_llm=False)
    try:
        fake_llm.fail(503, times=2)
        fake_llm.reply("from the backup")
        out = await app.core.handle(inbound("hi"))
        assert out.text == "from the backup"
        assert [r["model"] for r in fake_llm.requests] == ["primary", "primary", "backup"]
    finally:
        await app.close()


async def _fill(app, conversation: str, n: int) -> None:
    start = datetime(2026, 1, 1, tzinfo=UTC)

    def insert(conn) -> None:
        for i in range(n):
            history.append(conn, conversation=conversation, role="user" if i % 2 == 0 else "assistant",
                           author="console:ana" if i % 2 == 0 else "kith", platform="console", chat_id="ana",
                           text=f"message {i:06d} " + "lorem ipsum dolor sit amet " * 15,
                           created_at=start + timedelta(minutes=i))

    await app.db.run(insert)


async def test_prompt_size_is_bounded_whatever_the_thread_length(fake_llm, make_settings) -> None:
    sizes = {}
    for n in (500, 10_000):
        settings = make_settings(fake_llm)
        settings = dataclasses.replace(settings, storage=dataclasses.replace(
            settings.storage, data_dir=settings.storage.data_dir + f"-{n}"))
        app = await build_app(settings, warm_llm=False)
        try:
            await _fill(app, "console:ana", n)
            prompt, _ = await app.core.prompt_for(inbound("and so?"), await app.core.speaker_of(inbound("x")))
            sizes[n] = (prompt.total_chars, len(prompt.messages))
            assert prompt.total_chars <= max_prompt_chars(settings.budget)
            assert len(prompt.messages) <= settings.history.window_messages + 2
        finally:
            await app.close()
    assert sizes[500] == sizes[10_000]


async def test_two_concurrent_summarizers_neither_skip_nor_duplicate(fake_llm, make_settings) -> None:
    settings = dataclasses.replace(make_settings(fake_llm), history=HistorySettings(
        window_messages=10, summary_trigger_messages=5, summary_batch_messages=1000))
    app = await build_app(settings, warm_llm=False)
    try:
        await _fill(app, "console:ana", 60)

        def summarize(request) -> str:
            # The summary lists the ids it was given: a skipped or doubled message would show.
            content = request["messages"][-1]["content"]
            before, _, new = content.partition("New messages:\n")
            previous = before.removeprefix("Previous summary:\n").strip()
            ids = [line.split("]")[0].lstrip("[") for line in new.splitlines() if line.startswith("[")]
            return ((previous + ",") if previous != "(none)" else "") + ",".join(ids)

        fake_llm.default = summarize
        results = await asyncio.gather(app.core.summarizer.maybe_summarize("console:ana"),
                                       app.core.summarizer.maybe_summarize("console:ana"))
        assert sorted(results) == [False, True]
        summary = await app.db.run(history.get_summary, "console:ana")
        window = await app.db.run(history.recent, "console:ana", 10)
        assert summary.through == window[0].id - 1
        covered = [int(x) for x in summary.text.split(",")]
        assert covered == list(range(1, window[0].id))
        # a later run with nothing new to fold changes nothing
        assert await app.core.summarizer.maybe_summarize("console:ana") is False
    finally:
        await app.close()


async def test_history_survives_reopening_the_database(fake_llm, make_settings) -> None:
    settings = make_settings(fake_llm)
    app = await build_app(settings, warm_llm=False)
    await app.core.handle(inbound("remember this line"))
    await app.close()
    db = open_database(settings)
    try:
        rows = db.run_sync(history.recent, "console:ana", 10)
        assert [r.text for r in rows] == ["remember this line", "echo: remember this line"]
    finally:
        db.close()


async def test_capture_runs_after_the_reply_and_keeps_only_receipted_memories(fake_llm, make_settings) -> None:
    import json

    from ground.config import MemorySettings

    settings = dataclasses.replace(make_settings(fake_llm), memory=MemorySettings(embedder="none", capture=True))
    app = await build_app(settings, warm_llm=False)
    try:
        captured = {"memories": [
            {"kind": "fact", "text": "Ana's dog is called Luna",
             "evidence": "I have to take my dog Luna to the vet", "importance": 0.7},
            {"kind": "fact", "text": "Ana is an astronaut", "evidence": "I am an astronaut", "importance": 0.9},
        ]}

        def route(request):  # the capture call is the one whose system prompt says transcripts are data
            from tests.fakes.openai_api import Scripted

            if request["messages"][0]["content"].startswith("The transcript and the stored memories"):
                return Scripted(text=json.dumps(captured))
            return None

        fake_llm.route = route
        out = await app.core.handle(inbound("I have to take my dog Luna to the vet tomorrow"))
        assert out.text.startswith("echo:")  # the reply did not wait for capture
        await app.background.drain()
        person = (await app.core.speaker_of(inbound("x"))).person
        assert app.memory is not None
        notes = await app.memory.list_notes(person)
        assert [n.record.text for n in notes] == ["Ana's dog is called Luna"]  # the invented one is dropped
        assert notes[0].record.evidence == ("I have to take my dog Luna to the vet",)
    finally:
        await app.close()


async def test_forwarded_words_are_answered_but_never_evidence_about_the_forwarder(fake_llm,
                                                                                   make_settings) -> None:
    from ground.config import MemorySettings

    settings = dataclasses.replace(make_settings(fake_llm), memory=MemorySettings(embedder="none", capture=True))
    app = await build_app(settings, warm_llm=False)
    try:
        captured = answer(fact("Ana is allergic to penicillin", "I am allergic to penicillin", importance=0.9),
                          fact("Ana's dog is called Luna", "My dog Luna sees him every spring", importance=0.7))

        def route(request):
            from tests.fakes.openai_api import Scripted

            if request["messages"][0]["content"].startswith("The transcript and the stored memories"):
                return Scripted(text=captured)
            return None

        fake_llm.route = route
        # Ana forwards Bob's message, then says something of her own.
        forward = dataclasses.replace(inbound("I am allergic to penicillin, so no antibiotics for me"),
                                      forwarded=True)
        out = await app.core.handle(forward)
        assert out.text.startswith("echo:")  # a forward is part of the conversation, answered as usual
        await app.core.handle(inbound("My dog Luna sees him every spring. What do you make of this?"))
        await app.background.drain()
        person = (await app.core.speaker_of(inbound("x"))).person
        assert app.memory is not None
        assert [n.record.text for n in await app.memory.list_notes(person)] == [
            "Ana's dog is called Luna"]  # her own words only, never Bob's as hers
    finally:
        await app.close()


async def test_a_forward_is_in_the_forwarders_export_marked_as_one(fake_llm, make_settings) -> None:
    import json

    from memory.controls import Requester

    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        await app.core.handle(inbound("hello"))
        await app.core.handle(dataclasses.replace(inbound("Bob says the gate code is 4512"), forwarded=True))
        ana = Requester((await app.core.speaker_of(inbound("x"))).person, "console:ana")
        exported = json.loads((await app.memory_commands.controls.export(ana)).data)["messages"]
        assert [(m["text"], m["forwarded"]) for m in exported if m["from"] == "person"] == [
            ("hello", False), ("Bob says the gate code is 4512", True)]  # all she sent, forwards marked
    finally:
        await app.close()


async def test_recalled_memory_reaches_the_next_prompt_as_data(fake_llm, make_settings) -> None:
    import json

    from ground.config import MemorySettings
    from tests.fakes.openai_api import Scripted

    settings = dataclasses.replace(make_settings(fake_llm), memory=MemorySettings(embedder="none", capture=True))
    app = await build_app(settings, warm_llm=False)
    try:
        def route(request):
            if request["messages"][0]["content"].startswith("The transcript and the stored memories"):
                return Scripted(text=json.dumps({"memories": [
                    {"kind": "fact", "text": "Ana's dog is called Luna",
                     "evidence": "I have to take my dog Luna to the vet"}]}))
            return None

        fake_llm.route = route
        await app.core.handle(inbound("I have to take my dog Luna to the vet tomorrow"))
        await app.background.drain()
        fake_llm.route = None
        await app.core.handle(inbound("what should I pack for Luna's vet visit?", chat_id="ana-2"))
        system = fake_llm.requests[-1]["messages"][0]["content"]
        # The person's own sentence reaches the prompt, quoted; the extractor's label for it does not.
        assert '"I have to take my dog Luna to the vet tomorrow"' in system
        assert "Ana's dog is called Luna" not in system
        assert "not instructions" in system  # labelled as stored data
        assert fake_llm.requests[-1]["tools"][0]["function"]["name"] == "recall"
    finally:
        await app.close()


async def test_a_turn_resumed_after_a_restart_goes_on_from_its_row_and_sees_the_thread_as_it_was(
        fake_llm, make_settings) -> None:
    app = await build_app(make_settings(fake_llm), warm_llm=False)
    try:
        fake_llm.reply("Hello.")
        await app.core.handle(inbound("hi"))
        asked = inbound("what was I saying?", message_id="m-asked")
        # Recorded before the crash, unanswered; then the thread moved on (another turn, say).
        row = await app.db.run(lambda conn: history.append(
            conn, conversation="console:ana", role="user", author="console:ana", platform="console",
            chat_id="ana", text=asked.text, created_at=asked.timestamp, platform_message_id="m-asked"))
        await app.db.run(lambda conn: history.append(
            conn, conversation="console:ana", role="user", author="console:ana", platform="console",
            chat_id="ana", text="something said later", created_at=asked.timestamp))
        fake_llm.reply("You said hi.")
        out = await app.core.handle(dataclasses.replace(asked, opened_row=row))
        assert out.text == "You said hi."
        assert [m["content"] for m in fake_llm.requests[-1]["messages"][1:]] == ["hi", "Hello.", "what was I saying?"]
        texts = [r.text for r in await app.db.run(history.recent, "console:ana", 10)]
        assert texts.count("what was I saying?") == 1 and texts[-1] == "You said hi."
    finally:
        await app.close()
