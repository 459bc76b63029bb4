"""Every kith name a docstring gives resolves: a module, class, function or attribute moved or renamed leaves no
docstring pointing at where it used to be.

The names checked are every Sphinx role (``:mod:``, ``:class:``, ``:func:``, ``:meth:``, ``:data:``, ``:attr:``)
and the double-backticked dotted names whose first part is one of kith's packages. A name resolves when its
longest importable prefix imports and the rest is found on it by ``getattr`` (on a class, also its fields and
the attributes its methods set). A role's name that does not start with a kith package is looked up where the
docstring is, as Sphinx does: in the enclosing classes, innermost first, then in the module. A settings key
reads like a package name (``memory.embedder``), so a backticked name whose second part is a key of that
section in ``config.example.toml`` is taken as a key, unless that part is a module too (``memory.capture`` is
both a key and a room).
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import re
from collections.abc import Iterator

import pytest

from tests.support.kith_source import PACKAGES, source_files
from tests.support.paths import ROOT

_ROLE = re.compile(r":(?:mod|class|func|meth|data|attr):`!?~?(?P<name>[\w.]+)`")
_BACKTICKED = re.compile(r"``(?P<name>[A-Za-z_]\w*(?:\.\w+)+)``")
_SECTION = re.compile(r"^#?\s*\[\[?(?P<name>[\w.\"-]+)\]\]?\s*$")
_KEY = re.compile(r"^#?\s*(?P<key>[a-z_]\w*)\s*=")


@dataclasses.dataclass(frozen=True)
class Docstring:
    module: str
    line: int
    text: str
    scopes: tuple[str, ...]  # where a name not starting with a kith package is looked up, innermost first


@dataclasses.dataclass(frozen=True)
class Reference:
    where: str  # module and line of the docstring
    name: str
    scopes: tuple[str, ...] = ("",)  # the name is tried under each of these ("" for as written)


def config_keys(text: str) -> dict[str, set[str]]:
    """Each section's first part -> the keys and subsections under it, commented-out examples included."""
    keys: dict[str, set[str]] = {}
    section: list[str] = []
    for line in text.splitlines():
        line = line.strip()
        if m := _SECTION.match(line):
            section = m["name"].split(".")
            keys.setdefault(section[0], set()).update(section[1:2])
        elif section and (m := _KEY.match(line)):
            keys.setdefault(section[0], set()).add(section[1] if len(section) > 1 else m["key"])
    return keys


def docstrings(node: ast.AST, module: str, classes: tuple[str, ...] = ()) -> Iterator[Docstring]:
    """The docstring of ``node`` (the module, a class, a function) and of every class and function inside it."""
    if isinstance(node, ast.ClassDef):
        classes = (*classes, node.name)
    if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
        text = ast.get_docstring(node, clean=False)
        if text is not None:
            inner = tuple(".".join((module, *classes[:i])) for i in range(len(classes), -1, -1))
            yield Docstring(module, node.body[0].lineno if node.body else 1, text, inner)
    for child in ast.iter_child_nodes(node):
        yield from docstrings(child, module, classes)


def is_module(dotted: str) -> bool:
    """Whether a kith module or package is at ``dotted``, read from the files (nothing imported)."""
    path = ROOT.joinpath(*dotted.split("."))
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def references_in(doc: Docstring, keys: dict[str, set[str]]) -> Iterator[Reference]:
    where = f"{doc.module} (line {doc.line})"
    for m in _ROLE.finditer(doc.text):
        name = m["name"]
        yield Reference(where, name) if name.split(".")[0] in PACKAGES else Reference(where, name, doc.scopes)
    for m in _BACKTICKED.finditer(doc.text):
        name = m["name"]
        first, second = name.split(".")[:2]
        if first in PACKAGES and (second not in keys.get(first, set()) or is_module(f"{first}.{second}")):
            yield Reference(where, name)


def all_references() -> list[Reference]:
    keys = config_keys((ROOT / "config.example.toml").read_text(encoding="utf-8"))
    found: list[Reference] = []
    for path, module in source_files():
        for doc in docstrings(ast.parse(path.read_text(encoding="utf-8")), module):
            found.extend(references_in(doc, keys))
    return found


