"""The llvm runtime: one fused Numba kernel per external function.

Checks are split so the common call stays short: only exact ndarrays go
straight to the kernel (Numba takes an ndarray subclass's word for its dtype,
rank and flags); Numba's dispatcher refuses wrong dtypes, ranks, layouts and
misaligned arrays (the kernel has one explicit signature, so it never compiles
a new one), and the kernel checks every shape before its first read. Anything
refused there is retried on a careful path that raises nbyoc's own clear
errors, or copies strided, misaligned and read-only inputs to contiguous ones
(and has a misaligned output written through an aligned temporary) and runs
again. Scratch arenas come from the thread's pool, shared by every kernel it runs
(``nbyoc.runtime.scratch``).

Compiled kernels are cached in memory (by the function's structural digest
and the options: a second identical compile does not touch Numba) while
something holds them, plus the ``nbyoc.cache.kernels_kept()`` most recently
used ones, and on disk (see ``nbyoc.runtime.llvm.kernels``). The saved form is the
function's JSON and the options; loading regenerates the kernel source from
the graph.
"""

from __future__ import annotations

import collections
import functools
import statistics
import threading
import time
import weakref
from collections.abc import Sequence

import cffi
import numpy as np

from ... import cache
from ...errors import ArgumentError, ExecutionError, LoadError, NbyocError
from ...ir.nodes import Function
from ...ir.structural import structural_digest
from ...ir.types import tensor_types
from ...runtime import scratch
from ...runtime.arguments import (
    ArgumentSpec,
    aligned_destinations,
    check_destinations,
    readable_inputs,
)
from ...runtime.llvm import target
from ...runtime.llvm.fastcall import fixed_arity
from ...runtime.llvm.jit_address import data_addresses, stage_addresses, supported
from ...runtime.llvm.kernels import load_kernel_modules, prefetch
from ...runtime.llvm.kernels import release as release_kernels
from ...runtime.llvm.machine_code import MachineCodeModule
from ...runtime.memory import tune_malloc
from ...runtime.module import Module, load_function, register_loader, save_function
from ...runtime.outputs import allocate_result, allocators
from ...runtime.threads import start_threads
from . import PARALLEL_THRESHOLD, generic, templates
from . import lower as lower_module
from .assemble import Lowered
from .lower import lower
from .program import EXECUTOR_MODULE, EXECUTOR_TYPE, stage_programs
from .rules import STORAGE, storage_dtype

TYPE_KEY = "llvm"
SAVE_VERSION = 1


class CompiledKernel:
    """A compiled kernel: its lowering, the callable, the cache keys of its modules (the
    kernel's and its stages'), and the trailing arguments of every
    call (the addresses of its large stage functions, when it calls any through them;
    they follow the scratch buffers). Whoever runs it holds this object: the kernel
    stays loaded while it is alive (``release_unused``)."""

    __slots__ = ("__weakref__", "executor", "kernel", "key", "keys", "lowered", "trailing")

    def __init__(
        self,
        lowered: Lowered,
        kernel,
        trailing: tuple,
        key: str,
        keys: frozenset,
        executor: int | None = None,
    ):
        self.lowered, self.kernel, self.trailing = lowered, kernel, trailing
        self.key, self.keys = key, keys  # (the kernel module's; all of them)
        self.executor = executor  # (a program's: the address of its executor's callback)


#: Every compiled kernel something still holds, by function digest and options.
_LIVE: weakref.WeakValueDictionary[tuple, CompiledKernel] = weakref.WeakValueDictionary()
#: The most recently used ones, held so that compiling the same function again soon
#: (a test, a notebook cell, jit's next signature) finds them (``cache.kernels_kept()``).
_RECENT: collections.OrderedDict[tuple, CompiledKernel] = collections.OrderedDict()
_LOCK = threading.RLock()


