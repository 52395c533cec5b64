"""Loop nests for the csource codegen: the binary/unary op macros of the
reference design, generalised to any rank, dtype and broadcasting.

Each macro defines one function that walks the output in row-major order and
reads each operand through per-axis element strides (0 on a broadcast axis).
The guide's own form, ``CSOURCE_BINARY_OP_2D(id, op, d1, d2)`` for float32
operands of the output's shape, is kept as a shorthand.

>>> print(macro_definition("BINARY_OP", 1))
#define CSOURCE_BINARY_OP_1D(p_ID_, p_OP_, p_DIM1_) \\
  CSOURCE_BINARY_OP_T_1D(p_ID_, p_OP_, float, float, float, float, p_DIM1_, 1, 1)
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


def loop_nest(shape: tuple[int, ...], body: list[str], indent: str = "  ") -> list[str]:
    """``for`` loops over ``shape`` (outermost first) around ``body``."""
    lines = []
    for d, size in enumerate(shape):
        pad = indent * (d + 1)
        lines.append(f"{pad}for (int64_t i{d + 1} = 0; i{d + 1} < {size}; ++i{d + 1}) {{")
    pad = indent * (len(shape) + 1)
    lines += [pad + line for line in body]
    lines += [indent * (d + 1) + "}" for d in reversed(range(len(shape)))]
    return lines


def macro_name(family: str, rank: int) -> str:
    return f"CSOURCE_{family}_{rank}D"


def macro_definition(family: str, rank: int) -> str:
    """The ``#define`` of ``family`` (see ``FAMILIES``, or the guide's "BINARY_OP") for ``rank``."""
    dims = [f"p_DIM{d + 1}_" for d in range(rank)]
    if family == "BINARY_OP":  # the guide's float32 form, via the general one
        inner = [" * ".join(dims[d + 1 :]) or "1" for d in range(rank)]
        args = ["p_ID_", "p_OP_", "float", "float", "float", "float", *dims, *inner, *inner]
        head = f"#define {macro_name(family, rank)}({', '.join(['p_ID_', 'p_OP_', *dims])})"
        return f"{head} \\\n  {macro_name('BINARY_OP_T', rank)}({', '.join(args)})"
    arity, infix = FAMILIES[family]
    operands = "abc"[:arity]
    types = [f"p_T{x.upper()}_" for x in operands]
    strides = {x: [f"p_S{x.upper()}{d + 1}_" for d in range(rank)] for x in operands}
    # Operands are read in the working type (p_TW_: the op's loop dtype, float for
    # float16), the result converted to the output type (p_TO_).
    params = ["p_ID_", "p_OP_" if infix else "p_FN_", *types, "p_TO_", "p_TW_", *dims]
    for x in operands:
        params += strides[x]
    reads = []
    for x in operands:
        index = " + ".join(f"i{d + 1} * ({s})" for d, s in enumerate(strides[x])) or "0"
        reads.append(f"(p_TW_){x}[{index}]")
    if infix:
        value = f"{reads[0]} p_OP_ {reads[1]}" if arity == 2 else f"p_OP_ {reads[0]}"
    else:
        value = f"p_FN_({', '.join(reads)})"
    signature = ", ".join(f"const {t}* {x}" for t, x in zip(types, operands))
    loops = loop_nest(tuple(dims), [f"out[k++] = (p_TO_)({value});"])
    lines = [
        f"#define {macro_name(family, rank)}({', '.join(params)})",
        f"  static void p_ID_({signature}, p_TO_* out) {{",
        "    int64_t k = 0;",
        *("  " + line for line in loops),
        "  }",
    ]
    width = max(len(line) for line in lines)
    return "\n".join(line.ljust(width) + " \\" for line in lines[:-1]) + "\n" + lines[-1]
