"""kith's memory: what it remembers about its people, with a receipt for every fact.

The pure core (no I/O): records and their Chroma metadata form (``records``), text
normalisation and multilingual tokens (``text``), the merge/conflict decision
(``similarity``), keyword ranking (``bm25``), the check of an extractor's answer
(``validation``) and the secret scrubber (``redaction``). The store, the capture job and
the gate build on them.
"""
