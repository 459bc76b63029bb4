"""The long-running commands: ``run`` (every channel) and ``chat`` (the terminal).

Ctrl-C and SIGTERM end either one the same way, whenever they come (while it starts, too): the
running command is cancelled once, closes everything it opened (the control channel first, the
model process last among the parts), and only then is the data directory's lock released. A second
signal changes nothing: the close under way is already as short as it can be.

While either runs, it owns the data directory: operator commands reach it over its control channel
(:mod:`kith.control`) instead of opening the stores beside it.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import signal
import sys
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from ground.active_bot import ActiveLock, needs_active_lock
from ground.instance import AlreadyRunning, DataDirLock, take_for_bot
from ground.types import Channel
from kith.app.logs import log_to_file
from kith.app.model_start import new_model_process, start_early
from kith.operator.hints import llm_failure_hint
from kith.settings import AppSettings
from llm.client import LLMError
from llm.process import ModelProcess

if TYPE_CHECKING:
    from kith.app.lifecycle import App

PLATFORM_ENV_HINT = (
    "no platform credentials found; set {telegram} for Telegram, {slack} (and {slack_app} for Socket Mode) "
    "for Slack, {discord} for Discord. Starting the terminal chat."
)


BuildApp = Callable[..., Awaitable["App"]]


def _load_wiring() -> BuildApp:
    # Chroma and every part come in with it (about a second): imported here, on a thread, not when this
    # module is, so the model process is already loading litellm on the other core meanwhile.
    from kith.app.wiring import build_app

    return build_app


async def _import_wiring() -> BuildApp:
    return await asyncio.to_thread(_load_wiring)


def _hint_once(settings: AppSettings) -> Callable[[LLMError], None]:
    shown = False

    def hint(error: LLMError) -> None:
        nonlocal shown
        if not shown:
            shown = True
            print(f"kith: {llm_failure_hint(settings.llm, error)}", file=sys.stderr)

    return hint


def has_platform_credentials(settings: AppSettings) -> bool:
    """Whether any platform channel would start (``platform_channels`` builds one per token found)."""
    return bool(settings.telegram.token() or settings.discord.token() or settings.slack.bot_token())


def platform_channels(settings: AppSettings, app: App) -> list[Channel]:
    """Every platform channel whose credentials are present in the environment."""
    channels: list[Channel] = []
    token = settings.telegram.token()
    if token:
        from channels.telegram.channel import TelegramChannel

        channels.append(TelegramChannel(settings.telegram, token, journal=app.journal, cursors=app.cursors,
                                        clock=app.clock, commands=app.commands.menu()))
    discord_token = settings.discord.token()
    if discord_token:
        from channels.discord.channel import DiscordChannel

        channels.append(DiscordChannel(settings.discord, discord_token, journal=app.journal, cursors=app.cursors,
                                       clock=app.clock))
    slack_token = settings.slack.bot_token()
    if slack_token:
        from channels.slack.channel import SlackChannel

        channels.append(SlackChannel(settings.slack, slack_token, journal=app.journal, clock=app.clock))
    return channels


async def run_chat(settings: AppSettings, *, verbose: bool = False, model_process: ModelProcess | None = None) -> int:
    """``model_process``: one already spawned (:mod:`kith.app.launch`); else one is made here."""
    return await _as_sole_bot(settings, functools.partial(_chat, verbose=verbose), model_process)


async def run_all(settings: AppSettings, *, verbose: bool = False, model_process: ModelProcess | None = None) -> int:
    """``model_process``: one already spawned (:mod:`kith.app.launch`); else one is made here."""
    return await _as_sole_bot(settings, functools.partial(_run_all, verbose=verbose), model_process)


Body = Callable[[AppSettings, "ModelProcess | None"], Awaitable[int]]


async def _as_sole_bot(settings: AppSettings, body: Body, spawned: ModelProcess | None = None) -> int:
    """``body``'s exit code, run holding the data directory's lock; 1 with the reason if another bot holds it.

    An operator command holding the lock is waited for (one line says so): it ends on its own, and the
    bot must not open the stores before it has.
    """
    lock = DataDirLock(settings.storage.data_path())
    url = settings.storage.resolved_database_url()
    active = ActiveLock(url) if needs_active_lock(url) else None

    def say(line: str) -> None:
        print(f"kith: {line}", file=sys.stderr, flush=True)

    async def locked() -> int:
        # The collector is off until the start is done (freeze_startup_heap turns it back on): what a start
        # imports and builds lives as long as the process, and collections over it cost a third of the start.
        gc.disable()
        await take_for_bot(lock, say)
        if active is not None:  # a database other machines' bots may share: wait here while another is active
            await active.take(say)
        # The model process loads litellm (seconds) on the other core while this one imports and opens the rest.
        model_process = spawned if spawned is not None else new_model_process(settings)
        early = start_early(model_process)  # held here: the loop keeps only a weak reference to a task
        try:
            return await _while_active(body(settings, model_process), active)
        finally:
            gc.enable()  # a start that ended before freeze_startup_heap
            if early is not None:
                early.cancel()
            if model_process is not None:
                # Ended before the lock is released, however the body ended: stopped while it still imported,
                # the app that would close it does not exist yet (closing it twice is harmless).
                await model_process.close()

    try:
        return await until_signalled(locked())
    except AlreadyRunning as exc:
        print(f"kith: {exc}", file=sys.stderr)
        return 1
    finally:
        if active is not None:
            await active.release()  # a standby may take over from here: everything this bot opened is closed
        lock.release()  # last: everything the bot opened is closed


async def _while_active(work: Awaitable[int], active: ActiveLock | None) -> int:
    """``work``'s exit code; 1 when ``active``'s lock was lost first (``work`` cancelled: another bot may be
    active now)."""
    if active is None:
        return await work
    job = asyncio.ensure_future(work)
    lost = asyncio.ensure_future(active.lost.wait())
    try:
        await asyncio.wait({job, lost}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        lost.cancel()
        if not job.done():
            job.cancel()
            await asyncio.gather(job, return_exceptions=True)
    if job.cancelled() and active.lost.is_set():
        print("kith: this bot lost its hold on the database as the active one, so it stopped (another may be "
              "active now); start it again to wait as a standby", file=sys.stderr)
        return 1
    return job.result()


async def until_signalled(body: Awaitable[int]) -> int:
    """``body``'s exit code; 0 once SIGINT or SIGTERM has cancelled it and it has closed what it opened."""
    loop = asyncio.get_running_loop()
    task = asyncio.ensure_future(body)
    signalled: list[int] = []

    def stop(sig: int) -> None:
        if not signalled:
            signalled.append(sig)
            task.cancel()

    installed = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError, RuntimeError):  # Windows; a loop off the main thread
            loop.add_signal_handler(sig, stop, sig)
            installed.append(sig)
    try:
        return await task
    except asyncio.CancelledError:
        if not signalled or not task.cancelled():
            raise  # cancelled from outside, not by a signal
        return 0
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)


