"""``Executable``: a compiled module you call with NumPy arrays.

It checks the arguments, runs ``main`` on the host executor, which calls the
external functions through their runtime modules (inputs, then freshly
allocated outputs) and any other module function on the host, and returns
fresh arrays that share memory with nothing else: not with the inputs, not
with constants, not with each other.

>>> import numpy as np, nbyoc
>>> a = nbyoc.var("a", (2,))
>>> fn = nbyoc.compile(nbyoc.function([a], [a * 2.0, a]))
>>> x = np.ones(2, np.float32)
>>> y, same = fn(x)
>>> y, same is x
(array([2., 2.], dtype=float32), False)
"""

from __future__ import annotations

import operator
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import NbyocError, ShapeMismatchError
from ..ir.nodes import Call, Function, GlobalVar, IRModule
from ..ir.traversal import callees_first
from ..ir.types import TupleType, tensor_types
from .arguments import ArgumentSpec
from .host import HostFunction
from .outputs import allocate_result, allocators, is_pooled
from .sizes import SymbolicSizes, is_symbolic, module_constraints

if TYPE_CHECKING:
    from ..explanation.report import Explanation
    from .fallback import Fallback
    from .module import Module
    from .profile import Profile
    from .verify_report import VerificationReport


class Executable:
    """Call it with arrays: ``fn(*arrays)`` -> ndarray, or a tuple for several outputs.

    Arguments are positional, in the order of ``main``'s parameters (``signature``);
    a keyword argument is refused with an ``ArgumentError`` that lists them.

    ``module`` is the partitioned ``IRModule``; ``runtime_modules`` maps the
    global symbol of each external function to the runtime module running it.
    """

    def __init__(
        self, module: IRModule, runtime_modules: Mapping[str, Module] | None = None,
        backend: str | Sequence[str] = "host", options: Mapping[str, Any] | None = None, *,
        strict: bool = False, fallbacks: Iterable[Fallback] = (), verify: bool = False,
    ) -> None:  # fmt: skip
        self.module = module
        self.runtime_modules = dict(runtime_modules or {})
        self.backend = backend
        self.options = dict(options or {})
        #: ``strict``: a runtime module failing its first call raises, instead of its
        #: region moving to the next backend or the host (``runtime.fallback``).
        self.strict = strict
        self._fallbacks = list(fallbacks)
        #: Whether the first call verifies every external function (``verify``) first.
        self.verify_first = verify
        #: Whether a build for fixed shapes would run faster (one binding of a function
        #: with symbolic sizes, built size-generic: ``runtime.sizes.STABLE_CALLS``).
        self.fixed_pays = False
        #: Seconds ``nbyoc.compile`` took to make it (partition and build; with symbolic
        #: sizes, the builds of later bindings are not counted). None when not compiled.
        self.compile_seconds: float | None = None
        main = module["main"]
        self._spec = ArgumentSpec.of([(p.name_hint, p.type) for p in main.params], "main")
        if is_symbolic(module):
            self._sizes = SymbolicSizes(self, module_constraints(module))
            self._direct = None
            self._call = self._sizes.call
            return
        self._sizes = None
        self._plan()
        if verify or (self.runtime_modules and not strict):
            from .fallback import FirstCall

            self._call = FirstCall(self)  # then the plan above, or one without the moved

    def _plan(self) -> None:
        """How a call runs: ``main`` on the host executor, or its one external function."""
        self._main = self._host_plan()
        self._direct = _direct_call(self.module, self.runtime_modules, self._spec)
        self._plain_call()

    def _plain_call(self) -> None:
        direct = self._direct
        if direct is not None and direct.checks_arguments:
            self._call = direct  # all of main is one external function: called directly
        else:
            self._call = self._call_main

    def _host_plan(self, wrap=None) -> HostFunction:
        """``main`` on the host executor, calling each external function through its
        runtime module (``wrap(name, run)`` instead of ``run`` when given: the first call
        guards them, ``verify`` records their inputs) and any other on the host."""
        callees: dict = {}
        for name in callees_first(self.module):
            if name in self.runtime_modules:
                run = _allocating_callee(self.runtime_modules[name], name, self.module[name])
                callees[name] = run if wrap is None else wrap(name, run)
            elif name != "main":
                callees[name] = HostFunction(self.module[name], callees, self._compile_body)
        return HostFunction(self.module["main"], callees, self._compile_body)

    def _run_plan(self, main: HostFunction, arrays) -> object:
        return _fresh(main(*arrays), {id(a) for a in arrays}, set())

    def _moved(self, moves) -> None:
        """Take ``(function, module or None, record)`` for each region moved off its
        backend (``runtime.fallback``), and plan the calls without them."""
        moves = list(moves)
        if not moves:
            self._plain_call()  # (the plan made first stands)
            return
        functions = dict(self.module.functions)
        for func, module, record in moves:
            functions[record.symbol] = func
            self.runtime_modules.pop(record.symbol)
            if module is not None:
                self.runtime_modules[record.symbol] = module
            self._fallbacks.append(record)
        self.module = IRModule(functions)
        self._plan()

    def _compile_body(self, body: Function):
        """A control-flow op's body compiled as this executable was (its backends and
        options): partitioned and built like any function."""
        from ..compiler import compile as compile_function

        run = compile_function(body, self.backend, options=self.options, strict=self.strict)
        return lambda *arrays: run(*arrays)

    #: ``fn(*arrays)`` calls ``self._call``, found by a C-level getter: when all of
    #: ``main`` is one external function that is its allocating function itself, with
    #: no Python frame of ours in between (a tenth of a 1 us call on a 10x10 graph).
    if TYPE_CHECKING:  # (what the getter gives, for type checkers)

        def __call__(self, *arrays: Any) -> Any:
            """An array, or a tuple of them for a function of several outputs: which,
            only the compiled function knows, hence ``Any``."""

    else:
        __call__ = property(operator.attrgetter("_call"))

    def _call_main(self, *args, **named):
        if named:
            raise self._spec.keywords_refused(named)
        direct = self._direct
        if direct is not None:  # one external function that does not check its arguments
            return direct(*self._spec.check(args))
        arrays = self._spec.check(args)
        return _fresh(self._main(*arrays), {id(a) for a in arrays}, set())

    def explain(self, **options: Any) -> Explanation:
        """Where each op of this executable runs and why not elsewhere: ``nbyoc.explain``
        of its module for its backends (``options``: ``explain``'s).

        >>> import nbyoc
        >>> x = nbyoc.var("x", (3,))
        >>> print(nbyoc.compile(nbyoc.function([x], x * 2.0)).explain().summary())
        1 op calls (llvm 1) in 1 region
        """
        from ..explanation import explain

        return explain(self, **options)

    def verify(
        self, *args: Any, bisect: bool = True, rtol: float = 0.0, atol: float = 0.0
    ) -> VerificationReport:
        """Run every external function on its real inputs for ``args`` next to the host
        executor and compare each output, element by element, within the forward error
        bound of its computation (``rtol`` and ``atol`` widen it); a region that fails is
        bisected to the first op that diverges (``bisect=False``: not). Returns a
        ``VerificationReport`` (``print`` it; ``.ok``, ``.failures``, ``.check()``). A
        function with symbolic sizes verifies the build for the arguments' sizes. See
        ``nbyoc.runtime.verify``."""
        arrays = self._spec.check(args)
        if self._sizes is not None:
            made = self._sizes.executable_for(arrays)
            return made.verify(*arrays, bisect=bisect, rtol=rtol, atol=atol)
        from .verify import verify_executable

        return verify_executable(self, arrays, bisect=bisect, rtol=rtol, atol=atol)

    @property
    def fallbacks(self) -> list[Fallback]:
        """The regions moved off the backend they were given (their codegen raised, or
        their module failed its first call), each a ``runtime.fallback.Fallback``:
        symbol, from backend, to backend (or ``"host"``), reason, when. Saved with the
        executable. For symbolic sizes: those of every build made so far."""
        found = list(self._fallbacks)
        for made in self.specializations.values():
            found += [record for record in made.fallbacks if record not in found]
        return found

    def bind_sizes(self, shapes: Sequence[Sequence[int]]) -> dict[str, int]:
        """The value of each symbolic size for arguments of ``shapes`` (a
        ``ShapeMismatchError`` says which disagree or which constraint fails); ``{}``
        for a function of fixed shapes that they fit.

        >>> import nbyoc
        >>> x = nbyoc.var("x", ("n", 3))
        >>> nbyoc.compile(nbyoc.function([x], x * 2.0), backend="host").bind_sizes([(5, 3)])
        {'n': 5}
        """
        if self._sizes is None:
            for i, (shape, want) in enumerate(zip(shapes, self._spec.shapes)):
                if tuple(shape) != want:
                    raise ShapeMismatchError(
                        f"main: argument {i} ({self._spec.names[i]}) has shape {tuple(shape)}, "
                        f"not {want}"
                    )
            return {}
        return self._sizes.bind(shapes)

    @property
    def size_generic(self) -> bool:
        """True when this executable has symbolic sizes and every backend it uses builds
        size-generic code (``nbyoc.compiler.SIZE_GENERIC``: llvm), so that a new size
        compiles nothing; False for fixed shapes, or when a backend builds each binding
        for its shapes (csource, examplejson: a new size compiles there).

        >>> import nbyoc
        >>> f = nbyoc.function([x := nbyoc.var("x", ("n",))], x * 2.0)
        >>> nbyoc.compile(f).size_generic, nbyoc.compile(f, "csource").size_generic
        (True, False)
        """
        if self._sizes is None:
            return False
        used = {
            f.attrs["Compiler"] for f in self.module.functions.values() if "Compiler" in f.attrs
        }
        return all(_GENERIC_BACKENDS.get(name, False) for name in used)

    @property
    def specializations(self) -> dict[tuple[tuple[str, int], ...], Executable]:
        """For a function with symbolic sizes: the executables made so far, by binding
        (``{"n": 4}`` as a tuple of pairs); empty for a function of fixed shapes."""
        return {} if self._sizes is None else self._sizes.made()

    @property
    def signature(self) -> str:
        """Parameters and result type of ``main``, as text."""
        return f"({self._spec.signature()}) -> {self.module['main'].ret_type!r}"

    def profile(self, *arrays: Any, repeat: int = 10) -> Profile:
        """Where the time of ``self(*arrays)`` goes: a ``Profile`` (``runtime.profile``)
        of each region (with its backend) and host op, median time per call over
        ``repeat`` calls after a warm-up, share of the total, bytes moved; ``print`` it
        for a table, read ``.rows`` and ``.total`` for numbers.

        >>> import numpy as np, nbyoc
        >>> fn = nbyoc.compile(nbyoc.function([x := nbyoc.var("x", (3,))], nbyoc.exp(x)))
        >>> p = fn.profile(np.ones(3, np.float32), repeat=2)
        >>> [(row.name, row.backend) for row in p.rows]
        [('@llvm_0', 'llvm'), ('(executor)', 'host')]
        """
        from .profile import profile

        return profile(self, arrays, repeat)

    def save(self, path: str | os.PathLike[str]) -> None:
        """Write this executable to one file (see ``nbyoc.runtime.archive``).

        >>> import nbyoc, numpy as np, tempfile, os
        >>> x = nbyoc.var("x", (3,))
        >>> fn = nbyoc.compile(nbyoc.function([x], x * 2.0), backend="host")
        >>> path = os.path.join(tempfile.mkdtemp(), "double.nbyoc")
        >>> fn.save(path)
        >>> nbyoc.load(path)(np.ones(3, np.float32))
        array([2., 2., 2.], dtype=float32)
        """
        from .archive import save_executable

        save_executable(self, path)

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write the external functions as a library that runs without nbyoc's JIT: a C
        shared library and header for csource, a ``numba.pycc`` extension module for
        llvm (see ``nbyoc.runtime.export``)."""
        from .export import export_library

        export_library(self, path)

    def get_source(self, symbol: str | None = None) -> str:
        """The generated code of every external function as one string, each under a
        header comment naming its symbol and backend (empty when everything runs on
        the host); ``get_source(symbol)`` is that one function's code as its backend
        made it. ``sources`` maps each symbol to its code.

        >>> import nbyoc
        >>> x = nbyoc.var("x", (3,))
        >>> fn = nbyoc.compile(nbyoc.function([x], x * 2.0), backend="examplejson")
        >>> print(fn.get_source())
        # ---- @examplejson_0: backend examplejson, module type examplejson ----
        examplejson_0
          input 0 3
          const 1 shape: dtype: float32 data: AAAAQA==
          mul 2 inputs: 0 1 shape: 3
        >>> fn.get_source("examplejson_0") == fn.sources["examplejson_0"]
        True
        """
        if symbol is not None:
            if symbol not in self.runtime_modules:
                raise NbyocError(
                    f"no external function {symbol!r}; this executable has "
                    f"{', '.join(self.runtime_modules) or 'none (everything runs on the host)'}"
                )
            return self.runtime_modules[symbol].get_source()
        parts = []
        for name, m in self.runtime_modules.items():
            backend = self.module[name].attrs.get("Compiler", "?")
            header = f"---- @{name}: backend {backend}, module type {m.type_key} ----"
            parts.append(f"{m.source_comment} {header}\n{m.get_source().rstrip()}\n")
        return "\n".join(parts)

    @property
    def sources(self) -> dict[str, str]:
        """The generated code of each external function, by global symbol."""
        return {name: m.get_source() for name, m in self.runtime_modules.items()}

    def __repr__(self) -> str:
        return f"<nbyoc.Executable backend={self.backend!r} main{self.signature}>"


#: Backends whose build for one binding of symbolic sizes runs every binding's kernels
#: (set by ``nbyoc.compiler`` from its ``SIZE_GENERIC`` table).
_GENERIC_BACKENDS: dict[str, bool] = {}


def _direct_call(module: IRModule, runtime_modules: dict, spec: ArgumentSpec):
    """If ``main`` only passes its parameters, each once, to one external function and
    returns its result, that function (allocating its outputs); else None.
    A module may offer ``allocating_function(symbol, spec)`` that checks its own
    arguments more cheaply than a separate check would. Parameters passed in another
    order (the partitioner orders them by first use: ``a * x + b * y`` called with
    ``x, y, a, b``) are reordered, after ``main``'s own check."""
    body, params = module["main"].body, module["main"].params
    if not (
        isinstance(body, Call)
        and isinstance(body.op, GlobalVar)
        and body.op.name_hint in runtime_modules
        and len(body.args) == len(params)
    ):
        return None
    order = [next((i for i, p in enumerate(params) if p is a), None) for a in body.args]
    if None in order or sorted(order) != list(range(len(params))):
        return None
    name = body.op.name_hint
    runtime = runtime_modules[name]
    if order == list(range(len(params))):
        if hasattr(runtime, "allocating_function"):
            return runtime.allocating_function(name, spec)
        return _allocating(runtime.get_function(name), body.type)
    if hasattr(runtime, "allocating_function"):
        run = runtime.allocating_function(name, None)
    else:
        run = _allocating(runtime.get_function(name), body.type)

    def reordered(*inputs):
        return run(*[inputs[i] for i in order])

    reordered.checks_arguments = False  # main's spec checks them first (_call_main)
    return reordered


