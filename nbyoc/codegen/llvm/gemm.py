"""matmul in the llvm kernel, with the elementwise ops after it (its *epilogue*: a
bias, an activation, a residual) applied to each block of the result while the
block is still in cache.

Two ways, chosen per call by its sizes:

- **rows**: each output row is ``K`` multiply-adds of rows of ``b`` into an
  accumulator row, vectorised along the row; parallel over rows. For small inner
  sizes (an MLP's 16-wide layers, attention's heads) this beats a BLAS call, whose
  packing costs more than the product.
- **BLAS**: ``np.dot`` on row blocks of ``a`` (Numba calls SciPy's BLAS, which
  threads by itself), each block's epilogue run right after its product. Taken when
  the product is large (``BLAS_MIN_WORK``) and SciPy is installed; without SciPy,
  large products stay on the host's NumPy (``blas_available``).

Float products accumulate in their own dtype, as BLAS does (float16 in float32);
integer and bool products, and products with a 1-D operand, keep plain loops.
"""

from __future__ import annotations

import functools
import importlib.util
import math

from ...ir.dtypes import dtype_info
from ...ir.nodes import Call
from . import rules
from .loops import loops, subscript
from .stages import StageBody

#: Multiply-adds from which a float matmul goes to BLAS (measured on the project's
#: 2-core machine: a 4096 x 16 @ 16 x 32 layer is 2.1x faster as rows; 256 x 256 @
#: 256 x 256 1.9x faster through BLAS).
BLAS_MIN_WORK = 1 << 21
#: ... and the inner size from which it does: rows of a few dozen multiply-adds
#: vectorise well enough that BLAS's packing does not pay.
BLAS_MIN_INNER = 64
#: Bytes of a BLAS row block's result: the epilogue reads it back from L2.
BLOCK_BYTES = 1 << 18


@functools.cache
def blas_available() -> bool:
    """Whether Numba can call BLAS here (its ``np.dot`` needs SciPy).

    >>> isinstance(blas_available(), bool)
    True
    """
    return importlib.util.find_spec("scipy") is not None


def _fast_path(dtype: str) -> bool:
    """Float dtypes take the rows or BLAS path (float16 through a float32 row)."""
    return dtype_info(dtype).is_float


def uses_blas(node: Call) -> bool:
    """Whether this matmul runs through BLAS (both operands at least 2-D, float32 or
    float64, large, SciPy installed)."""
    a, b = node.args
    if a.type.ndim < 2 or b.type.ndim < 2 or node.type.dtype not in ("float32", "float64"):
        return False
    if a.type.dtype != node.type.dtype or b.type.dtype != node.type.dtype:
        return False
    m, k, n = a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]
    return m * k * n >= BLAS_MIN_WORK and k >= BLAS_MIN_INNER and blas_available()


def takes_epilogue(node: Call) -> bool:
    """Whether the matmul's emitter runs an epilogue per row (the rows and BLAS paths)."""
    a, b = node.args
    return a.type.ndim >= 2 and b.type.ndim >= 2 and _fast_path(node.type.dtype)


def matmul_stage(node: Call, sources, dest: str, parallel: bool, epilogue=None) -> StageBody:
    """NumPy's matmul (batched, broadcasting, 1-D operands) into ``dest``, as a stage
    function's body; ``epilogue``, given the names of an output row's leading indices,
    returns the lines to run on that row once it is written."""
    if not takes_epilogue(node):
        assert epilogue is None, "internal: an epilogue for a matmul without rows"
        return _loops_matmul(node, sources, dest)
    if uses_blas(node):
        return _blas_matmul(node, sources, dest, parallel, epilogue)
    return _rows_matmul(node, sources, dest, epilogue)


def _batch(node: Call):
    """The batch shape, and for each operand its batch subscript (broadcast axes at 0)."""
    a, b = node.args
    batch = node.type.shape[:-2]
    names = [f"i{d}" for d in range(len(batch))]

    def index(shape):
        lead = shape[:-2]
        pad = len(batch) - len(lead)
        return [
            "0" if n == 1 and batch[pad + d] != 1 else names[pad + d] for d, n in enumerate(lead)
        ]

    return batch, names, index(a.type.shape), index(b.type.shape)


