"""Who may talk to kith, and where: pure decisions over plain state, no platform client and no I/O.

- :mod:`policy.settings` — the ``[policy.<platform>]`` configuration, validated.
- :mod:`policy.pairing` — pairing codes and the access state (approved accounts, owner, pending codes).
- :mod:`policy.rules` — the inbound and outbound verdicts, each with a machine-readable reason code.
- :mod:`policy.ratelimit` — the per-sender token bucket and its once-per-streak notice.

Every function takes the state it needs and the current time as arguments and returns the new state,
so the storage layer decides how and when to persist it.
"""
