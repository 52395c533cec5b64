"""Binding symbolic sizes from a call's arrays, and checking what the types assumed.

A function with symbolic dimensions (``nbyoc.var("x", ("n", 3))``) learns its sizes
from its arguments: each dimension that is a symbol takes the array's size there,
a dimension written ``2*n + 1`` is solved for ``n`` when ``n`` appears nowhere
plainer, and every other use must agree. Then each constraint the type rules could
not prove (``ir.symbols.Constraint``) is checked; an error names the symbols and
their values.

>>> from nbyoc.ir.types import TensorType
>>> binder = SizeBinder([("x", TensorType(("n", 3))), ("y", TensorType(("2*n + 1",)))], [], "f")
>>> binder.bind([(4, 3), (9,)])
{'n': 4}
>>> binder.bind([(4, 3), (8,)])
Traceback (most recent call last):
    ...
nbyoc.errors.ShapeMismatchError: f: argument 1 (y) has size 8 on axis 0, where its type ...
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence

from ..errors import ArgumentError, NbyocError, NbyocTypeError, ShapeMismatchError
from ..ir.nodes import Call, IRModule
from ..ir.symbols import SYMBOL_MIN, Constraint, SizeExpr, substitute
from ..ir.traversal import post_order
from ..ir.types import TensorType


class SizeBinder:
    """Finds each symbol's value from the arguments' shapes (``bind``)."""

    def __init__(self, params: Sequence[tuple[str, TensorType]], constraints, where: str):
        self.where = where
        self.names = [name for name, _ in params]
        self.shapes = [t.shape for _, t in params]
        self.constraints = list(constraints)
        self.symbols = sorted(set().union(*(t.symbols for _, t in params)))
        # Where each symbol is read plainly (parameter, axis), first use first: the rest
        # of the dimensions are checked, or solved for a symbol no plain one gives.
        self.plain: dict[str, tuple[int, int]] = {}
        self.derived: list[tuple[int, int, SizeExpr]] = []
        for i, shape in enumerate(self.shapes):
            for axis, d in enumerate(shape):
                if isinstance(d, SizeExpr):
                    name = _plain_symbol(d)
                    if name is not None and name not in self.plain:
                        self.plain[name] = (i, axis)
                    else:
                        self.derived.append((i, axis, d))
        given = set(self.plain)
        for _, _, d in self.derived:
            unknown = d.symbols - given
            if len(unknown) > 1 or (unknown and _linear_in(d, next(iter(unknown))) is None):
                raise NbyocTypeError(
                    f"{where}: the sizes {', '.join(sorted(unknown))} of {d} cannot be found "
                    f"from the arguments' shapes; give one of them a dimension of its own"
                )
            given |= unknown

    def bind(self, shapes: Sequence[tuple[int, ...]]) -> dict[str, int]:
        """Each symbol's value for arguments of ``shapes`` (already checked for rank and
        for their fixed dimensions), or a ``ShapeMismatchError`` saying which disagree."""
        binding = {name: shapes[i][axis] for name, (i, axis) in self.plain.items()}
        for i, axis, d in self.derived:
            size = shapes[i][axis]
            unknown = d.symbols - set(binding)
            if unknown:
                (name,) = unknown
                scale, offset = _linear_in(substitute(d, binding), name)
                value, rest = divmod(size - offset, scale)
                if rest == 0 and value >= SYMBOL_MIN:
                    binding[name] = value
                    continue
            elif substitute(d, binding) == size:
                continue
            raise self._disagrees(i, axis, d, size, binding)
        for name, value in binding.items():
            if value < SYMBOL_MIN:
                i, axis = self.plain[name]
                raise ShapeMismatchError(
                    f"{self._which(i)} has size {value} on axis {axis}, the size {name}; "
                    f"a symbolic size is at least {SYMBOL_MIN} (use a function with that "
                    f"dimension fixed for empty arrays)"
                )
        for constraint in self.constraints:
            if not constraint.holds(binding):
                raise ShapeMismatchError(f"{self.where}: {constraint.explain(binding)}")
        return binding

    def _which(self, i: int) -> str:
        return f"{self.where}: argument {i} ({self.names[i]})"

    def _disagrees(self, i: int, axis: int, d, size: int, binding: dict) -> ShapeMismatchError:
        given = ", ".join(f"{n} = {binding[n]}" for n in sorted(d.symbols) if n in binding)
        origin = "; ".join(
            f"{n} from argument {self.plain[n][0]} ({self.names[self.plain[n][0]]}) axis "
            f"{self.plain[n][1]}" for n in sorted(d.symbols) if n in self.plain
        )  # fmt: skip
        return ShapeMismatchError(
            f"{self._which(i)} has size {size} on axis {axis}, where its type says {d}"
            + (f" = {substitute(d, binding)} ({given}; {origin})" if given else "")
        )


def _plain_symbol(d: SizeExpr) -> str | None:
    """The name of ``d`` if it is just a symbol."""
    if len(d.terms) == 1:
        ((monomial, coeff),) = d.terms
        if coeff == 1 and len(monomial) == 1 and isinstance(monomial[0], str):
            return monomial[0]
    return None


def _linear_in(d, name: str) -> tuple[int, int] | None:
    """(a, b) when ``d`` is ``a * name + b`` with ints a > 0 and b, else None."""
    if not isinstance(d, SizeExpr):
        return None
    scale, offset = 0, 0
    for monomial, coeff in d.terms:
        if monomial == ():
            offset = coeff
        elif monomial == (name,):
            scale = coeff
        else:
            return None
    return (scale, offset) if scale > 0 else None


def module_constraints(module: IRModule) -> list[Constraint]:
    """Every constraint the calls of ``module``'s functions assumed, each once, in order."""
    found: dict[Constraint, None] = {}
    for func in module.functions.values():
        for node in post_order([func.body]):
            if isinstance(node, Call):
                found.update(dict.fromkeys(node.assumes))
    return list(found)


