"""Helpers shared by the backend tests."""

from __future__ import annotations

import os

import pytest

import nbyoc
from nbyoc.codegen.llvm import stages as llvm_stages
from nbyoc.runtime import get_loader

#: float32, and float64 only with --run-slow: for the heaviest kernel suites, whose
#: code is the same at either width (a dtype is a record, ``rules.NP_TYPES``), each
#: case compiling kernels of its own.
FLOAT_DTYPES = ["float32", pytest.param("float64", marks=pytest.mark.slow)]


def examples(full: int, default: int | None = None) -> int:
    """Hypothesis examples for a heavy property test: ``full`` with --run-slow (or
    NBYOC_RUN_SLOW=1); in the default run ``default``, else half of ``full`` (each
    example compiles kernels)."""
    if os.environ.get("NBYOC_RUN_SLOW") == "1":
        return full
    return default if default is not None else max(5, full // 2)


def reload(fn: nbyoc.Executable) -> nbyoc.Executable:
    """The same compiled work after a save -> load round trip of the IR and of
    every runtime module (through the registered loaders)."""
    module = nbyoc.from_json(nbyoc.to_json(fn.module))
    runtime = {
        name: get_loader(m.type_key)(m.save_to_bytes()) for name, m in fn.runtime_modules.items()
    }
    return nbyoc.Executable(module, runtime, fn.backend)


def external(params, outputs, symbol: str, compiler: str) -> nbyoc.ir.Function:
    """An external function, as the partitioner would make it."""
    body = outputs[0] if len(outputs) == 1 else outputs
    return nbyoc.function(params, body).with_attrs(Compiler=compiler, global_symbol=symbol)


def output_view_graph() -> nbyoc.ir.Function:
    """Issue 36's repro: the output reshape(concatenate([s, x])) is a view of a scratch
    buffer, copied out at the kernel's end, while later stages need buffers of its size
    (llvm reused it: off by 7.8)."""
    x = nbyoc.var("x", (1, 4, 32, 32))
    s = nbyoc.sigmoid(x)
    y0 = nbyoc.reshape(nbyoc.concatenate([s, x], axis=1), (1, 8, 1024))
    c2 = nbyoc.concatenate([s, -x], axis=1)
    c3 = nbyoc.concatenate([c2, c2], axis=1)
    return nbyoc.function([x], [y0, nbyoc.concatenate([c3, c3], axis=1)])


def assert_matches_host(func, outputs, inputs, exact_ops, rtol) -> None:
    """``outputs`` (a list) equal the host's results for ``func`` on ``inputs``: bit
    for bit where only ``exact_ops`` are involved, else within ``rtol[dtype]``."""
    import numpy as np

    from nbyoc.runtime import HostFunction

    expected = HostFunction(func)(*inputs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    nodes = func.body.fields if isinstance(func.body, nbyoc.ir.Tuple) else [func.body]
    for got, want, node in zip(outputs, expected, nodes):
        ops = {n.op.name for n in nbyoc.ir.post_order([node]) if isinstance(n, nbyoc.ir.Call)}
        name = ",".join(sorted(ops))
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if ops <= set(exact_ops):
            np.testing.assert_array_equal(got, want, err_msg=name)
        else:
            tolerance = rtol.get(want.dtype.name, 0)
            np.testing.assert_allclose(got, want, rtol=tolerance, atol=1e-30, err_msg=name)


def assert_close_to_host(fn: nbyoc.Executable, func, args, rtol=1e-5, atol=1e-6) -> None:
    """``fn(*args)`` agrees with the host executor's result for ``func`` in structure,
    dtype, shape, and value: within the tolerances, or within the forward error bound
    of the computation where that is larger (``tests/tolerance.py``: a chain of
    ill-conditioned ops, ``exp(exp(x))``, amplifies rounding beyond any fixed rtol).
    Floating-point warnings are ignored."""
    import numpy as np

    from nbyoc.ir.dtypes import dtype_info

    from .tolerance import assert_within, error_bounds

    with np.errstate(all="ignore"):
        expected = nbyoc.compile(func, backend="host")(*args)
        got = fn(*args)
    if not isinstance(expected, tuple):
        got, expected = (got,), (expected,)
    assert isinstance(got, tuple) and len(got) == len(expected)
    bounds = error_bounds(func, args, unknown=0.0)  # (an op it does not know: the tolerances)
    for k, (g, e, bound) in enumerate(zip(got, expected, bounds)):
        assert g.dtype == e.dtype and g.shape == e.shape
        if dtype_info(e.dtype).is_float:
            with np.errstate(all="ignore"):
                given = atol + rtol * np.abs(e.astype(np.float64))
            bound = np.maximum(bound, np.where(np.isfinite(given), given, 0))
        assert_within(g, e, bound, f"output {k}")


def run_in_threads(worker, count: int = 8) -> None:
    """Call ``worker(k)`` for k in range(count), each in its own thread, all at once."""
    import threading

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()


def run_fresh(code: str, cwd, *args: str, env: dict | None = None, timeout: int = 300) -> dict:
    """Run ``code`` in a new Python process (in ``cwd``, with ``env`` added to this
    one's environment) and return the JSON object its last line of output prints."""
    import json
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert done.returncode == 0, f"the fresh process failed:\n{done.stderr[-4000:]}"
    return json.loads(done.stdout.strip().splitlines()[-1])


def kernel_source(source: str) -> str:
    """An llvm ``get_source()`` without the stage modules appended after the kernel's."""
    return source.split("\n# ---- stage_addresses[")[0]


def parallel_runs(source: str) -> int:
    """The parallel runs of stages an llvm kernel makes (``get_source()``): its own
    ``prange`` loops and its calls of the table driver (``stages.emit_calls``), which
    pass the table the kernel filled first."""
    kernel = kernel_source(source)
    return kernel.count("prange(") + kernel.count(f"_TYPE, ({llvm_stages.TABLE}, ")
