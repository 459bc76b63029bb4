"""Where kith keeps files it derives from the models it runs (built encoder graphs, lemma indexes): the user's
cache directory (``$XDG_CACHE_HOME/kith/encoders``, else ``~/.cache/kith/encoders``), private to its owner.
Nothing in it is precious: a missing or damaged file is built again."""

from __future__ import annotations

import os
from pathlib import Path


def model_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "kith" / "encoders"
