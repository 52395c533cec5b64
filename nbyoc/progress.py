"""Progress of long compiles on stderr: a bar (through tqdm, ``pip install
'nbyoc[progress]'``) or, without one, a single line when a compile is slow.

The bar counts compiled units: a compile's regions (external functions), each
refined by its backend into the units it compiles (the llvm backend: every Numba
function of its kernel; csource: its C file; examplejson: the kernels of its
ops), so that it moves while one region takes a minute. It shows the time
elapsed and what is compiling, appears only once a compile has taken ``DELAY``
seconds, and only when stderr is a terminal. Without a bar (stderr is not a
terminal, or tqdm is missing), a compile still working ``NOTICE_AFTER`` seconds
after its first real compile (not a load from the cache) says so once on stderr.
``NBYOC_PROGRESS=0`` turns both off; ``NBYOC_PROGRESS=1`` shows the bar even when
stderr is not a terminal (and says what to install when tqdm is missing).

A backend reports through ``progress`` too: inside a compile, a nested
``progress(n, ...)`` turns the region being built into ``n`` units, and
``update()`` counts them; the codegen never sees tqdm.

>>> with progress(2, "compiling") as bar:          # two regions
...     with bar.region("llvm_0"):
...         with progress(3, "llvm_0") as kernel:  # its backend compiles three units
...             for _ in range(3):
...                 kernel.update()
...     with bar.region("llvm_1"):                 # this one reports nothing: one unit
...         pass
...     (bar.done, bar.total)
(4, 4)
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import warnings
from collections.abc import Iterator

#: Seconds a compile runs before its bar appears: shorter ones never show one.
DELAY = 0.5
#: Seconds of real compiling (not loading from the cache) after which a compile with
#: no bar says, once, what it is doing. Tests set it to 0.
NOTICE_AFTER = 5.0
#: Seconds between redraws of a bar whose count does not move (its elapsed time does).
REDRAW = 1.0

#: The progress of the compile running in this thread, if any (``progress``).
_LOCAL = threading.local()


def setting() -> str:
    """``NBYOC_PROGRESS`` as "off", "on" or "auto" (a bar when stderr is a terminal)."""
    value = os.environ.get("NBYOC_PROGRESS", "").strip().lower()
    if value in ("0", "false", "off", "no"):
        return "off"
    return "on" if value in ("1", "true", "on", "yes") else "auto"


def wanted() -> bool:
    """Whether a bar should be shown."""
    mode = setting()
    if mode != "auto":
        return mode == "on"
    return sys.stderr is not None and hasattr(sys.stderr, "isatty") and sys.stderr.isatty()


@contextlib.contextmanager
def progress(total: int, description: str, *, notice: str | None = None) -> Iterator[Progress]:
    """The progress of ``total`` units of work on stderr (see the module docstring);
    ``.update()`` after each unit.

    Outside a compile this starts one (a bar, or the notice of a slow compile).
    Inside one, it reports a backend's own units: the region being built
    (``Progress.region``) becomes ``total`` units. Inside another backend's units
    (``examplejson`` counting its ops, each compiled by the llvm kernel cache), it
    counts nothing more, so each unit is counted once. ``notice`` says what compiles,
    for the line a slow compile prints (``description`` by default).

    >>> with progress(2, "llvm_0", notice="the llvm kernel of 'llvm_0'") as bar:
    ...     bar.describe("stage0 (1/2)")
    ...     bar.update(2)
    """
    outer = getattr(_LOCAL, "progress", None)
    if outer is not None:
        with outer.scope(total, description, notice):
            yield outer
        return
    if setting() == "off":
        yield Progress(total, description, notice, bar=None, notices=False)
        return
    bar = _bar(total, description)
    root = Progress(total, description, notice, bar=bar, notices=bar is None)
    _LOCAL.progress = root
    try:
        yield root
    finally:
        _LOCAL.progress = None
        root.close()


def _bar(total: int, description: str):
    """A tqdm bar on stderr, or None when none is wanted or tqdm is missing."""
    if not wanted():
        return None
    try:
        from tqdm import tqdm
    except ImportError:
        if setting() == "on":
            warnings.warn(
                "NBYOC_PROGRESS=1 needs tqdm: pip install 'nbyoc[progress]'", stacklevel=4
            )
        return None
    # (no rate nor time remaining: one unit may take a minute and the next a millisecond)
    return tqdm(
        total=total, desc=f"nbyoc: {description}", file=sys.stderr, delay=DELAY,
        leave=False, dynamic_ncols=True,
        bar_format="{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}]",
    )  # fmt: skip


class _Scope:
    """Units counted together: a compile, a region, a backend's units within one.

    A region starts as one unit of its compile (already in the compile's total), until
    a backend reports its own units in it. A quiet scope counts nothing (it is inside
    another backend's units)."""

    __slots__ = ("coarse", "description", "detail", "done", "notice", "quiet", "region", "total")

    def __init__(self, total, description, notice=None, region=False, quiet=False):
        self.total, self.done, self.description = total, 0, description
        self.notice, self.region, self.quiet, self.detail = notice, region, quiet, ""
        self.coarse = region  # (still the one unit it counts for until refined)


class Progress:
    """The progress of one compile in one thread: units done and expected, what is
    compiling, and when real compiling started (``working``). Made by ``progress``."""

    def __init__(self, total, description, notice, *, bar, notices: bool):
        self._scopes = [_Scope(total, description, notice)]
        self._bar, self._notices = bar, notices
        self._stream = sys.stderr  # (read now: a test's capture may be gone later)
        self._start = time.monotonic()
        self._said = threading.Event()
        self._finished = threading.Event()
        self._timer: threading.Timer | None = None
        if bar is not None:
            threading.Thread(target=self._redraw, daemon=True, name="nbyoc-progress").start()

    @property
    def total(self) -> int:
        """Units expected in the whole compile (grows as backends report theirs)."""
        return self._scopes[0].total

    @property
    def done(self) -> int:
        """Units compiled so far."""
        return self._scopes[0].done

    def update(self, n: int = 1) -> None:
        """Count ``n`` units of the current scope done (never more than it expects)."""
        top = self._scopes[-1]
        n = min(n, top.total - top.done)
        if top.quiet or n <= 0:
            return
        for scope in self._scopes:
            scope.done += n
        if self._bar is not None:
            self._bar.update(n)

    def add_total(self, n: int) -> None:
        """Expect ``n`` more units in the current scope; in a region nothing had refined
        yet, they replace the one unit it counted for."""
        top = self._scopes[-1]
        if top.quiet:
            return
        grow = n
        if top.coarse:
            grow = n - (top.total - top.done)
            top.coarse = False
        for scope in self._scopes:
            scope.total += grow
        if self._bar is not None:
            self._bar.total = self.total
            self._redraw_now()

    def describe(self, detail: str) -> None:
        """Say what the current scope is compiling now, after its description in the
        bar (e.g. ``"stage12 (13/41)"``)."""
        top = self._scopes[-1]
        if top.quiet:
            return
        top.detail = detail
        self._describe()

    def working(self) -> None:
        """Real compiling has started (not a load from the cache): a compile without a
        bar that is still running ``NOTICE_AFTER`` seconds from now says so once."""
        if not self._notices or self._timer is not None or self._said.is_set():
            return
        if NOTICE_AFTER <= 0:
            self._say()
            return
        self._timer = threading.Timer(NOTICE_AFTER, self._say)
        self._timer.daemon = True
        self._timer.start()

    @contextlib.contextmanager
    def region(self, description: str):
        """One unit of the current scope (a region of the compile) unless a backend
        reports units of its own in it; whatever it expected counts as done when it ends
        (a kernel loaded from the cache compiles nothing)."""
        with self._pushed(_Scope(1, description, region=True)):
            yield self

    @contextlib.contextmanager
    def scope(self, total: int, description: str, notice: str | None = None):
        """A backend's ``total`` units inside the current scope (what a nested
        ``progress`` makes): they refine a region, and count nothing anywhere else."""
        top = self._scopes[-1]
        quiet = top.quiet or not top.region
        if not quiet:
            self.add_total(total)
        with self._pushed(_Scope(total, description, notice, quiet=quiet)):
            yield self

    @contextlib.contextmanager
    def _pushed(self, scope: _Scope):
        self._scopes.append(scope)
        self._describe()
        try:
            yield
        finally:
            self.update(scope.total - scope.done)
            self._scopes.pop()
            self._describe()

    def close(self) -> None:
        """Stop the timers and clear the bar."""
        self._finished.set()
        if self._timer is not None:
            self._timer.cancel()
        if self._bar is not None:
            self._bar.close()

    def _counting(self) -> _Scope:
        """The innermost scope that is not quiet: what the bar and the notice name."""
        # (a copy: the notice's timer thread reads it while the compile pushes and pops)
        return next(s for s in reversed(list(self._scopes)) if not s.quiet)

    def _describe(self) -> None:
        if self._bar is None:
            return
        scope = self._counting()
        detail = f" {scope.detail}" if scope.detail else ""
        self._bar.set_description_str(f"nbyoc: {scope.description}{detail}", refresh=False)
        self._redraw_now()

    def _redraw_now(self) -> None:
        """Redraw the bar, unless it has not appeared yet (tqdm's ``delay``)."""
        if time.monotonic() - self._start >= DELAY:
            self._bar.refresh()

    def _redraw(self) -> None:
        """Keep the elapsed time moving while one unit takes long."""
        while not self._finished.wait(REDRAW):
            with contextlib.suppress(Exception):  # (closed meanwhile)
                self._redraw_now()

    def _say(self) -> None:
        """Print the notice of a slow compile, once, unless the compile has ended."""
        if self._finished.is_set() or self._said.is_set():
            return
        self._said.set()
        scope = self._counting()
        line = f"nbyoc: compiling {scope.notice or scope.description}; {_cache_hint()}"
        with contextlib.suppress(Exception):  # (a closed stream: nothing to tell)
            print(f"{line} (NBYOC_PROGRESS=0 turns this message off)", file=self._stream)
            self._stream.flush()


def _cache_hint() -> str:
    """What a later compile of the same model costs: where the compiled code is kept."""
    from . import cache

    if not cache.enabled():
        return (
            "the first compile of a model takes seconds, and the disk cache "
            "is off (NBYOC_CACHE=0), so each new process compiles it again"
        )
    return (
        "the first compile of a model takes seconds; later ones load it "
        f"from the cache in {cache.cache_dir()}"
    )
