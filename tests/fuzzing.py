"""The fuzz harness: runs a reader of untrusted input on many cases, each in a worker
process, and reports any case that ends other than with a result or an ``NbyocError``,
or that takes more than its time or memory budget.

A worker imports nbyoc, reads one warm-up case (its imports and first compiles are not
the cases' cost), caps its address space (``RLIMIT_AS``: a memory bomb raises
MemoryError instead of exhausting the machine), then runs the cases in turn, telling
the parent when each starts and how it ended: its outcome, its time, and its peak
memory (the growth of the peak resident set, reset before each case through
``/proc/self/clear_refs``). A case that outlives its time budget or kills the worker is
recorded and the worker restarted after it. Outcomes:

- ``ok`` (the input was read), ``refused`` (an ``NbyocError``): both fine;
- ``escape``: any other exception; ``hidden``: an ``NbyocError`` raised while handling
  a ``MemoryError`` or ``RecursionError`` (a bomb caught by a catch-all);
- ``slow``, ``heavy``: over the time or memory budget; ``timeout``, ``crash``.

The workers run with low limits (``WORKER_LIMITS``), so the memory budget is tight.

Print the figures of a reader's cases: ``python -m tests.fuzzing <test module>``
(e.g. ``tests.ir.test_parser_fuzz``; it must define ``cases(slow)`` and ``READER``).
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: nbyoc's limits in the workers: low, so that a bomb shows in the memory budget.
WORKER_LIMITS = {"NBYOC_LIMIT_FOLDED_BYTES": "16M", "NBYOC_LIMIT_MEMBER_BYTES": "64M"}
#: The address space a worker may add after its warm-up.
ADDRESS_SPACE = 3 << 30
#: Time for a worker to start: import nbyoc and read the warm-up case.
STARTUP_SECONDS = 180.0
FAILURES = ("escape", "hidden", "slow", "heavy", "timeout", "crash")


@dataclass(frozen=True)
class Budget:
    """Per case: ``seconds`` plus ``seconds_per_kib`` of input, and ``memory_mib`` of
    peak memory growth. The time is generous for a shared 2-core machine."""

    seconds: float = 10.0
    seconds_per_kib: float = 0.1
    memory_mib: float = 512.0

    def time(self, size: int) -> float:
        return self.seconds + self.seconds_per_kib * size / 1024


@dataclass
class Report:
    reader: str
    cases: list[tuple[str, bytes]]
    outcomes: dict[int, dict] = field(default_factory=dict)

    @property
    def counts(self) -> Counter:
        return Counter(o["kind"] for o in self.outcomes.values())

    @property
    def failures(self) -> list[tuple[int, dict]]:
        return sorted((i, o) for i, o in self.outcomes.items() if o["kind"] in FAILURES)

    @property
    def distinct(self) -> dict[str, int]:
        """Failures grouped by kind, exception type and the frame that raised it."""
        found: Counter = Counter()
        for _, o in self.failures:
            exception, _, frames = o["detail"].partition(" at ")
            found[f"{o['kind']}: {exception.split(':')[0]} at {frames.split(' <- ')[0]}"] += 1
        return dict(found)

    def describe(self, limit: int = 8) -> str:
        lines = [f"{self.reader}: {len(self.outcomes)} cases, {dict(self.counts)}"]
        lines += [f"  {count} x {what}" for what, count in self.distinct.items()]
        for i, o in self.failures[:limit]:
            lines.append(f"- case {i} ({self.cases[i][0]}): {o['kind']}: {o['detail']}")
        return "\n".join(lines)

    def keep_failures(self, directory: Path) -> None:
        """Write each failing case's input to ``directory``, to reproduce it."""
        directory.mkdir(parents=True, exist_ok=True)
        for i, _ in self.failures:
            (directory / f"{self.reader.replace(':', '_')}-{i}.bin").write_bytes(self.cases[i][1])


def run(reader: str, cases: list[tuple[str, bytes]], budget: Budget = Budget(),
        warmup: bytes | None = None) -> Report:  # fmt: skip
    """Run ``reader`` (a name in ``READERS``) on every case; ``warmup`` (default: the
    first case) is read once first in each worker, outside the budget."""
    report = Report(reader, cases)
    with tempfile.TemporaryDirectory(prefix="nbyoc-fuzz-") as tmp:
        directory = Path(tmp)
        for i, (_, data) in enumerate(cases):
            (directory / f"{i}.bin").write_bytes(data)
        (directory / "warmup.bin").write_bytes(warmup if warmup is not None else cases[0][1])
        start = 0
        while start < len(cases):
            start = _run_worker(reader, directory, start, budget, report)
    return report


