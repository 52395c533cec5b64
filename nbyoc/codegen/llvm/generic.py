"""Which sizes of a size-generic region are symbolic, for the emitters that would
otherwise write a size into a stage's code.

A region built for one binding of a function with symbolic sizes (``size_generic``)
is registered with the symbolic function it was made from (``register``), and carries
its parameters' symbolic shapes in the attribute ``symbolic_shapes`` (``"n,8;n,4"``),
so that its kernel's cache key tells it from a region of fixed shapes. While it is
lowered, ``symbolic_size(node, axis)`` says whether that size of a node is symbolic
(the node of the symbolic function in the same place says): a stage reads such a size
at run time even where a fixed size would be written in (a product's column count, a
short row's length), so the stage is the same for every binding. A region without a
registered symbolic function (loaded from an archive) is lowered for its shapes: its
code is right for them, only less shared.

>>> import nbyoc
>>> from nbyoc.ir.specialize import specialize
>>> x = nbyoc.var("x", ("n", 8))
>>> symbolic = nbyoc.function([x], nbyoc.exp(x))
>>> region = specialize(symbolic, {"n": 4})
>>> register(region, symbolic)
>>> with lowering(region):
...     symbolic_size(region.body, 0), symbolic_size(region.body, 1)
(True, False)
"""

from __future__ import annotations

import contextlib
import contextvars
import weakref

from ...ir.nodes import Function
from ...ir.symbols import SizeExpr
from ...ir.traversal import post_order
from ...ir.types import TensorType

#: The function attribute holding the parameters' symbolic shapes.
ATTR = "symbolic_shapes"

_SYMBOLIC: contextvars.ContextVar = contextvars.ContextVar("nbyoc_llvm_symbolic", default=None)
#: Each registered region's symbolic function (held while the region lives).
_SOURCES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
#: The binding of each region registered with one.
_BINDINGS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def register(region: Function, symbolic: Function, binding: dict | None = None) -> None:
    """Note that ``region`` is ``symbolic`` specialised (``specialize``: node for node),
    by ``binding`` when given (a region registered without one is never made from a
    template: ``templates``)."""
    _SOURCES[region] = symbolic
    if binding is not None:
        _BINDINGS[region] = dict(binding)


def binding_of(region: Function) -> dict | None:
    """The binding ``region`` was registered with, if any."""
    return _BINDINGS.get(region)


def source_of(region: Function) -> Function | None:
    """The symbolic function ``region`` was registered as a binding of, if any."""
    return _SOURCES.get(region)


def shapes_text(func: Function) -> str:
    """``func``'s parameters' shapes as the attribute writes them."""
    return ";".join(",".join(str(d).replace(" ", "") for d in p.type.shape) for p in func.params)


@contextlib.contextmanager
def lowering(func: Function):
    """While ``func`` is lowered: its nodes' symbolic types (none unless it carries them)."""
    token = _SYMBOLIC.set(_symbolic_types(func))
    try:
        yield
    finally:
        _SYMBOLIC.reset(token)


def symbolic_size(node, axis: int) -> bool:
    """Whether size ``axis`` of ``node`` (negative counts from the end) is symbolic in the
    function being lowered."""
    types = _SYMBOLIC.get()
    t = types.get(node, node.type) if types else node.type
    return isinstance(t, TensorType) and isinstance(t.shape[axis], SizeExpr)


def _symbolic_types(func: Function) -> dict | None:
    symbolic = _SOURCES.get(func)
    if symbolic is None:
        return None
    concrete_nodes = post_order([func.body])
    symbolic_nodes = post_order([symbolic.body])
    if len(concrete_nodes) != len(symbolic_nodes):
        return None
    return {c: s.type for c, s in zip(concrete_nodes, symbolic_nodes)}


def mark_symbolic(symbolic, concrete, binding=None):
    """``concrete`` (a module ``symbolic`` specialised by ``binding``) with each llvm
    region carrying its parameters' symbolic shapes (the attribute ``symbolic_shapes``,
    part of its kernel's cache key) and registered with its symbolic function and the
    binding (``register``)."""
    from ...ir.nodes import IRModule

    functions = dict(concrete.functions)
    for name, func in symbolic.functions.items():
        if func.attrs.get("Compiler") == "llvm" and any(p.type.symbols for p in func.params):
            functions[name] = functions[name].with_attrs(**{ATTR: shapes_text(func)})
            register(functions[name], func, binding)
    if functions == dict(concrete.functions):
        return concrete
    return IRModule(functions)  # (main's calls name the same functions, of the same types)


def fixed_build_faster(module) -> bool:
    """Whether some llvm region of ``module`` would be a compiled kernel, not a program,
    when built for its fixed shapes (``lower.is_program``): a size-generic build of it
    pays a program's dearer call."""
    from .lower import is_program, region_work

    regions = [f for f in module.functions.values() if f.attrs.get("Compiler") == "llvm"]
    work = [region_work(f) for f in regions]
    return any(not is_program(w, sum(work)) for w in work)