def _rows_matmul(node, sources, dest, epilogue) -> StageBody:
    a_name, b_name = sources
    a, b = node.args
    dtype = node.type.dtype
    acc_dtype = rules.value_dtype(dtype)
    m, k, n = a.type.shape[-2], a.type.shape[-1], b.type.shape[-1]
    batch, names, a_batch, b_batch = _batch(node)
    rows = math.prod(batch) * m
    a_value = rules.load(f"{a_name}[{subscript([*a_batch, 'm', 'kk'])}]", a.type.dtype)
    b_value = rules.load(f"{b_name}[{subscript([*b_batch, 'kk', 'j'])}]", b.type.dtype)
    out = f"{dest}[{subscript([*names, 'm', 'j'])}]"
    position = _unravel("task", [*batch, m], [*names, "m"])
    stored = rules.store(rules.cast("acc[j]", dtype), dtype)
    body = [
        *position,
        f"for j in range({n}):",
        f"    acc[j] = {rules.cast('0', acc_dtype)}",
        f"for kk in range({k}):",
        f"    av = {rules.cast(a_value, acc_dtype)}",
        f"    for j in range({n}):",
        f"        acc[j] += av * {rules.cast(b_value, acc_dtype)}",
        f"for j in range({n}):",
        f"    {out} = {stored}",
    ]
    if epilogue is not None:
        body += epilogue([*names, "m"])
    setup = [f"acc = np.empty({n}, {rules.NP_TYPES[acc_dtype]})"]
    return StageBody(body, rows, k * n, setup)


def _unravel(flat: str, shape, names) -> list[str]:
    """Lines binding ``names`` to the C-order position ``flat`` in ``shape``."""
    lines, current = [], flat
    for d in reversed(range(1, len(shape))):
        lines += [f"{names[d]} = {current} % {shape[d]}", f"q{d} = {current} // {shape[d]}"]
        current = f"q{d}"
    return [*lines, f"{names[0]} = {current}"]


def _blas_matmul(node, sources, dest, parallel, epilogue) -> StageBody:
    a_name, b_name = sources
    a, b = node.args
    m, n = a.type.shape[-2], b.type.shape[-1]
    batch, names, a_batch, b_batch = _batch(node)
    block = max(1, min(m, BLOCK_BYTES // (n * dtype_info(node.type.dtype).bits // 8)))
    a_rows = f"{a_name}[{subscript([*a_batch, 'slice(r0, r1)'])}]" if batch else f"{a_name}[r0:r1]"
    b_matrix = f"{b_name}[{subscript(b_batch)}]" if batch else b_name
    out_rows = f"{dest}[{subscript([*names, 'slice(r0, r1)'])}]" if batch else f"{dest}[r0:r1]"
    inner = [
        f"for r0 in range(0, {m}, {block}):",
        f"    r1 = min({m}, r0 + {block})",
        f"    np.dot({a_rows}, {b_matrix}, {out_rows})",
    ]
    if epilogue is not None:
        # The block's rows, each row's epilogue in parallel.
        inner += [
            f"    for m in {'prange' if parallel else 'range'}(r0, r1):",
            *("        " + line for line in epilogue([*names, "m"])),
        ]
    return StageBody(loops(batch, inner, False, names))


def _loops_matmul(node: Call, sources, dest: str) -> StageBody:
    """Any matmul as plain loops (integer and bool dtypes, 1-D operands)."""
    a_name, b_name = sources
    a, b = node.args
    out = node.type
    dtype = out.dtype
    acc_dtype = "float64" if dtype_info(dtype).is_float else dtype
    a_shape = (1, *a.type.shape) if a.type.ndim == 1 else a.type.shape
    b_shape = (*b.type.shape, 1) if b.type.ndim == 1 else b.type.shape
    k = a_shape[-1]
    batch = out.shape[: len(out.shape) - (a.type.ndim > 1) - (b.type.ndim > 1)]
    names = [f"i{d}" for d in range(len(batch))]

    def batch_index(shape):
        lead = shape[:-2]
        pad = len(batch) - len(lead)
        return [
            "0" if n == 1 and batch[pad + d] != 1 else names[pad + d] for d, n in enumerate(lead)
        ]

    a_index = batch_index(a_shape) + (["m"] if a.type.ndim > 1 else []) + ["kk"]
    b_index = batch_index(b_shape) + ["kk"] + (["n"] if b.type.ndim > 1 else [])
    out_index = names + (["m"] if a.type.ndim > 1 else []) + (["n"] if b.type.ndim > 1 else [])
    a_value = rules.load(f"{a_name}[{subscript(a_index)}]", a.type.dtype)
    b_value = rules.load(f"{b_name}[{subscript(b_index)}]", b.type.dtype)
    update = f"acc += {rules.cast(a_value, acc_dtype)} * {rules.cast(b_value, acc_dtype)}"
    inner = [
        f"acc = {rules.cast('0', acc_dtype)}",
        f"for kk in range({k}):",
        f"    {update}",
        f"{dest}[{subscript(out_index)}] = {rules.store(rules.cast('acc', dtype), dtype)}",
    ]
    shape = [
        *batch,
        *([a_shape[-2]] if a.type.ndim > 1 else []),
        *([b_shape[-1]] if b.type.ndim > 1 else []),
    ]
    loop_names = [*names, *(["m"] if a.type.ndim > 1 else []), *(["n"] if b.type.ndim > 1 else [])]
    if not shape:
        return StageBody(inner)
    body = [f"{loop_names[0]} = task", *loops(shape[1:], inner, False, loop_names[1:])]
    return StageBody(body, shape[0], math.prod(shape[1:]) * k)
