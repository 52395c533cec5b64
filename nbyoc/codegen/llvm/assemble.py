"""The llvm lowering's last phase: the kernel module's source around an emitted body.

``assemble`` takes what ``emit.KernelEmitter`` wrote (``Emitted``) and makes the module
``lower`` returns (``Lowered``): the kernel's signature (inputs, constants read at their
addresses, outputs, scratch arenas, stage addresses), one check of all its argument
shapes, the imports and helpers its statements need, its stage functions (each
addressed one in a module of its own, keyed by its text), its parallel loops outlined
into group functions, a long body cut into chunk functions (``chunks``), and, for a
program, the table ``program`` reads from its statements.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

import numpy as np

from ..._version import __version__
from ...ir.nodes import Function
from ...ir.types import TensorType
from ...runtime.llvm.target import vector_bits
from . import rules
from .chunks import chunk_kernel
from .emit import Emitted
from .emit_copies import TRANSPOSED_IMPORT
from .kernel_arrays import shape_literal
from .loops import DEFAULT_VECTOR_BITS, OPAQUE_IMPORT, VECTOR_WIDTH_IMPORT, with_vector_width
from .outline import outline_parallel_loops
from .program import NotAProgram, Place, read_program
from .reduce import table_source
from .rows import PREFETCH_IMPORT, ROWS_IMPORT, STREAM_IMPORT
from .rules import storage_dtype
from .schedule import Schedule, function_outputs
from .stages import (
    STAGE_FUNCTION,
    STAGE_SIGNATURE,
    Addressed,
    StageFunctions,
    call_text,
    stage_module,
)

#: A kernel over fewer elements than this (inputs and outputs together), with no
#: parallel loop and no stage functions, keeps the GIL: releasing and taking it back
#: costs 40 ns a call, more than such a kernel's work (the reference graph at 10x10
#: runs in 20 ns), and no other thread could do much in that time.
NOGIL_MIN_ELEMENTS = 1 << 14
#: The kernel module's import of ``pointer_at`` (its constants, read at their addresses).
POINTER_IMPORT = "from nbyoc.runtime.llvm.jit_address import pointer_at"
#: The options of a parallel loop's group function (``outline``): called from the
#: kernel only, so compiled and cached with it.
GROUP_OPTIONS = 'nogil=True, error_model="numpy", boundscheck=False'

#: The import lines a kernel's statements may need (``Emitted.needs``), in the order
#: its module lists them.
NEEDED_IMPORTS = (*rules.EMULATION_IMPORTS, ROWS_IMPORT, PREFETCH_IMPORT, STREAM_IMPORT)


@dataclass
class Lowered:
    """The kernel module's source and what its caller must pass."""

    source: str
    kernel: str
    inputs: list[TensorType]
    constants: list[np.ndarray]
    outputs: list[TensorType]
    scratch: list[tuple[str, int]]  # (storage dtype, elements) of each scratch arena
    parallel: bool = False
    #: (function, signature) of the stage functions whose addresses the kernel takes, in
    #: order, as its last argument (``nbyoc.runtime.llvm.jit_address.stage_addresses``).
    addressed: list[Addressed] = field(default_factory=list)
    #: What the buffers were planned from, for checking the plan (``Schedule``).
    schedule: Schedule | None = None
    #: The kernel as data, when it is one (``program``): its template, relocations and
    #: steps; its bases are the addresses of the inputs, outputs and scratch arenas,
    #: then of the constants and the addressed stages. The kernel's source is then
    #: never compiled.
    program: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    #: Why it is not one: the first statement a program cannot hold.
    not_a_program: str | None = None
    #: The program's slots holding symbolic sizes, when it was lowered for every
    #: binding of them (``templates``): (0 for the template or 2 for the steps, the
    #: slot, the size); those slots hold 0 until a binding's values are written there.
    program_sizes: tuple = ()
    #: What each step of the program computes (``program.Step.labels``): per step, one
    #: label per stage it runs; for ``Executable.profile``'s stages.
    program_labels: tuple[tuple[str, ...], ...] = ()


