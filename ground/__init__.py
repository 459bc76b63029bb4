"""The ground floor: what every other package stands on. It imports nothing else of kith.

* :mod:`ground.types`: the core's own types (an inbound message, an outbound one, a button press, a channel).
* :mod:`ground.turns`: what a conversation turn is for the parts that take part in one, and a turn made of a burst.
* :mod:`ground.config`: the typed, validated settings read from TOML; :mod:`ground.env_file` the secrets beside it.
* :mod:`ground.tunables`: every tunable number, named, in one place.
* :mod:`ground.db`: the relational store (one SQLAlchemy Core engine) and its change topics;
  :mod:`ground.prepared` the statements every message runs, compiled once.
* :mod:`ground.background`: background work that must neither delay a reply nor vanish silently.
* :mod:`ground.ordering` and :mod:`ground.keyed_locks`: work one at a time per key; one lock per key, dropped
  when unused.
* :mod:`ground.loop`: the event loop every command runs on.
* :mod:`ground.instance`: one writer per data directory; :mod:`ground.private_files` owner-only files.
* :mod:`ground.redaction`: credentials and personal numbers scrubbed before anything reaches disk;
  :mod:`ground.visible_text` text as a reader sees it (invisible characters dropped, NFKC), which redaction reads.
* :mod:`ground.failures`: how a handled failure is logged; :mod:`ground.checks` one line of ``doctor``.
* :mod:`ground.days`: calendar days in a time zone.
* :mod:`ground.person_data`: what a feature keeps about a person, declared: how it follows a link, what the
  export holds of it, what a forget does to it.
* :mod:`ground.wording`: small rules for the words kith shows people and operators.
"""
