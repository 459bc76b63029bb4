"""kith's memory: what it remembers about its people, with a receipt for every fact.

Memory knows no platform. It lives in rooms, each importing only the rooms below it (an import contract):

* :mod:`memory.controls`: what a person may do with their own memory, and the conflict questions kith asks.
* :mod:`memory.service`: :class:`~memory.service.MemoryService`, the one object the wiring builds and closes.
* :mod:`memory.capture` and :mod:`memory.recall`: from words to memories (validated, staged, gated); from a
  query to ranked memories and the prompt's memory part.
* :mod:`memory.goals`: what a person wants to reach (not a memory: a direction), the ``/goals`` command, and
  the prompt's goals part.
* :mod:`memory.forgetting`: the plan, the journal, tombstones, and the words scrubbed from every table.
* :mod:`memory.graph`: the person's graph, who and what is in their life and how it connects, with receipts.
* :mod:`memory.store`: Chroma, each person's in-memory index, and the change log between processes.
* :mod:`memory.encoders`: the local sentence encoder, reranker and entailment models.
* :mod:`memory.core`: the shapes and text rules, pure.

The rest of kith imports a room or the service, never a module inside a room (``tests/unit/test_layers.py``).
"""