def _outline(lines, args, types, addressed, pointers: bool) -> tuple[list[str], list[str]]:
    """The kernel's ``lines`` with its parallel loops outlined (``outline``), and the
    group functions' source. With function pointers, each group is called through
    its address (appended to ``addressed``), so its code is not linked into the
    kernel and the loop around it again."""
    first = len(addressed)
    parameters = [*args, "stage_addresses"]
    # A 0-d array cannot cross into a prange (Numba's parfor lowering refuses it):
    # a loop reading one, even through a view, stays in the kernel.
    scalars = [a for a, t in zip(args, types) if t.startswith("nbt.Array(") and ", 0, " in t]
    lines, groups = outline_parallel_loops(
        lines,
        parameters,
        lambda k, arguments: call_text(
            f"stage_at{first + k}" if pointers else f"group{k}", arguments
        ),
        scalars,
    )
    type_of = dict(zip(args, types))
    type_of["stage_addresses"] = 'nbt.Array(nbt.int64, 1, "C", readonly=True)'
    source = []
    for k, group in enumerate(groups):
        decorator = f"@njit({GROUP_OPTIONS})"
        if pointers:
            signature = f"GROUP{k}"
            group_types = [type_of[p] for p in group.parameters] + ["nbt.int64"]
            source += [
                f"{signature} = nbt.void({', '.join(group_types)})",
                f"{signature}_TYPE = nbt.FunctionType({signature})",
                f"STAGE_AT{first + k}_TYPE = {signature}_TYPE",
            ]
            decorator = f"@njit({signature}, cache=True, {GROUP_OPTIONS})"
            addressed.append(Addressed(f"group{k}", signature))
        header = f"def group{k}({', '.join([*group.parameters, 'c'])}):"
        source += [decorator, header, *("    " + line for line in group.lines), ""]
    return lines, source


