"""Where the time goes: ``fn.profile(*arrays, repeat=...)`` times each region (an
external function, with its backend) and each op the host runs, per call.

One warm-up call first (it compiles a new binding of symbolic sizes, fills the
scratch pools and the caches), then ``repeat`` calls of the executable as a user
makes them, for the total, each followed by one call of its host plan with a timer
around every step (``HostFunction.instrumented``: the executable itself is not
touched). Each row is the median of its ``repeat`` times; its share is of the total;
its bytes moved are the sizes of the arrays it reads and writes in one call. What no
step accounts for (checking the arguments, handing values between steps, copying
results that are views) is the row ``(executor)``, so the shares add up to 100%.

A function with symbolic sizes is profiled in the build made for the arrays' sizes. A
control-flow op (``cond``, ``loop``) is one host-op row, its bodies' time included.

Inside a region: a backend that can run its parts one at a time (``Module.stage_times``;
llvm, for a region that runs as a program) times each part alone, ``repeat`` times, on
the region's arguments of the last call: ``Profile.stages``, one ``StageRow`` per part
(what it computes, its median seconds, its share of the total), slowest first. Alone,
a part waits for its threads at its end and finds nothing its predecessor left in
cache, so the parts' sum may exceed the region's row.

>>> import numpy as np, nbyoc
>>> x = nbyoc.var("x", (128, 128))
>>> fn = nbyoc.compile(nbyoc.function([x], (nbyoc.exp(x) * 2.0) @ x), "csource")
>>> p = fn.profile(np.ones((128, 128), np.float32), repeat=3)
>>> [(row.name, row.kind, row.backend, row.ops) for row in p.rows]  # doctest: +NORMALIZE_WHITESPACE
[('the result', 'host op', 'host', 'matmul'),
 ('@csource_0', 'region', 'csource', 'exp, multiply'),
 ('(executor)', 'executor', 'host', 'argument checks, handing values on, copies')]
>>> round(sum(row.share for row in p.rows), 6), p.rows[1].bytes_moved
(1.0, 131072)
>>> print(p)  # doctest: +SKIP
profile: median of 3 calls after a warm-up
what        backend  time/call   share  bytes moved  ops
the result  host        180 us   79.3%       197 kB  matmul
@csource_0  csource    39.2 us   17.3%       131 kB  exp, multiply
(executor)  host       7.77 us    3.4%               argument checks, handing values on, copies
total                   227 us  100.0%       328 kB
"""

from __future__ import annotations

import statistics
import time
from collections import Counter
from dataclasses import dataclass, field

from ..errors import NbyocError
from ..ir.nodes import Call, GlobalVar
from ..ir.op import Op
from ..ir.traversal import post_order
from .report_text import bytes_text, seconds_text, text_table

#: What the ``(executor)`` row stands for.
EXECUTOR_WORK = "argument checks, handing values on, copies"
#: The stages ``str(profile)`` lists (``Profile.stages`` holds them all).
STAGES_SHOWN = 10


@dataclass(frozen=True)
class ProfileRow:
    """One region, host op or host function of ``main`` (or the executor's own work).

    ``kind``: ``"region"`` (an external function), ``"host op"``, ``"host function"``
    (a function of the module the host runs) or ``"executor"``. ``ops``: the ops it runs
    (a region's counted, ``multiply x2``). ``seconds``: median time per call; ``share``:
    of the total; ``bytes_moved``: bytes of the arrays it reads and writes per call.
    """

    name: str
    kind: str
    backend: str
    ops: str
    seconds: float
    share: float
    bytes_moved: int


@dataclass(frozen=True)
class StageRow:
    """One stage inside a region, run alone (``Module.stage_times``): the ``region``'s
    row name, ``what`` it computes (its op and shapes, the epilogue it runs), its median
    ``seconds`` per call, and their ``share`` of the profile's total."""

    region: str
    what: str
    seconds: float
    share: float


@dataclass(frozen=True)
class Profile:
    """The result of ``Executable.profile``: ``rows`` (slowest first, the executor's
    row last), ``total`` (median seconds per call), ``repeat``, and ``sizes`` (the
    binding of symbolic sizes the arrays gave; empty for fixed shapes). ``str()`` is
    an aligned table; ``as_dict()`` the same as plain data (for JSON)."""

    rows: tuple[ProfileRow, ...]
    total: float
    repeat: int
    sizes: dict = field(default_factory=dict)
    stages: tuple[StageRow, ...] = ()

    def as_dict(self) -> dict:
        return {
            "total_seconds": self.total,
            "repeat": self.repeat,
            "sizes": dict(self.sizes),
            "rows": [row.__dict__.copy() for row in self.rows],
            "stages": [row.__dict__.copy() for row in self.stages],
        }

    def __str__(self) -> str:
        sizes = ", ".join(f"{k}={v}" for k, v in self.sizes.items())
        head = f"profile: median of {self.repeat} calls after a warm-up"
        head += f" (sizes {sizes})" if sizes else ""
        table = [
            [
                row.name,
                row.backend,
                seconds_text(row.seconds),
                f"{row.share:.1%}",
                bytes_text(row.bytes_moved) if row.kind != "executor" else "",
                row.ops,
            ]
            for row in self.rows
        ]
        moved = sum(row.bytes_moved for row in self.rows)
        table.append(["total", "", seconds_text(self.total), "100.0%", bytes_text(moved), ""])
        header = ["what", "backend", "time/call", "share", "bytes moved", "ops"]
        right = {"time/call", "share", "bytes moved"}
        text = head + "\n" + text_table(header, table, right)
        if self.stages:
            shown = self.stages[:STAGES_SHOWN]
            alone = seconds_text(sum(r.seconds for r in self.stages))
            text += (f"\ninside the regions, each stage run alone: the slowest {len(shown)} "
                     f"of {len(self.stages)} (all of them alone: {alone})\n")  # fmt: skip
            table = [[r.what, r.region, seconds_text(r.seconds), f"{r.share:.1%}"] for r in shown]
            text += text_table(["stage", "region", "time/call", "share"], table,
                               {"time/call", "share"})  # fmt: skip
        return text


