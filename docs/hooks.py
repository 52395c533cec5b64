"""The site's build hook (``hooks:`` in mkdocs.yml): a page whose generated regions the
code no longer gives (``docs/generated.py``) is a warning, so ``mkdocs build --strict``
fails on it, as ``tests/test_docs_facts.py`` does."""

from __future__ import annotations

import importlib.util
import logging
from pathlib import Path

log = logging.getLogger("mkdocs.plugins.nbyoc")

_GENERATED = Path(__file__).with_name("generated.py")
_spec = importlib.util.spec_from_file_location("nbyoc_docs_generated", _GENERATED)
generated = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generated)


def on_page_markdown(markdown: str, page, config, files) -> str:
    names = generated.stale(markdown)
    if names:
        log.warning(
            f"{page.file.src_uri}: generated text out of date ({', '.join(names)}); "
            "run python docs/generated.py"
        )
    return markdown
