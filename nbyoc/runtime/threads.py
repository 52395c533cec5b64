"""Starting Numba's worker threads so that they give the cores back soon after a kernel.

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

On Intel, a short spin is the better choice: on this project's VM when it lands
on an Intel Xeon (Emerald Rapids), a worker waking from sleep cost every call
tens of microseconds at each end of its parallel loop (softmax 1024x1024:
0.29 ms a call with passive waiting, 0.23 ms with ``GOMP_SPINCOUNT=3000``, as
fast as never sleeping; a 512x512 layer norm 0.09 -> 0.03 ms; softmax
2048x2048 0.86 -> 0.80 ms), while a NumPy matmul or ``np.exp`` right after a
kernel ran no slower (0.32-0.37 ms against 0.35-0.37 ms alone; a worker that
never sleeps made that matmul 4.1 ms). So on Intel the workers spin
``SPIN_COUNT`` times before sleeping; on every other CPU (the AMD case above)
they sleep at once.

libgomp reads ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when it is loaded,
and Numba loads it when it starts its threads. So :func:`start_threads` sets the
variable for that moment only, unless the user set either. It changes nothing if
Numba's threads already run, or if its threading layer is not OpenMP. csource
libraries built with OpenMP load the system's libgomp (Numba's wheels carry their
own copy) under :func:`quiet_openmp`, which does the same for that copy.

>>> start_threads() >= 1
True
"""

from __future__ import annotations

import functools
import os
import threading
from contextlib import contextmanager

#: How an idle OpenMP worker waits where it does not spin (see the module docstring).
WAIT_POLICY = "passive"
#: How many times an idle worker spins before it sleeps, on the CPUs of SPIN_VENDORS.
SPIN_COUNT = 3000
SPIN_VENDORS = ("GenuineIntel",)
_USER_CHOICES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
_LOCK = threading.Lock()
_started = False


def start_threads() -> int:
    """Start Numba's parallel threads (once), waiting as ``wait_environment`` says
    when idle unless the user chose how they wait; returns the number of threads."""
    import numba

    global _started
    with _LOCK:
        if not _started:
            _started = True
            with quiet_openmp():
                return numba.get_num_threads()  # loads the threading layer, which reads it
    return numba.get_num_threads()


@functools.cache
def cpu_vendor() -> str:
    """The CPU's vendor as Linux names it ("GenuineIntel", "AuthenticAMD"), or "" where
    ``/proc/cpuinfo`` does not say (read once: every csource library load asks)."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as info:
            for line in info:
                if line.startswith("vendor_id"):
                    return line.partition(":")[2].strip()
    except OSError:
        pass
    return ""


def wait_environment() -> dict[str, str]:
    """The variables telling OpenMP how idle workers wait on this CPU (see the module
    docstring).

    >>> sorted(wait_environment()) in (["GOMP_SPINCOUNT"], ["OMP_WAIT_POLICY"])
    True
    """
    if cpu_vendor() in SPIN_VENDORS:
        return {"GOMP_SPINCOUNT": str(SPIN_COUNT)}
    return {"OMP_WAIT_POLICY": WAIT_POLICY}


@contextmanager
def quiet_openmp():
    """Within this block, an OpenMP runtime being loaded reads ``wait_environment()``
    (see the module docstring), unless the user chose how OpenMP threads wait.

    >>> with quiet_openmp():
    ...     any(os.environ.get(k) == v for k, v in wait_environment().items())
    True
    """
    if any(name in os.environ for name in _USER_CHOICES):
        yield
        return
    chosen = wait_environment()
    os.environ.update(chosen)
    try:
        yield
    finally:
        for name in chosen:
            del os.environ[name]
