"""Many rows computed one by one and stacked: one region, one program, compiled once.

A user's loop ``y[i] = x[i] * i`` (or ``np.stack([x[i] * i for i in range(n)])``)
traces to n slices, reshapes and products joined by one concatenate. Its compile time
must not grow with n: the rows stay in one region (``merge.VIEW_OPS`` are not counted
by ``max_size``), the region runs as a program (its concatenate copied row by row:
``reduce.copies_parts``), and the rows' products, equal up to their constant, are one
stage function. What is checked is the structure and the values, never the time.
"""

from __future__ import annotations

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm.lower import PROGRAM_MIN_STAGES, lower
from nbyoc.runtime.compiles import compile_counts

from ..frontend.test_jit_updates import loop_rows as scaled_rows  # (the user's loop)
from ..helpers import kernel_source


def stacked_rows(x):
    return np.stack([x[i] * i for i in range(x.shape[0])])


def rows_of(n: int, width: int = 1000) -> np.ndarray:
    return np.random.default_rng(n).standard_normal((n, width)).astype(np.float32)


@pytest.mark.parametrize("form", [scaled_rows, stacked_rows])
def test_many_rows_are_one_program_equal_to_numpy(form):
    x = rows_of(200)
    fn = nbyoc.jit(form, strict=True)
    # one float32 product a value, rounded once on both sides: equal bits
    np.testing.assert_array_equal(fn(x), form(x))
    executable = fn.lower(x)
    ((module,),) = [executable.runtime_modules.values()]
    assert module.lowered.program is not None, module.lowered.not_a_program


def test_more_rows_compile_no_new_module():
    """The modules of 40 rows serve 200: the products are one stage function taking its
    constant, the row copies another taking its offset, the executor is shared."""
    first = nbyoc.jit(scaled_rows, strict=True).lower(rows_of(40))
    before = compile_counts().get("llvm modules", 0)
    fn = nbyoc.jit(scaled_rows, strict=True)
    x = rows_of(200)
    np.testing.assert_array_equal(fn(x), scaled_rows(x))
    assert compile_counts().get("llvm modules", 0) == before
    ((small,),) = [first.runtime_modules.values()]
    ((large,),) = [fn.lower(x).runtime_modules.values()]
    stage_modules = {a.module for a in large.lowered.addressed}
    assert stage_modules == {a.module for a in small.lowered.addressed}
    assert len(stage_modules) <= 5  # (products, row copies and their entries)


def test_rows_beyond_the_region_cap_gather_into_one_more_region():
    """300 rows: 301 calls of work, more than ``max_size``; the rows that do not fit
    the stack's region gather in one more region instead of one region each."""
    x = rows_of(300, 16)
    fn = nbyoc.jit(scaled_rows, strict=True)
    np.testing.assert_array_equal(fn(x), scaled_rows(x))
    assert len(fn.lower(x).runtime_modules) == 2


def test_main_calls_its_regions_through_their_allocating_functions(monkeypatch):
    """The outputs ``main`` allocates for a region are fresh: it calls the module's
    allocating function, not the checked destination-passing one (whose overlap checks
    grow with the square of a region's outputs)."""
    from nbyoc.codegen.llvm.module import LLVMModule

    def refused(self, symbol):
        def run(*arrays):
            raise AssertionError("main ran the destination-passing function")

        return run

    monkeypatch.setattr(LLVMModule, "get_function", refused)
    x = rows_of(300, 16)
    fn = nbyoc.jit(scaled_rows, strict=True)
    np.testing.assert_array_equal(fn(x), scaled_rows(x))
    assert len(fn.lower(x).runtime_modules) == 2


def test_a_slice_of_leading_rows_is_read_in_place():
    """``x[1:3]`` of a C array is one: bound as ``in0[1:3]`` (Numba keeps its layout "C"),
    reshaped with no copy. A slice narrowing a later axis is strided: copied."""
    x = nbyoc.var("x", (4, 6))
    rows = nbyoc.function([x], nbyoc.reshape(nbyoc.slice(x, [1], [3], [0]), (12,)) * 2.0)
    columns = nbyoc.function([x], nbyoc.reshape(nbyoc.slice(x, [1], [3], [1]), (8,)) * 2.0)
    rows_source = lower(rows).source
    assert "in0[1:3]\n" in rows_source and "ascontiguousarray" not in rows_source
    assert "ascontiguousarray" in lower(columns).source
    data = np.arange(24, dtype=np.float32).reshape(4, 6)
    for f in (rows, columns):
        fn = nbyoc.compile(f, "llvm", strict=True)
        np.testing.assert_array_equal(fn(data), nbyoc.compile(f, "host")(data))


def test_a_program_copies_a_concatenate_of_many_parts_part_by_part():
    """A concatenate of 12 operands takes a table loop in a compiled kernel, which no
    program holds; in a program each operand is a copy of its own."""
    x = nbyoc.var("x", (12, 1 << 14))
    parts = [nbyoc.slice(x, [i], [i + 1], [0]) * float(i) for i in range(12)]
    f = nbyoc.function([x], nbyoc.concatenate(parts, axis=0))
    as_program = lower(f, function_pointers=True)
    assert as_program.program is not None, as_program.not_a_program
    assert "_parts = (" not in kernel_source(as_program.source)
    assert "_parts = (" in lower(f).source  # (a kernel keeps its table loop)


def test_a_kernel_of_many_stages_is_a_program_whatever_its_work():
    """Rows of 4: little work, but a kernel of ``PROGRAM_MIN_STAGES`` stages compiles
    slower than a program (``lower.PROGRAM_MIN_STAGES``); fewer stay a kernel."""

    def rows(count: int):
        x = nbyoc.var("x", (count, 4))
        parts = [nbyoc.slice(x, [i], [i + 1], [0]) * float(i) for i in range(count)]
        return nbyoc.function([x], nbyoc.concatenate(parts, axis=0))

    many = PROGRAM_MIN_STAGES - 1  # (and the concatenate)
    assert lower(rows(many), function_pointers=True).program is not None
    assert lower(rows(8), function_pointers=True).program is None
    fn = nbyoc.compile(rows(many), "llvm", strict=True)
    data = rows_of(many, 4)
    np.testing.assert_array_equal(
        fn(data), np.stack([data[i] * np.float32(i) for i in range(many)])
    )
