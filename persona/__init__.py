"""Everything kith tells the model, in one place.

* :mod:`persona.card`: who kith is (name, attitude, language, honesty) and its style examples, followed by
  whatever notes it is given;
* :mod:`persona.instructions`: the standing notes on the card, the system instruction of every call that is
  not a reply (the thread summary, memory capture, nightly consolidation, the heartbeat's check-in) and what
  the model is told about its tools;
* :mod:`persona.labels`: the notices, headings and flags that frame stored data (recalled memories, pinned
  facts, goals, summaries, transcripts, due items) as data.

Modules that call the model import their texts from here rather than writing their own, so one can read
everything the model is told side by side, and check in one place that recalled memory always reaches it
labelled as data about a person, never as instructions. This package holds texts and small pure functions
that render them; it imports nothing but :mod:`ground`.
"""
