"""Call overhead of the csource backend at 10x10, against a bare call.

The bare call is the compiled subgraph function ``csource_0_`` called through
cffi with the arrays' buffers and nothing else: no checks, no DLTensors. The
module's function adds the argument checks, the DLTensors and the C entry
point's own checks; the Executable adds checking ``main``'s arguments and
allocating the output.
"""

import cffi
import numpy as np
import pytest

import nbyoc
from nbyoc.demo import reference_graph


@pytest.fixture(scope="module")
def compiled():
    fn = nbyoc.compile(reference_graph((10, 10)), backend="csource")
    module = fn.runtime_modules["csource_0"]
    ffi = cffi.FFI()
    ffi.cdef("int csource_0_(void*, void*, void*, void*, void*);")
    lib = ffi.dlopen(str(module.library_path))
    rng = np.random.default_rng(0)
    args = [rng.standard_normal((10, 10)).astype(np.float32) for _ in range(4)]
    return fn, module, lib, ffi, args, np.empty((10, 10), np.float32)


def test_bare(benchmark, compiled):
    _, _, lib, ffi, args, out = compiled
    benchmark.group = "csource call 10x10"
    fb = ffi.from_buffer
    benchmark(lambda: lib.csource_0_(fb(args[0]), fb(args[1]), fb(args[2]), fb(args[3]), fb(out)))


def test_module_function(benchmark, compiled):
    _, module, _, _, args, out = compiled
    benchmark.group = "csource call 10x10"
    benchmark(module.get_function("csource_0"), *args, out)


def test_executable(benchmark, compiled):
    fn, _, _, _, args, _ = compiled
    benchmark.group = "csource call 10x10"
    benchmark(fn, *args)
