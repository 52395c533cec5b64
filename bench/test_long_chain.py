"""Run time of long elementwise chains: the scaling sweep's ``chain`` (``*1.001``,
``tanh``, ``+0.5``, ``sigmoid`` repeated) at 10 and 300 ops, per element and op, on
llvm and examplejson beside NumPy, so that splitting a long region into capped,
deduplicated stage functions is seen to cost nothing per op against the fused kernel
of a short chain."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import scaling_graphs

import nbyoc

OPS = (10, 300)
#: Sizes above this are left out: NumPy's 300 passes over 64 MiB take seconds a call.
MAX_SIDE = 1024
CASES = ("numpy", "llvm", "examplejson")


def numpy_chain(x, ops):
    for k in range(ops):
        step = k % 4
        if step == 0:
            x = x * np.float32(1.001)
        elif step == 1:
            x = np.tanh(x)
        elif step == 2:
            x = x + np.float32(0.5)
        else:
            x = 1 / (1 + np.exp(-x))
    return x


@functools.lru_cache(maxsize=4)
def prepared(ops: int, side: int):
    data = np.random.default_rng(0).uniform(-2, 2, (side, side)).astype(np.float32)
    return scaling_graphs.chain(ops, side), data


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("ops", OPS)
def test_long_chain(benchmark, ops, size, case):
    if size > MAX_SIDE:
        pytest.skip(f"long chains run up to {MAX_SIDE}x{MAX_SIDE}")
    side = size
    func, data = prepared(ops, side)
    fn = (lambda x: numpy_chain(x, ops)) if case == "numpy" else nbyoc.compile(func, case)
    np.testing.assert_allclose(fn(data), numpy_chain(data, ops), rtol=1e-5, atol=1e-6)
    benchmark.group = f"long chain {side}x{side}"
    benchmark.extra_info.update(kind="chain", ops=ops, shape=f"{side}x{side}", case=case,
                                elements=side * side)  # fmt: skip
    benchmark(fn, data)
