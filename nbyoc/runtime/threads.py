"""Starting Numba's worker threads so that they give the cores back quickly.

After a parallel kernel, GNU OpenMP's workers spin, waiting for the next one
(300,000 iterations by default: milliseconds). When the host runs a BLAS matmul
next, as in a graph whose large matmul falls back to NumPy, the spinning thread
takes a core from BLAS: measured on this project's 2-core machine, the two-layer
MLP of ``bench/graphs.py`` took 16.0 ms on llvm against NumPy's 6.2 ms. Spinning
3000 iterations instead brought it to 6.1 ms and kept back-to-back launches as
cheap as before (6.9 us at 2**15 elements; sleeping at once, as
``OMP_WAIT_POLICY=passive`` does, costs 18 us there).

libgomp reads ``GOMP_SPINCOUNT`` once, when it is loaded, and Numba loads it when
it starts its threads. So :func:`start_threads` sets the variable for that moment
only, unless the user set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``. It changes
nothing if Numba's threads already run, or if its threading layer is not OpenMP.

>>> start_threads() >= 1
True
"""

from __future__ import annotations

import os
import threading

import numba

#: Iterations an idle OpenMP worker spins before it sleeps (see the module docstring).
SPIN_COUNT = "3000"
_USER_CHOICES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
_LOCK = threading.Lock()
_started = False


def start_threads() -> int:
    """Start Numba's parallel threads (once), with a short OpenMP spin unless the user
    chose one; returns the number of threads."""
    global _started
    with _LOCK:
        if not _started:
            _started = True
            if any(name in os.environ for name in _USER_CHOICES):
                return numba.get_num_threads()
            os.environ["GOMP_SPINCOUNT"] = SPIN_COUNT
            try:
                return numba.get_num_threads()  # loads the threading layer, which reads it
            finally:
                del os.environ["GOMP_SPINCOUNT"]
    return numba.get_num_threads()
