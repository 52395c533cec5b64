"""Graceful fallback: a region whose backend fails it moves to the next backend of the
compile's priority list that takes every call of it, else to the host, and only that
region; a ``FallbackWarning`` names the region, the backend and the reason, and the
executable records the move (``fn.fallbacks``, saved in its archive).

A region fails at compile time when its codegen raises (``nbyoc.codegen.fallback``), or
at its first call when its runtime module raises there (``first_call``): the call is then
run again on the region's new home, so the user's call still returns its result. When
the host fails too, the inputs are at fault, not the backend: the backend's error is
raised and nothing moves. ``nbyoc.compile(..., strict=True)`` raises instead of moving.

>>> record = Fallback("mine_0", "mine", "host", "RuntimeError: no device", "codegen")
>>> print(record)
@mine_0: mine -> host at codegen (RuntimeError: no device)
>>> Fallback.from_json(record.to_json()) == record
True
"""

from __future__ import annotations

import threading
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from ..errors import CodegenError, FallbackWarning, LoadError, shown
from ..ir.nodes import Function
from .host import HostFunction
from .rebuild import build_region, callable_of, supported

#: Where a region runs when no backend of the compile takes it.
HOST = "host"
#: When a region can fail: its codegen, or its module's first call.
WHEN = ("codegen", "first call")


@dataclass(frozen=True)
class Fallback:
    """One region moved: ``symbol`` (its global symbol, still its name in ``fn.module``)
    from ``backend`` to ``to`` (a backend, or ``"host"``), because of ``reason`` (the
    error), found at ``when`` (``"codegen"`` or ``"first call"``)."""

    symbol: str
    backend: str
    to: str
    reason: str
    when: str

    def __str__(self) -> str:
        return f"@{self.symbol}: {self.backend} -> {self.to} at {self.when} ({self.reason})"

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, data) -> Fallback:
        """A record read from an archive; ``LoadError`` unless it is one."""
        fields = ("symbol", "backend", "to", "reason", "when")
        if not isinstance(data, dict) or set(data) != set(fields):
            raise LoadError(f"bad fallback record {shown(data)}: it holds {', '.join(fields)}")
        if not all(isinstance(data[k], str) for k in fields) or data["when"] not in WHEN:
            raise LoadError(f"bad fallback record {shown(data)}")
        return cls(*(data[k] for k in fields))


def announce(record: Fallback, stacklevel: int = 2) -> None:
    """The ``FallbackWarning`` of ``record``: what moved where, and why."""
    what = "its codegen failed" if record.when == "codegen" else "its first call failed"
    warnings.warn(
        f"@{record.symbol} moved from {record.backend} to {record.to}: {what} "
        f"({record.reason}). fn.fallbacks lists every move; nbyoc.compile(..., strict=True) "
        f"raises instead",
        FallbackWarning,
        stacklevel=stacklevel + 1,
    )


def reason(error: BaseException) -> str:
    """An error as a fallback's reason: its type and first line, the cause's when it
    wraps one (a ``CodegenError`` chains the codegen's own exception)."""
    cause = error.__cause__ if isinstance(error, CodegenError) and error.__cause__ else error
    text = str(cause).strip().splitlines()
    return f"{type(cause).__name__}: {text[0] if text else ''}".rstrip(": ")


def on_host(func: Function) -> Function:
    """``func`` as a function the host runs (without its ``Compiler``)."""
    return Function(func.params, func.body, {k: v for k, v in func.attrs.items()
                                             if k != "Compiler"})  # fmt: skip


def candidates(func: Function, backends: str | Sequence[str]) -> list[str]:
    """Where a region of ``func``'s backend goes when that backend fails it: each backend
    after it in the compile's priority list that takes every call of it, then the host."""
    order = [backends] if isinstance(backends, str) else list(backends)
    failed = func.attrs["Compiler"]
    after = order[order.index(failed) + 1 :] if failed in order else []
    return [b for b in after if b != HOST and supported(b, func)] + [HOST]


def move(func: Function, error: BaseException, backends, options: Mapping, when: str,
         run: Callable | None = None):  # fmt: skip
    """Where external function ``func`` goes after ``error`` (from its backend, at
    ``when``): ``(function, module, record)`` with ``module`` None on the host. ``run``,
    given at a first call, runs a candidate's callable on the call's inputs (a candidate
    whose codegen or run fails is passed over; the host's failure propagates, and so
    does an error that is not the codegen's, such as an unknown option)."""
    symbol = func.attrs["global_symbol"]
    record = Fallback(symbol, func.attrs["Compiler"], HOST, reason(error), when)
    for backend in candidates(func, backends):
        if backend == HOST:
            host = on_host(func)
            if run is not None:
                run(HostFunction(host))
            return host, None, record
        moved = func.with_attrs(Compiler=backend)
        try:
            module = build_region(moved, options)
        except CodegenError:  # (not a user's error: an unknown option is raised)
            continue
        if run is not None:
            try:
                run(callable_of(module, moved))
            except Exception:  # (the next candidate, in the end the host, runs it)
                continue
        return moved, module, Fallback(symbol, record.backend, backend, record.reason, when)
    raise AssertionError("the host is always a candidate")


class FirstCall:
    """An executable's first call, each external function guarded (unless ``strict``):
    one that raises is moved (``move``) and the call runs on its new home; then the
    executable takes its moves (``Executable._moved``) and its plain plan for every later
    call. With ``verify_first``, the call's arguments are verified too (``verify``), and
    a region beyond its tolerance raises ``VerificationError``. First calls in several
    threads run one at a time."""

    def __init__(self, executable):
        self.executable = executable
        self.lock = threading.Lock()
        self.settled = False

    def __call__(self, *args, **named):
        ex = self.executable
        with self.lock:
            if self.settled:
                return ex._call(*args, **named)
            if named:
                raise ex._spec.keywords_refused(named)
            arrays = ex._spec.check(args)
            moves: dict[str, tuple] = {}
            if ex.strict:
                main = ex._main
            else:
                main = ex._host_plan(lambda name, run: self._guard(name, run, moves))
            try:
                result = ex._run_plan(main, arrays)
            except BaseException:
                if moves:  # kept; the regions the call did not reach stay guarded
                    ex._moved(moves.values())
                    ex._call = self
                    self._announce(moves)
                raise
            ex._moved(moves.values())
            self.settled = True
            self._announce(moves)
            if ex.verify_first:
                from .verify import verify_executable

                verify_executable(ex, arrays).check()
        return result

    @staticmethod
    def _announce(moves: dict) -> None:
        for _, _, record in moves.values():
            announce(record, stacklevel=3)  # (the user's call)

    def _guard(self, name: str, run: Callable, moves: dict) -> Callable:
        ex = self.executable

        def guarded(*inputs):
            try:
                return run(*inputs)
            except Exception as error:
                results = []
                try:
                    moved = move(ex.module[name], error, ex.backend, ex.options, "first call",
                                 lambda other: results.append(other(*inputs)))  # fmt: skip
                except Exception:
                    moved = None  # the host fails too: the inputs are at fault
                if moved is None:
                    raise error  # (as strict would; its own cause kept)
                moves[name] = moved
                return results[-1]

        return guarded
