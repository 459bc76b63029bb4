"""Moving stored vectors into the embedder's space: a batch at a time, resumable, with progress.

Each record's metadata names the space its vector came from (``VECTOR_KEY``: an embedder's name,
or ``hash`` for the fallback); a collection's metadata names the space and vector size it was
built for (``SPACE_KEY``, ``DIM_KEY``). A migration gives every record whose vector is from another
space a vector from the embedder. Each batch is written with its new tag, so a migration cut
short (a kill, a crash, an embedder that fails) resumes where it stopped: finished records are
never embedded again.

A collection whose vector size differs cannot hold the new vectors: its records are copied, with
new vectors, into ``<name>-rebuild`` (built for the new size), which is swapped in once the copy is
complete. The original is dropped only then, so a rebuild cut short leaves it intact, and the next
migration copies only what the partial copy lacks or what changed in the original since it was
copied (a start without the embedder may have written there in between).

:func:`migrate` is what every start runs (:meth:`memory.store.chroma.ChromaCollections.prepare`) and what
``bot.py memory reembed`` runs to show its progress; :func:`pending` counts what is left.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar

from ground.tunables import REEMBED_BATCH, REEMBED_LOG_EVERY_S, STORE_PAGE
from memory.core.records import MetadataValue
from memory.encoders.embedders import Embedder

log = logging.getLogger("kith.memory.reembed")

T = TypeVar("T")

VECTOR_KEY = "vector"  # record metadata: the vector space its stored vector came from
SPACE_KEY = "kith_vector_space"  # collection metadata: the space the collection was built for
DIM_KEY = "kith_dim"  # collection metadata: the size of the vectors it holds
REBUILD_SUFFIX = "-rebuild"


@dataclass(frozen=True, slots=True)
class Progress:
    done: int  # records given a vector from the new space so far
    total: int  # records that needed one when the migration began


ProgressFn = Callable[[Progress], None]


class OnChromaThread(Protocol):
    """What a migration needs of :class:`memory.store.chroma.ChromaCollections`: its client, and its thread."""

    client: Any

    async def run(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T: ...


@dataclass(frozen=True, slots=True)
class Migrated:
    collections: list[Any]  # the collections to use from now on, in the order given
    records: int  # records that got a vector from the new space


@dataclass(slots=True)
class _Step:
    """One collection's share of a migration."""

    col: Any
    todo: list[str]  # ids whose records need a vector from the target space
    resize: bool  # the vector size changes: the records go into a rebuild that is swapped in
    rebuild: Any | None = None  # a partial copy for this very target, carried on
    stale: list[str] = field(default_factory=list)  # ids in that copy to drop first (gone or changed since)
    relabel: bool = False  # the collection's own metadata still names another space or size


def collection_metadata(space: str, dim: int) -> dict[str, MetadataValue]:
    return {"hnsw:space": "cosine", SPACE_KEY: space, DIM_KEY: dim}


async def pending(chroma: OnChromaThread, cols: Sequence[Any], space: str, dim: int) -> int:
    """Records of ``cols`` that a migration to ``space`` (vectors of ``dim``) would still embed."""
    return sum([len((await _plan(chroma, col, space, dim)).todo) for col in cols])


async def migrate(
    chroma: OnChromaThread,
    cols: Sequence[Any],
    embedder: Embedder,
    dim: int,
    on_progress: ProgressFn | None = None,
) -> Migrated:
    """Give every record of ``cols`` a vector from ``embedder`` (of ``dim``), reporting each batch.

    What is left is counted first, so ``on_progress`` hears the whole total (once with nothing done
    yet, then after every batch). An embedder failure propagates; every batch written before it stays.
    """
    space = embedder.name
    steps = [await _plan(chroma, col, space, dim) for col in cols]
    total = sum(len(step.todo) for step in steps)
    done = 0

    def advance(count: int) -> None:
        nonlocal done
        done += count
        if on_progress is not None:
            on_progress(Progress(done, total))

    if total:
        advance(0)
    return Migrated([await _carry_out(chroma, step, embedder, dim, advance) for step in steps], total)


def logged(space: str, every_s: float = REEMBED_LOG_EVERY_S) -> ProgressFn:
    """Progress for the log of a start: the total when it begins, how far it got now and then, the end."""
    started = last = time.monotonic()

    def report(progress: Progress) -> None:
        nonlocal last
        now = time.monotonic()
        if progress.done == 0:
            log.info("re-embedding records=%d space=%s", progress.total, space)
        elif progress.done >= progress.total:
            log.info("re-embedded records=%d space=%s ms=%.0f", progress.total, space, (now - started) * 1000)
        elif now - last >= every_s:
            last = now
            log.info("re-embedding done=%d records=%d", progress.done, progress.total)

    return report


# --- planning: what is left ----------------------------------------------------------------
async def _plan(chroma: OnChromaThread, col: Any, space: str, dim: int) -> _Step:
    meta = dict(col.metadata or {})
    stored_dim = int(meta.get(DIM_KEY) or dim)
    if stored_dim == dim:
        # A record with no tag predates tagging and counts as hashed: $ne matches it too.
        todo = await chroma.run(record_ids_sync, col, {VECTOR_KEY: {"$ne": space}})
        relabel = meta.get(SPACE_KEY) != space or meta.get(DIM_KEY) != dim
        return _Step(col, todo, resize=False, relabel=relabel)
    ids = await chroma.run(record_ids_sync, col, None)
    rebuild = await chroma.run(_partial_copy_sync, chroma.client, col.name + REBUILD_SUFFIX, space, dim)
    if rebuild is None:
        return _Step(col, ids, resize=True)
    current, stale = await chroma.run(_current_copies_sync, col, rebuild, ids)
    return _Step(col, [i for i in ids if i not in current], resize=True, rebuild=rebuild, stale=stale)