def compiled_kernel(
    func: Function, fuse: bool, parallel_threshold: int, model_work: int = 0
) -> CompiledKernel:
    """The compiled kernel of ``func`` (a region of a model doing ``model_work``: see
    ``lower``), from memory when possible (a second identical compile does not touch
    Numba)."""
    # A binding of a symbolic function: its lowering from the function's template
    # (``templates``), keyed by the template and the binding's shapes.
    templated = _from_template(func, fuse, parallel_threshold, model_work)
    with _LOCK:
        ahead = _AHEAD.pop(id(func), None)  # (func, its digest, key, lowering: lower_ahead)
        ahead = ahead if ahead is not None and ahead[0] is func else None
        if templated is not None:
            key = templated[0]
        else:
            digest = ahead[1] if ahead is not None else structural_digest(func)
            key = _kernel_key(digest, fuse, parallel_threshold, model_work)
        entry = _LIVE.get(key)
        if entry is None:
            if templated is not None:
                lowered = templated[1]
            elif ahead is not None and ahead[2] == key:
                lowered = ahead[3]
            else:
                lowered = lower(func, fuse, parallel_threshold, supported(), model_work)
            tune_malloc()  # (before its stages first allocate: ``runtime.memory``)
            if lowered.parallel:
                start_threads()
            # The stages in modules of their own first, then the kernel's (or a program's
            # executor, the same for every program), as one unit of the compile's progress.
            sources = [*dict.fromkeys(a.module for a in lowered.addressed if a.module)]
            label = func.attrs.get("global_symbol", "kernel")
            last = EXECUTOR_MODULE if lowered.program is not None else lowered.source
            modules = load_kernel_modules(
                [*sources, last], label, addressed=True, executor=lowered.program is not None
            )
            module, by_source = modules[-1], dict(zip(sources, modules))
            functions = [(by_source.get(a.module, module), a.function, a.signature)
                         for a in lowered.addressed]  # fmt: skip
            trailing = (stage_addresses(functions),) if functions else ()
            executor = None
            if lowered.program is not None:
                executor = _executor_address(module)
                kernel = storage_views(lowered, program_kernel(lowered, executor))
            else:
                kernel = storage_views(lowered, getattr(module, lowered.kernel))
            keys = frozenset(m.__nbyoc_key__ for m in modules)
            entry = CompiledKernel(lowered, kernel, trailing, module.__nbyoc_key__, keys, executor)
            _LIVE[key] = entry
        _RECENT[key] = entry
        _RECENT.move_to_end(key)
        kept = cache.kernels_kept()
        if len(_RECENT) > kept:
            while len(_RECENT) > kept:
                _RECENT.popitem(last=False)
            release_unused(keep_recent=True)
    return entry


def _from_template(func: Function, fuse: bool, parallel_threshold: int, model_work: int):
    """(its kernel's key, its lowering) for a binding of a symbolic function whose
    template serves it (``templates``); else None."""
    if generic.source_of(func) is None:
        return None
    options = _kernel_key("template", fuse, parallel_threshold, model_work)
    pointers = supported()
    made = templates.lowered_for(
        func, options, lambda f: lower(f, fuse, parallel_threshold, pointers, model_work)
    )
    if made is None:
        return None
    template, lowered = made
    shapes = tuple(tuple(t.shape) for t in lowered.inputs)
    return (template, shapes), lowered


def _kernel_key(digest: str, fuse: bool, parallel_threshold: int, model_work: int) -> tuple:
    """What makes two compiled kernels one (``compiled_kernel``), for a function of
    structural digest ``digest``."""
    # (the streaming threshold shapes the source too, and a test or user may change it;
    # so does whether the kernel is a program)
    # (its own work is the function's: in its digest; the rest that makes it a program)
    program = (
        lower_module.PROGRAM_MIN_WORK,
        lower_module.PROGRAM_MIN_STAGES,
        model_work >= lower_module.MODEL_PROGRAM_MIN_WORK,
    )
    return (digest, fuse, parallel_threshold, target.stream_min_bytes(), program)


#: Regions lowered ahead of their compile (``lower_ahead``), by the function's id: the
#: function, its structural digest (computed once), its ``_kernel_key``, its lowering.
_AHEAD: dict[int, tuple[Function, str, tuple, Lowered]] = {}


