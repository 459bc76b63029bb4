"""Builders, fakes and rigs that more than one test module uses.

They live here rather than in a test module so that no test module imports another: importing one
runs its module-level code, and a helper's home should not depend on which tests happen to use it.
"""

import pkgutil

import pytest

# Asserts in these modules (``valid_telegram``) report like a test's own: pytest rewrites them as it does a test
# module's. Named one by one, before any is imported; the package itself is already imported by now.
pytest.register_assert_rewrite(*(f"{__name__}.{module.name}" for module in pkgutil.iter_modules(__path__)))
