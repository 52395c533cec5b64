"""``nbyoc.jit``: the NumPy functions people already write, traced into nbyoc graphs,
compiled once per signature and called like the function itself.

At the first call with a new *signature* (each array's shape and dtype; each Python
``bool``/``int``/``float`` as a weak scalar of that kind; any other argument by its
value) the function runs once on graph values instead of arrays: NumPy's ufuncs,
array functions, operators, methods and indexing on them build an nbyoc
``Function`` (``nbyoc.frontend.numpy``). That function is compiled for the
backend and kept; later calls with the signature go straight to it.

>>> import numpy as np, nbyoc
>>> @nbyoc.jit
... def softmax(x):
...     e = np.exp(x - x.max(axis=-1, keepdims=True))
...     return e / e.sum(axis=-1, keepdims=True)
>>> x = np.array([[1.0, 2.0, 3.0]], np.float32)
>>> np.allclose(softmax(x), np.exp(x) / np.exp(x).sum()), softmax(x).dtype
(True, dtype('float32'))
>>> softmax.signatures
['(x: float32[1, 3])']
"""

from __future__ import annotations

import collections
import functools
import inspect
import os
import traceback
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, overload

import numpy as np

from ...errors import (
    ArgumentError,
    NbyocError,
    NbyocTypeError,
    UndecidableSizeError,
    ValueOutOfRangeError,
)
from ...ir.builder import const, function, var, weak_scalar
from ...ir.nodes import Expr, Function
from ...ir.types import TensorType, tensor_types
from .aliasing import tracking
from .masks import DATA_DEPENDENT, MaskedSelection
from .methods import elementwise_equality
from .randomness import refusing_random_draws
from .weak_ranges import check_int64, range_checker

#: Python scalar types traced as weak scalars (the dtype they take follows their partner).
WEAK_KINDS = (bool, int, float)
_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_NUMPY = os.path.dirname(os.path.abspath(np.__file__))


__all__ = ["JitFunction", "jit"]


@overload
def jit(
    fn: Callable[..., Any],
    *,
    backend: str | Sequence[str] = ...,
    static_argnames: Sequence[str] = ...,
    dynamic: bool | None = ...,
    **compile_options: Any,
) -> JitFunction: ...


@overload
def jit(
    fn: None = None,
    *,
    backend: str | Sequence[str] = ...,
    static_argnames: Sequence[str] = ...,
    dynamic: bool | None = ...,
    **compile_options: Any,
) -> Callable[[Callable[..., Any]], JitFunction]: ...


def jit(
    fn: Callable[..., Any] | None = None, *, backend: str | Sequence[str] = "llvm",
    static_argnames: Sequence[str] = (), dynamic: bool | None = None, **compile_options: Any,
) -> JitFunction | Callable[[Callable[..., Any]], JitFunction]:  # fmt: skip
    """Compile a NumPy function with nbyoc, per signature of its arguments.

    ``nbyoc.jit(fn)`` or ``@nbyoc.jit(backend="csource", ...)``: ``backend`` and the
    keyword arguments of ``nbyoc.compile`` (``compile_options``) apply to every
    signature. Arguments named in ``static_argnames`` (and any argument that is not an
    array or a Python number: an axis tuple, a string, None) are compile-time values:
    the function is traced with the value itself, and each value compiles anew.

    ``dynamic`` says which sizes the compiled code is for. ``None`` (the default): the
    first call compiles for its shapes; a later call that differs only in sizes compiles
    one version in which the sizes that changed are symbolic (``nbyoc.ir.symbols``), and
    every later size runs on it without compiling (as torch.compile's automatic dynamic
    shapes). ``True``: size-generic from the first call (every size above 1 a symbol;
    equal sizes share one, as torch's "duck sizing"). ``False``: each shape compiles
    its own. A function whose tracing needs a size's value (``range(len(x))``) is
    compiled per shape whatever ``dynamic`` says. ``signatures`` shows the symbols.

    >>> import numpy as np, nbyoc
    >>> @nbyoc.jit(static_argnames=["axis"])
    ... def normalise(x, axis, eps=1e-6):
    ...     return x / (np.abs(x).sum(axis=axis, keepdims=True) + eps)
    >>> normalise(np.ones((2, 4), np.float32), 1, eps=0.0).tolist()
    [[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
    """
    if dynamic not in (None, True, False):
        raise NbyocTypeError(f"nbyoc.jit: dynamic must be None, True or False, got {dynamic!r}")
    if fn is None:
        return lambda f: JitFunction(f, backend, static_argnames, compile_options, dynamic)
    return JitFunction(fn, backend, static_argnames, compile_options, dynamic)