def lower_ahead(funcs: list[Function], fuse: bool, parallel_threshold: int, model_work: int):
    """Lower the regions ``funcs`` of a model now, before the first is compiled, and send
    the stage modules none of them has yet to the compile workers
    (``runtime.llvm.kernels.prefetch``): they compile while this process compiles the
    regions before theirs. ``compiled_kernel`` then takes each lowering from here. Only
    the last model's are kept.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4,))
    >>> region = nbyoc.function([x], nbyoc.tanh(x) + 0.25)
    >>> lower_ahead([region], True, 1 << 15, 0)
    >>> [lowered.kernel for *_, lowered in _AHEAD.values()]
    ['kernel']
    """
    with _LOCK:
        _AHEAD.clear()
        sources = []
        templated = _kernel_key("template", fuse, parallel_threshold, model_work)
        for func in funcs:
            if templates.seen(func, templated):
                continue  # (a later binding of a symbolic function: from its template)
            digest = structural_digest(func)
            key = _kernel_key(digest, fuse, parallel_threshold, model_work)
            if key in _LIVE:
                continue
            try:
                lowered = lower(func, fuse, parallel_threshold, supported(), model_work)
            except Exception:  # (raised again when that region compiles, naming it)
                continue
            _AHEAD[id(func)] = (func, digest, key, lowered)
            sources += [a.module for a in lowered.addressed if a.module]
        prefetch(sources)


def release_unused(keep_recent: bool = False) -> int:
    """Let go of the kernels nothing holds (and, unless ``keep_recent``, of those only the
    recently-used list holds); return how many (``nbyoc.cache.release``)."""
    with _LOCK:
        if not keep_recent:
            _RECENT.clear()
        return release_kernels({key for entry in _LIVE.values() for key in entry.keys})


cache.on_release(release_unused)


def program_kernel(lowered: Lowered, executor: int, program: tuple | None = None):
    """A function running ``lowered``'s program (or ``program``, another of its template,
    relocations and steps: ``program.stage_programs``) through the executor's C
    callback at address ``executor`` (``program.EXECUTOR_MODULE``), called as its kernel
    would be: inputs, the constants' addresses (when
    it has constants), outputs, scratch arenas, the stages' addresses. Like the kernel,
    it refuses an argument that is not an exact ndarray of its dtype and shape,
    C-contiguous and aligned (an output and a scratch arena writable too), so that the
    caller's careful path reports or mends it; the executor then reads and writes
    nothing else. The addresses that do not change from call to call (constants,
    stages, this thread's scratch arenas) are taken once."""
    template, relocations, steps = lowered.program if program is None else program
    ffi = _FFI
    execute = ffi.cast(EXECUTOR_TYPE, executor)
    # (the program's own arrays, kept alive by the closure: their addresses are fixed)
    program_at = [_int64s(a) for a in (template, relocations, steps)]
    length, n_relocations, n_steps = len(template), len(relocations), len(steps)
    table_type = f"int64_t[{max(length, 1)}]"
    specs = [(tuple(t.shape), np.dtype(storage_dtype(t.dtype))) for t in lowered.inputs]
    n_in, has_constants = len(specs), bool(lowered.constants)
    specs += [(tuple(t.shape), np.dtype(storage_dtype(t.dtype))) for t in lowered.outputs]
    n_user = len(specs)
    specs += [((n,), np.dtype(dtype)) for dtype, n in lowered.scratch]
    count = n_user + has_constants + len(lowered.scratch) + bool(lowered.addressed)
    ndarray, ffi = np.ndarray, _FFI
    fixed_of: dict[tuple, tuple] = {}  # (id, id) of the fixed arguments -> them, their bases
    # (each scratch arena's last array and its address: a thread's pool cuts the same
    # arrays call after call, and holding only the last lets a grown pool's old go)
    arenas: list[tuple | None] = [None] * len(lowered.scratch)

    def address(array, shape, dtype, writable: bool) -> int:
        if type(array) is not ndarray or array.dtype != dtype:
            raise TypeError(f"nbyoc: an argument is not a {dtype} ndarray")
        if array.shape != shape:
            raise ValueError("nbyoc: an argument has the wrong shape")
        flags = array.flags
        if not (flags.c_contiguous and flags.aligned) or (writable and not flags.writeable):
            raise ValueError("nbyoc: an argument is strided, misaligned or read-only")
        return int(ffi.cast("intptr_t", ffi.from_buffer(array)))

    def run(*args):
        if len(args) != count:
            raise TypeError(f"nbyoc: {len(args)} arguments for {count}")
        # (the kernel's order: inputs, constants, outputs, scratch, stages)
        arrays = [*args[:n_in], *args[n_in + has_constants : count - bool(lowered.addressed)]]
        dynamic = []
        for k, (array, spec) in enumerate(zip(arrays, specs)):
            if k < n_user:
                dynamic.append(address(array, *spec, k >= n_in))
                continue
            known = arenas[k - n_user]
            if known is None or known[0] is not array:
                known = arenas[k - n_user] = (array, address(array, *spec, True))
            dynamic.append(known[1])
        fixed = [args[n_in]] if has_constants else []
        fixed += [args[-1]] if lowered.addressed else []
        key = tuple(map(id, fixed))
        known = fixed_of.get(key)
        if known is None or any(a is not b for a, b in zip(known[0], fixed)):
            bases = np.concatenate([[], *fixed]).astype(np.int64)
            known = fixed_of[key] = (fixed, _int64s(bases), len(bases))
        fixed_bases, n_fixed = known[1], known[2]
        execute(
            ffi.new(table_type), program_at[0], length, program_at[1], n_relocations,
            ffi.new("int64_t[]", dynamic), len(dynamic), fixed_bases, n_fixed,
            program_at[2], n_steps,
        )  # fmt: skip

    return run


