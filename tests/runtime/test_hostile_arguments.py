"""Hostile call arguments on every backend and every call path: nothing native runs on
an object that only claims to be an array.

Objects that lie about their ``.shape``, ``.dtype``, ``.ndim`` or ``.flags`` (a
``bytearray`` subclass, ``ndarray`` subclasses over a smaller buffer, an object
exposing ``__array_interface__``), short buffers, wrong itemsizes, zero-size
arrays, non-array values, read-only, strided and overlapping outputs are refused
with an ``ArgumentError``; strided, broadcast, read-only and misaligned inputs,
misaligned outputs and honest ``ndarray`` subclasses are accepted and give the
host's results. The claimed shape is 1024 x 1024 float32 (4 MiB) over 16-byte
buffers, so code that believed a lie would read and write megabytes out of bounds.

Each backend runs in a fresh process (``run_fresh``), so a segfault fails the test
instead of killing pytest.
"""

import numpy as np
import pytest

import nbyoc

from ..helpers import run_fresh

BACKENDS = ["host", "llvm", "csource", "examplejson"]

CHILD = r'''
import json, sys
import numpy as np, nbyoc
from nbyoc.errors import ArgumentError
from nbyoc.ir.types import tensor_types
from nbyoc.runtime import HostFunction

backend = sys.argv[1]
SHAPE, DTYPE = (1024, 1024), np.dtype(np.float32)
a, b = nbyoc.var("a", SHAPE), nbyoc.var("b", SHAPE)
t = a * b
graphs = {
    "single": nbyoc.function([a, b], t + 1.0),  # main is one external call
    "multi": nbyoc.function([a, b], [t + 1.0, t - b]),  # one external function, two outputs
    "mixed": nbyoc.function([a, b], [t + 1.0, a]),  # main returns an input too
}
compiled = {name: nbyoc.compile(f, backend=backend) for name, f in graphs.items()}
rng = np.random.default_rng(0)
A, B = (rng.standard_normal(SHAPE).astype(np.float32) for _ in range(2))
A0, B0 = A.copy(), B.copy()
reference = {name: nbyoc.compile(f, backend="host") for name, f in graphs.items()}
host = {name: reference[name](A, B) for name, f in graphs.items()}


def expected(name, inputs):
    """The host's results on plain copies of ``inputs``."""
    result = reference[name](*[np.array(x) for x in inputs])
    return result if isinstance(result, tuple) else (result,)


class LyingBytes(bytearray):  # any buffer-protocol object can claim attributes
    shape, dtype, ndim = SHAPE, DTYPE, 2


class Flags:
    writeable = aligned = c_contiguous = True

    def __getitem__(self, key):
        return key in ("C_CONTIGUOUS", "WRITEABLE", "ALIGNED")


class Lying(np.ndarray):  # an ndarray over a small buffer that says otherwise
    __numba_array_subtype_dispatch__ = True  # (Numba then types it from the attributes)
    shape = property(lambda self: SHAPE)
    dtype = property(lambda self: DTYPE)
    ndim = property(lambda self: 2)
    flags = property(lambda self: Flags())
    size = property(lambda self: SHAPE[0] * SHAPE[1])


class Honest(np.ndarray):
    pass


class Interface:  # np.asarray would believe this one: nbyoc must not call it
    def __init__(self):
        self.keep = np.zeros(4, np.float32)
        self.__array_interface__ = {"shape": SHAPE, "typestr": "<f4", "version": 3,
                                    "data": (self.keep.ctypes.data, False)}


def misaligned(like, writeable=True):
    raw = bytearray(like.nbytes + 1)
    raw[1:] = like.tobytes()
    array = np.frombuffer(raw if writeable else bytes(raw), like.dtype, offset=1)
    return array.reshape(like.shape)


def read_only(like):
    copy = like.copy()
    copy.flags.writeable = False
    return copy


def strided(like):
    wide = np.zeros((like.shape[0], 2 * like.shape[1]), like.dtype)
    wide[:, ::2] = like
    return wide[:, ::2]


REFUSED = {  # name -> object for a slot whose honest value is ``like``
    "lying bytearray": lambda like: LyingBytes(16),
    "lying subclass, small buffer": lambda like: np.zeros(4, np.float32).view(Lying),
    "lying subclass, int8 buffer": lambda like: np.zeros(SHAPE, np.int8).view(Lying),
    "lying subclass, 1-d strided buffer": lambda like: np.zeros((1024, 256), np.float32)[:, 0].view(Lying),
    "__array_interface__ object": lambda like: Interface(),
    "memoryview": lambda like: memoryview(bytearray(like.nbytes)).cast("B").cast("f", SHAPE),
    "short array": lambda like: np.zeros(16, np.float32),
    "zero-size array": lambda like: np.zeros((0, 1024), np.float32),
    "float16 (half the itemsize)": lambda like: np.zeros(SHAPE, np.float16),
    "byte-swapped float32": lambda like: like.astype(">f4"),
    "float32 scalar": lambda like: np.float32(1),
    "nested list": lambda like: [[0.0]],
    "None": lambda like: None,
}
ACCEPTED_INPUTS = {
    "strided": strided,
    "Fortran order": np.asfortranarray,
    "broadcast (read-only, stride 0)": lambda like: np.broadcast_to(like[0], SHAPE),
    "read-only": read_only,
    "misaligned": misaligned,
    "misaligned read-only": lambda like: misaligned(like, writeable=False),
    "honest subclass": lambda like: like.copy().view(Honest),
}


def attempt(run, check=None):
    try:
        with np.errstate(all="ignore"):
            result = run()
    except ArgumentError:
        return "ArgumentError"
    except Exception as e:
        return f"{type(e).__name__}: {e}"
    return "ok" if check is None or check(result) else "wrong result"


def same(got, want):
    got = got if isinstance(got, tuple) else (got,)
    want = want if isinstance(want, tuple) else (want,)
    return len(got) == len(want) and all(np.array_equal(g, w) for g, w in zip(got, want))


outcomes = {}  # case -> [expected, got]


def refused(case, run):
    outcomes[case] = ["ArgumentError", attempt(run)]


def accepted(case, run, check):
    outcomes[case] = ["ok", attempt(run, check)]


for name, fn in compiled.items():
    for k in range(2):
        for case, make in REFUSED.items():
            args = [A, B]
            args[k] = make(args[k])
            refused(f"call {name}: input {k} {case}", lambda: fn(*args))
        for case, make in ACCEPTED_INPUTS.items():
            args = [A, B]
            args[k] = make(args[k])
            want = expected(name, args)
            accepted(f"call {name}: input {k} {case}", lambda: fn(*args), lambda r: same(r, want))
    if name == "mixed":
        continue  # (its external function is "single"'s)
    for symbol, module in fn.runtime_modules.items():
        run = module.get_function(symbol)
        types = tensor_types(fn.module[symbol].ret_type)
        where = f"get_function {name}"
        external = HostFunction(fn.module[symbol])

        def outputs():
            return [np.empty(t.shape, t.dtype) for t in types]

        def wrote(outs, inputs=(A, B)):
            want = external(*[np.array(x) for x in inputs])
            want = want if isinstance(want, tuple) else (want,)
            return lambda _: all(np.array_equal(o, w) for o, w in zip(outs, want))

        for slot in range(2 + len(types)):
            for case, make in REFUSED.items():
                args = [A, B, *outputs()]
                args[slot] = make(args[slot])
                refused(f"{where}: argument {slot} {case}", lambda: run(*args))
        for k in range(2):
            for case, make in ACCEPTED_INPUTS.items():
                args = [A, B, *outputs()]
                args[k] = make(args[k])
                check = wrote(args[2:], args[:2])
                accepted(f"{where}: input {k} {case}", lambda: run(*args), check)
        # An output one row into a buffer whose start is input 1: they overlap.
        buffer = np.empty(SHAPE[0] * SHAPE[1] + SHAPE[1], np.float32)
        buffer[: SHAPE[0] * SHAPE[1]] = B.ravel()
        below, above = buffer[: B.size].reshape(SHAPE), buffer[SHAPE[1] :].reshape(SHAPE)
        for k in range(len(types)):
            for case, ins, out in [
                ("read-only", [A, B], read_only(A)),
                ("strided", [A, B], strided(A)),
                ("the same array as input 0", [A, B], A),
                ("overlapping input 1", [A, below], above),
            ]:
                outs = outputs()
                outs[k] = out
                refused(f"{where}: output {k} {case}", lambda: run(*ins, *outs))
            for case, make in [("misaligned", misaligned),
                               ("honest subclass", lambda like: like.view(Honest))]:
                outs = outputs()
                outs[k] = make(outs[k])
                accepted(f"{where}: output {k} {case}", lambda: run(A, B, *outs), wrote(outs))
        if len(types) == 2:
            out = np.empty(SHAPE, np.float32)
            refused(f"{where}: both outputs one array", lambda: run(A, B, out, out))

# Nothing above changed the caller's arrays, and the executables still compute right.
outcomes["inputs unchanged"] = ["ok", "ok" if same((A, B), (A0, B0)) else "changed"]
accepted("still right afterwards", lambda: compiled["multi"](A, B), lambda r: same(r, host["multi"]))
print(json.dumps(outcomes))
'''