def is_symbolic(module: IRModule) -> bool:
    """True when ``main`` has a parameter with a symbolic dimension."""
    return any(p.type.symbols for p in module["main"].params)


#: How many executables (one per binding of the sizes) a symbolic one keeps; the one
#: made first goes first. Their kernels are shared, so one costs its plan and buffers.
MAX_KEPT = 64

#: ``(module, binding, backend, options, generic, strict, verify) -> Executable``: builds
#: the module for one binding of its sizes, size-generic or not. Set by
#: ``nbyoc.compiler`` (the runtime imports no codegen). The executable's ``fixed_pays``
#: says whether a build for fixed shapes would run faster (``STABLE_CALLS``).
_SPECIALIZER: list[Callable] = []
#: A binding called this many times is *stable*: when its size-generic build is one a
#: build for its fixed shapes beats (``fixed_pays``: a region too small for a program's
#: dearer call, 5 to 30 us, not to show), it is built again for its shapes and runs that.
#: Measured (bench/size_generic.py): the bench graphs at 256x256 ran 1.3x to 4x slower
#: size-generic, from 1024x1024 within 8%.
STABLE_CALLS = 16


def register_specializer(make: Callable) -> None:
    """Set the function that builds a module for concrete sizes (``nbyoc.compiler``)."""
    _SPECIALIZER[:] = [make]


