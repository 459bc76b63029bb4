"""Who may talk to kith, and where: the decisions pure, over plain state, with no platform client.

- :mod:`policy.settings` — the ``[policy.<platform>]`` configuration, validated.
- :mod:`policy.pairing` — pairing codes and the access state (approved accounts, owner, pending codes).
- :mod:`policy.rules` — the inbound and outbound verdicts, each with a machine-readable reason code.
- :mod:`policy.ratelimit` — the per-sender token bucket and its once-per-streak notice.
- :mod:`policy.store` — the access state persisted.
- :mod:`policy.gate` — what intake and delivery ask: the rules over the stored state, and the rate limit.

The rules, pairing and rate limit take the state they need and the current time as arguments and return the
new state, so the store and the gate decide how and when to persist it.
"""