class JitFunction:
    """A NumPy function compiled by nbyoc per signature (see ``jit``)."""

    def __init__(
        self, fn: Callable[..., Any], backend: str | Sequence[str], static_argnames: Iterable[str],
        compile_options: Mapping[str, Any], dynamic: bool | None = None,
    ) -> None:  # fmt: skip
        if not callable(fn):
            raise NbyocTypeError(f"nbyoc.jit takes a function, got {fn!r}")
        functools.update_wrapper(self, fn)
        self._fn = fn
        self._backend = backend
        self._options = dict(compile_options)
        self._signature = inspect.signature(fn)
        self._parameters = self._signature.parameters
        self._names = list(self._parameters)
        if any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in self._parameters.values()):
            raise NbyocTypeError(
                f"{fn.__name__}: nbyoc.jit traces functions of named parameters only "
                f"(no *args or **kwargs)"
            )
        unknown = sorted(set(static_argnames) - set(self._names))
        if unknown:
            raise NbyocTypeError(f"{fn.__name__} has no parameter(s) {', '.join(unknown)}")
        self._static = frozenset(static_argnames)
        #: signature key -> the function running the compiled code on a call's arguments
        #: (the Executable itself when it can take them as they are)
        self._runners: dict[tuple, Callable] = {}
        #: signature key -> (its traced Function, its text, its Executable)
        self._compiled: dict[tuple, tuple] = {}
        #: runner -> the Executable it calls (``lower``)
        self._executables: dict[Callable, object] = {}
        #: the runner of the last signature called, when it checks its own arguments
        self._last: Callable | None = None
        self._dynamic = dynamic
        #: structure key (ranks, dtypes, kinds, static values) -> the shapes of its first
        #: call; and its size-generic version once it has one (``dynamic``): the runner,
        #: each argument's dimensions, the executable (all None: it could not be traced)
        self._first_shapes: dict[tuple, tuple] = {}
        self._generic: dict[tuple, tuple] = {}

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        # The common call, kept to one Python call: the signature of the last call again.
        # Its runner checks the arguments (the Executable: shapes and dtypes; and the
        # kinds of weak scalars) and raises ArgumentError for any other signature.
        last = self._last
        if last is not None and not kwargs:
            try:
                return last(*args)
            except ArgumentError:
                pass
        return self._call(args, kwargs)

    def _call(self, args, kwargs):
        """Any call: arguments bound to the parameters (defaults, keywords, static
        values), the signature compiled if it is new."""
        # (a call that needs binding never takes the fast path: its arguments are not
        # the runner's, and a static value is not checked by it)
        plain = not (kwargs or self._static or len(args) != len(self._names))
        if not plain:
            args = self._bind(args, kwargs)
        try:
            key = tuple([_key(a) for a in args])
            run = self._runners.get(key) or self._choose(args, key)
            self._last = run if plain and all(type(k) is not _Static for k in key) else None
        except TypeError as error:  # an unhashable static value
            if "unhashable" not in str(error):
                raise
            raise NbyocTypeError(
                f"{self.__name__}: an argument that is not an array or a number is a "
                f"compile-time value, and keys the compiled code, so it must be hashable: "
                f"pass data as np.asarray(...), an axis list as a tuple"
            ) from None
        return run(*args)

    @property
    def signatures(self) -> list[str]:
        """The signatures compiled so far, as text: ``(x: float32[2, 3], s: float)``."""
        return [entry[1] for entry in self._compiled.values()]

    def trace(self, *args, **kwargs) -> Function:
        """The nbyoc ``Function`` the arguments' signature traces to (not compiled):
        print it, partition it, save it.

        >>> import numpy as np, nbyoc
        >>> print(nbyoc.jit(lambda a, b: a * b + 1.0).trace(np.ones(2, np.float32), 3.0))
        fn (%a: Tensor[(2,), float32], %b: Tensor[(), float64]) -> Tensor[(2,), float32] {
          %0 = cast(%b, to="float32") /* Tensor[(), float32] */;
          %1 = multiply(%a, %0) /* Tensor[(2,), float32] */;
          %2 = const(1.0, dtype=float32) /* Tensor[(), float32] */;
          add(%1, %2) /* Tensor[(2,), float32] */
        }
        """
        args = self._bind(args, kwargs)
        return self._trace(args)[0]

    def lower(self, *args, **kwargs):
        """The compiled ``Executable`` the arguments' signature runs on, compiled now if the
        signature is new: its ``get_source()``, ``module``, ``explain()``, ``profile()``,
        ``save()`` and ``compile_seconds``. (A size-generic version serves the signature
        when ``dynamic`` made one: its executable has symbolic sizes.)

        >>> import numpy as np, nbyoc
        >>> scale = nbyoc.jit(lambda x: x * 2.0)
        >>> fn = scale.lower(np.ones((2, 3), np.float32))
        >>> fn.module["main"].params, fn.compile_seconds > 0
        ((Var(x: Tensor[(2, 3), float32]),), True)
        >>> fn.explain().summary()
        '1 op calls (llvm 1) in 1 region'
        """
        args = self._bind(args, kwargs)
        key = tuple([_key(a) for a in args])
        run = self._runners.get(key) or self._choose(args, key)
        return self._executables[run]

    def __repr__(self) -> str:
        return f"<nbyoc.jit {self.__name__} ({len(self._compiled)} signature(s))>"

    def _bind(self, args, kwargs) -> tuple:
        """All arguments in order, defaults filled in; static ones wrapped as ``_Static``."""
        try:
            bound = self._signature.bind(*args, **kwargs)
        except TypeError as error:
            raise NbyocTypeError(f"{self.__name__}: {error}") from None
        bound.apply_defaults()
        return tuple(
            _Static(bound.arguments[name]) if name in self._static else bound.arguments[name]
            for name in self._names
        )

    def _choose(self, args, key) -> Callable:
        """The runner for a signature not seen before: the size-generic one of its
        structure when ``dynamic`` asks for it (made, or widened, as needed), else one
        compiled for its shapes."""
        structure = _structure_key(key)
        shapes = _shapes(args)
        if self._dynamic is False or not any(shapes):
            return self._compile(args, key)
        first = self._first_shapes.setdefault(structure, shapes)
        if self._dynamic is None and first == shapes:
            return self._compile(args, key)  # (the first shapes of this structure)
        generic = self._generic.get(structure)
        if generic is not None and generic[0] is not None and _fits(generic[1], shapes):
            if _binds(generic[2], shapes):
                return generic[0]
            return self._compile(args, key)  # (sizes one symbol stood for now differ)
        symbolic = _symbolic_dims(first, shapes, self._dynamic, generic)
        if symbolic is None:  # (tracing needed a size's value: per shape)
            return self._compile(args, key)
        generic_key = (structure, "generic", symbolic)
        try:
            run = self._compile(args, generic_key, symbolic)
        except (UndecidableSizeError, NbyocTypeError):
            self._generic[structure] = (None, None, None)
            return self._compile(args, key)
        executable = self._compiled[generic_key][2]
        self._generic[structure] = (run, symbolic, executable)
        if not _binds(executable, shapes):  # (a constraint the sizes break: NumPy's rules)
            return self._compile(args, key)
        return run

    def _compile(self, args, key, symbolic=None) -> Callable:
        from ...compiler import compile as nbyoc_compile

        func, structure, text = self._trace(args, symbolic)
        executable = nbyoc_compile(func, self._backend, **self._options)
        check = range_checker(func, [p.name_hint for p in func.params])
        run = _runner(executable, args, structure, func.ret_type, check, symbolic is not None)
        self._compiled[key] = (func, text, executable)
        self._runners[key] = run
        self._executables[run] = executable
        return run

    def _trace(self, args, symbolic=None) -> tuple[Function, object, str]:
        """Trace the function on graph values for ``args``; ``symbolic``: per argument,
        the dimension of each axis (an int, or a symbol's name)."""
        traced, params, described, scalars = [], [], [], []
        for k, (name, value) in enumerate(zip(self._names, args)):
            role = _role(value)
            if role in ("array", "scalar"):
                array = np.asarray(value)
                shape = symbolic[k] if symbolic is not None else array.shape
                node = var(name, shape, array.dtype)
                params.append(node)
                if role == "scalar":
                    scalars.append(node)
                described.append(f"{name}: {array.dtype}[{', '.join(map(str, shape))}]")
            elif role == "weak":
                node = weak_scalar(name, type(value))
                params.append(node)
                scalars.append(node)
                described.append(f"{name}: {type(value).__name__}")
            else:
                node = value.value if isinstance(value, _Static) else value
                described.append(f"{name}={node!r}")
            traced.append(node)
        try:
            with elementwise_equality(), refusing_random_draws(), tracking(scalars) as aliases:
                result = self._fn(*traced)
                # (each result as it is after the function's in-place updates)
                outputs, structure = _outputs(result, self.__name__, aliases.value)
        except NbyocError as error:
            raise type(error)(f"{error}\n{_user_line(error)}") from None
        func = function(params, outputs[0] if len(outputs) == 1 else outputs)
        return func, structure, f"({', '.join(described)})"