def _int64s(array: np.ndarray):
    """A C pointer to the int64 ``array``'s elements (keeping it alive; one element of
    zero for an empty one: nothing is read there)."""
    return _FFI.from_buffer("int64_t[]", array if array.size else np.zeros(1, np.int64))


def _executor_address(module) -> int:
    """The address of the program executor's C callback in its ``module``: loaded from
    machine code, or run (compiled here or loaded by Numba)."""
    if isinstance(module, MachineCodeModule):
        return module.address("execute")
    return module.execute.address


_FFI = cffi.FFI()


def storage_views(lowered: Lowered, kernel):
    """``kernel``, or for one with float16 inputs or outputs (which Numba takes as their
    uint16 bits, ``codegen.llvm.rules.STORAGE``) a function passing those as views.
    Anything else in those places raises TypeError, as the kernel itself would, so the
    callers' careful paths report it."""
    boundary = [*lowered.inputs, *([None] if lowered.constants else []), *lowered.outputs]
    views = {
        k: (np.dtype(t.dtype), np.dtype(STORAGE[t.dtype]))
        for k, t in enumerate(boundary)
        if t is not None and t.dtype in STORAGE
    }
    if not views:
        return kernel

    def call(*args):
        args = list(args)
        for k, (dtype, storage) in views.items():
            if getattr(args[k], "dtype", None) != dtype:
                raise TypeError(f"argument {k} must be a {dtype} array")
            args[k] = args[k].view(storage)
        return kernel(*args)

    call.__doc__ = kernel.__doc__
    return call


#: The allocating call's short paths (``fastcall.fixed_arity``): the common case, one
#: output and nothing but the inputs to pass, and the general one.
_ONE_OUTPUT = """
def call({params}):
    try:
        if rest or named or not ({exact}):
            raise TypeError
        out = new(({args})) if big else new()  # (the pool places it by the inputs)
        kernel({args}out)
    except Exception:
        return careful(given(({args}), rest), named)
    return out
"""
_OUTPUTS = """
def call({params}):
    try:
        if rest or named or not ({exact}):
            raise TypeError
        inputs = ({args})
        outs = [new(inputs) if big else new() for new, big in kinds]
        kernel({args}*constants, *outs, *scratch(), *trailing)
    except Exception:
        return careful(given(({args}), rest), named)
    return outs[0] if len(outs) == 1 else tuple(outs)
"""


