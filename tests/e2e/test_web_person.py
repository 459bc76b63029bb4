"""One person's page in headless Chromium against kith on the fake Telegram Bot API: their memories with their own
words, where and when; a conflict settled with a button; forget with its plan and counts, gone from the next
prompt; search in recall's order; the export; and the forged form the page refuses."""

# ruff: noqa: F811

from __future__ import annotations

import dataclasses
import json
from datetime import UTC, datetime, timedelta

import httpx
import pytest

from kith.app.lifecycle import App
from memory.core.records import Status
from tests.fakes.telegram_api import FakeTelegramApi, telegram_api  # noqa: F401
from tests.support.browser import PHONE, WAIT_S, browser, chromium, page_bot, person, signed_in, web_settings  # noqa: F401
from tests.support.fake_secrets import FAKE_TOKENS
from tests.support.memory import memory_section, said_memory
from tests.support.telegram_app import ask

ANA, BEN = 701, 702
STRANGER = 799
TEA = "My favourite tea is lapsang souchong, smoky like a campfire."
VIM = "I edit everything in Vim, always have."
EMACS = "These days I write all my code in Emacs."
SECRET_OF_BEN = "Ben's secret: he is learning the accordion."


async def seed(app: App) -> tuple[str, str]:
    """Ana (three memories, two of them in conflict) and Ben (one private memory); their person ids."""
    now = datetime.now(UTC)
    ana, ben = person(app, f"telegram:{ANA}", "Ana"), person(app, f"telegram:{BEN}", "Ben")
    tea = said_memory("m_7ea07ea07ea07ea0", ana, "PERSON's favourite tea is lapsang souchong", "lapsang souchong",
                      TEA, when=now - timedelta(days=3))
    vim = said_memory("m_0a1b0a1b0a1b0a1b", ana, "PERSON edits in Vim", "I edit everything in Vim", VIM,
                      when=now - timedelta(days=2))
    emacs = said_memory("m_e3ac5e3ac5e3ac50", ana, "PERSON writes code in Emacs", "I write all my code in Emacs",
                        EMACS, when=now - timedelta(days=1))
    accordion = said_memory("m_acc0acc0acc0acc0", ben, "PERSON is learning the accordion", "learning the accordion",
                            SECRET_OF_BEN, when=now)
    for record in (tea, dataclasses.replace(vim, conflicts_with=(emacs.id,)),
                   dataclasses.replace(emacs, conflicts_with=(vim.id,)), accordion):
        await app.memory.store.add_memory(record)
    return ana, ben


