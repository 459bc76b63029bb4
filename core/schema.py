"""Imports every module that declares tables, so ``Database.create_all`` creates them all."""

from core import history, linking, people  # noqa: F401
from delivery import inbound, inbox, outbox  # noqa: F401
from heartbeat import schema as heartbeat_schema  # noqa: F401
from memory import capture, changes, controls, questions, tombstones  # noqa: F401
from policy import store  # noqa: F401
