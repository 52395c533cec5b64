"""Starting Numba's worker threads: on TBB where it is installed, else on OpenMP told
to give the cores back soon after a kernel.

**TBB first.** Numba tries its TBB threading layer before OpenMP, but the ``tbb``
wheel puts ``libtbb.so.12`` in ``<prefix>/lib``, which the dynamic loader does not
search, so Numba quietly fell back to OpenMP. :func:`start_threads` loads the
wheel's library first (:func:`load_tbb`), and Numba's TBB layer then finds it. On
this project's 2-core VM (AMD EPYC znver4, firecracker), an empty parallel loop
costs 2.7 us back to back on TBB against 45-57 us on OpenMP with passive waiting,
and a model's calls, dozens of parallel loops each, got faster: a mel spectrogram
0.65 -> 0.57 ms, a text-angle classifier 1.35 -> 1.02 ms, a layout detector
4.96 -> 3.05 ms, a text detector 11.1 -> 7.0 ms. A NumPy matmul right after a
kernel ran at its own speed (TBB's idle workers sleep after a short spin), and
TBB is the layer Numba calls safe across ``fork``. ``NUMBA_THREADING_LAYER=omp``
(or ``workqueue``) keeps Numba off TBB; nothing is loaded then.

**OpenMP otherwise.** Numba's OpenMP workers wait for the next parallel loop by
spinning (300,000 iterations by default: milliseconds) before they sleep. Between
two kernels the host may run NumPy, and a spinning worker takes a core from it: on
the VM above a 256x256 BLAS matmul right after a tiny parallel kernel took 8.0 ms
instead of 0.19 ms, and a 1M-element ``np.exp`` 1.95 ms instead of 0.47 ms with a
30,000-iteration spin. Short spins are no cure there: with 3,000 iterations every
parallel loop cost 154 us to start, the workers being woken from a half-asleep
state. Sleeping at once (``OMP_WAIT_POLICY=passive``) leaves NumPy and BLAS
undisturbed: the robust choice, never catastrophic (on another VM it cost 18 us a
loop against 6.9 us).

On Intel, a short spin is the better choice: on this project's VM when it lands
on an Intel Xeon (Emerald Rapids), a worker waking from sleep cost every call
tens of microseconds at each end of its parallel loop (softmax 1024x1024:
0.29 ms a call with passive waiting, 0.23 ms with ``GOMP_SPINCOUNT=3000``, as
fast as never sleeping; a 512x512 layer norm 0.09 -> 0.03 ms; softmax
2048x2048 0.86 -> 0.80 ms), while a NumPy matmul or ``np.exp`` right after a
kernel ran no slower (0.32-0.37 ms against 0.35-0.37 ms alone; a worker that
never sleeps made that matmul 4.1 ms). So on Intel OpenMP workers spin
``SPIN_COUNT`` times before sleeping; on every other CPU (the AMD case above)
they sleep at once.

libgomp reads ``OMP_WAIT_POLICY`` and ``GOMP_SPINCOUNT`` once, when it is loaded,
and Numba loads it when it starts its threads. So :func:`start_threads` sets the
variable for that moment only, unless the user set either. It changes nothing if
Numba's threads already run. csource libraries built with OpenMP load the
system's libgomp (Numba's wheels carry their own copy) under
:func:`quiet_openmp`, which does the same for that copy.

>>> start_threads() >= 1
True
>>> threading_layer() in ("tbb", "omp", "workqueue")
True
"""

from __future__ import annotations

import ctypes
import functools
import importlib.metadata
import os
import threading
from contextlib import contextmanager

#: How an idle OpenMP worker waits where it does not spin (see the module docstring).
WAIT_POLICY = "passive"
#: How many times an idle worker spins before it sleeps, on the CPUs of SPIN_VENDORS.
SPIN_COUNT = 3000
SPIN_VENDORS = ("GenuineIntel",)
_USER_CHOICES = ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY")
#: The TBB library Numba's TBB layer links against (its soname), and the layers
#: Numba's ``NUMBA_THREADING_LAYER`` may name that try TBB.
TBB_LIBRARY = "libtbb.so.12"
_TRIES_TBB = ("default", "tbb", "safe", "threadsafe", "forksafe")
_LOCK = threading.Lock()
_started = False


def start_threads() -> int:
    """Start Numba's parallel threads (once): on TBB where the ``tbb`` wheel is
    installed (:func:`load_tbb`), else on OpenMP waiting as ``wait_environment`` says
    when idle unless the user chose how it waits; returns the number of threads."""
    import numba

    global _started
    with _LOCK:
        if not _started:
            _started = True
            load_tbb()
            with quiet_openmp():
                return numba.get_num_threads()  # loads the threading layer, which reads it
    return numba.get_num_threads()


def threading_layer() -> str:
    """The threading layer Numba's parallel kernels run on ("tbb", "omp" or
    "workqueue"), starting the threads if they are not running yet.

    >>> threading_layer() in ("tbb", "omp", "workqueue")
    True
    """
    import numba

    start_threads()  # Numba picks its layer when its threads start
    return numba.threading_layer()


def load_tbb() -> str | None:
    """Load the ``tbb`` wheel's ``libtbb.so.12`` (global symbols) so that Numba's TBB
    layer, which links against that name, finds it; the path loaded, or None where
    Numba is not to try TBB (``NUMBA_THREADING_LAYER``), its threads already run, the
    wheel is not installed, or the library does not load (then Numba uses OpenMP).

    >>> load_tbb() is None or load_tbb().endswith("libtbb.so.12")
    True
    """
    import numba
    from numba.np.ufunc import parallel

    if str(numba.config.THREADING_LAYER).lower() not in _TRIES_TBB or parallel._is_initialized:
        return None
    path = _tbb_library_path()
    if path is None:
        return None
    try:
        ctypes.CDLL(path, mode=ctypes.RTLD_GLOBAL)
    except OSError:
        return None
    return path


@functools.cache
def _tbb_library_path() -> str | None:
    """Where the ``tbb`` wheel put ``libtbb.so.12`` (``<prefix>/lib``, outside
    site-packages), from the wheel's own file list; None without the wheel."""
    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    for file in files:
        if file.name == TBB_LIBRARY:
            path = file.locate()
            if os.path.exists(path):
                return os.path.normpath(path)
    return None


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