@register_loader(TYPE_KEY)
class LLVMModule(Module):
    """One external function as a fused Numba kernel."""

    type_key = TYPE_KEY
    source_comment = "#"

    def __init__(
        self,
        func: Function,
        fuse: bool = True,
        parallel_threshold: int = PARALLEL_THRESHOLD,
        model_work: int = 0,
    ):
        if not isinstance(fuse, bool):
            raise NbyocError(f"llvm option fuse must be True or False, got {fuse!r}")
        if not isinstance(parallel_threshold, int) or parallel_threshold < 1:
            raise NbyocError(
                f"llvm option parallel_threshold must be a positive int, got {parallel_threshold!r}"
            )
        if not isinstance(model_work, int) or isinstance(model_work, bool) or model_work < 0:
            raise NbyocError(f"llvm model_work must be a non-negative int, got {model_work!r}")
        self.func, self.fuse, self.parallel_threshold = func, fuse, parallel_threshold
        self.model_work = model_work
        self.symbol = func.attrs.get("global_symbol", "")
        # (keeps it loaded)
        self.compiled = compiled_kernel(func, fuse, parallel_threshold, model_work)
        self.lowered, self.kernel = self.compiled.lowered, self.compiled.kernel
        self._trailing = self.compiled.trailing
        constants = self.lowered.constants  # read through their addresses (``lower``)
        self._constants = (data_addresses(constants),) if constants else ()
        params = [(p.name_hint, p.type) for p in func.params]
        self._inputs = ArgumentSpec.of(params, f"{self.symbol} inputs")
        outs = tensor_types(func.ret_type)
        self._outputs = ArgumentSpec.of(
            [(f"out{k}", t) for k, t in enumerate(outs)], f"{self.symbol} outputs"
        )
        self._out_specs = [(t.shape, np.dtype(t.dtype)) for t in outs]
        self._signature = ArgumentSpec.of(
            [*params, *((f"out{k}", t) for k, t in enumerate(outs))], self.symbol
        )
        self._scratch_layout = tuple((dtype, n) for dtype, n in self.lowered.scratch)

    def _scratch_buffers(self) -> tuple:
        """This thread's scratch arenas, cut from its pool (``runtime.scratch``)."""
        return scratch.arenas(self._scratch_layout)

    def _run_carefully(self, inputs, outputs, spec: ArgumentSpec | None = None) -> None:
        """Check everything with clear errors (only real arrays get through), copy inputs
        that are strided, misaligned or read-only, run the kernel (into an aligned
        temporary for a misaligned output)."""
        inputs = (spec or self._inputs).check(inputs)
        outputs = self._outputs.check(outputs)
        check_destinations(self._outputs.where, outputs, inputs)
        inputs = readable_inputs(inputs, writeable=True)
        written, copies = aligned_destinations(outputs)
        try:
            self.kernel(
                *inputs, *self._constants, *written, *self._scratch_buffers(), *self._trailing
            )
        except Exception as e:
            raise ExecutionError(f"{self.symbol} failed: {type(e).__name__}: {e}") from e
        for out, result in copies:
            np.copyto(out, result)

    def _call_carefully(self, inputs, spec: ArgumentSpec | None):
        """The allocating call's careful path: the arguments are checked before any output
        is allocated, so a wrong call on a huge graph says what is wrong with it, and a
        failed allocation says how much it asked for."""
        inputs = (spec or self._inputs).check(inputs)
        where = spec.where if spec is not None else self.symbol
        outs = [
            allocate_result(shape, dtype, inputs, f"{where}: output {k}")
            for k, (shape, dtype) in enumerate(self._out_specs)
        ]
        self._run_carefully(inputs, outs, spec)
        return outs[0] if len(outs) == 1 else tuple(outs)

    def get_function(self, symbol: str):
        """The checked destination-passing function: inputs, then outputs."""
        self._check_symbol(symbol)
        n_in, n_args = len(self.func.params), len(self.func.params) + len(self._out_specs)
        ndarray = np.ndarray

        def run(*arrays, **named):
            if named:
                raise self._signature.keywords_refused(named)
            inputs, outputs = arrays[:n_in], arrays[n_in:]
            if len(arrays) != n_args:
                self._signature.check(arrays)  # raises the count error
            for a in arrays:
                # Numba believes what an ndarray subclass says its dtype, rank and flags
                # are (numba.core.typing.typeof): only exact ndarrays reach the kernel here.
                if type(a) is not ndarray:
                    return self._run_carefully(inputs, outputs)
            for k, out in enumerate(outputs):
                others = [*inputs, *outputs[:k]]
                if any(np.may_share_memory(out, other) for other in others):
                    raise ArgumentError(f"{self.symbol}: out{k} overlaps another argument")
            try:
                self.kernel(
                    *inputs, *self._constants, *outputs, *self._scratch_buffers(), *self._trailing
                )
            except Exception:
                self._run_carefully(inputs, outputs)

        run.__name__ = symbol
        return run

    def allocating_function(self, symbol: str, spec: ArgumentSpec | None = None):
        """A function of the inputs that allocates and returns the outputs; it checks
        its own arguments (errors name ``spec``'s parameters when given).

        Only exact ndarrays take the short path (Numba's dispatcher then checks their
        dtype, rank and layout from the array itself, and the kernel their shapes and
        alignment); anything else, and any failure, goes to ``_call_carefully``."""
        self._check_symbol(symbol)
        kinds = allocators(self._out_specs)
        named_spec = spec or self._inputs

        def careful(inputs, named):
            if named:
                raise named_spec.keywords_refused(named)
            return self._call_carefully(inputs, spec)

        namespace = {
            "kernel": self.kernel, "constants": self._constants, "trailing": self._trailing,
            "kinds": kinds, "careful": careful,
            "scratch": functools.partial(scratch.arenas, self._scratch_layout),
        }  # fmt: skip
        simple = len(kinds) == 1 and not (self._constants or self.lowered.scratch or self._trailing)
        if simple:
            ((namespace["new"], namespace["big"]),) = kinds
        template = _ONE_OUTPUT if simple else _OUTPUTS
        call = fixed_arity(len(self.func.params), template, namespace)
        call.checks_arguments = True
        return call

    def stage_times(
        self, symbol: str, inputs: Sequence[np.ndarray], repeat: int
    ) -> list[tuple[str, float]] | None:
        """Each stage of the kernel's program run alone (``program.stage_programs``), in
        order, ``repeat`` times: what it computes and its median seconds, less the cost
        of a program of no steps (the executor's call, the table). None for a kernel that
        is not a program (Numba compiled it whole). A driver's stages then each wait for
        the threads at their end, and none finds the data the stage before left in its
        core's cache: their sum may exceed the kernel's own time."""
        self._check_symbol(symbol)
        executor, lowered = self.compiled.executor, self.lowered
        if executor is None:
            return None
        inputs = readable_inputs(self._inputs.check(inputs), writeable=True)
        outputs = [np.empty(shape, dtype) for shape, dtype in self._out_specs]
        arguments = (*inputs, *self._constants, *outputs, *self._scratch_buffers(),
                     *self._trailing)  # fmt: skip
        template, relocations, steps = lowered.program
        runs = stage_programs(lowered.program, lowered.program_labels)
        nothing = (template, relocations, steps[:0])
        kernels = [storage_views(lowered, program_kernel(lowered, executor, program))
                   for _, program in [*runs, ("", nothing)]]  # fmt: skip
        times: list[list[int]] = [[] for _ in kernels]
        clock = time.perf_counter_ns
        for _ in range(repeat):
            for kernel, measured in zip(kernels, times):
                start = clock()
                kernel(*arguments)
                measured.append(clock() - start)
        medians = [statistics.median(t) for t in times]
        overhead = medians.pop()
        return [(label, max(0.0, m - overhead) * 1e-9) for (label, _), m in zip(runs, medians)]

    def _check_symbol(self, symbol: str) -> None:
        if symbol != self.symbol:
            raise NbyocError(f"this llvm module provides {self.symbol!r}, not {symbol!r}")

    def get_source(self) -> str:
        """The kernel's module, then each stage module it calls (shared with every
        kernel that has the same stage)."""
        parts, seen = [self.lowered.source], set()
        for k, stage in enumerate(self.lowered.addressed):
            if stage.module and stage.module not in seen:
                seen.add(stage.module)
                parts += [f"# ---- stage_addresses[{k}]: a module of its own ----", stage.module]
        return "\n".join(parts)

    def save_to_bytes(self) -> bytes:
        options = {"fuse": self.fuse, "parallel_threshold": self.parallel_threshold}
        if self.model_work:
            options["model_work"] = self.model_work
        return save_function(TYPE_KEY, SAVE_VERSION, self.func, options)

    @staticmethod
    def export_modules(modules: dict, path):
        """Write ``modules`` (this backend's, by symbol) as one library at ``path``
        (``nbyoc.runtime.export``)."""
        from .export import export_llvm

        return export_llvm(modules, path)

    @classmethod
    def load_from_bytes(cls, data: bytes) -> LLVMModule:
        func, options = load_function(TYPE_KEY, SAVE_VERSION, data)
        fuse, threshold = options.get("fuse"), options.get("parallel_threshold")
        if not isinstance(fuse, bool):
            raise LoadError("saved llvm module: option 'fuse' must be true or false")
        if not isinstance(threshold, int) or isinstance(threshold, bool) or threshold < 1:
            raise LoadError(
                "saved llvm module: option 'parallel_threshold' must be a positive integer"
            )
        model_work = options.get("model_work", 0)
        if not isinstance(model_work, int) or isinstance(model_work, bool) or model_work < 0:
            raise LoadError("saved llvm module: option 'model_work' must be a non-negative integer")
        return cls(func, fuse=fuse, parallel_threshold=threshold, model_work=model_work)
