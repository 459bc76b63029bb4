"""Every table kith keeps: each feature declares its own; this module gathers them to create them all."""

import memory.capture
import memory.controls
import memory.documents
import memory.forgetting
import memory.goals
import memory.graph
import memory.store  # noqa: F401
from conversation import linking  # noqa: F401
from delivery import inbound, inbox, outbox, previews  # noqa: F401
from ground.db import Database
from heartbeat import schema as heartbeat_schema  # noqa: F401
from kith.control import request_rows  # noqa: F401
from people import directory, history  # noqa: F401
from policy import store  # noqa: F401


def create_schema(db: Database) -> None:
    """Create every feature's tables (and columns added since) in ``db``."""
    db.create_all()
