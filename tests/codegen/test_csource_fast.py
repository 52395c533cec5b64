"""csource's fast path: nbyoc's float32 transcendental functions in C (within their ulp
bound, and vectorised by the C compiler), loops shared out by OpenMP on large arrays
(with the same numbers as NumPy, broadcasting and errors included), and the
``native`` option (-march=native) kept across saving and loading."""

import os
import platform
import re
import subprocess
import sys

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.csource import emit_c
from nbyoc.codegen.csource.loops import PARALLEL_MIN_ELEMENTS
from nbyoc.codegen.csource.module import CSourceModule
from nbyoc.errors import ExecutionError, LoadError
from nbyoc.runtime import cc
from nbyoc.runtime.llvm import vecmath

from ..helpers import external
from .conformance import VECTORISED_OPS, assert_within_ulp, ulp_inputs
from .test_csource import check_against_numpy, run_module, subgraph_body

BIG = PARALLEL_MIN_ELEMENTS + 4099  # not a multiple of any chunk


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize("op", sorted(VECTORISED_OPS))
def test_float32_transcendentals_are_within_their_ulp_bound(op, fused):
    """The C versions share the llvm versions' constants (runtime.vecmath_constants) but
    round every multiply and add apart (no contraction in csource): the same bound holds."""
    data = ulp_inputs()
    x = nbyoc.var("in0", data.shape)
    f = external([x], [nbyoc.call_op(op, x)], "csource_0", "csource")
    assert f"nbyoc_{op}_f32" in emit_c(f)
    assert_within_ulp(op, data, run_module(f, [data], fused)[0], vecmath.MAX_ULP)


def test_float64_and_float16_transcendentals():
    """float64 stays with libm (exactly NumPy's numbers on this platform, within 1e-14);
    float16 computes in float through the vectorised functions."""
    for dtype in ("float64", "float16"):
        x = nbyoc.var("in0", (64,), dtype)
        outs = [nbyoc.call_op(op, x) for op in sorted(VECTORISED_OPS)]
        data = np.linspace(-5, 5, 64).astype(dtype)
        check_against_numpy(external([x], outs, "csource_0", "csource"), [data])


@pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"), reason="x86 assembly")
def test_loops_calling_the_functions_vectorise():
    """The point of the C versions: the loop over them runs on vector registers. libm's
    expf in the same loop kept it scalar (a call per element, no packed arithmetic)."""
    x = nbyoc.var("in0", (4096,))
    outs = [nbyoc.call_op(op, x) for op in sorted(VECTORISED_OPS)]
    source = emit_c(external([x], outs, "csource_0", "csource"))
    flags = [f for f in cc.compile_flags() if f not in ("-shared", "-fPIC")]
    assembly = subprocess.run(
        [*cc.compiler_command(), *flags, "-S", "-o", "-", "-x", "c", "-"],
        input=source, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    assert not re.search(r"call\s+\S*(expf|logf|tanhf|erff|log1pf|expm1f)\b", assembly)
    packed = re.findall(r"\b(v?(?:mul|add|sub|div)ps)\b", assembly)
    assert len(packed) >= 10 * len(VECTORISED_OPS), assembly[:2000]


@pytest.mark.parametrize("fused", [False, True])
@pytest.mark.parametrize(
    "shape_a, shape_b",
    [((BIG,), (BIG,)), ((BIG,), ()), ((3, 5, BIG // 15), (5, 1)), ((BIG // 7, 7), (BIG // 7, 1)),
     ((2, 1, 3, BIG // 6), (3, 1))],
)  # fmt: skip
def test_parallel_loops_match_numpy(shape_a, shape_b, fused):
    """Large enough to be shared out by OpenMP, in pieces that do not divide evenly;
    rank 1 (chunks of one loop), collapsed outer loops, and broadcast operands."""
    a, b = nbyoc.var("in0", shape_a), nbyoc.var("in1", shape_b)
    outs = [nbyoc.tanh(a * b + a), nbyoc.maximum(a - b, b)]
    f = external([a, b], outs, "csource_0", "csource")
    assert "omp parallel for" in emit_c(f, fused=fused)
    rng = np.random.default_rng(0)
    inputs = [rng.standard_normal(s).astype(np.float32) for s in (shape_a, shape_b)]
    check_against_numpy(f, inputs, fused=fused)


def test_small_loops_stay_serial():
    x = nbyoc.var("in0", (PARALLEL_MIN_ELEMENTS // 2,))
    source = emit_c(external([x], [nbyoc.exp(x) * 2.0], "csource_0", "csource"), fused=True)
    assert "omp parallel" not in subgraph_body(source)


def test_an_op_that_can_fail_runs_serially_and_still_reports():
    """The error flag is per thread: a loop whose helper can set it (integer power) is
    not shared out, so the error an OpenMP worker would hit is not lost."""
    x, y = nbyoc.var("in0", (BIG,), "int32"), nbyoc.var("in1", (BIG,), "int32")
    f = external([x, y], [nbyoc.power(x, y)], "csource_0", "csource")
    assert "omp parallel" not in subgraph_body(emit_c(f, fused=True))
    exponents = np.ones(BIG, np.int32)
    exponents[-1] = -1  # in the last chunk, which a worker thread would take
    module = CSourceModule(f, fused=True)
    with pytest.raises(ExecutionError, match="negative integer powers"):
        module.get_function("csource_0")(np.full(BIG, 2, np.int32), exponents,
                                         np.empty(BIG, np.int32))  # fmt: skip


def test_native_builds_for_this_cpu_and_survives_saving():
    x = nbyoc.var("in0", (1000,))
    f = external([x], [nbyoc.exp(x) + 1.0], "csource_native", "csource")
    native, portable = CSourceModule(f, native=True), CSourceModule(f)
    assert native.library_path != portable.library_path
    loaded = CSourceModule.load_from_bytes(native.save_to_bytes())
    assert loaded.native and loaded.library_path == native.library_path
    data = np.linspace(-3, 3, 1000, dtype=np.float32)
    outs = [np.empty(1000, np.float32) for _ in range(2)]
    loaded.get_function("csource_native")(data, outs[0])
    portable.get_function("csource_native")(data, outs[1])
    np.testing.assert_allclose(outs[0], outs[1], rtol=3e-7)  # contraction may differ


def test_native_reaches_the_codegen_and_bad_values_are_refused():
    x = nbyoc.var("x", (3,))
    fn = nbyoc.compile(nbyoc.function([x], x * 2.0), backend="csource",
                       options={"csource": {"native": True}})  # fmt: skip
    np.testing.assert_array_equal(fn(np.ones(3, np.float32)), [2, 2, 2])
    with pytest.raises(nbyoc.NbyocError, match="option native must be True or False"):
        CSourceModule(external([x], [x * 2.0], "csource_0", "csource"), native="yes")
    saved = CSourceModule(external([x], [x + 1.0], "csource_0", "csource")).save_to_bytes()
    with pytest.raises(LoadError, match="option 'native' must be"):
        CSourceModule.load_from_bytes(saved.replace(b'"native": false', b'"native": 1'))


def test_modules_saved_before_the_native_option_load():
    x = nbyoc.var("in0", (2,))
    saved = CSourceModule(external([x], [x + 1.0], "csource_0", "csource")).save_to_bytes()
    old = saved.replace(b', "native": false', b"")
    assert old != saved and not CSourceModule.load_from_bytes(old).native


def test_a_process_with_spinning_openmp_threads_exits_cleanly(tmp_path):
    """Modules are collected at exit and their libraries unloaded; that must not take the
    OpenMP runtime with them while its threads spin in it (OMP_WAIT_POLICY=active):
    before the libraries were loaded RTLD_NODELETE, this process died with SIGSEGV."""
    script = tmp_path / "spin.py"
    script.write_text(
        "import numpy as np, nbyoc\n"
        f"x = nbyoc.var('x', ({BIG},))\n"
        "fn = nbyoc.compile(nbyoc.function([x], nbyoc.tanh(x) + 1.0), backend='csource')\n"
        f"data = np.ones({BIG}, np.float32)\n"
        "for _ in range(20):\n"
        "    out = fn(data)\n"
        "assert np.allclose(out, np.tanh(1.0) + 1.0)\n"
        "del fn\n"
    )
    env = {**os.environ, "OMP_WAIT_POLICY": "active"}
    result = subprocess.run([sys.executable, str(script)], env=env, capture_output=True,
                            text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-2000:]
