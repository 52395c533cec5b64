"""Bisecting a region whose results diverge from the host's, down to the first op (in
evaluation order) whose value diverges.

The region's calls, in the order the host evaluates them, are cut into prefixes: the
function of the first ``k`` calls returns every one of their values. Whether it
diverges is monotone in ``k`` (a prefix holds every value a shorter one returns), so a
binary search over ``k`` finds the first diverging op in about ``log2(calls) + 1``
builds. Each prefix is built by the region's own backend (its codegen, with the
executable's options), run on the region's recorded inputs and compared as the region
was (``runtime.verify.compare``). This needs nothing of the backend but its codegen
and functions of several outputs; a backend that cannot build or run a prefix stops the
bisection, and the report says why (unless the region itself raised: then the first op
whose prefix raises is the one sought). An error that shows only when the region is
built whole (a fused pattern, say) is reported as such: with every value an output, no
op diverges.

>>> import numpy as np, nbyoc
>>> a = nbyoc.var("a", (3,))
>>> region = nbyoc.function([a], nbyoc.exp(a) * a).with_attrs(
...     Compiler="examplejson", global_symbol="examplejson_0")
>>> names(region)
{'%0': '  %0 = exp(%a);', 'the result': '  multiply(%0, %a)'}
"""

from __future__ import annotations

from ..ir.nodes import Call, Function, Tuple, TupleGetItem, Var
from ..ir.printer import astext
from ..ir.traversal import post_order
from ..ir.types import TupleType
from .fallback import reason
from .rebuild import build_region, callable_of
from .verify import _flat, compare
from .verify_report import Divergence


class _Stopped(Exception):
    """The bisection cannot go on (a prefix the backend cannot build)."""


def bisect_region(func: Function, inputs, options, rtol: float = 0.0, atol: float = 0.0,
                  raised: bool = False) -> Divergence:  # fmt: skip
    """The first op of external function ``func`` whose value its backend computes
    beyond tolerance on ``inputs`` (its recorded arguments), or why none was found.
    ``raised``: the region raised instead of returning, so the first op whose prefix
    raises is the one sought; otherwise a prefix that raises stops the bisection."""
    symbol, backend = func.attrs["global_symbol"], func.attrs["Compiler"]
    calls = [n for n in post_order([func.body]) if isinstance(n, Call)]
    found: dict[int, str] = {}

    def diverges(k: int) -> bool:
        detail = _diverges(func, calls, k, inputs, options, rtol, atol, raised)
        if detail:
            found[k] = detail
        return bool(detail)

    def stopped(why: str) -> Divergence:
        return Divergence(symbol, backend, "", "", {}, "", why)

    try:
        if not calls or not diverges(len(calls)):
            return stopped(
                "with every op's value made an output, no op diverges: the error shows only "
                "when the region is built whole (a pattern the backend fuses?)"
            )
        good, bad = 0, len(calls)  # the first `good` ops agree; the first `bad` do not
        while bad - good > 1:
            middle = (good + bad) // 2
            if diverges(middle):
                bad = middle
            else:
                good = middle
    except _Stopped as e:
        return stopped(str(e))
    node = calls[bad - 1]
    name = _name_of(func, node)
    return Divergence(symbol, backend, name, node.op.name, dict(node.attrs),
                      names(func)[name].strip().rstrip(";"), found[bad])  # fmt: skip


def _diverges(func, calls, k, inputs, options, rtol, atol, raised) -> str:
    """How the function of ``func``'s first ``k`` calls diverges (its last op's values
    first), or "" if it does not."""
    symbol, backend = func.attrs["global_symbol"], func.attrs["Compiler"]
    outputs, last = [], 0
    for call in calls[:k]:
        last = len(outputs)
        if isinstance(call.type, TupleType):
            outputs += [TupleGetItem(call, i) for i in range(len(call.type.fields))]
        else:
            outputs.append(call)
    used = {v for v in post_order(outputs) if isinstance(v, Var)}
    positions = [i for i, p in enumerate(func.params) if p in used]
    prefix = Function([func.params[i] for i in positions], Tuple(outputs),
                      {"Compiler": backend, "global_symbol": f"{symbol}_first{k}"})  # fmt: skip
    args = [inputs[i] for i in positions]
    try:
        run = callable_of(build_region(prefix, options), prefix)
    except Exception as e:
        raise _Stopped(
            f"the {backend} codegen cannot build the region's first {k} ops ({reason(e)})"
        ) from None
    try:
        got = _flat(run(*args))
    except Exception as e:
        if raised:
            return f"the region's first {k} ops raised {reason(e)}"
        raise _Stopped(  # (the region ran: this prefix's error is no wrong value)
            f"the {backend} module raised on the region's first {k} ops ({reason(e)}), which "
            f"return all {k} values (a tuple): bisection needs the backend to run those"
        ) from None
    rows = compare(prefix, args, got, rtol, atol)
    bad = [row for row in rows[last:] + rows[:last] if not row.ok]
    if not bad:
        return ""
    row = bad[0]
    if row.error:
        return f"raised {row.error}"
    return (
        f"max abs error {row.max_abs_error:.3g} where its tolerance is {row.tolerance:.3g} "
        f"({row.beyond} of {row.checked} elements beyond)"
    )


def names(func: Function) -> dict[str, str]:
    """Each computed value's name in ``print(func)`` (``%k``, or ``the result``) -> its line."""
    lines = astext(func, show_types=False).splitlines()[1:-1]
    found, counter = {}, 0
    for node in post_order([func.body]):
        if isinstance(node, Var):
            continue
        if node is func.body:
            found["the result"] = next(line for line in reversed(lines) if line.startswith("  "))
            break
        name = f"%{counter}"
        counter += 1
        found[name] = next(line for line in lines if line.startswith(f"  {name} = "))
    return found


def _name_of(func: Function, target) -> str:
    counter = 0
    for node in post_order([func.body]):
        if isinstance(node, Var):
            continue
        if node is func.body:
            return "the result"
        if node is target:
            return f"%{counter}"
        counter += 1
    raise AssertionError("the op is in the region")