# --- carrying it out -----------------------------------------------------------------------
async def _carry_out(
    chroma: OnChromaThread, step: _Step, embedder: Embedder, dim: int, advance: Callable[[int], None]
) -> Any:
    space = embedder.name
    name = str(step.col.name)
    if not step.resize:
        # A copy begun for another size is of no use now: it would only be resumed with stale records.
        await chroma.run(_drop_sync, chroma.client, name + REBUILD_SUFFIX)
        await _embed_into(chroma, step.col, step.col, step.todo, embedder, advance, in_place=True)
        if step.relabel:
            await chroma.run(step.col.modify, metadata={SPACE_KEY: space, DIM_KEY: dim})
        return step.col
    copy = step.rebuild
    if copy is None:
        await chroma.run(_drop_sync, chroma.client, name + REBUILD_SUFFIX)  # one for another target
        copy = await chroma.run(chroma.client.create_collection, name + REBUILD_SUFFIX, embedding_function=None,
                                metadata=collection_metadata(space, dim))
    for start in range(0, len(step.stale), STORE_PAGE):
        await chroma.run(copy.delete, ids=step.stale[start : start + STORE_PAGE])
    await _embed_into(chroma, step.col, copy, step.todo, embedder, advance, in_place=False)
    # The copy is complete: only now may the original go. Killed between these two, the next open
    # finds the copy alone and finishes the swap (ChromaCollections._open_collection).
    await chroma.run(chroma.client.delete_collection, name)
    await chroma.run(copy.modify, name=name)
    log.debug("rebuilt collection=%s dim=%d", name, dim)
    return await chroma.run(chroma.client.get_collection, name, embedding_function=None)


async def _embed_into(
    chroma: OnChromaThread,
    source: Any,
    target: Any,
    ids: list[str],
    embedder: Embedder,
    advance: Callable[[int], None],
    *,
    in_place: bool,
) -> None:
    for start in range(0, len(ids), REEMBED_BATCH):
        chunk = ids[start : start + REEMBED_BATCH]
        found, metadatas = await chroma.run(_metadata_sync, source, chunk)
        values = await embedder.embed([str(md["text"]) for md in metadatas]) if found else []
        if len(values) != len(found):
            raise ValueError(f"{embedder.name} returned {len(values)} vectors for {len(found)} texts")
        if found and in_place:
            # Chroma merges an update's metadata into the stored one: only the tag changes.
            await chroma.run(target.update, ids=found, embeddings=values,
                             metadatas=[{VECTOR_KEY: embedder.name} for _ in found])
        elif found:
            await chroma.run(target.add, ids=found, embeddings=values,
                             metadatas=[md | {VECTOR_KEY: embedder.name} for md in metadatas])
        advance(len(chunk))  # ids gone meanwhile count as done: there is nothing left to embed for them


# --- jobs for the Chroma thread ------------------------------------------------------------
def record_ids_sync(col: Any, condition: dict[str, Any] | None) -> list[str]:
    """Ids of the collection's records matching ``condition`` (None: all), without their metadata."""
    return list(col.get(where=condition, include=[])["ids"])


def _metadata_sync(col: Any, ids: list[str]) -> tuple[list[str], list[dict[str, MetadataValue]]]:
    page = col.get(ids=ids, include=["metadatas"])
    return list(page["ids"]), [dict(md) for md in page["metadatas"]]


def collection_names_sync(client: Any) -> set[str]:
    """The names of the client's collections."""
    return {c.name if hasattr(c, "name") else str(c) for c in client.list_collections()}


def _partial_copy_sync(client: Any, name: str, space: str, dim: int) -> Any | None:
    """The rebuild begun for exactly this space and size, if one is there."""
    if name not in collection_names_sync(client):
        return None
    copy = client.get_collection(name, embedding_function=None)
    meta = dict(copy.metadata or {})
    return copy if meta.get(SPACE_KEY) == space and meta.get(DIM_KEY) == dim else None


def _drop_sync(client: Any, name: str) -> None:
    if name in collection_names_sync(client):
        client.delete_collection(name)


def _current_copies_sync(original: Any, copy: Any, ids: list[str]) -> tuple[set[str], list[str]]:
    """Of the original's ``ids``: those whose copy is current; and the copy's ids to drop (gone from the
    original, or changed there since they were copied)."""
    wanted = set(ids)
    copied = list(copy.get(include=[])["ids"])
    stale = [i for i in copied if i not in wanted]
    both = [i for i in copied if i in wanted]
    current: set[str] = set()
    for start in range(0, len(both), STORE_PAGE):
        page = both[start : start + STORE_PAGE]
        theirs = _by_id(original.get(ids=page, include=["metadatas"]))
        ours = _by_id(copy.get(ids=page, include=["metadatas"]))
        for record_id in page:
            if _untagged(theirs.get(record_id)) == _untagged(ours.get(record_id)):
                current.add(record_id)
            else:
                stale.append(record_id)
    return current, stale


def _by_id(page: dict[str, Any]) -> dict[str, dict[str, MetadataValue]]:
    return {i: dict(md) for i, md in zip(page["ids"], page["metadatas"], strict=True)}


def _untagged(metadata: dict[str, MetadataValue] | None) -> dict[str, MetadataValue] | None:
    return None if metadata is None else {k: v for k, v in metadata.items() if k != VECTOR_KEY}
