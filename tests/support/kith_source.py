"""kith's own source, for the tests that read it whole: its packages, as the import contracts name them, and
each of their files with the module it is."""

from __future__ import annotations

import tomllib
from collections.abc import Iterator
from pathlib import Path

from tests.support.paths import ROOT

PACKAGES: list[str] = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["root_packages"]


def module_name(path: Path) -> str:
    """The dotted module a file under ROOT is (a package's ``__init__.py`` is the package)."""
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def source_files() -> Iterator[tuple[Path, str]]:
    """Every Python file of every kith package, in a stable order, with its module name."""
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            yield path, module_name(path)