def assert_no_failures(cases: dict[str, list[tuple[str, bytes]]], directory: Path,
                       budget: Budget = Budget()) -> None:  # fmt: skip
    """Run each reader (a name in ``READERS``) on its cases and fail, describing every
    failure, if any case failed; the failing inputs are kept in ``directory``."""
    for reader, found in cases.items():
        report = run(reader, found, budget)
        report.keep_failures(directory)
        assert not report.failures, report.describe()


def _run_worker(reader: str, directory: Path, start: int, budget: Budget, report) -> int:
    """Run cases from ``start`` in one worker; the index to restart from."""
    env = {**os.environ, **WORKER_LIMITS, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1"}
    worker = subprocess.Popen(
        [sys.executable, "-m", "tests.fuzzing", "--worker", reader, str(directory), str(start)],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    lines: queue.Queue = queue.Queue()
    threading.Thread(target=lambda: [lines.put(x) for x in worker.stdout] + [lines.put(None)],
                     daemon=True).start()  # fmt: skip
    errors: list[str] = []
    threading.Thread(target=lambda: errors.extend(worker.stderr), daemon=True).start()
    current, deadline = None, time.monotonic() + STARTUP_SECONDS
    try:
        while True:
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                line = "timeout"
            if line is None or line == "timeout":
                kind = "timeout" if line else "crash"
                if current is None:
                    raise RuntimeError(f"fuzz worker for {reader} failed to start ({kind}): "
                                       + "".join(errors[-20:]))  # fmt: skip
                detail = f"worker exit {worker.poll()}: {''.join(errors[-5:])[-500:]}"
                if kind == "timeout":
                    detail = f"still running after {budget.time(_size(directory, current)):.0f} s"
                report.outcomes[current] = {"kind": kind, "detail": detail}
                return current + 1
            event = json.loads(line)
            if event["event"] == "start":
                current = event["i"]
                # Twice the budget before the worker is stopped: a case a little over it
                # is reported as slow, with its time, rather than killed.
                deadline = time.monotonic() + 2 * budget.time(_size(directory, current))
            elif event["event"] == "done":
                _judge(event, budget, _size(directory, event["i"]))
                report.outcomes[event["i"]] = event
                current = None
                deadline = time.monotonic() + STARTUP_SECONDS
            elif event["event"] == "finished":
                return len(report.cases)
    finally:
        if worker.poll() is None:
            worker.kill()  # the worker this call started, by its own handle
        worker.wait()


def _size(directory: Path, i: int) -> int:
    return (directory / f"{i}.bin").stat().st_size


def _judge(event: dict, budget: Budget, size: int) -> None:
    if event["kind"] not in ("ok", "refused"):
        return
    if event["seconds"] > budget.time(size):
        event["kind"], event["detail"] = "slow", f"{event['seconds']:.1f} s: {event['detail']}"
    elif event["peak_mib"] is not None and event["peak_mib"] > budget.memory_mib:
        event["kind"], event["detail"] = "heavy", f"{event['peak_mib']:.0f} MiB: {event['detail']}"


def check_in_process(read, data: bytes, memory_mib: float = 64.0) -> None:
    """Read ``data`` with ``read`` in this process (for property tests, whose examples
    hypothesis shrinks): anything but an ``NbyocError`` escapes to the test, a bomb caught
    by a catch-all fails it, and so does a traced peak above ``memory_mib`` plus 40 times
    the input (what a text costs to read). Hypothesis's deadline bounds the time."""
    import tracemalloc

    from nbyoc.errors import NbyocError

    tracemalloc.start()
    try:
        read(data, Path(tempfile.gettempdir()))
    except NbyocError as e:
        assert not _bomb_inside(e), f"a MemoryError or RecursionError inside: {e}"
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert peak <= memory_mib * 2**20 + 40 * len(data), f"{peak / 2**20:.0f} MiB"


# -- the readers, as the workers call them ----------------------------------------------


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def read_parse(data: bytes, scratch: Path) -> None:
    import nbyoc

    f = nbyoc.parse(_text(data))
    str(f), nbyoc.to_json(f)


def read_from_json(data: bytes, scratch: Path) -> None:
    import nbyoc

    f = nbyoc.from_json(data)
    str(f), nbyoc.to_json(f)


def read_examplejson(data: bytes, scratch: Path) -> None:
    from nbyoc.codegen.examplejson.parse import parse_examplejson

    for func in parse_examplejson(_text(data)).values():
        str(func)


def read_module(type_key: str):
    def read(data: bytes, scratch: Path) -> None:
        import nbyoc

        path = scratch / "module.bin"
        path.write_bytes(data)
        module = nbyoc.load_module(path, type_key)
        symbols = getattr(module, "subgraphs", None) or [getattr(module, "symbol", None)]
        for symbol in symbols:
            module.get_function(symbol)

    return read


def read_onnx(data: bytes, scratch: Path) -> None:
    """``from_onnx`` on the bytes, with a size of 2 for each dynamic dim of an input
    (models name their batch dim), so the import goes past the inputs."""
    import onnx

    import nbyoc

    shapes = {}
    try:
        proto = onnx.load_from_string(data)
    except Exception:
        proto = None  # from_onnx says what is wrong
    if proto is not None:
        initializers = {t.name for t in proto.graph.initializer}
        for info in proto.graph.input:
            dims = info.type.tensor_type.shape.dim
            fixed = [d.HasField("dim_value") and d.dim_value > 0 for d in dims]
            shaped = info.name not in initializers and info.type.tensor_type.HasField("shape")
            if shaped and not all(fixed):
                shapes[info.name] = [d.dim_value if f else 2 for d, f in zip(dims, fixed)]
    f = nbyoc.from_onnx(data, shapes=shapes or None)
    str(f)


def read_archive(data: bytes, scratch: Path) -> None:
    import nbyoc

    path = scratch / "model.nbyoc"
    path.write_bytes(data)
    nbyoc.load(path)


READERS = {
    "parse": read_parse,
    "from_json": read_from_json,
    "examplejson": read_examplejson,
    "load_module:examplejson": read_module("examplejson"),
    "load_module:llvm": read_module("llvm"),
    "load_module:csource": read_module("csource"),
    "from_onnx": read_onnx,
    "load": read_archive,
}


# -- the worker ---------------------------------------------------------------------------


def _status(key: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def _reset_peak() -> bool:
    try:
        Path("/proc/self/clear_refs").write_text("5")
        return True
    except OSError:
        return False


def _bomb_inside(error: BaseException) -> bool:
    """True if ``error`` was raised while handling a MemoryError or RecursionError."""
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(error, (MemoryError, RecursionError)):
            return True
        error = error.__cause__ or error.__context__
    return False


def _outcome(read, data: bytes, scratch: Path) -> dict:
    from nbyoc.errors import NbyocError

    try:
        read(data, scratch)
        return {"kind": "ok", "detail": ""}
    except NbyocError as e:
        kind = "hidden" if _bomb_inside(e) else "refused"
        return {"kind": kind, "detail": f"{type(e).__name__}: {str(e)[:300]}"}
    except BaseException as e:  # what the fuzz test looks for: anything else escaping
        where = traceback.extract_tb(e.__traceback__)[-3:]
        frames = " <- ".join(f"{Path(f.filename).name}:{f.lineno}" for f in reversed(where))
        return {"kind": "escape", "detail": f"{type(e).__name__}: {str(e)[:200]} at {frames}"}


def worker(reader: str, directory: Path, start: int) -> None:
    import gc
    import resource
    import warnings

    warnings.simplefilter("ignore")
    # Events go to the parent through the original stdout; anything else printed (by
    # Python or by C code) goes to stderr, so it cannot garble them.
    events = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    read = READERS[reader]
    scratch = Path(tempfile.mkdtemp(prefix="case-", dir=directory))
    _outcome(read, (directory / "warmup.bin").read_bytes(), scratch)
    size = _status("VmSize")
    if size is not None:
        resource.setrlimit(resource.RLIMIT_AS, (size + ADDRESS_SPACE, resource.RLIM_INFINITY))

    def emit(event: dict) -> None:
        events.write(json.dumps(event) + "\n")
        events.flush()

    i = start
    while (directory / f"{i}.bin").exists():
        data = (directory / f"{i}.bin").read_bytes()
        gc.collect()
        emit({"event": "start", "i": i})
        measured = _reset_peak()
        before = _status("VmRSS")
        began = time.perf_counter()
        result = _outcome(read, data, scratch)
        seconds = time.perf_counter() - began
        peak = _status("VmHWM") if measured else None
        growth = None if peak is None or before is None else (peak - before) / 2**20
        emit({"event": "done", "i": i, "seconds": seconds, "peak_mib": growth, **result})
        i += 1
    emit({"event": "finished"})


def _figures(module_name: str) -> None:
    import importlib

    module = importlib.import_module(module_name)
    slow = "--slow" in sys.argv
    for reader, cases in module.cases(slow).items():
        began = time.monotonic()
        report = run(reader, cases, getattr(module, "BUDGET", Budget()))
        print(report.describe(limit=50), f"({time.monotonic() - began:.0f} s)")


if __name__ == "__main__":
    if sys.argv[1] == "--worker":
        worker(sys.argv[2], Path(sys.argv[3]), int(sys.argv[4]))
    else:
        _figures(sys.argv[1])