class SymbolicSizes:
    """The calls of an executable whose ``main`` has symbolic sizes: bind the sizes from
    the arguments, check the constraints, and run the executable made for that binding
    (made once, the ``MAX_KEPT`` made last kept; the kernels they use are compiled
    once per structure and shared, so a new size compiles nothing new)."""

    def __init__(self, executable, constraints):
        self.executable = executable
        main = executable.module["main"]
        self.spec = executable._spec
        self.binder = SizeBinder([(p.name_hint, p.type) for p in main.params], constraints, "main")
        self._made: OrderedDict = OrderedDict()
        self._calls: dict[tuple, int] = {}  # (until a binding is stable)
        self.stable_calls = STABLE_CALLS  # (read when compiled; 0: never rebuilt)
        self._lock = threading.Lock()
        plain = self.binder.plain
        #: where each symbol is read, when every one is read plainly: a call's binding is
        #: then its arrays' sizes there, and the build made for it checks the rest.
        self._positions = (
            [plain[name] for name in self.binder.symbols]
            if all(name in plain for name in self.binder.symbols) else None
        )  # fmt: skip

    def call(self, *args, **named):
        positions = self._positions
        if positions is not None and not named:
            try:
                key = tuple([args[i].shape[axis] for i, axis in positions])
            except (AttributeError, IndexError, TypeError):
                key = None
            made = self._made.get(key)
            if made is not None:
                if key in self._calls:
                    made = self._count(key, made)
                try:
                    return made._call(*args)  # (it checks every shape: they are its own)
                except ArgumentError:
                    pass  # (the check below says what is wrong, in the symbols' terms)
        return self._call_checked(args, named)

    def _call_checked(self, args, named):
        if named:
            raise self.spec.keywords_refused(named)
        arrays = self.spec.check(args)
        return self.executable_for(arrays)._call(*arrays)

    def executable_for(self, arrays):
        """The executable made for the binding of ``arrays`` (checked arguments; made
        now if the binding is new)."""
        binding = self.binder.bind([a.shape for a in arrays])
        key = tuple(binding[name] for name in self.binder.symbols)
        made = self._made.get(key)
        if made is None:
            made = self._make(key, binding)
        return made

    def _count(self, key: tuple, made):
        """Count a call of binding ``key``; at its ``STABLE_CALLS``-th, the build for its
        fixed shapes when that one is faster (``fixed_pays``)."""
        calls = self._calls[key] = self._calls[key] + 1
        if calls < self.stable_calls:
            return made
        del self._calls[key]
        if not getattr(made, "fixed_pays", False):
            return made
        ex = self.executable
        binding = dict(zip(self.binder.symbols, key))
        fixed = _SPECIALIZER[0](ex.module, binding, ex.backend, ex.options, generic=False,
                                strict=ex.strict)  # fmt: skip
        with self._lock:
            if self._made.get(key) is made:
                self._made[key] = fixed
        return fixed

    def bind(self, shapes) -> dict[str, int]:
        """The binding for arguments of ``shapes`` (ranks and fixed sizes checked too)."""
        shapes = [tuple(shape) for shape in shapes]
        if len(shapes) != len(self.spec.shapes):
            raise ShapeMismatchError(
                f"main takes {len(self.spec.shapes)} arrays, got {len(shapes)}"
            )
        for i, (shape, want) in enumerate(zip(shapes, self.spec.shapes)):
            if len(shape) != len(want) or any(
                isinstance(d, int) and d != n for d, n in zip(want, shape)
            ):
                raise ShapeMismatchError(
                    f"main: argument {i} ({self.spec.names[i]}) has shape {shape}, not one of "
                    f"{self.spec.types[i]!r}"
                )
        return self.binder.bind(shapes)

    def made(self) -> dict:
        names = self.binder.symbols
        return {tuple(zip(names, key)): made for key, made in list(self._made.items())}

    def _make(self, key: tuple, binding: dict):
        with self._lock:
            made = self._made.get(key)
            if made is None:
                if not _SPECIALIZER:
                    raise NbyocError("import nbyoc to run functions with symbolic sizes")
                ex = self.executable
                made = _SPECIALIZER[0](
                    ex.module,
                    binding,
                    ex.backend,
                    ex.options,
                    generic=True,
                    strict=ex.strict,
                    verify=ex.verify_first,
                )
                self._made[key] = made
                if self.stable_calls and getattr(made, "fixed_pays", False):
                    self._calls[key] = 0
                while len(self._made) > MAX_KEPT:
                    self._made.popitem(last=False)
            else:
                self._made.move_to_end(key)
            return made