class _Entry:
    """What one step of ``main`` measured: a time per call, its bytes moved."""

    __slots__ = ("arguments", "backend", "kind", "module", "moved", "name", "ops", "times")

    def __init__(self, name: str, kind: str, backend: str, ops: str, module=None):
        self.name, self.kind, self.backend, self.ops = name, kind, backend, ops
        self.times: list[int] = []
        self.moved = -1  # (-1 until the first call measures it)
        self.module = module  # (a region's runtime module, for its stages)
        self.arguments: tuple | None = None  # (a region's last arguments)


def profile(executable, arrays, repeat: int = 10) -> Profile:
    """Profile ``executable`` on ``arrays`` (see the module docstring)."""
    if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
        raise NbyocError(f"profile: repeat must be a positive int, got {repeat!r}")
    executable(*arrays)  # warm-up: a new binding's build, scratch pools, caches
    target, sizes = _built_for(executable, arrays)
    checked = target._spec.check(arrays)
    entries: list[_Entry] = []

    def wrap(node, fn, label):
        entry = _entry(target, node, label.partition(" = ")[0])
        if entry is None:
            return fn  # (tuples and their fields: the executor's own work)
        entries.append(entry)
        return _timed(entry, fn)

    timed_main = target._main.instrumented(wrap)
    timed_main(*checked)  # (its own warm-up: the timers' first call measures the bytes)
    for entry in entries:
        entry.times.clear()
    call, clock, totals = target._call, time.perf_counter_ns, []
    for _ in range(repeat):
        start = clock()
        call(*arrays)
        totals.append(clock() - start)
        timed_main(*checked)
    stages = []
    for entry in entries:
        if entry.module is not None and entry.arguments is not None:
            symbol = entry.name[1:]  # (the row's name is "@" and the symbol)
            for what, seconds in entry.module.stage_times(symbol, entry.arguments, repeat) or ():
                stages.append((entry.name, what, seconds))
    return _report(entries, statistics.median(totals) * 1e-9, repeat, sizes, stages)


def _built_for(executable, arrays) -> tuple:
    """The executable that runs ``arrays`` (for symbolic sizes: the build made for
    their binding) and that binding."""
    sizes = executable._sizes
    if sizes is None:
        return executable, {}
    checked = executable._spec.check(arrays)
    return sizes.executable_for(checked), sizes.binder.bind([a.shape for a in checked])


def _entry(executable, node, name: str) -> _Entry | None:
    if not isinstance(node, Call):
        return None
    if isinstance(node.op, Op):
        return _Entry(name, "host op", "host", node.op.name)
    assert isinstance(node.op, GlobalVar)
    symbol = node.op.name_hint
    func = executable.module[symbol]
    ops = _ops_text(func)
    if symbol in executable.runtime_modules:
        module = executable.runtime_modules[symbol]
        return _Entry(f"@{symbol}", "region", func.attrs.get("Compiler", "?"), ops, module)
    return _Entry(f"@{symbol}", "host function", "host", ops)


def _ops_text(func) -> str:
    """The ops of ``func``, in order of first use, counted: ``add, multiply x2``."""
    counts = Counter(
        n.op.name for n in post_order([func.body]) if isinstance(n, Call) and isinstance(n.op, Op)
    )
    return ", ".join(name if k == 1 else f"{name} x{k}" for name, k in counts.items())


def _timed(entry: _Entry, fn):
    clock = time.perf_counter_ns

    def timed(*args, **kwargs):
        start = clock()
        result = fn(*args, **kwargs)
        entry.times.append(clock() - start)
        if entry.module is not None:
            entry.arguments = args
        if entry.moved < 0:
            entry.moved = _nbytes(args) + _nbytes(result)
        return result

    return timed


def _nbytes(value) -> int:
    if isinstance(value, (tuple, list)):
        return sum(_nbytes(v) for v in value)
    return int(getattr(value, "nbytes", 0))


def _report(
    entries: list[_Entry], measured: float, repeat: int, sizes: dict, stages: list
) -> Profile:
    medians = [statistics.median(e.times) * 1e-9 for e in entries]
    # (the steps' medians may add up to a little more than the total's: noise)
    total = max(measured, sum(medians))
    rest = total - sum(medians)
    rows = [
        ProfileRow(e.name, e.kind, e.backend, e.ops, s, s / total if total else 0.0, e.moved)
        for e, s in zip(entries, medians)
    ]
    rows.sort(key=lambda row: -row.seconds)
    share = rest / total if total else 0.0
    rows.append(ProfileRow("(executor)", "executor", "host", EXECUTOR_WORK, rest, share, 0))
    inside = [StageRow(region, what, t, t / total if total else 0.0) for region, what, t in stages]
    inside.sort(key=lambda row: -row.seconds)
    return Profile(tuple(rows), total, repeat, dict(sizes), tuple(inside))
