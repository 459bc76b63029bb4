"""The recall query cache keys a message by a digest: it keeps no person's words in this process."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from types import SimpleNamespace

from memory.recall.query_vectors import QueryVectors, query_key
from memory.store.vectors import Vectors


def test_the_key_holds_none_of_the_words_and_is_the_same_for_the_same_text() -> None:
    key = query_key("I have a lighthouse tattoo")
    assert "lighthouse" not in key and "tattoo" not in key
    assert key == query_key("i have a  LIGHTHOUSE tattoo")  # the same query as recall reads it
    assert key != query_key("I have a lighthouse tattoo, Ola")


class SlowStore:
    """A store whose embedder answers when told to (``go``), one vector a query."""

    def __init__(self) -> None:
        self.vector_source = SimpleNamespace(ready=True)
        self.go = asyncio.Event()
        self.called = asyncio.Event()
        self.asked: list[list[str]] = []

    async def vectors(self, texts: Sequence[str]) -> Vectors:
        self.asked.append(list(texts))
        self.called.set()
        await self.go.wait()
        return Vectors([[1.0, float(i)] for i in range(len(texts))], "embedder")


async def test_a_query_left_waiting_by_a_cancelled_runner_is_still_embedded() -> None:
    store = SlowStore()
    store.go.set()
    queries = QueryVectors(store)  # type: ignore[arg-type]
    waiter = asyncio.ensure_future(queries.get("how is Ola?", None))
    await asyncio.sleep(0)  # it asked, and waits for a runner that has not started yet
    assert queries._runner is not None
    queries._runner.cancel()  # before it took the query (not close(): nothing answered the waiter)
    await asyncio.gather(queries._runner, return_exceptions=True)
    found = await asyncio.wait_for(queries.get("how is Ola?", None), 1.0)  # the same query asked again
    assert found is not None and found.space == "embedder" and store.asked == [["how is Ola?"]]
    assert await asyncio.wait_for(waiter, 1.0) == found


async def test_a_query_taken_by_a_cancelled_call_gets_no_vector_and_the_next_ask_embeds_it() -> None:
    store = SlowStore()
    queries = QueryVectors(store)  # type: ignore[arg-type]
    waiter = asyncio.ensure_future(queries.get("how is Ola?", None))
    await asyncio.wait_for(store.called.wait(), 1.0)
    assert queries._runner is not None
    queries._runner.cancel()  # inside the embedder call
    assert await asyncio.wait_for(waiter, 1.0) is None
    store.go.set()
    found = await asyncio.wait_for(queries.get("how is Ola?", None), 1.0)
    assert found is not None and len(store.asked) == 2