def _shapes(args) -> tuple:
    """Each argument's shape (None for one that is not an array)."""
    return tuple(np.shape(a) if _role(a) in ("array", "scalar") else None for a in args)


def _structure_key(key: tuple) -> tuple:
    """A signature without its sizes: ranks and dtypes, kinds, static values."""
    return tuple((len(k[0]), k[1]) if type(k) is tuple else k for k in key)


def _fits(symbolic: tuple, shapes: tuple) -> bool:
    """Whether arrays of ``shapes`` agree with the generic version's fixed sizes (its
    symbols are bound, and their constraints checked, by its executable)."""
    return all(
        shape is None or all(not isinstance(d, int) or d == n for d, n in zip(dims, shape))
        for dims, shape in zip(symbolic, shapes)
    )


def _binds(executable, shapes: tuple) -> bool:
    """Whether the size-generic ``executable`` takes arrays of ``shapes``: its symbols
    bind consistently and its constraints hold."""
    try:
        executable.bind_sizes([shape for shape in shapes if shape is not None])
    except ArgumentError:
        return False
    return True


def _symbolic_dims(first: tuple, shapes: tuple, dynamic: bool | None, generic):
    """Per argument, the dimensions of a size-generic version: a symbol for each size
    that changed since the first call (``dynamic=None``; also those a previous generic
    version made symbolic) or each size above 1 (``True``); equal sizes of this call
    share one symbol. None when a generic version was tried and could not be traced."""
    if generic is not None and generic[0] is None:
        return None  # (a generic version could not be traced)
    before = generic[1] if generic is not None else first
    names: dict[int, str] = {}
    out = []
    for old, new in zip(before, shapes):
        if new is None:
            out.append(None)
            continue
        dims = []
        for o, n in zip(old, new):
            varying = not isinstance(o, int) or o != n if dynamic is None else n > 1
            if varying and n > 1:  # (a 1 broadcasts: it stays one, as in torch)
                dims.append(names.setdefault(n, f"s{len(names)}"))
            else:
                dims.append(n)
        out.append(tuple(dims))
    return tuple(out)


