"""Loopback fakes of the chat platforms kith talks to, for tests."""