def _set_by_its_methods(cls: type, name: str) -> bool:
    """Whether a class (or a base) assigns ``self.<name>``: an attribute that exists on its instances only."""
    assigned = re.compile(rf"\bself\.{re.escape(name)}\s*(?::[^=\n]+)?=[^=]")
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] not in PACKAGES:
            continue
        try:
            source = inspect.getsource(klass)
        except (OSError, TypeError):
            continue
        if assigned.search(source):
            return True
    return False


def _attribute(owner: object, name: str) -> tuple[bool, object]:
    if hasattr(owner, name):
        return True, getattr(owner, name)
    if isinstance(owner, type):
        if dataclasses.is_dataclass(owner) and name in {f.name for f in dataclasses.fields(owner)}:
            return True, None
        if any(name in getattr(klass, "__annotations__", {}) for klass in owner.__mro__):
            return True, None
        if _set_by_its_methods(owner, name):
            return True, None
    return False, None


def resolves(name: str) -> bool:
    """Import the longest module prefix of ``name``, then find the rest on it attribute by attribute."""
    parts = name.split(".")
    for cut in range(len(parts), 0, -1):
        prefix = ".".join(parts[:cut])
        try:
            owner: object = importlib.import_module(prefix)
        except ModuleNotFoundError as exc:
            if exc.name is not None and prefix.startswith(exc.name):
                continue  # no such module: a shorter prefix may be one
            raise
        for part in parts[cut:]:
            if owner is None:
                return True  # a field or an attribute set by a method: nothing below it to check
            found, owner = _attribute(owner, part)
            if not found:
                return False
        return True
    return False


def unresolved(references: list[Reference]) -> list[str]:
    return [f"{r.where}: {r.name}" for r in references
            if not any(resolves(f"{scope}.{r.name}" if scope else r.name) for scope in r.scopes)]


def test_every_kith_name_in_a_docstring_resolves() -> None:
    references = all_references()
    assert len(references) > 300, "the scan found few names: it is not looking"
    stale = unresolved(references)
    assert not stale, "docstrings name what does not exist:\n" + "\n".join(stale)


# As if written in a method of conversation.router.Router.
_IN_A_METHOD = ("conversation.router.Router", "conversation.router")


@pytest.mark.parametrize("text", [
    ":class:`ground.types.NoSuchMessage`",
    ":mod:`memory.no_such_room`",
    "``conversation.router.Router.no_such_method``",
    ":attr:`ground.turns.Speaker.no_such_field`",
    ":meth:`no_such_method`",
    ":class:`NoSuchClass`",
])
def test_a_made_up_name_is_found(text: str) -> None:
    references = list(references_in(Docstring("conversation.router", 1, text, _IN_A_METHOD), keys={}))
    assert len(references) == 1 and unresolved(references)


@pytest.mark.parametrize("text", [
    ":class:`ground.types.InboundMessage`",
    ":meth:`~conversation.router.Router.take_turn`",
    "``ground.turns.Speaker.person``",  # a dataclass field
    ":attr:`conversation.router.Router.debouncer`",  # set by __init__
    ":meth:`take_turn`",  # the enclosing class's
    ":class:`Keeping`",  # imported into the module
])
def test_a_real_name_resolves(text: str) -> None:
    references = list(references_in(Docstring("conversation.router", 1, text, _IN_A_METHOD), keys={}))
    assert len(references) == 1 and not unresolved(references)


def test_a_made_up_name_in_a_module_that_is_also_a_settings_key_is_found() -> None:
    keys = config_keys("[memory]\ncapture = true\n")
    doc = Docstring("memory", 1, "``memory.capture.no_such_rule`` and ``memory.capture``", ("memory",))
    references = list(references_in(doc, keys))
    assert [r.name for r in references] == ["memory.capture.no_such_rule", "memory.capture"]
    assert unresolved(references) == ["memory (line 1): memory.capture.no_such_rule"]


def test_a_settings_key_is_not_a_name() -> None:
    keys = config_keys("[memory]\nembedder = \"onnx\"\n# [policy.telegram]\n# dm = \"pairing\"\n")
    doc = Docstring("memory", 1, "``memory.embedder`` and ``policy.telegram``", ("memory",))
    assert list(references_in(doc, keys)) == []