async def _chat(settings: AppSettings, model_process: ModelProcess | None, *, verbose: bool = False) -> int:
    # The person types here: log lines would land in the middle of the conversation.
    file_log = log_to_file(settings.storage.data_path(), keep_terminal=verbose)
    print(f"kith: logging to {file_log.path}" + ("" if verbose else " (-v shows it here too)"), file=sys.stderr)
    try:
        return await _chat_with(settings, model_process)
    finally:
        summary = file_log.summary()
        file_log.close()
        if summary:
            print(f"kith: {summary}", file=sys.stderr)


async def _chat_with(settings: AppSettings, model_process: ModelProcess | None) -> int:
    from channels.terminal import TerminalChannel

    build_app = await _import_wiring()
    app = await build_app(settings, model_process=model_process, on_llm_error=_hint_once(settings))
    # A file a reply carries (an /export) is saved here: a terminal cannot show one.
    terminal = TerminalChannel(persona_name=settings.persona.name, files_dir=settings.storage.exports_path())
    async with app.running([terminal]):
        await terminal.closed.wait()  # the end of input; Ctrl-C and SIGTERM cancel this wait
    return 0


async def _run_all(settings: AppSettings, model_process: ModelProcess | None, *, verbose: bool = False) -> int:
    if not has_platform_credentials(settings):
        hint = PLATFORM_ENV_HINT.format(telegram=settings.telegram.token_env, slack=settings.slack.bot_token_env,
                                        slack_app=settings.slack.app_token_env, discord=settings.discord.token_env)
        print(f"kith: {hint}", file=sys.stderr)
        return await _chat(settings, model_process, verbose=verbose)
    build_app = await _import_wiring()
    app = await build_app(settings, model_process=model_process, on_llm_error=_hint_once(settings))
    async with app.running(platform_channels(settings, app)) as started:
        if not started:
            print("kith: no channel could start; see the log above", file=sys.stderr)
            return 1
        print(f"kith: running on {', '.join(started)}; Ctrl-C to stop", file=sys.stderr)
        await asyncio.Event().wait()  # until Ctrl-C or SIGTERM cancels it (until_signalled)
    return 0
