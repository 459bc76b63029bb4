"""The start of ``run`` and ``chat``: the model process first, then the rest of kith.

litellm takes the model process seconds to load. Spawned before this process imports the rest of its start (the
database layer, the stores, the wiring: about a third of a second here), it loads on the other core meanwhile, so
the first poll waits for the longer of the two rather than for one after the other. For that, this module imports
nothing heavy itself. When the data directory's lock names a running bot, no child is spawned ahead: this start
will be refused (:func:`ground.instance.take_for_bot`), and a model process loaded for nothing would only delay that.
"""

from __future__ import annotations

import asyncio
import gc
import os

from ground.instance import Role, read_holder
from kith.app.model_start import new_model_process
from kith.settings import AppSettings


async def run_all(settings: AppSettings, *, verbose: bool = False) -> int:
    """``bot.py run``: every configured channel (:func:`kith.app.run.run_all`)."""
    return await _launched(settings, chat=False, verbose=verbose)


async def run_chat(settings: AppSettings, *, verbose: bool = False) -> int:
    """``bot.py chat``: the terminal (:func:`kith.app.run.run_chat`)."""
    return await _launched(settings, chat=True, verbose=verbose)


async def _launched(settings: AppSettings, *, chat: bool, verbose: bool) -> int:
    # The collector is off for the whole start, these imports included (kith.app.run says why; its
    # freeze_startup_heap turns it back on).
    gc.disable()
    model_process = None if _another_bot_runs(settings) else new_model_process(settings)
    try:
        if model_process is not None:
            model_process.begin()
            await asyncio.sleep(0)  # the start runs to its spawn: the child is forked before the imports below
        from kith.app import run

        command = run.run_chat if chat else run.run_all
        return await command(settings, verbose=verbose, model_process=model_process)
    finally:
        gc.enable()  # a start that ended before freeze_startup_heap
        if model_process is not None:
            await model_process.close()  # ended by the run already, unless the start failed before it got there


def _another_bot_runs(settings: AppSettings) -> bool:
    """Whether the data directory's lock names a bot that is alive (a hint only: the lock itself decides)."""
    holder = read_holder(settings.storage.data_path())
    if holder is None or holder.role is not Role.BOT or holder.pid == os.getpid():
        return False
    try:
        os.kill(holder.pid, 0)
    except ProcessLookupError:
        return False  # a bot killed without its clean-up left the file
    except PermissionError:
        return True  # alive, under another user
    return True