def _allocating_callee(runtime, name: str, func: Function):
    """External function ``name`` as ``main`` calls it: a function of its inputs that
    allocates its outputs. A module's own ``allocating_function`` when it has one: its
    outputs are fresh, so the destination checks of ``get_function`` (each output
    against every other argument) have nothing to find, and they grow with the square of
    a region's outputs (a user's loop over 1000 rows, 746 of them passed between its 4
    regions: 40 ms a call checked, 8.3 ms not; NumPy's loop 1.9 ms; loaded machine)."""
    single = not isinstance(func.ret_type, TupleType)
    if hasattr(runtime, "allocating_function") and (single or len(func.ret_type.fields) > 1):
        return runtime.allocating_function(name)
    return _allocating(runtime.get_function(name), func.ret_type)


def _allocating(run, ret_type):
    """Wrap a destination-passing function so it allocates its outputs and returns them.
    (Its callers have checked the inputs: an allocation that fails is not a wrong call.)"""
    specs = [(t.shape, np.dtype(t.dtype)) for t in tensor_types(ret_type)]
    kinds = allocators(specs)
    name = getattr(run, "__name__", "function")

    def call(*inputs):
        try:
            outputs = [new(inputs) if big else new() for new, big in kinds]
        except MemoryError:
            outputs = [
                allocate_result(shape, dtype, inputs, f"@{name}: output {k}")
                for k, (shape, dtype) in enumerate(specs)
            ]
        run(*inputs, *outputs)
        return _nest(ret_type, iter(outputs))

    call.checks_arguments = False
    return call


def _nest(t, outputs):
    """Arrays in the (possibly nested tuple) shape of type ``t``."""
    if isinstance(t, TupleType):
        return tuple(_nest(f, outputs) for f in t.fields)
    return next(outputs)


def _fresh(value, inputs: set[int], seen: set[int]):
    """``value`` with every array made private: a view, an input, a constant or a
    repeated output is copied."""
    if isinstance(value, tuple):
        return tuple(_fresh(v, inputs, seen) for v in value)
    flags = value.flags
    private = (
        (flags.owndata or is_pooled(value))
        and flags.writeable
        and flags.c_contiguous
        and id(value) not in inputs
        and id(value) not in seen
    )
    if not private:
        value = np.array(value, order="C")
    seen.add(id(value))
    return value