async def test_her_page_shows_her_words_where_and_when_and_nothing_of_bens(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, ben = await seed(app)
        await signed_in(browser, app)
        await browser.go("/people")
        await browser.click(f"a[href='/person/{ana}']")
        tea = await browser.text("#m-m_7ea07ea07ea07ea0")
        assert TEA in tea and "Ana said" in tea and "private chat on telegram" in tea
        assert "LABEL Ana's favourite tea is lapsang souchong" in tea  # kith's label, under her words
        assert "telegram · chat c1 ·" in tea
        page = await browser.text()
        assert page.index(TEA) < page.index("LABEL Ana's favourite tea")  # her words first
        assert SECRET_OF_BEN not in page and "accordion" not in page
        await browser.shoot("person")
        await browser.shoot("person-phone", width=PHONE)
        await browser.go(f"/person/{ben}")
        assert SECRET_OF_BEN in await browser.text("#memories") and TEA not in await browser.text()


async def test_a_conflict_is_settled_with_a_button(telegram_api: FakeTelegramApi, fake_llm, make_settings,
                                                  monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        pair = await browser.text("#conflicts .pair")
        assert pair.index(VIM) < pair.index(EMACS)  # side by side, the earlier first
        await browser.click("#conflicts button[value='second']")  # that one: Emacs
        assert "kept one" in await browser.text(".notice")
        assert await browser.count("#conflicts") == 0
        vim, emacs = await app.memory.get("m_0a1b0a1b0a1b0a1b"), await app.memory.get("m_e3ac5e3ac5e3ac50")
        assert vim is not None and vim.status is Status.SUPERSEDED
        assert emacs is not None and emacs.status is Status.ACTIVE and emacs.conflicts_with == ()
        page = await browser.text("#memories")
        assert EMACS in page and VIM not in page
        await browser.click("#memories a[href$='?every=1']")  # superseded, never deleted: there to see
        vim_shown = await browser.text("#m-m_0a1b0a1b0a1b0a1b")
        assert VIM in vim_shown and "superseded" in vim_shown
        assert await browser.count("#m-m_0a1b0a1b0a1b0a1b .tend") == 0  # nothing to pin or relabel on it


@pytest.mark.backends("sqlite", "postgres")
async def test_forget_shows_the_plan_with_its_counts_and_the_fact_is_gone_from_the_next_prompt(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser, backend) -> None:
    browser.shots = backend == "sqlite"
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api, dm="open"), monkeypatch) as app:
        ana, _ben = await seed(app)
        fake_llm.reply("Lapsang, of course.")
        await ask(telegram_api, ANA, "what tea do I like, lapsang souchong?")
        assert "lapsang souchong" in memory_section(fake_llm.requests[-1]["messages"][0]["content"])
        # The reply's after-work (use credit for the memory it cited) done first: a forget racing it is the memory
        # store's own question, not the page's.
        await app.background.drain(timeout=10)
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}/forget")
        await browser.fill("input[name='words']", "lapsang")
        await browser.click("form.tools button")
        plan = await browser.text("#plan")
        assert "removes 1 memory" in plan
        assert TEA in await browser.text("main")
        await browser.shoot("forget")
        await browser.click("button.danger")
        assert "forgotten: 1 memory" in await browser.text(".notice")
        assert TEA not in await browser.text("#memories")
        assert await app.memory.get("m_7ea07ea07ea07ea0") is None
        fake_llm.reply("I don't know which tea you like.")
        await ask(telegram_api, ANA, "what tea do I like, lapsang souchong?")
        system = fake_llm.requests[-1]["messages"][0]["content"]
        assert "campfire" not in system and "favourite tea" not in system, system[-1500:]


