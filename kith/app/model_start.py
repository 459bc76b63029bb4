"""The model process, made and started before anything else of the bot: litellm takes seconds to load.

It loads in its own process, on the other core, while this one imports Chroma, opens the stores and
connects the channels, so a newcomer's first message does not wait for the sum of both.
"""

from __future__ import annotations

import asyncio

from ground.tunables import (
    MODEL_PROCESS_RESTART_BACKOFF_S,
    MODEL_PROCESS_START_TIMEOUT_S,
    MODEL_PROCESS_STOP_TIMEOUT_S,
)
from kith.settings import AppSettings
from llm.client import LLMError
from llm.process import ModelProcess


def new_model_process(settings: AppSettings) -> ModelProcess | None:
    """The process the model calls are made in, or None when ``[llm] separate_process`` is off."""
    if not settings.llm.separate_process:
        return None
    return ModelProcess(start_timeout_s=MODEL_PROCESS_START_TIMEOUT_S, stop_timeout_s=MODEL_PROCESS_STOP_TIMEOUT_S,
                        restart_backoff_s=MODEL_PROCESS_RESTART_BACKOFF_S)


async def start_quietly(model_process: ModelProcess) -> None:
    """Start it; a failure is left for the first reply, which tries again and answers honestly."""
    try:
        await model_process.start()
    except LLMError:
        pass


def start_early(model_process: ModelProcess | None) -> asyncio.Task[None] | None:
    return None if model_process is None else asyncio.create_task(start_quietly(model_process),
                                                                   name="model-process-early-start")