@pytest.mark.parametrize("backend", BACKENDS)
def test_hostile_arguments_are_refused_cleanly_on_every_path(backend, tmp_path):
    outcomes = run_fresh(CHILD, tmp_path, backend, timeout=900)
    wrong = {case: got for case, (expected, got) in outcomes.items() if got != expected}
    assert wrong == {}
    paths = {case.split(":")[0] for case in outcomes}
    if backend == "host":
        assert paths >= {"call single", "call multi", "call mixed"}
    else:
        assert paths >= {"call single", "call multi", "call mixed", "get_function single",
                         "get_function multi"}  # fmt: skip
    assert sum(expected == "ArgumentError" for expected, _ in outcomes.values()) >= 60


def test_compiled_code_itself_refuses_misaligned_arrays():
    """Numba types a misaligned array as aligned, and C would dereference it through a
    typed pointer: the llvm kernel and the csource entry point check the address
    themselves (before any read), and the runtime copies such an input (above)."""
    from nbyoc.codegen.csource.module import MISALIGNED

    x = nbyoc.var("x", (8,))
    f = nbyoc.function([x], x * 2.0)
    odd = np.zeros(33, np.uint8)[1:].view(np.float32)
    out = np.empty(8, np.float32)
    llvm = nbyoc.compile(f, backend="llvm").runtime_modules["llvm_0"]
    with pytest.raises(ValueError, match="not aligned"):
        llvm.kernel(odd, out)
    csource = nbyoc.compile(f, backend="csource").runtime_modules["csource_0"]
    pointers, rows = csource._thread_tensors()
    for (slot, *_), array in zip(rows, [odd, out]):
        slot.data = csource._ffi.from_buffer(array)
    assert csource._entry(pointers, 2) == MISALIGNED
    assert (
        "not aligned to its 4-byte elements" in csource._ffi.string(csource._last_error()).decode()
    )