async def test_search_ranks_as_recall_does_and_the_export_downloads(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        await browser.fill("input[name='q']", "code in Emacs")
        await browser.click("nav.tools button")
        hits = await browser.text("main")
        assert "their words match" in hits and EMACS in hits and TEA not in hits
        # No one memory holds both words: each is found by recall's ranking, in its order.
        await browser.fill("input[name='q']", "Vim Emacs")
        await browser.click("form.tools button")
        assert "2 found, ranked as recall ranks them" in await browser.text("main")
        ranked = [h.record.id for h in (await app.memory.search(ana, "Vim Emacs", 20)).hits]
        shown = [line for line in (await browser.text("main")).split("\n") if line.startswith("m_")]
        assert shown == ranked and len(ranked) == 2
        await browser.shoot("search")
        cookie = {c["name"]: c["value"] for c in await browser.cookies()}
        async with httpx.AsyncClient(base_url=browser.base, cookies=cookie) as client:
            answer = await client.get(f"/person/{ana}/export")
        assert answer.status_code == 200 and "attachment" in answer.headers["content-disposition"]
        document = json.loads(answer.text)
        assert TEA in json.dumps(document, ensure_ascii=False) and SECRET_OF_BEN not in answer.text


async def test_a_forged_form_and_a_post_without_a_session_change_nothing(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        await signed_in(browser, app)
        cookie = {c["name"]: c["value"] for c in await browser.cookies()}
        form = {"first": "m_0a1b0a1b0a1b0a1b", "second": "m_e3ac5e3ac5e3ac50", "answer": "first"}
        async with httpx.AsyncClient(base_url=browser.base, cookies=cookie) as client:
            # A page on another site posting with the browser's cookie: it cannot know the form's token.
            forged = await client.post(f"/person/{ana}/settle", data={**form, "csrf": "guessed"})
            missing = await client.post(f"/person/{ana}/settle", data=form)
        async with httpx.AsyncClient(base_url=browser.base) as client:
            anonymous = await client.post(f"/person/{ana}/settle", data={**form, "csrf": "guessed"})
            page = await client.get(f"/person/{ana}")
        # A site whose own name points at 127.0.0.1 (DNS rebinding) is refused before any page runs.
        async with httpx.AsyncClient(base_url=browser.base, cookies=cookie) as client:
            rebound = await client.get(f"/person/{ana}", headers={"Host": "evil.example"})
        assert rebound.status_code == 400 and TEA not in rebound.text
        assert forged.status_code == 403 and missing.status_code == 403 and anonymous.status_code == 401
        assert page.status_code == 401
        assert "nothing changed" in forged.text
        for answer in (forged, anonymous):
            assert answer.headers["content-security-policy"].startswith("default-src 'none'")
        emacs = await app.memory.get("m_e3ac5e3ac5e3ac50")
        assert emacs is not None and emacs.status is Status.ACTIVE and emacs.conflicts_with


async def test_her_documents_and_her_graphs_picture_are_on_her_page(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api, dm="open"), monkeypatch) as app:
        ana, _ben = await seed(app)
        before = len(telegram_api.texts_to(ANA))
        telegram_api.push_document(ANA, ANA, b"# Pancakes\n\nTwo eggs, flour and cardamom.\n", file_name="recipes.md",
                                   mime_type="text/markdown")
        await telegram_api.wait_until(lambda: len(telegram_api.texts_to(ANA)) > before, WAIT_S)
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        shared = await browser.text("#documents")
        assert "1. recipes.md" in shared and "1 page" in shared and "on telegram" in shared
        cookie = {c["name"]: c["value"] for c in await browser.cookies()}
        async with httpx.AsyncClient(base_url=browser.base, cookies=cookie) as client:
            drawing = await client.get(f"/person/{ana}/graph.svg")
        if drawing.status_code == 404:  # no Graphviz here: the page says so in the picture's place
            assert "Graphviz" in drawing.text or "dot" in drawing.text
        else:
            assert drawing.headers["content-type"] == "image/svg+xml" and b"<svg" in drawing.content


async def test_the_page_fits_a_phones_width(telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch,
                                            browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        await signed_in(browser, app)
        for path in ("/", "/people", f"/person/{ana}", f"/person/{ana}/forget?words=Vim"):
            await browser.go(path)
            assert await browser.overflow(PHONE) == 0, path  # nothing to scroll sideways
        await browser.go("/person/p_nobody")
        assert "No such person" in await browser.text("h1")


async def test_both_true_clears_the_flags_and_kiths_own_questions_are_not_used_up(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        book = app.memory_commands.controls.questions
        asked_before = await book.asked_in_window()
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        await browser.click("#conflicts button[value='both']")
        assert "both kept" in await browser.text(".notice")
        assert await browser.count("#conflicts") == 0
        for memory_id in ("m_0a1b0a1b0a1b0a1b", "m_e3ac5e3ac5e3ac50"):
            record = await app.memory.get(memory_id)
            assert record is not None and record.status is Status.ACTIVE and record.conflicts_with == ()
        # Settled with no question written: the hourly cap on kith's questions to people is untouched.
        assert await book.asked_in_window() == asked_before and await book.of_person(ana) == []


async def test_a_question_kith_asked_is_the_one_the_button_answers(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    from memory.controls import ConflictPair, DmTarget

    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        book = app.memory_commands.controls.questions
        vim, emacs = await app.memory.get("m_0a1b0a1b0a1b0a1b"), await app.memory.get("m_e3ac5e3ac5e3ac50")
        assert vim is not None and emacs is not None
        asked = await book.reserve(ana, ConflictPair(vim, emacs), DmTarget("telegram", str(ANA), str(ANA)))
        assert asked is not None
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        await browser.click("#conflicts button[value='first']")  # this one: Vim
        assert "kept one" in await browser.text(".notice")
        answered = await book.get(asked.id)
        assert answered is not None and answered.status.value == "answered" and answered.answer is not None
        assert answered.answer.value == "first" and answered.answered_by == "web:operator"
        emacs = await app.memory.get("m_e3ac5e3ac5e3ac50")
        assert emacs is not None and emacs.status is Status.SUPERSEDED


async def test_two_accounts_are_linked_and_unlinked_from_the_people_page(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api), monkeypatch) as app:
        ana, _ben = await seed(app)
        other = person(app, "discord:9001", "Ana on Discord")
        violin = said_memory("m_d15c0d15c0d15c0d", other, "PERSON plays the violin", "I play the violin",
                             "I play the violin in a string quartet.", platform="discord")
        await app.memory.store.add_memory(violin)
        telegram_api.push_text(STRANGER, STRANGER, "hello?")  # someone asking, for the page's picture
        await telegram_api.wait_until(lambda: any("pairing code" in t for t in telegram_api.texts_to(STRANGER)), WAIT_S)
        await signed_in(browser, app)
        await browser.go("/people")
        await browser.shoot("people")
        await browser.choose("#link select[name='account']", "discord:9001")
        await browser.choose("#link select[name='to']", f"telegram:{ANA}")
        await browser.click("#link button")
        assert f"linked discord:9001 to {ana}" in await browser.text(".notice")
        assert "discord:9001" in await browser.text(f"#p-{ana}")
        await browser.go(f"/person/{ana}")
        assert "I play the violin in a string quartet." in await browser.text("#memories")  # it followed her
        await browser.go("/people")
        await browser.click(f"#p-{ana} form:has(input[value='discord:9001']) button")
        assert "unlinked discord:9001" in await browser.text(".notice")
        assert "discord:9001" not in await browser.text(f"#p-{ana}")


async def test_a_memory_is_pinned_into_the_next_prompt_and_relabelled_with_her_words_unchanged(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api, dm="open"), monkeypatch) as app:
        ana, _ben = await seed(app)
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        await browser.click("#m-m_7ea07ea07ea07ea0 .tend form.inline button")
        assert "pinned m_7ea07ea07ea07ea0" in await browser.text(".notice")
        assert "pinned" in await browser.text("#m-m_7ea07ea07ea07ea0 .meta")
        fake_llm.reply("Hello Ana.")
        await ask(telegram_api, ANA, "good morning")  # nothing in it recalls tea: only a pin brings it
        assert "lapsang souchong" in memory_section(fake_llm.requests[-1]["messages"][0]["content"])

        await browser.fill("#m-m_7ea07ea07ea07ea0 .relabel input[name='label']", "PERSON drinks smoky lapsang tea")
        await browser.click("#m-m_7ea07ea07ea07ea0 .relabel button")
        assert "relabelled m_7ea07ea07ea07ea0" in await browser.text(".notice")
        tea = await browser.text("#m-m_7ea07ea07ea07ea0")
        assert "LABEL User701 drinks smoky lapsang tea" in tea and TEA in tea  # a new label; her words unchanged

        await browser.click("#m-m_7ea07ea07ea07ea0 .tend form.inline button")
        assert "unpinned m_7ea07ea07ea07ea0" in await browser.text(".notice")


async def test_a_secret_she_told_kith_appears_redacted_as_it_is_kept(
        telegram_api: FakeTelegramApi, fake_llm, make_settings, monkeypatch, browser) -> None:
    token = FAKE_TOKENS["github"]
    async with page_bot(web_settings(make_settings(fake_llm), telegram_api, dm="open"), monkeypatch) as app:
        reply = await ask(telegram_api, ANA, f"/remember my github token is {token} and my cat is called Miso")
        assert token not in reply
        ana = person(app, f"telegram:{ANA}", "Ana")
        kept = [m for m in await app.memory.active_memories(ana) if "Miso" in m.text]
        assert kept and token not in repr(kept[0])  # redacted before it was stored
        await signed_in(browser, app)
        await browser.go(f"/person/{ana}")
        page = await browser.text("#memories")
        assert "Miso" in page and "[redacted]" in page and token not in page
