"""The op catalog: every registered op by family, with the backends that run it. The
documentation's op table is this text (``python -m nbyoc ops``), and a test keeps them
equal.

A backend "runs" an op when it claims calls of it (its rules table has a row; a
support predicate may still leave some dtypes or sizes to others: no backend takes the
narrow storage dtypes, csource takes no bfloat16, llvm takes integer matmuls and those
with a 1-D operand only while small). An op with a decomposition that a backend lacks
runs there "decomposed"; anything else runs on the host.

>>> print(op_table().splitlines()[2])
| elementwise | `add` | yes | yes | yes |
"""

from __future__ import annotations

from .ir.op import get_op, list_ops
from .ir.ops import FAMILY_NAMES, FAMILY_OF
from .transform.support import declared_ops

BACKENDS = ("llvm", "csource", "examplejson")


def _cell(backend: str, name: str) -> str:
    if name in declared_ops(backend):
        return "yes"
    return "decomposed" if get_op(name).decompose is not None else "host"


def op_table() -> str:
    """The markdown table of every op nbyoc registers itself, family by family."""
    lines = ["| family | op | " + " | ".join(BACKENDS) + " |", "|---" * (2 + len(BACKENDS)) + "|"]
    for family in FAMILY_NAMES:
        for name in (n for n in list_ops() if FAMILY_OF.get(n) == family):
            cells = " | ".join(_cell(b, name) for b in BACKENDS)
            lines.append(f"| {family} | `{name}` | {cells} |")
    return "\n".join(lines)


def _numpy_name(func) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    prefix = "np" + module.removeprefix("numpy").replace("._core", "").replace(".core", "")
    return f"{prefix.rstrip('.')}.{func.__name__}"


def numpy_ufunc_table() -> str:
    """The NumPy ufuncs graph values answer (what ``nbyoc.jit`` traces through), with the
    op each builds and the ops behind their ``reduce`` and ``accumulate``.

    >>> print(numpy_ufunc_table().splitlines()[2])
    | `np.absolute` | `abs` |  |  |
    """
    from .ir import numpy_protocol as protocol

    built = {u: f"`{name}`" for u, name in protocol.ufunc_ops().items()}
    built.update({u: "a graph of ops" for u in protocol.UFUNC_GRAPHS})
    lines = ["| ufunc | builds | `.reduce` | `.accumulate` |", "|---|---|---|---|"]
    for ufunc in sorted(built, key=lambda u: u.__name__):
        reduce = protocol.UFUNC_REDUCTIONS.get(ufunc)
        scan = protocol.UFUNC_SCANS.get(ufunc)
        cells = [f"`{reduce}`" if reduce else "", f"`{scan}`" if scan else ""]
        lines.append(f"| `np.{ufunc.__name__}` | {built[ufunc]} | {' | '.join(cells)} |")
    return "\n".join(lines)


def numpy_function_list() -> str:
    """The NumPy array functions graph values answer, as one sorted line.

    >>> "`np.einsum`" in numpy_function_list()
    True
    """
    from .ir.numpy_protocol import ARRAY_FUNCTIONS

    return ", ".join(sorted({f"`{_numpy_name(f)}`" for f in ARRAY_FUNCTIONS}))


#: The operators a graph value has, with an example of each (read by
#: ``numpy_operator_table``, which builds them to find the op).
OPERATORS = (
    ("x + y", "__add__"), ("x - y", "__sub__"), ("x * y", "__mul__"), ("x / y", "__truediv__"),
    ("x // y", "__floordiv__"), ("x % y", "__mod__"), ("x ** y", "__pow__"),
    ("x @ y", "__matmul__"), ("-x", "__neg__"), ("abs(x)", "__abs__"), ("x < y", "__lt__"),
    ("x <= y", "__le__"), ("x > y", "__gt__"), ("x >= y", "__ge__"), ("x == y", "__eq__"),
    ("x != y", "__ne__"),
)  # fmt: skip


def numpy_operator_table() -> str:
    """Python's operators on graph values and the op each builds (``==`` and ``!=`` only
    while ``nbyoc.jit`` traces: elsewhere nodes compare by identity).

    >>> print(numpy_operator_table().splitlines()[2])
    | `x + y` | `add` |
    """
    from .ir.builder import var
    from .ir.numpy_protocol import elementwise_equality

    x, y = var("x", (2, 2)), var("y", (2, 2))
    lines = ["| operator | builds |", "|---|---|"]
    for text, method in OPERATORS:
        with elementwise_equality():
            built = getattr(x, method)(*([y] if " y" in text else []))
        note = " (in `nbyoc.jit`)" if method in ("__eq__", "__ne__") else ""
        lines.append(f"| `{text}` | `{built.op.name}`{note} |")
    return "\n".join(lines)


def numpy_method_table() -> str:
    """The NumPy-style methods and attributes of graph values, each with the first line
    of its docstring.

    >>> "| `x.T` |" in numpy_method_table()
    True
    """
    from .ir.nodes import Expr

    lines = ["| method or attribute | what it gives |", "|---|---|"]
    names = sorted(n for n in dir(Expr) if not n.startswith("_") and n not in _NOT_NUMPY)
    shown = [(f"x.{n}" if isinstance(getattr(Expr, n), property) else f"x.{n}(...)", n)
             for n in names]  # fmt: skip
    for text, name in [*_PROTOCOL, *shown]:
        doc = (getattr(Expr, name).__doc__ or "").strip().split("\n\n")[0]
        cell = " ".join(doc.split()).replace("|", r"\|")  # (a bar would end the cell)
        lines.append(f"| `{text}` | {cell} |")
    return "\n".join(lines)


#: Public attributes of graph values that are nbyoc's own, not NumPy's.
_NOT_NUMPY = {"type"}
#: Python's protocols on graph values that NumPy users reach for, as they are written.
_PROTOCOL = [("x[...]", "__getitem__"), ("len(x)", "__len__")]


def numpy_refused_table() -> str:
    """The NumPy functions refused with a hint of what to write instead.

    >>> "`np.copy`" in numpy_refused_table()
    True
    """
    from .ir import numpy_protocol as protocol

    hints = {f"np.{u.__name__}": h for (u, _), h in protocol.UFUNC_HINTS.items()}
    hints.update({_numpy_name(f): h for f, h in protocol.FUNCTION_HINTS.items()})
    lines = ["| NumPy | instead |", "|---|---|"]
    lines += [f"| `{name}` | {hints[name]} |" for name in sorted(hints)]
    return "\n".join(lines)


def dtype_table() -> str:
    """Every dtype, whether nbyoc computes in it or only stores it, and which backends
    take an elementwise op of it (``add``; ``cast`` to float32 for a storage dtype);
    the host runs what they leave.

    >>> print(dtype_table().splitlines()[2])
    | `float32` | computes | yes | yes | yes |
    """
    from .codegen import supports
    from .ir.builder import var
    from .ir.dtypes import DTYPES, NARROW_DTYPES
    from .ir.ops import add, cast

    lines = ["| dtype | nbyoc | " + " | ".join(BACKENDS) + " |", "|---" * (2 + len(BACKENDS)) + "|"]
    for dtype in (*DTYPES, *NARROW_DTYPES):
        x = var("x", (2,), dtype)
        call = add(x, x) if dtype in DTYPES else cast(x, "float32")
        kind = "computes" if dtype in DTYPES else "stores and casts"
        cells = " | ".join("yes" if supports(b, call) else "host" for b in BACKENDS)
        lines.append(f"| `{dtype}` | {kind} | {cells} |")
    return "\n".join(lines)
