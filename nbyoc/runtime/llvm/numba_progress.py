"""The Numba functions of a kernel module as the units of a compile's progress
(``nbyoc.progress``).

A region's kernel module defines its stage functions, helpers and the kernel, each
an ``@njit`` function, and Numba compiles them one by one as the module runs (the
lazily compiled ones inside the kernel's own compile). Numba's event API
(``numba.core.event``, kind ``"numba:compile"``) announces the start and end of
each compile, with its dispatcher, so each function of this module compiled here
counts as one unit; a function loaded from Numba's disk cache fires no event, and
is counted when the module has run. Functions of other modules compiled on the way
(nbyoc's runtime helpers, Numba's own overloads) are not counted.

>>> function_count('@njit(STAGE0, cache=True)\\ndef stage0(a):\\n    pass\\n'
...                '@njit(SIGNATURE)\\ndef kernel(a):\\n    stage0(a)\\n')
2
"""

from __future__ import annotations

import contextlib
import re
import threading

from numba.core import event

from ...progress import progress

#: A line decorating a function that Numba compiles.
_DECORATOR = re.compile(r"^@(?:numba\.)?njit\b", re.MULTILINE)


def function_count(source: str) -> int:
    """How many ``@njit`` functions the kernel module ``source`` defines."""
    return len(_DECORATOR.findall(source))


@contextlib.contextmanager
def reporting(sources: list[str], module_names: set[str], label: str):
    """Count the functions of the modules ``module_names`` (run from ``sources``) that
    Numba compiles in this thread, while the block runs, as units of the current
    compile's progress, described as ``label`` (a region's symbol). The block gets a
    function counting ``n`` more, compiled elsewhere (``compile_workers``)."""
    n = sum(map(function_count, sources))
    notice = f"the llvm kernel of {label!r} ({n} Numba function{'s' * (n != 1)})"
    with progress(n, label, notice=notice) as bar:
        listener = _Listener(bar, module_names, n)
        with event.install_listener("numba:compile", listener):
            yield listener.advance


class _Listener(event.Listener):
    """Counts the compiles of one module's functions in one thread (Numba broadcasts
    every thread's events to every listener)."""

    def __init__(self, bar, module_names: set[str], n: int):
        self.bar, self.module_names, self.n = bar, module_names, n
        self.thread = threading.get_ident()
        self.compiling: list[str] = []  # (the kernel compiles its lazy stages inside)
        self.compiled: set[str] = set()
        self.elsewhere = 0  # (compiled by worker processes: ``advance``)

    def advance(self, count: int) -> None:
        """``count`` functions of these modules compiled in another process."""
        self.elsewhere += count
        self.bar.update(count)

    def _function(self, ev) -> str | None:
        """The name of the function ``ev`` compiles, if it is one of this module's."""
        if threading.get_ident() != self.thread or not isinstance(ev.data, dict):
            return None
        func = getattr(ev.data.get("dispatcher"), "py_func", None)
        module = getattr(func, "__module__", None)
        if module not in self.module_names:
            return None
        return f"{module}.{func.__name__}"

    def on_start(self, ev) -> None:
        name = self._function(ev)
        if name is None:
            return
        self.bar.working()
        self.compiling.append(name)
        self._describe()

    def on_end(self, ev) -> None:
        name = self._function(ev)
        if name is None or not self.compiling:
            return
        self.compiling.pop()
        if name not in self.compiled:  # (a helper compiled for a second signature: once)
            self.compiled.add(name)
            self.bar.update()
        self._describe()

    def _describe(self) -> None:
        if self.compiling:
            position = min(len(self.compiled) + self.elsewhere + 1, self.n)
            function = self.compiling[-1].rsplit(".", 1)[-1]  # (a stage module's: "stage")
            self.bar.describe(f"{function} ({position}/{self.n})")
