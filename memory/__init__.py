"""kith's memory: what it remembers about its people, with a receipt for every fact.

The pure core (no I/O): records and their Chroma metadata form (``records``), text
normalisation and multilingual tokens (``text``), the merge/conflict decision
(``similarity``), keyword ranking (``bm25``), the check of an extractor's answer
(``validation``); the secret scrubber is :mod:`ground.redaction`. The store, the capture job
and the gate build on them.

The store (``store``: reads, compare-and-swap writes, the cross-person scan) is made of
Chroma's lifecycle and doctor probe (``chroma``), vectors with their hashed fallback
(``vectors``), each person's in-memory index (``person_index``, searched by ``index_search``),
catching up with other processes through the change log (``catch_up``) and the scrub of
forgotten words from embedded Chroma's file (``chroma_scrub``). One ranking (``ranking``)
orders every list of memories a query finds.
"""
