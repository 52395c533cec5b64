"""Progress of long compiles on stderr, through tqdm (``pip install 'nbyoc[progress]'``).

A bar appears only once a compile has taken half a second, only when stderr is a
terminal, and counts the regions (external functions) built. ``NBYOC_PROGRESS=0``
turns it off; ``NBYOC_PROGRESS=1`` shows it even when stderr is not a terminal (and
says what to install when tqdm is missing). Without tqdm and without
``NBYOC_PROGRESS=1`` there is simply no bar.

>>> with progress(3, "compiling") as bar:
...     for _ in range(3):
...         bar.update()
"""

from __future__ import annotations

import contextlib
import os
import sys
import warnings

#: Seconds a compile runs before its bar appears: shorter ones never show one.
DELAY = 0.5


class _Silent:
    def update(self, n: int = 1) -> None:
        pass


def setting() -> str:
    """``NBYOC_PROGRESS`` as "off", "on" or "auto" (a bar when stderr is a terminal)."""
    value = os.environ.get("NBYOC_PROGRESS", "").strip().lower()
    if value in ("0", "false", "off", "no"):
        return "off"
    return "on" if value in ("1", "true", "on", "yes") else "auto"


def wanted() -> bool:
    """Whether progress should be shown."""
    mode = setting()
    if mode != "auto":
        return mode == "on"
    return sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


@contextlib.contextmanager
def progress(total: int, description: str):
    """A bar counting ``total`` steps on stderr (see the module docstring); ``.update()``
    after each step."""
    if total < 1 or not wanted():
        yield _Silent()
        return
    try:
        from tqdm import tqdm
    except ImportError:
        if setting() == "on":
            warnings.warn(
                "NBYOC_PROGRESS=1 needs tqdm: pip install 'nbyoc[progress]'", stacklevel=3
            )
        yield _Silent()
        return
    bar = tqdm(
        total=total, desc=f"nbyoc: {description}", unit="region", file=sys.stderr,
        delay=DELAY, leave=False, dynamic_ncols=True,
    )  # fmt: skip
    try:
        yield bar
    finally:
        bar.close()
