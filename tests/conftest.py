"""Test-session set-up: an empty, private nbyoc cache, so tests neither depend on
nor pollute the user's cache (tests that need a warm cache warm it themselves); and
every llvm kernel the suite lowers has its buffer plan checked (``buffer_plan``)."""

import os
import shutil
import tempfile

_CACHE = tempfile.mkdtemp(prefix="nbyoc-test-cache-")


def pytest_configure(config):
    os.environ["NBYOC_CACHE_DIR"] = _CACHE
    os.environ.pop("NBYOC_CACHE", None)
    if config.getoption("--run-slow"):  # (before the test modules are imported: examples())
        os.environ["NBYOC_RUN_SLOW"] = "1"
    from .buffer_plan import install

    install()


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE, ignore_errors=True)


def pytest_addoption(parser):
    parser.addoption(
        "--run-slow",
        action="store_true",
        help="also run the tests marked slow (full dtype matrices); CI runs a fast slice",
    )


def pytest_collection_modifyitems(config, items):
    import pytest

    if config.getoption("--run-slow") or os.environ.get("NBYOC_RUN_SLOW") == "1":
        return
    skip = pytest.mark.skip(reason="slow: run with --run-slow (or NBYOC_RUN_SLOW=1)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
