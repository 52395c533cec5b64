"""Loop nests for the csource codegen: the binary/unary op macros of the
reference design, generalised to any rank, dtype and broadcasting.

Each macro defines one function that walks the output in row-major order and
reads each operand through per-axis element strides (0 on a broadcast axis).
Its last argument says whether the loops run on all cores: OpenMP shares the
outer loops out (collapsed, so that (2, 3, 4096) has 6 rows to share) and the
innermost stays whole for the compiler to vectorise; the operands are
``restrict`` (an output never overlaps an input). The guide's own form,
``CSOURCE_BINARY_OP_2D(id, op, d1, d2)`` for float32 operands of the output's
shape, is kept as a shorthand, parallel from ``PARALLEL_MIN_ELEMENTS``.

>>> print(macro_definition("BINARY_OP", 1))
#define CSOURCE_BINARY_OP_1D(p_ID_, p_OP_, p_DIM1_) \\
  CSOURCE_BINARY_OP_T_1D(p_ID_, p_OP_, float, float, float, float, float, p_DIM1_, 1, 1,
    p_DIM1_ >= 131072)
>>> broadcast_strides((3, 1), (2, 3, 4))
(0, 1, 0)
"""

from __future__ import annotations

import math

#: family -> (number of operands, whether the op is a C operator token)
FAMILIES = {
    "BINARY_OP_T": (2, True),
    "BINARY_FN_T": (2, False),
    "UNARY_OP_T": (1, True),
    "UNARY_FN_T": (1, False),
    "TERNARY_FN_T": (3, False),
}
#: Loops over at least this many elements run on all cores: below it, waking the
#: OpenMP threads costs more than the work they share.
PARALLEL_MIN_ELEMENTS = 1 << 17
#: About how many elements a thread takes at a time in a parallel loop.
PARALLEL_CHUNK = 1 << 14
#: The family stem for each number of operands.
ARITY_NAMES = {1: "UNARY", 2: "BINARY", 3: "TERNARY"}


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Row-major element strides of ``shape``."""
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


def broadcast_strides(shape: tuple[int, ...], out_shape: tuple[int, ...]) -> tuple[int, ...]:
    """Element strides reading an operand of ``shape`` along ``out_shape`` (NumPy broadcasting)."""
    own = contiguous_strides(shape)
    pad = len(out_shape) - len(shape)
    return tuple(
        0 if i < pad or shape[i - pad] == 1 else own[i - pad] for i in range(len(out_shape))
    )


def index_expression(strides: tuple[int, ...]) -> str:
    """``i1 * s1 + i2 * s2 ...`` without the zero terms (``0`` if none)."""
    terms = [f"i{d + 1}" if s == 1 else f"i{d + 1} * {s}" for d, s in enumerate(strides) if s]
    return " + ".join(terms) or "0"


def loop_nest(
    shape: tuple, body: list[str], indent: str = "  ", parallel: str | None = None
) -> list[str]:
    """``for`` loops over ``shape`` (outermost first) around ``body``. With ``parallel``
    (a C condition; ``"1"`` for always), the loops but the innermost are shared out by
    OpenMP when it holds, and run as plain loops when not (an OpenMP region that ends
    up running on one thread still costs half a microsecond).

    The shares are handed out as threads ask for them (``schedule(dynamic)``), about
    ``PARALLEL_CHUNK`` elements at a time: with static halves, a core that is busy with
    something else (BLAS threads spinning after a host matmul take one for ~0.1 s)
    holds up the whole loop, and a 2-core parallel loop ran at half serial speed.

    >>> print("\\n".join(loop_nest((4, 5), ["x;"], parallel="1")))
      {
        const int64_t chunk = (16384 + (5) - 1) / (5);
        _Pragma("omp parallel for schedule(dynamic, chunk)")
        for (int64_t i1 = 0; i1 < 4; ++i1) {
          for (int64_t i2 = 0; i2 < 5; ++i2) {
            x;
          }
        }
      }
    """
    if parallel is None or not shape:
        return _loops(shape, body, indent, indent)
    inner = f"({shape[-1]})"
    rows = f"({PARALLEL_CHUNK} + {inner} - 1) / {inner}"  # rows of about PARALLEL_CHUNK
    chunk = str(PARALLEL_CHUNK) if len(shape) == 1 else rows
    collapse = f" collapse({len(shape) - 1})" if len(shape) > 2 else ""
    shared = [
        f"{indent * 2}const int64_t chunk = {chunk};",
        f'{indent * 2}_Pragma("omp parallel for{collapse} schedule(dynamic, chunk)")',
        *_loops(shape, body, indent, indent * 2),
    ]
    if parallel == "1":
        return [f"{indent}{{", *shared, f"{indent}}}"]
    plain = _loops(shape, body, indent, indent * 2)
    return [f"{indent}if ({parallel}) {{", *shared, f"{indent}}} else {{", *plain, f"{indent}}}"]


def _loops(shape: tuple, body: list[str], indent: str, pad: str) -> list[str]:
    lines = [
        f"{pad}{indent * d}for (int64_t i{d + 1} = 0; i{d + 1} < {size}; ++i{d + 1}) {{"
        for d, size in enumerate(shape)
    ]
    lines += [pad + indent * len(shape) + line for line in body]
    return lines + [pad + indent * d + "}" for d in reversed(range(len(shape)))]


def output_index(dims: list[str]) -> str:
    """The row-major index of element (i1, i2, ...) in an array of ``dims``.

    >>> output_index(["A", "B", "C"])
    'i1 * ((int64_t)B * C) + i2 * (C) + i3'
    """
    terms = [f"i{d + 1} * ({_product(dims[d + 1 :])})" for d in range(len(dims) - 1)]
    return " + ".join([*terms, f"i{len(dims)}"]) if dims else "0"


def _product(factors: list[str]) -> str:
    """``a * b * c`` computed in 64 bits (literals are ``int``, whose product may overflow)."""
    if len(factors) < 2:
        return factors[0] if factors else "1"
    return " * ".join([f"(int64_t){factors[0]}", *factors[1:]])


def macro_name(family: str, rank: int) -> str:
    return f"CSOURCE_{family}_{rank}D"


def macro_definition(family: str, rank: int) -> str:
    """The ``#define`` of ``family`` (see ``FAMILIES``, or the guide's "BINARY_OP") for ``rank``."""
    dims = [f"p_DIM{d + 1}_" for d in range(rank)]
    if family == "BINARY_OP":  # the guide's float32 form, via the general one
        inner = [_product(dims[d + 1 :]) for d in range(rank)]
        parallel = f"{_product(dims)} >= {PARALLEL_MIN_ELEMENTS}"
        args = ["p_ID_", "p_OP_", "float", "float", "float", "float", "float", *dims, *inner]
        args += inner
        args.append(parallel)
        head = f"#define {macro_name(family, rank)}({', '.join(['p_ID_', 'p_OP_', *dims])})"
        return f"{head} \\\n  {macro_name('BINARY_OP_T', rank)}({', '.join(args)})"
    arity, infix = FAMILIES[family]
    operands = "abc"[:arity]
    types = [f"p_T{x.upper()}_" for x in operands]
    strides = {x: [f"p_S{x.upper()}{d + 1}_" for d in range(rank)] for x in operands}
    # Each operand is read in its working type (p_WA_, ...: its dtype in the op's loop,
    # float for float16; ``where`` reads its condition as _Bool, its branches in their
    # common type), the result converted to the output type (p_TO_).
    working = [f"p_W{x.upper()}_" for x in operands]
    params = ["p_ID_", "p_OP_" if infix else "p_FN_", *types, "p_TO_", *working, *dims]
    for x in operands:
        params += strides[x]
    params.append("p_PAR_")
    reads = []
    for x, w in zip(operands, working):
        index = " + ".join(f"i{d + 1} * ({s})" for d, s in enumerate(strides[x])) or "0"
        reads.append(f"({w}){x}[{index}]")
    if infix:
        value = f"{reads[0]} p_OP_ {reads[1]}" if arity == 2 else f"p_OP_ {reads[0]}"
    else:
        value = f"p_FN_({', '.join(reads)})"
    signature = ", ".join(f"const {t}* restrict {x}" for t, x in zip(types, operands))
    store = f"out[{output_index(dims)}] = (p_TO_)({value});"
    loops = loop_nest(tuple(dims), [store], parallel="(p_PAR_)")
    lines = [
        f"#define {macro_name(family, rank)}({', '.join(params)})",
        f"  NBYOC_VECTOR_CLONES static void p_ID_({signature}, p_TO_* restrict out) {{",
        *("  " + line for line in loops),
        "  }",
    ]
    width = max(len(line) for line in lines)
    return "\n".join(line.ljust(width) + " \\" for line in lines[:-1]) + "\n" + lines[-1]
