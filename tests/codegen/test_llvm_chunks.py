"""A long llvm kernel cut into chunk functions (``codegen/llvm/chunks.py``).

Many small independent stages (rows of a matrix each scaled, then stacked) make a
kernel body longer than ``CHUNK_LINES``: it must come out as chunk functions called
in turn, passing what later statements read, and compute what the host does. The
limit is lowered here so that a small graph compiles in seconds; what is checked is
the structure and the values, never the time.
"""

from __future__ import annotations

import ast
import re

import numpy as np
import pytest

import nbyoc
from nbyoc.codegen.llvm import chunks
from nbyoc.codegen.llvm.chunks import chunk_kernel

from ..helpers import kernel_source


def stacked(rows: int, width: int = 8):
    """``np.stack([x[i] * i for i in range(rows)])``: about 14 kernel lines a row."""
    x = nbyoc.var("x", (rows, width))
    scaled = [nbyoc.slice(x, [i], [i + 1], [0]) * float(i) for i in range(rows)]
    return nbyoc.function([x], nbyoc.concatenate(scaled, axis=0))


def test_many_independent_stages_compile_as_chunks_and_compute_the_host_values(monkeypatch):
    monkeypatch.setattr(chunks, "CHUNK_LINES", 40)
    func = stacked(12)
    fn = nbyoc.compile(func, backend="llvm")
    source = kernel_source(fn.get_source())
    defined = re.findall(r"^def (chunk\d+)\(", source, re.MULTILINE)
    assert len(defined) >= 3, source
    kernel = source.split("\ndef kernel(")[1]
    for name in defined:  # each chunk called once, by the kernel
        assert len(re.findall(rf"\b{name}\(", kernel)) == 1, name
    for body in source.split("\ndef chunk")[1:]:  # none longer than the limit
        lines = body.split("\n\n")[0].split("\n")[1:]
        # (views bound again at a chunk's start come on top of the statements it cuts)
        cut = [t for t in lines if t.strip() and not chunks._VIEW.match(t.strip())]
        assert len([t for t in cut if "vector_width(" not in t]) <= 41
    x = np.random.default_rng(0).standard_normal((12, 8)).astype(np.float32)
    want = nbyoc.compile(func, backend="host")(x)
    # one float32 product a value, rounded once on both sides: equal bits
    np.testing.assert_array_equal(fn(x), want)
    np.testing.assert_array_equal(want, np.stack([x[i] * np.float32(i) for i in range(12)]))


def test_stages_equal_up_to_their_constants_are_one_stage_module(monkeypatch):
    """Rows of 16384 elements: the region is worth a program (``lower.is_program``),
    every nest a stage function called by address, and the concatenate a copy per row
    (``reduce.copies_parts``): a program, no kernel compiled, so no chunks. Each row's
    product differs only by its constant, taken as an argument: one module for all of
    them (one module per row before: one compile each)."""
    monkeypatch.setattr(chunks, "CHUNK_LINES", 60)
    rows, width = 24, 1 << 14
    func = stacked(rows, width)
    fn = nbyoc.compile(func, backend="llvm")
    source = fn.get_source()
    modules = source.split("\n# ---- stage_addresses[")[1:]
    products = [m for m in modules if " * x0" in m]
    # (the product, the row copy, and the entries a program calls stages through)
    assert len(products) == 1 and len(modules) <= 5, source
    ((module,),) = [fn.runtime_modules.values()]
    assert module.lowered.program is not None and "def chunk" not in kernel_source(source)
    x = np.random.default_rng(1).standard_normal((rows, width)).astype(np.float32)
    want = np.stack([x[i] * np.float32(i) for i in range(rows)])
    np.testing.assert_array_equal(fn(x), want)  # (one float32 product a value: exact)


def test_a_user_loop_updating_rows_in_place_runs_chunked(monkeypatch):
    """The shape the issue came from: ``out[i] = x[i] * i`` row by row under ``jit``,
    whose kernel binds a view (``t0_flat``) again in later stages, and passes values
    across chunks."""
    monkeypatch.setattr(chunks, "CHUNK_LINES", 40)

    def rows(x):
        out = np.empty_like(x)
        for i in range(x.shape[0]):
            out[i] = x[i] * i
        return out

    x = np.random.default_rng(2).standard_normal((16, 300))
    fn = nbyoc.jit(rows, strict=True)
    np.testing.assert_array_equal(fn(x), rows(x))  # (one product a value: exact)
    assert "def chunk2(" in fn.lower(x).get_source()


def test_a_short_kernel_is_left_whole():
    fn = nbyoc.compile(stacked(3), backend="llvm")
    source = fn.get_source()
    assert "chunk" not in source


def _run(lines, parameters, limit, **arrays):
    """Run ``lines`` as Python, whole and chunked at ``limit``: both results."""
    whole = {k: v.copy() for k, v in arrays.items()}
    exec("\n".join(lines), {"np": np}, whole)
    kernel, source = chunk_kernel(lines, parameters, limit)
    namespace = {"np": np, "njit": lambda *a, **k: lambda f: f}
    exec("\n".join(source), namespace)
    cut = {k: v.copy() for k, v in arrays.items()}
    exec("\n".join(kernel), namespace, cut)
    return kernel, source, whole, cut


def test_a_value_carried_across_chunks_is_passed_and_returned():
    lines = [
        "acc = 0.0",
        "for i in range(4):",
        "    acc = acc + x[i]",
        "scale = 2.0",
        "for i in range(4):",
        "    v = x[i] * scale",  # (v: bound again below before it is read: not passed)
        "    y[i] = v + acc",
        "v = acc * scale",
        "y[0] = v",
    ]
    x = np.arange(4.0)
    kernel, source, whole, cut = _run(lines, ["x", "y"], 3, x=x, y=np.zeros(4))
    assert len(kernel) > 1 and any("return (" in t for t in source)
    np.testing.assert_array_equal(cut["y"], whole["y"])
    returned = {n for t in kernel if t.startswith("(") for n in re.findall(r"\w+", t.split("=")[0])}
    assert "i" not in returned  # a loop's index, read by no later statement


def test_a_parallel_loop_stays_in_the_kernel():
    lines = ["a = x[0:4]", "b = a.reshape((4,))"] * 2 + [
        "for c in prange(4):",
        "    y[c] = b[c]",
        "y[0] = b[1]",
    ]
    kernel, source = chunk_kernel(lines, ["x", "y"], 2)
    assert "for c in prange(4):" in kernel
    assert not any("prange" in t for t in source)
    ast.parse("\n".join(source))  # valid Python


@pytest.mark.parametrize("limit", [1, 2, 5])
def test_chunked_code_computes_what_the_whole_does(limit):
    lines = [
        "# stage 0",
        "t = s[0:4]",
        "n = 3",
        "if x[0] > 0:",
        "    m = 1",
        "else:",
        "    m = 2",
        "for i in range(n):",
        "    t[i] = x[i] * m",
        "t[3] += n",
        "y[:] = t",
    ]
    x = np.array([1.0, 2.0, 3.0, 4.0])
    *_, whole, cut = _run(lines, ["x", "y", "s"], limit, x=x, y=np.zeros(4), s=np.zeros(4))
    np.testing.assert_array_equal(cut["y"], whole["y"])
    np.testing.assert_array_equal(cut["y"], [1.0, 2.0, 3.0, 3.0])