def assemble(func: Function, emitted: Emitted, fuse: bool, plan: Schedule) -> Lowered:
    """The kernel module's source around ``emitted``'s body (its signature, the checks of
    its arguments, its imports, helpers, tables, stage functions and parallel loops'
    group functions), or its program; ``plan``: what it was emitted from."""
    body, scratch, stages = emitted.body, emitted.scratch, emitted.stages
    symbol = func.attrs.get("global_symbol", "kernel")
    inputs = [p.type for p in func.params]
    outputs = [o.type for o in function_outputs(func)]
    args, types, checks = [], [], []
    # Every shape condition, one check and one raise for all of them: Numba ends each
    # raise by releasing every live array, so a raise per argument made the kernel's
    # code grow as the square of its arguments (100 inputs: 57 s to compile). The
    # runtime retries a refused call on its careful path, whose errors name the
    # argument (``ArgumentSpec.check``).
    shapes = []  # the shape conditions of the caller's arrays
    internal = []  # the shape conditions of the arrays the runtime itself passes
    # Numba types a misaligned array as aligned, and the code reads it through typed
    # pointers; a caller's array not aligned to its elements goes to the runtime's
    # careful path (copied in, or written through an aligned temporary) instead.
    misaligned = []

    def add(name, t_dtype, shape, readonly=False, user=True):
        args.append(name)
        ro = ", readonly=True" if readonly else ""
        element = rules.NUMBA_TYPES[storage_dtype(t_dtype)]
        types.append(f'nbt.Array({element}, {len(shape)}, "C"{ro})')
        conditions = [f"{name}.shape[{d}] != {n}" for d, n in enumerate(shape)]
        (shapes if user else internal).extend(conditions)
        itemsize = np.dtype(storage_dtype(t_dtype)).itemsize
        if user and itemsize > 1:
            misaligned.append(f"{name}.ctypes.data % {itemsize}")

    # Constants and scratch come from the runtime, never from a caller: checked apart
    # from the caller's arrays, so that a failure there says the runtime is wrong (a
    # raise per constant cost Numba 0.2 s each in a 20-block MLP's kernel with 80
    # weights: 24 s against 5.6 s).
    scope = emitted.scope
    for k, t in enumerate(inputs):
        add(scope.argument("in", k), t.dtype, t.shape)
    views = []  # each constant, viewed at its address
    if emitted.constants:
        add("constants", "int64", (len(emitted.constants),), readonly=True, user=False)
        for k, c in enumerate(emitted.constants):
            pointer = f"pointer_at(constants[{k}], {_np_type(c.dtype)})"
            view = f"carray({pointer}, {shape_literal(c.shape)})"
            if not c.shape:  # (carray makes no 0-d array: one element, reshaped)
                view = f"carray({pointer}, (1,)).reshape(())"
            views.append(f"{scope.argument('c', k)} = {view}")
    for k, t in enumerate(outputs):
        add(scope.argument("out", k), t.dtype, t.shape)
    for k, (dtype, n) in enumerate(scratch):
        add(scope.argument("s", k), dtype, (n,), user=False)
    if shapes:
        checks.append(f"if {' or '.join(shapes)}:")
        checks.append('    raise ValueError("nbyoc: an argument has the wrong shape")')
    if misaligned:  # one check and one raise for all of them (see the shapes')
        checks.append(f"if {' or '.join(misaligned)}:")
        checks.append('    raise ValueError("nbyoc: an argument is not aligned")')
    if internal:
        checks.append(f"if {' or '.join(internal)}:")
        checks.append('    raise ValueError("nbyoc: runtime arrays of wrong shapes")')
    imports = [
        "import math",
        "import numpy as np",
        "from numba import njit, prange",
        "from numba.core import types as nbt",
        OPAQUE_IMPORT,
        *([VECTOR_WIDTH_IMPORT] if vector_bits() > DEFAULT_VECTOR_BITS else []),
        *(["from numba import carray", POINTER_IMPORT] if emitted.constants else []),
        *(line for line in NEEDED_IMPORTS if line in emitted.needs),
        *intrinsic_imports(emitted.intrinsics),
    ]
    helpers = {h: rules.HELPERS[h] for h in sorted(emitted.helpers)}
    program, not_a_program, program_sizes, labels = (
        _program(func, emitted) if emitted.as_program else (None, None, (), ())
    )
    addressed = [
        replace(
            a,
            function=STAGE_FUNCTION,
            signature=STAGE_SIGNATURE,
            module=a.module or _stage_module(stages, a, [*imports, *STAGE_IMPORTS], helpers),
        )  # (an entry's module is its text already: ``drivers.entry_source``)
        for a in stages.addressed
    ]
    scope.check(body, symbol)
    lines, groups = views + body, []
    if emitted.parallel:
        lines, groups = _outline(lines, args, types, addressed, stages.pointers)
    if addressed:
        args.append("stage_addresses")
        types.append('nbt.Array(nbt.int64, 1, "C", readonly=True)')
        checks.append(f"if stage_addresses.shape[0] != {len(addressed)}:")
        checks.append('    raise ValueError("nbyoc: wrong number of stage addresses")')
    chunks = []
    if program is None:  # (a program's kernel is never compiled)
        lines, chunks = chunk_kernel(lines, args)
    lines = checks + lines
    kernel = "kernel"  # a name of our own, never the symbol
    # Numba's parfor fusion off: see the module docstring. A kernel whose parallel
    # work all runs in drivers (``emit_calls``) has no loop of its own to outline.
    loops = emitted.parallel and any("prange(" in line for line in lines)
    parallel = '{"fusion": False}' if loops else "False"
    elements = sum(math.prod(t.shape) for t in [*inputs, *outputs])
    nogil = emitted.parallel or addressed or elements >= NOGIL_MIN_ELEMENTS
    options = (
        f"cache=True, nogil={bool(nogil)}, "
        f'error_model="numpy", boundscheck=False, parallel={parallel}'
    )
    # No symbol in the source: structurally identical regions share one kernel.
    source = [
        f"# Generated by nbyoc {__version__}, llvm codegen{'' if fuse else ' (fusion off)'}.",
        *imports,
        *([CALL_AT_IMPORT] if addressed else []),
        *([STAGE_TABLE_IMPORT] if stages.driven else []),
        *([TRANSPOSED_IMPORT] if TRANSPOSED_IMPORT in emitted.needs else []),
        "",
        *helpers.values(),
        *(table_source(name, rows) for name, rows in emitted.tables.items()),
        *stages.source,
        *(f"STAGE_AT{k}_TYPE = {a.signature}_TYPE" for k, a in enumerate(stages.addressed)),
        *groups,
        *chunks,
        "",
        f"SIGNATURE = nbt.void({', '.join(types)})",
        "",
        "",
        f"@njit(SIGNATURE, {options})",
        f"def {kernel}({', '.join(args)}):",
        *("    " + line for line in lines),
        "    return",
        "",
    ]
    source = with_vector_width("\n".join(source).split("\n"), vector_bits())
    if program is not None:
        source = [PROGRAM_NOTE, *source]
    return Lowered(
        "\n".join(source),
        kernel,
        inputs,
        emitted.constants,
        outputs,
        scratch,
        emitted.parallel,
        list(addressed),
        plan,
        program,
        not_a_program,
        program_sizes,
        labels,
    )


