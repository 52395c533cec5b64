"""What a compiled function raises when a call goes wrong: always an ``NbyocError``.

Keyword arguments, errors the computation itself raises (a gather index out of
range, an integer to a negative power) on every backend, and results too large to
allocate: the arguments are checked before any output is allocated, so a wrong call
on a huge graph is a shape error, and a right call is an ``AllocationError`` (also a
``MemoryError``) naming the size.
"""

import numpy as np
import pytest

import nbyoc
from nbyoc.errors import (
    AllocationError,
    ArgumentError,
    ExecutionError,
    NbyocError,
    ShapeMismatchError,
)

BACKENDS = ["host", "llvm", "csource", "examplejson"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_keyword_arguments_are_refused_naming_the_parameters(backend):
    a, b = nbyoc.var("a", (3,)), nbyoc.var("b", (3,))
    fn = nbyoc.compile(nbyoc.function([a, b], a * b + 1.0), backend=backend)
    x = np.ones(3, np.float32)
    with pytest.raises(ArgumentError) as info:
        fn(x, b=x)
    message = str(info.value)
    assert "main takes its arguments by position" in message
    assert "(a: Tensor[(3,), float32], b: Tensor[(3,), float32])" in message
    assert "got keyword argument(s) 'b'" in message and "fn(a, b)" in message
    for symbol, module in fn.runtime_modules.items():
        with pytest.raises(ArgumentError, match=rf"{symbol} takes its arguments by position"):
            module.get_function(symbol)(x, x, out0=np.empty(3, np.float32))


@pytest.mark.parametrize("backend", ["llvm", "csource", "examplejson"])
@pytest.mark.parametrize("case", ["gather out of range", "negative integer power"])
def test_errors_raised_while_computing_are_execution_errors(backend, case):
    if case == "gather out of range":
        x, i = nbyoc.var("x", (4,)), nbyoc.var("i", (2,), "int64")
        f = nbyoc.function([x, i], nbyoc.gather(x * 2.0, i, axis=0))
        args = [np.ones(4, np.float32), np.array([1, 7], np.int64)]
    else:
        x, y = nbyoc.var("x", (3,), "int32"), nbyoc.var("y", (3,), "int32")
        f = nbyoc.function([x, y], nbyoc.power(x + 1, y))
        args = [np.ones(3, np.int32), np.array([1, -2, 3], np.int32)]
    fn = nbyoc.compile(f, backend=backend)
    with pytest.raises(ExecutionError):
        fn(*args)
    ((symbol, module),) = fn.runtime_modules.items()
    op = "gather" if case.startswith("gather") else "power"
    if op not in fn.module[symbol].attrs.get("ops", str(fn.module[symbol])):
        pytest.skip(f"{backend} leaves {op} to the host (checked above through main)")
    outputs = [np.empty(t.shape, t.dtype) for t in nbyoc.ir.types.tensor_types(f.ret_type)]
    with pytest.raises(ExecutionError, match=symbol):
        module.get_function(symbol)(*args, *outputs)


def huge_graph(host_part: bool):
    """Inputs of 64 MiB whose sum broadcasts to 2**48 float32 elements: 1 PiB, more
    than any machine's address space, so allocating it fails whatever the overcommit
    policy."""
    a, b = nbyoc.var("a", (1 << 24, 1)), nbyoc.var("b", (1, 1 << 24))
    return nbyoc.function([a, b], [a + b, a] if host_part else a + b)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("host_part", [False, True], ids=["direct", "through main"])
def test_arguments_are_checked_before_outputs_are_allocated(backend, host_part):
    fn = nbyoc.compile(huge_graph(host_part), backend=backend)
    small = np.ones((2, 1), np.float32)
    with pytest.raises(ShapeMismatchError, match=r"argument 0 \(a\)"):
        fn(small, np.ones((1, 1 << 24), np.float32))
    with pytest.raises(AllocationError) as info:
        fn(np.ones((1 << 24, 1), np.float32), np.ones((1, 1 << 24), np.float32))
    assert isinstance(info.value, MemoryError) and isinstance(info.value, NbyocError)
    message = str(info.value)
    assert "(16777216, 16777216) float32 array, needs 1.0 PiB (1125899906842624 bytes)" in message
