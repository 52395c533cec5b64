"""Test-session set-up: an empty, private nbyoc cache, so tests neither depend on
nor pollute the user's cache (tests that need a warm cache warm it themselves)."""

import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="nbyoc-test-cache-")


def pytest_configure(config):
    os.environ["NBYOC_CACHE_DIR"] = _CACHE
    os.environ.pop("NBYOC_CACHE", None)


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)
