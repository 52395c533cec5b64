"""Stage modules compiled in worker processes while this one compiles the kernel.

A region's stage modules (``codegen.llvm.stages``) are independent of one another
and of the kernel module, which holds only their types: each can be compiled by
any process, and Numba's disk cache then holds its machine code for all of them
(``runtime.llvm.kernels``). So on a machine of several cores, the stage modules a cold
compile lacks are sent to worker processes, the kernel module is compiled here
meanwhile, and each stage module is then loaded from the cache. A module no worker
has started when this process is free is taken back and compiled here; one a
worker failed on is compiled here too, which raises what it raises with this
process's traceback. Loading from the cache checks the files the worker wrote as
any other process's (``runtime.llvm.numba_cache``).

A model of several regions sends the stage modules of all of them at its first
region (``kernels.prefetch``): a module already sent is not sent again (``pending``),
and while this process waits for a worker's module it takes back the last one sent
that no worker has started, from a later region, and compiles it (``take_back``).

A worker is ``python -m nbyoc.runtime.llvm.compile_worker``, fed one JSON line per module
on its standard input, answering one per module on its standard output: it never
imports the user's ``__main__`` (as ``multiprocessing``'s spawn would, re-running a
script that compiles at its top level) and unpickles nothing. Workers start when a
compile first has enough to share (``MIN_MODULES``; starting one costs about a
second, importing NumPy and Numba) and end with this process. The environment
variable ``NBYOC_COMPILE_WORKERS`` sets how many (0: compile everything here); by
default, one fewer than the cores this process may run on.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import json
import os
import queue
import subprocess
import sys
import threading

#: Stage modules a compile must lack before workers are used: below, starting the
#: workers costs more than the compiles they share (a stage module takes 0.2-2 s).
MIN_MODULES = 3
#: A worker is replaced by a new one after compiling this many modules: Numba never
#: frees a compiled module's machine code (about 1 MiB each, ``runtime.llvm.kernels``).
MODULES_PER_WORKER = 200

_WORKERS: list[_Worker] = []
_TASKS: queue.Queue = queue.Queue()
_LOCK = threading.RLock()  # (a future cancelled under it calls ``_forget`` at once)
#: The futures of the modules sent and not yet compiled (or taken back), by key: a
#: later request for the same module waits for the same compile.
_PENDING: dict[str, concurrent.futures.Future] = {}
#: The tasks sent, in order, with their futures: where ``take_back`` looks, from the end.
_SENT: list[tuple[dict, concurrent.futures.Future]] = []


def worker_count() -> int:
    """How many worker processes compile stage modules (``NBYOC_COMPILE_WORKERS``, by
    default the usable cores but one).

    >>> worker_count() >= 0
    True
    """
    configured = os.environ.get("NBYOC_COMPILE_WORKERS", "").strip()
    if configured:
        try:
            return max(0, int(configured))
        except ValueError:
            raise ValueError(
                f"NBYOC_COMPILE_WORKERS must be a whole number, not {configured!r}"
            ) from None
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # (not on every platform)
        cores = os.cpu_count() or 1
    return cores - 1


def submit(tasks: list[dict]) -> dict[str, concurrent.futures.Future]:
    """Futures of the ``tasks`` (each the JSON fields ``compile_worker`` reads, with
    the module's ``key``) compiled by the workers, by key: those already sent (``pending``)
    and the others, sent now unless they are too few to share or no worker runs. A
    future not yet running may be cancelled (``cancel()``), to compile that module here
    instead."""
    futures = pending([task["key"] for task in tasks])
    new = [task for task in tasks if task["key"] not in futures]
    if len(new) < MIN_MODULES or not _start_workers():
        return futures
    with _LOCK:
        _SENT[:] = [(t, f) for t, f in _SENT if not f.done()]
        for task in new:
            key = task["key"]
            futures[key] = _PENDING[key] = future = concurrent.futures.Future()
            future.add_done_callback(lambda done, key=key: _forget(key, done))
            _SENT.append((task, future))
            _TASKS.put((task, future))
    return futures


def pending(keys: list[str]) -> dict[str, concurrent.futures.Future]:
    """The futures of the modules ``keys`` already sent and not yet compiled, by key.

    >>> pending(["a module never sent"])
    {}
    """
    with _LOCK:
        return {key: _PENDING[key] for key in keys if key in _PENDING}


def take_back() -> dict | None:
    """The task sent last that no worker has started, taken back (its future cancelled)
    for this process to compile while it would otherwise wait; None if there is none
    (``tests/runtime/test_compile_workers.py`` takes some back)."""
    with _LOCK:
        while _SENT:
            task, future = _SENT.pop()
            if not future.done() and future.cancel():  # (cancel() is True once cancelled)
                return task
    return None


def _forget(key: str, future: concurrent.futures.Future) -> None:
    with _LOCK:
        if _PENDING.get(key) is future:
            del _PENDING[key]


def _start_workers() -> bool:
    """Start the workers if none is running; whether any runs."""
    with _LOCK:
        _WORKERS[:] = [w for w in _WORKERS if w.alive()]
        if not _WORKERS:
            for _ in range(worker_count()):
                try:
                    _WORKERS.append(_Worker())
                except OSError:  # (no process could start: compile here)
                    break
        return bool(_WORKERS)


class _Worker:
    """One worker process, and the thread here that hands it tasks one at a time."""

    def __init__(self):
        self.process = self._start()
        threading.Thread(target=self._serve, daemon=True, name="nbyoc-compile-worker").start()

    @staticmethod
    def _start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "nbyoc.runtime.llvm.compile_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,  # (a failure is compiled again here, and shown)
            text=True,
        )

    def alive(self) -> bool:
        return self.process.poll() is None

    def _serve(self) -> None:
        compiled = 0
        while True:
            task, future = _TASKS.get()
            if not future.set_running_or_notify_cancel():
                continue  # (taken back: compiled by the process that wanted it)
            if compiled == MODULES_PER_WORKER:
                self.stop()
                try:
                    self.process, compiled = self._start(), 0
                except OSError as error:  # (what is still queued is taken back)
                    future.set_exception(RuntimeError(f"nbyoc: no compile worker: {error}"))
                    return
            compiled += 1
            try:
                self.process.stdin.write(json.dumps(task) + "\n")
                self.process.stdin.flush()
                answer = json.loads(self.process.stdout.readline() or "null")
            except (OSError, ValueError) as error:
                future.set_exception(RuntimeError(f"nbyoc: a compile worker failed: {error}"))
                self.process.kill()
                return
            if isinstance(answer, dict) and answer.get("key") == task["key"] and answer.get("ok"):
                future.set_result(None)
            else:
                error = answer.get("error") if isinstance(answer, dict) else "no answer"
                future.set_exception(RuntimeError(f"nbyoc: a compile worker failed: {error}"))

    def stop(self) -> None:
        with contextlib.suppress(OSError):
            self.process.stdin.close()  # (its loop ends at the end of its input)


@atexit.register
def _stop_workers() -> None:
    for worker in _WORKERS:
        worker.stop()