def _program(func: Function, emitted: Emitted) -> tuple:
    """The kernel's body as a program (``program``): its template, relocations and
    steps, with the entries its calls need added to the addressed stages; None; its
    slots holding symbolic sizes (``Lowered.program_sizes``); and its steps' labels.
    Or None, why not (the first statement that is not one a program holds), () and
    ()."""
    bases, places, scope = [], {}, emitted.scope

    def base(name: str, shape, dtype: str) -> None:
        places[name] = Place.array(len(bases), tuple(shape), dtype)
        bases.append(name)

    # (the call's own arrays first, then the fixed ones: ``program``)
    for k, p in enumerate(func.params):
        base(scope.argument("in", k), p.type.shape, storage_dtype(p.type.dtype))
    for k, o in enumerate(function_outputs(func)):
        base(scope.argument("out", k), o.type.shape, storage_dtype(o.type.dtype))
    for k, (dtype, n) in enumerate(emitted.scratch):
        base(scope.argument("s", k), (n,), dtype)
    for k, c in enumerate(emitted.constants):
        base(scope.argument("c", k), c.shape, c.dtype.name)
    stages = emitted.stages
    names = frozenset().union(*(t.symbols for t in [*inputs_of(func), *outputs_of(func)]))
    try:
        program = read_program(emitted.body, places, stages.addressed, len(bases), names)
    except NotAProgram as e:
        return None, str(e), (), ()
    entries = {}
    for step in program.steps:
        kind, what = step.function
        if kind == "entry" and what not in entries:
            entries[what] = stages.add_entry(list(what))

    def function_base(function) -> int:
        kind, what = function
        return len(bases) + (what if kind == "stage" else entries[what])

    steps, sized_steps = program.step_array(function_base)
    sized = tuple((0, k, v) for k, v in program.sized) + tuple((2, k, v) for k, v in sized_steps)
    labels = tuple(step.labels for step in program.steps)
    return (program.table, program.relocations, steps), None, sized, labels


def inputs_of(func: Function) -> list[TensorType]:
    return [p.type for p in func.params]


def outputs_of(func: Function) -> list[TensorType]:
    return [o.type for o in function_outputs(func)]


def _stage_module(stages: StageFunctions, stage: Addressed, imports, helpers) -> str:
    """The source of the module of its own that an addressed stage lives in."""
    lines = "\n".join(stages.definitions[stage.function]).split("\n")
    return "\n".join(stage_module(with_vector_width(lines, vector_bits()), imports, helpers))


#: The first line of a kernel's source that runs as a program.
PROGRAM_NOTE = (
    "# Runs as a program (nbyoc.codegen.llvm.program): the kernel below is never compiled;"
    " its statements were read into a table of stage calls."
)
#: The import of what calls a stage through its address (kernels and drivers).
CALL_AT_IMPORT = "from nbyoc.runtime.llvm.jit_address import call_at"
#: The runtime module each kind of intrinsic a stage calls comes from, by its name's
#: prefix (``StageBody.imports``).
RUNTIME_NAMES = {
    "tile_": "nbyoc.runtime.llvm.tiles",
    "tap_row_": "nbyoc.runtime.llvm.tap_rows",
    "window_rows_": "nbyoc.runtime.llvm.window_rows",
    "deal_row_": "nbyoc.runtime.llvm.window_rows",
}


def intrinsic_imports(names: set[str]) -> list[str]:
    """The import lines of the intrinsics ``names``, a line per runtime module.

    >>> intrinsic_imports({"tap_row_float32_k3_s1_d1", "tile_float32_6x32"})
    ['from nbyoc.runtime.llvm.tiles import tile_float32_6x32', \
'from nbyoc.runtime.llvm.tap_rows import tap_row_float32_k3_s1_d1']
    """
    lines = []
    for prefix, module in RUNTIME_NAMES.items():
        chosen = sorted(n for n in names if n.startswith(prefix))
        if chosen:
            lines.append(f"from {module} import {', '.join(chosen)}")
    unknown = {n for n in names if not n.startswith(tuple(RUNTIME_NAMES))}
    assert not unknown, f"internal: intrinsics of no runtime module: {unknown}"
    return lines


#: What a kernel that builds a driver's table imports (``drivers``).
STAGE_TABLE_IMPORT = "from nbyoc.runtime.llvm.stage_table import table_of"
#: What a stage's module may import beyond the kernel's: a driver calls through addresses.
STAGE_IMPORTS = [CALL_AT_IMPORT]


def _np_type(dtype: np.dtype) -> str:
    """The NumPy scalar type of an array's elements, as the kernel module spells it."""
    return rules.NP_TYPES[dtype.name]
