"""The layering holds in the code: the import contracts in pyproject.toml pass, and no import placed inside a
function hides a cycle (a lazy import is fine for start-up speed, never to get round the layers)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import grimp

from tests.support.kith_source import PACKAGES, source_files
from tests.support.paths import ROOT


def _resolve(importer: str, node: ast.ImportFrom, graph: grimp.ImportGraph) -> list[str]:
    """The kith modules a ``from X import a, b`` names: X.a where that is a module, else X."""
    base = node.module or ""
    if node.level:
        package = importer.rsplit(".", node.level)[0]
        base = f"{package}.{base}" if base else package
    named = [f"{base}.{alias.name}" for alias in node.names]
    return [m for m in named if m in graph.modules] or ([base] if base in graph.modules else [])


def function_local_imports(graph: grimp.ImportGraph) -> list[tuple[str, str, int]]:
    found: list[tuple[str, str, int]] = []
    for path, importer in source_files():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in ast.walk(tree):
            if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
                continue
            for node in ast.walk(fn):
                if isinstance(node, ast.ImportFrom):
                    targets = _resolve(importer, node, graph)
                elif isinstance(node, ast.Import):
                    targets = [a.name for a in node.names if a.name in graph.modules]
                else:
                    continue
                found.extend((importer, target, node.lineno) for target in targets)
    return found


def test_the_import_contracts_hold() -> None:
    lint_imports = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint_imports), "--no-cache"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


def test_no_function_local_import_hides_a_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    local = function_local_imports(graph)
    assert local, "the scan found no function-local imports at all: it is not looking"
    hiding = []
    for importer, imported, line in local:
        if importer == imported or imported.startswith(importer + "."):
            continue
        chain = graph.find_shortest_chain(importer=imported, imported=importer)
        if chain is not None:
            hiding.append(f"{importer}:{line} imports {imported}, which leads back: {' -> '.join(chain)}")
    assert not hiding, "\n".join(hiding)


def test_no_package_level_cycle() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    cycles = [f"{a} <-> {b}" for a in PACKAGES for b in PACKAGES
              if a < b and graph.chain_exists(importer=a, imported=b, as_packages=True)
              and graph.chain_exists(importer=b, imported=a, as_packages=True)]
    assert not cycles, cycles


def test_the_rest_of_kith_reaches_memory_through_its_rooms() -> None:
    """Outside memory, code imports a room (``memory.store``) or the service, never a module inside a room: what a
    room's ``__init__`` exports is memory's whole surface, so a room can be rearranged without touching its users."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    rooms = {m for m in graph.find_children("memory")}
    assert {"memory.core", "memory.store", "memory.service"} <= rooms, "the scan does not see memory's rooms"
    deep = sorted(
        f"{importer} imports {imported}"
        for imported in graph.find_descendants("memory") - rooms
        for importer in graph.find_modules_that_directly_import(imported)
        if not importer.startswith("memory.")
    )
    assert not deep, "\n".join(deep)