class _Static:
    """A compile-time argument (``static_argnames``), keyed by its value: by
    ``_value_key``, so that values NumPy tells apart (``0.0`` and ``-0.0``) compile
    apart, and a value equals itself (a NaN too) so it compiles once."""

    __slots__ = ("key", "value")

    def __init__(self, value):
        self.value = value
        self.key = _value_key(value)

    def __eq__(self, other):
        return isinstance(other, _Static) and self.key == other.key

    def __hash__(self):
        return hash(self.key)


def _value_key(value):
    """What identifies a static value: its type and its value, with floats (and the
    parts of complex numbers) by their exact text (``float.hex``: ``-0x0.0p+0`` is
    not ``0x0.0p+0``; ``nan`` equals ``nan``), through tuples and frozensets.
    Anything else keys by itself: a list or dict raises TypeError when hashed, as
    values that can change after the call cannot key compiled code."""
    kind = type(value)
    if isinstance(value, (float, np.floating)):
        return (kind, float(value).hex())
    if isinstance(value, (complex, np.complexfloating)):
        return (kind, complex(value).real.hex(), complex(value).imag.hex())
    if isinstance(value, tuple):
        return (kind, *(_value_key(v) for v in value))
    if isinstance(value, frozenset):
        return (kind, frozenset(_value_key(v) for v in value))
    return (kind, value)


