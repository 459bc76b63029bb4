"""The heartbeat: kith's own schedule inside the bot process.

Nightly consolidation of yesterday's transcripts into curated memory, proactive turns for people
with something due (goals, lapsing horizons, open conflict questions), goals as their own
records, and the weekly decay that retires lapsed memories without deleting them.
"""
