"""The checks of the stores kith keeps in its data directory, run by whoever holds it: the running bot, or a
command holding the data directory's lock."""

from __future__ import annotations

from ground.checks import CheckResult
from ground.config import Settings

STORE_CHECKS = ("database", "chroma", "embedder")


async def check_database(settings: Settings) -> CheckResult:
    from kith.app.wiring import open_database

    try:
        db = open_database(settings)
        db.close()
    except Exception as exc:
        return CheckResult("database", False, f"cannot open ({type(exc).__name__}); set [storage] database_url")
    return CheckResult("database", True, settings.storage.resolved_database_url().split("://")[0] + " opens")


async def check_chroma(settings: Settings) -> CheckResult:
    from memory.store import check_chroma as check

    return await check(settings)


async def check_embedder(settings: Settings) -> CheckResult:
    from memory.encoders import check_embedder as check

    return await check(settings)
