"""The demo: compile the reference graph on every backend, check it against NumPy,
and print timings side by side.

The reference graph is the one of the BYOC guide, ``((a + b) - c) * d``.

>>> fn = reference_graph((4, 4))
>>> [p.name_hint for p in fn.params]
['a', 'b', 'c', 'd']
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence

import numpy as np

from . import compiler
from ._version import __version__
from .codegen.registry import check_backend, registered_backends
from .errors import NbyocError
from .ir.builder import function, var
from .ir.nodes import Function
from .runtime.report_text import seconds_text


def reference_graph(shape: Sequence[int], dtype: str = "float32") -> Function:
    """``((a + b) - c) * d`` over four tensors of ``shape`` and ``dtype``."""
    a, b, c, d = (var(name, shape, dtype) for name in "abcd")
    return function([a, b, c, d], ((a + b) - c) * d)


def numpy_reference(a, b, c, d):
    """What NumPy computes for the reference graph."""
    return ((a + b) - c) * d


def median_seconds(
    fn: Callable, args: Sequence, min_batch_seconds: float = 0.002, batches: int = 7
):
    """Median time of one ``fn(*args)`` call, over batches long enough to time reliably."""
    fn(*args)  # warm up
    loops = 1
    while True:
        start = time.perf_counter()
        for _ in range(loops):
            fn(*args)
        if time.perf_counter() - start >= min_batch_seconds or loops >= 1 << 20:
            break
        loops *= 2
    samples = []
    for _ in range(batches):
        start = time.perf_counter()
        for _ in range(loops):
            fn(*args)
        samples.append((time.perf_counter() - start) / loops)
    return statistics.median(samples)


#: Where the interesting part of each backend's generated code starts (a line beginning
#: with this text); other backends show their first lines.
EXCERPT_STARTS = {"csource": "CSOURCE_BINARY_OP_2D(", "llvm": "    # stage"}
EXCERPT_LINES = 18


def code_excerpt(backend: str, source: str, lines: int = EXCERPT_LINES) -> list[str]:
    r"""A few lines of generated code, from where the backend's own work starts.

    >>> code_excerpt("other", "a\nb\nc", lines=2)
    ['a', 'b', '(lines 1-2 of 3)']
    """
    all_lines = source.splitlines()
    marker = EXCERPT_STARTS.get(backend)
    first = next((i for i, line in enumerate(all_lines) if marker and line.startswith(marker)), 0)
    shown = all_lines[first : first + lines]
    return [*shown, f"(lines {first + 1}-{first + len(shown)} of {len(all_lines)})"]


def _show_backend(backend: str, fn, out) -> None:
    out(f"--- {backend}: the partitioned module ---")
    out(str(fn.module))
    sources = {name: text for name, text in fn.sources.items() if text}
    for name, text in sources.items():
        out(f"--- {backend}: generated code of @{name} ---")
        for line in code_excerpt(backend, text):
            out("    " + line)
    if not sources:
        out(f"--- {backend}: no generated code (the NumPy host executor runs the graph) ---")
    out("")


def run_demo(
    sizes: Sequence[int] = (10, 1024, 4096), backends: Sequence[str] | None = None, out=print
) -> int:
    """Compile the reference graph on every backend (showing progress, the partitioned
    module and some generated code), check each result against NumPy and time it;
    return 0 if every backend matched NumPy, 1 otherwise."""
    backends = [check_backend(b) for b in backends or registered_backends()]
    sizes = list(sizes)
    if not sizes or any(not isinstance(n, int) or n < 1 for n in sizes):
        raise NbyocError(f"the demo's sizes must be positive ints, got {sizes}")
    out(f"nbyoc {__version__} demo: the reference graph ((a + b) - c) * d, float32")
    out(str(reference_graph((sizes[0], sizes[0]))))
    out("")
    compiled = {}
    for step, backend in enumerate(backends, 1):
        out(f"[{step}/{len(backends)}] compiling for {backend}:", end="", flush=True)
        for n in sizes:
            start = time.perf_counter()
            compiled[backend, n] = compiler.compile(reference_graph((n, n)), backend=backend)
            out(f" {n}x{n} {seconds_text(time.perf_counter() - start)},", end="", flush=True)
        out(" done")
    out("")
    for backend in backends:
        _show_backend(backend, compiled[backend, sizes[0]], out)
    header = (
        f"{'shape':>12}  {'backend':<12} {'check':<8} {'nbyoc':>10} {'numpy':>10} "
        f"{'numpy/nbyoc':>12}"
    )
    out(header)
    out("-" * len(header))
    failures = 0
    rng = np.random.default_rng(0)
    for n in sizes:
        args = [rng.standard_normal((n, n)).astype(np.float32) for _ in range(4)]
        expected = numpy_reference(*args)
        numpy_time = median_seconds(numpy_reference, args)
        for backend in backends:
            fn = compiled[backend, n]
            ok = np.allclose(fn(*args), expected, rtol=1e-6, atol=1e-6)
            failures += not ok
            nbyoc_time = median_seconds(fn, args)
            out(
                f"{f'{n}x{n}':>12}  {backend:<12} {'ok' if ok else 'MISMATCH':<8} "
                f"{seconds_text(nbyoc_time):>10} {seconds_text(numpy_time):>10} "
                f"{numpy_time / nbyoc_time:>11.2f}x"
            )
    out("")
    out("numpy/nbyoc above 1 means nbyoc is faster; medians of 7 timed batches.")
    out("Full benchmarks, from the repository: python bench/report.py (see the README)")
    return 1 if failures else 0
