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


def numpy_ufunc_table() -> str:
    """The NumPy ufuncs graph values answer (what ``nbyoc.jit`` traces through), with the
    op each builds and the ops behind their ``reduce`` and ``accumulate``.

    >>> print(numpy_ufunc_table().splitlines()[2])
    | `numpy.absolute` | `abs` |  |  |
    """
    from .frontend.numpy import ufuncs

    built = {u: f"`{name}`" for u, name in ufuncs.ufunc_ops().items()}
    built.update({u: "a graph of ops" for u in ufuncs.UFUNC_GRAPHS})
    lines = ["| ufunc | builds | `.reduce` | `.accumulate` |", "|---|---|---|---|"]
    for ufunc in sorted(built, key=lambda u: u.__name__):
        reduce = ufuncs.UFUNC_REDUCTIONS.get(ufunc)
        scan = ufuncs.UFUNC_SCANS.get(ufunc)
        cells = [f"`{reduce}`" if reduce else "", f"`{scan}`" if scan else ""]
        lines.append(f"| `numpy.{ufunc.__name__}` | {built[ufunc]} | {' | '.join(cells)} |")
    return "\n".join(lines)


def numpy_function_list() -> str:
    """The NumPy array functions graph values answer (``nbyoc.frontend.numpy.supported``),
    as one sorted line.

    >>> "`numpy.einsum`" in numpy_function_list()
    True
    """
    from .frontend.numpy.support import supported

    return ", ".join(f"`{name}`" for name in supported()["functions"])


def numpy_operator_table() -> str:
    """Python's operators on graph values (``nbyoc.frontend.numpy.supported``) and the op
    each builds (``==`` and ``!=`` only while ``nbyoc.jit`` traces: elsewhere nodes
    compare by identity).

    >>> print(numpy_operator_table().splitlines()[2])
    | `+` | `add` |
    """
    from .frontend.numpy.methods import elementwise_equality
    from .frontend.numpy.support import OPERATORS, supported
    from .ir.builder import var

    x, b = var("x", (2, 2)), var("b", (2, 2), "bool")
    method = {symbol: name for name, symbol in OPERATORS.items()}
    lines = ["| operator | builds |", "|---|---|"]
    for symbol in supported()["operators"]:
        if symbol == "x[...]":  # (the methods' table has indexing)
            continue
        unary = symbol.startswith("unary") or symbol.endswith("()") or symbol == "~"
        operand = b if symbol in ("&", "|", "^", "~") else x
        with elementwise_equality():
            built = getattr(operand, method[symbol])(*([] if unary else [operand]))
        note = " (in `nbyoc.jit`)" if symbol in ("==", "!=") else ""
        note += " (of bools)" if operand is b else ""
        lines.append(f"| `{symbol}` | `{built.op.name}`{note} |")
    return "\n".join(lines)


def numpy_method_table() -> str:
    """The NumPy methods and attributes of graph values (``nbyoc.frontend.numpy.supported``),
    each with the first paragraph of its docstring.

    >>> "| `x.T` |" in numpy_method_table()
    True
    """
    from .frontend.numpy.support import supported
    from .ir.nodes import Expr

    listing = supported()
    shown = [(f"x.{n}", n) for n in listing["attributes"]]
    shown += [(f"x.{n}(...)", n) for n in listing["methods"]]
    lines = ["| method or attribute | what it gives |", "|---|---|"]
    for text, name in [*_PROTOCOL, *sorted(shown, key=lambda pair: pair[1].lower())]:
        doc = (getattr(Expr, name).__doc__ or "").strip().split("\n\n")[0]
        cell = " ".join(doc.split()).replace("|", r"\|")  # (a bar would end the cell)
        lines.append(f"| `{text}` | {cell} |")
    return "\n".join(lines)


#: Python's protocols on graph values that NumPy users reach for, as they are written.
_PROTOCOL = [("x[...]", "__getitem__"), ("len(x)", "__len__")]


def numpy_refused_table() -> str:
    """The NumPy functions refused with a hint of what to write instead.

    >>> "`numpy.average`" in numpy_refused_table()
    True
    """
    from .frontend.numpy import functions, ufuncs
    from .frontend.numpy.refusals import public_name

    hints = {f"numpy.{u.__name__}": h for (u, _), h in ufuncs.UFUNC_HINTS.items()}
    hints.update({public_name(f): h for f, h in functions.FUNCTION_HINTS.items()})
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
