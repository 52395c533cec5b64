"""Starting Numba's worker threads so that they give the cores back at once.

Numba's OpenMP workers wait for the next parallel loop by spinning (300,000
iterations by default: milliseconds) before they sleep. Between two kernels the
host may run NumPy, and a spinning worker takes a core from it: on this
project's 2-core VM (AMD EPYC znver4, firecracker) a 256x256 BLAS matmul right
after a tiny parallel kernel took 8.0 ms instead of 0.19 ms, and a 1M-element
``np.exp`` 1.95 ms instead of 0.47 ms with a 30,000-iteration spin. Short spins
are no cure there: with 3,000 iterations (this module's earlier choice, tuned on
another VM) every parallel loop cost 154 us to start, the workers being woken
from a half-asleep state. Sleeping at once (``OMP_WAIT_POLICY=passive``) costs
10 us per parallel loop and leaves NumPy and BLAS undisturbed: the robust choice,
never catastrophic on either machine (on the earlier VM it cost 18 us against
6.9 us).

libgomp reads ``OMP_WAIT_POLICY`` once, when it is loaded, and Numba loads it when
it starts its threads. So :func:`start_threads` sets the variable for that moment
only, unless the user set ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``. It changes
nothing if Numba's threads already run, or if its threading layer is not OpenMP.
csource libraries built with OpenMP load the system's libgomp (Numba's wheels carry
their own copy) under :func:`passive_openmp`, which does the same for that copy.

>>> start_threads() >= 1
True
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager

#: How an idle OpenMP worker waits (see the module docstring).
WAIT_POLICY = "passive"
_USER_CHOICES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
_LOCK = threading.Lock()
_started = False


def start_threads() -> int:
    """Start Numba's parallel threads (once), sleeping when idle unless the user chose
    how they wait; returns the number of threads."""
    import numba

    global _started
    with _LOCK:
        if not _started:
            _started = True
            with passive_openmp():
                return numba.get_num_threads()  # loads the threading layer, which reads it
    return numba.get_num_threads()


@contextmanager
def passive_openmp():
    """Within this block, an OpenMP runtime being loaded reads ``OMP_WAIT_POLICY=passive``
    (see the module docstring), unless the user chose how OpenMP threads wait.

    >>> with passive_openmp():
    ...     os.environ.get("OMP_WAIT_POLICY", WAIT_POLICY) == WAIT_POLICY
    True
    """
    if any(name in os.environ for name in _USER_CHOICES):
        yield
        return
    os.environ["OMP_WAIT_POLICY"] = WAIT_POLICY
    try:
        yield
    finally:
        del os.environ["OMP_WAIT_POLICY"]
