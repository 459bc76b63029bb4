"""Fixtures the end-to-end tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import pytest

from kith.settings import AppSettings
from tests.fakes.openai_api import FakeOpenAI
from tests.support.lived import Lived, lived_through


@pytest.fixture
async def lived(fake_llm: FakeOpenAI, make_settings: Callable[..., AppSettings]) -> AsyncIterator[Lived]:
    """Ana and Ben after living through every kind of thing kith keeps, in a built app (closed after the test)."""
    async with lived_through(make_settings(fake_llm)) as kept:
        yield kept
