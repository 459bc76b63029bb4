"""Channels translate platform events into the core's types and back; they know nothing of memory or the LLM."""