def _key(value):
    """The part of a signature one argument gives (arrays and NumPy scalars: as the fast
    path in ``JitFunction.__call__`` keys them)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return (value.shape, value.dtype)
    if type(value) in WEAK_KINDS:
        return type(value)
    if isinstance(value, _Static):
        return value
    return _Static(value)


def _role(value) -> str:
    """How an argument is traced: "array" (a graph input of its shape and dtype),
    "scalar" (a NumPy scalar: a 0-d input of its dtype, strong as in NumPy), "weak" (a
    Python number: a weak scalar input) or "static" (its value)."""
    if isinstance(value, np.ndarray):
        return "array"
    if isinstance(value, np.generic):
        return "scalar"
    if type(value) in WEAK_KINDS:
        return "weak"
    return "static"


def _outputs(result, name: str, latest=lambda node: node) -> tuple[list[Expr], object]:
    """The graph values ``result`` holds (each as ``latest`` gives it), and how to rebuild
    it from arrays: "one" for a single value, else a ``_Tree`` of the tuples, lists, named
    tuples and dicts holding them (``nbyoc.jit`` functions return their results in that
    structure)."""
    if not isinstance(result, (tuple, list, dict)):
        return [latest(_leaf(result, name))], "one"
    leaves: list[Expr] = []
    tree = _Tree.of(result, leaves, name)
    return [latest(leaf) for leaf in leaves], tree


def _leaf(value, name: str) -> Expr:
    if isinstance(value, Expr):
        return value
    if isinstance(value, (np.ndarray, np.generic, bool, int, float)):
        return const(value)  # computed from static values only
    if isinstance(value, MaskedSelection):
        raise NbyocTypeError(f"{DATA_DEPENDENT} (returned it)")
    raise NbyocTypeError(
        f"{name} returned {type(value).__name__}; nbyoc.jit functions return arrays, or "
        f"tuples, lists, named tuples and dicts of them"
    )


class _Tree:
    """How a result nests its arrays: a tuple, list, named tuple or dict (by key, in
    order) of leaves and of other trees, rebuilt from the arrays in order (``build``)."""

    __slots__ = ("keys", "kind", "parts")

    def __init__(self, kind: type, keys, parts: list):
        self.kind, self.keys, self.parts = kind, keys, parts

    @classmethod
    def of(cls, value, leaves: list, name: str):
        """The tree of ``value``, its leaves appended to ``leaves``; None for a leaf."""
        if isinstance(value, dict):
            if type(value) not in (dict, collections.OrderedDict):
                raise NbyocTypeError(
                    f"{name} returned a {type(value).__name__}; nbyoc.jit rebuilds dicts "
                    f"and OrderedDicts, so return dict(...) of it"
                )
            keys = list(value)
            return cls(type(value), keys, [cls.of(value[k], leaves, name) for k in keys])
        if isinstance(value, tuple) and hasattr(type(value), "_fields"):  # a named tuple
            return cls(type(value), None, [cls.of(v, leaves, name) for v in value])
        if type(value) in (tuple, list):
            return cls(type(value), None, [cls.of(v, leaves, name) for v in value])
        leaves.append(_leaf(value, name))
        return None

    def build(self, arrays) -> object:
        """The result, from an iterator over its arrays in order."""
        parts = [next(arrays) if part is None else part.build(arrays) for part in self.parts]
        if self.keys is not None:
            return self.kind(zip(self.keys, parts))
        if self.kind in (tuple, list):
            return self.kind(parts)
        return self.kind(*parts)  # a named tuple


def _runner(executable, args, structure, ret_type, check=None, generic=False) -> Callable:
    """The function calling ``executable`` with a call's arguments: static ones left out,
    Python numbers as 0-d arrays (after checking they are still of the kind traced: an
    ArgumentError otherwise, as the Executable raises for arrays of another shape or
    dtype; and that Python ints fit the dtypes they meet: ``check``, from
    ``weak_ranges.range_checker``), 0-d results as NumPy scalars (as NumPy's own
    reductions and indexing return them), several results as the tuple or list the
    function returned. The Executable itself when none of that applies."""
    roles = [_role(a) for a in args]
    inputs = [k for k, role in enumerate(roles) if role != "static"]
    weak = [(k, type(args[k])) for k, role in enumerate(roles) if role == "weak"]
    every = len(inputs) == len(roles)
    zero_d = [t.ndim == 0 for t in tensor_types(ret_type)]
    if structure == "one" and every and not weak:
        return executable if not zero_d[0] else lambda *args: executable(*args)[()]

    def scalars(result):
        return result[()] if type(result) is np.ndarray and result.ndim == 0 else result

    count = len(args)
    several = len(tensor_types(ret_type)) != 1 or not isinstance(ret_type, TensorType)
    arrays = [
        (k, _key(a)) for k, (a, role) in enumerate(zip(args, roles)) if role in ("array", "scalar")
    ]
    names = executable.module["main"].params
    names = {k: names[n].name_hint for n, k in enumerate(inputs)}

    def run(*args):
        if len(args) != count:
            raise ArgumentError(f"{count} arguments expected, got {len(args)}")
        for k, kind in weak:
            if type(args[k]) is not kind:
                raise ArgumentError(f"argument {k} is not a Python {kind.__name__}")
            if kind is int:
                check_int64(args[k], names[k])
        if check is not None:
            try:
                check([args[k] for k in inputs])
            except ValueOutOfRangeError:
                # Only for this signature's arrays: others go to their own (the fast
                # path in JitFunction.__call__ takes an ArgumentError to mean that).
                if not generic and any(_key(args[k]) != key for k, key in arrays):
                    raise ArgumentError("the arrays are of another signature") from None
                raise
        values = [np.asarray(args[k]) if type(args[k]) in WEAK_KINDS else args[k] for k in inputs]
        results = executable(*values)
        if structure == "one":
            return scalars(results)
        if not several:
            results = (results,)
        return structure.build(scalars(r) for r in results)

    return run


def _user_line(error: BaseException) -> str:
    """Where the user's code called what failed: the innermost frame of the traceback
    outside nbyoc and NumPy."""
    frames = [
        f
        for f in traceback.extract_tb(error.__traceback__)
        if not os.path.abspath(f.filename).startswith((_PACKAGE, _NUMPY))
    ]
    if not frames:
        return "  (raised while tracing the function)"
    frame = frames[-1]
    return f'  at File "{frame.filename}", line {frame.lineno}: {(frame.line or "").strip()}'
