"""Lowering an external function to the Python source of one Numba ``@njit`` kernel.

The kernel is a sequence of *stages* in evaluation order:

- a **loop nest** computes elementwise ops of one shape together: each node is
  a local scalar, computed once per element; each input is read once per
  element; only values needed outside the nest are stored. A nest holds at
  most ``MAX_NEST_OPS`` ops (a longer run continues in the next nest). A nest
  of ``FUNCTION_MIN_OPS`` or more ops is a *stage function* of its own
  (``stages``): compiled once however often it appears, large ones called
  through their address, consecutive parallel ones sharing one ``prange``;
  smaller nests stay loops in the kernel;
- every other op (reductions, matmul, concatenate) is a stage of its own with
  explicit loops; reshape and transpose are views, not stages of work.

This keeps compile time linear in the graph's size: no loop body Numba or LLVM
sees grows beyond ``MAX_NEST_OPS`` ops, and Numba's parfor passes see only calls.

Stage functions are built per *structure*, not per shape: a conv, matmul, pool,
row group or broadcasting nest reads its sizes at run time (``sizes``: the
function's parameter ``z``), and one called through its address lives in a
module of its own, keyed by its text (``stages.Addressed``), so the layers of a
model, other models, other batch sizes and other processes with the same
structure share one compiled function. What stays written into a stage's code is
structure: a conv's window, strides, dilations and pads and whether it is
grouped; a matmul's row and column remainders by the tile (they pick the tail
tile and its mask: with the column count known only at run time a product 10
columns wide ran 2x slower); which axes broadcast; dtypes and ranks.

The kernel that calls them is per shape, and so it is not compiled when it need
not be: a kernel of at least ``PROGRAM_MIN_WORK`` elements of work (``ops.call_work``),
or of at least ``PROGRAM_MIN_STAGES`` stages, is lowered as a *program* (every nest a
stage called through its address, copies as copy stages into arenas of their own), whose
statements ``program`` reads into a table that one executor, compiled once per machine,
runs. A statement outside a program's
language (``Lowered.not_a_program`` names it) keeps the kernel compiled.

The lowering runs as phases with plain data between them, each testable alone:
``schedule`` decides the stages, their prange groups and the buffers, with no strings
(a ``Schedule``, its ``buffers.BufferPlan`` inside); ``emit`` writes the kernel's body
from it (``Emitted``); ``assemble`` makes the module's source around the body (or its
program). This module runs them in turn.

Values that cross stages live in scratch buffers, planned by liveness (a
buffer is reused once its value is dead, and not before the end of the
``prange`` group that reads it; ``buffers``) in one arena per dtype passed in by
the caller, so the kernel allocates nothing. Outputs are written in place; outputs that are inputs,
constants or views are copied. With ``fuse=False`` every elementwise node gets
its own loop nest, one loop per node as in the reference design. Stages at
least ``parallel_threshold`` elements large run their outer loops with
``prange``. Numba's own loop fusion is switched off in parallel kernels: the
stages are already fused as far as their dependencies allow, and Numba's
fusion of a stage that writes a scratch view with one that reads it through
another view of the same buffer reads the buffer before it is written.

The kernel's arguments are: inputs, constant arrays (read-only), outputs,
scratch arenas and, when it calls stage functions through their addresses,
those addresses. It checks every shape
first and raises ``ValueError`` rather than index out of bounds. The source
never names the external function's symbol, so identical regions share one
kernel.
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import CompileError
from ...ir.nodes import Call, Constant, Function, Var
from ...ir.op import Op
from ...ir.traversal import post_order
from ...runtime.compiles import count
from . import generic
from .assemble import Lowered, assemble
from .emit import KernelEmitter
from .ops import call_work
from .schedule import VIEWS, function_outputs, schedule

#: A kernel doing at least this much work (``ops.call_work`` summed over its ops: the
#: elements each reads or writes, a conv's or matmul's multiply-adds) is a program when
#: it can be (``program``). A program's call costs 5 to 10 us more than a compiled
#: kernel's (the addresses of the call's own arrays are taken in Python: 81 tiny stages
#: ran in 70 us as a program, 64 us as a kernel, on this 2-core Xeon), under 2% of a
#: kernel of a million elements; smaller ones stay compiled, loops and all. (Counting
#: results alone kept a mel spectrogram's 25 million multiply-adds a compiled kernel,
#: compiled again for each input length: 3 s.)
PROGRAM_MIN_WORK = 1 << 20
#: A region of a model whose llvm regions together do at least this much work is a
#: program whatever its own (``model_work``): its dearer call is then under 0.1% of the
#: model's (several milliseconds), and a compiled kernel is the only thing that would
#: make a warm start build a Numba dispatcher, whose first one costs Numba 0.1 s of
#: set-up (a layout model's two small output copies: 0.6 s warm, 0.45 s as programs).
MODEL_PROGRAM_MIN_WORK = 1 << 26
#: A kernel of at least this many stages of work (views not counted) is a program when it
#: can be, whatever its work: Numba's time on one kernel grows faster than its
#: statements, a program's compile only with its distinct stage functions. Measured
#: (loaded 2-core machine, cold, one process each) on a user's loop ``y[i] = x[i] * i``
#: over rows of 16 float32: 32 rows 6.0 s as a kernel against 0.9 s as a program, 64
#: rows 12 s against 1.0 s, 200 rows 54 s; a call 7-12 us against 11-14 us.
PROGRAM_MIN_STAGES = 32


def lower(
    func: Function,
    fuse: bool = True,
    parallel_threshold: int = 1 << 15,
    function_pointers: bool = False,
    model_work: int = 0,
) -> Lowered:
    """The kernel source for external function ``func`` (see the module docstring).
    ``function_pointers``: call large stage functions through their addresses (the
    runtime asks for it when its Numba supports it; ahead-of-time export cannot).
    ``model_work``: the work of the model ``func`` is a region of (``region_work`` of
    all its llvm regions), which may make it a program (``MODEL_PROGRAM_MIN_WORK``).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 8))
    >>> lowered = lower(nbyoc.function([x], nbyoc.exp(x) + 1.0))
    >>> lowered.kernel, lowered.program is None, "def kernel(in0, out0):" in lowered.source
    ('kernel', True, True)
    """
    symbol = func.attrs.get("global_symbol", "kernel")
    count("llvm lowerings")
    nodes = post_order(function_outputs(func))
    for node in nodes:
        if not (
            isinstance(node, (Var, Constant))
            or (isinstance(node, Call) and isinstance(node.op, Op))
        ):
            raise CompileError(f"the llvm backend cannot compile {node!r} in @{symbol}")
    with generic.lowering(func):  # (which sizes are symbolic, for a size-generic region)
        plan = schedule(func, fuse, parallel_threshold)
        stages = stages_of_work(plan)
        as_program = function_pointers and is_program(_work(nodes), model_work, stages)
        emitter = KernelEmitter(func, plan, fuse, parallel_threshold, function_pointers, as_program)
        lowered = assemble(func, emitter.emit(), fuse, plan)
        if as_program and lowered.program is None:
            # Emitted as a program (numbers read at their addresses, literals passed as
            # arguments), a kernel the program reader refused would be compiled with what
            # only a program's table passes: emitted again as a kernel. (A region with a
            # float16 concatenate and a lifted literal failed to type and fell back.)
            emitter = KernelEmitter(func, plan, fuse, parallel_threshold, function_pointers, False)
            lowered = replace(assemble(func, emitter.emit(), fuse, plan),
                              not_a_program=lowered.not_a_program)  # fmt: skip
        return lowered


def region_work(func: Function) -> int:
    """The work of external function ``func``: ``ops.call_work`` summed over its ops.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 8))
    >>> region_work(nbyoc.function([x], nbyoc.exp(x) + 1.0))  # 32 for the exp, 33 the add
    65
    """
    return _work(post_order(function_outputs(func)))


def _work(nodes) -> int:
    return sum(call_work(n) for n in nodes if isinstance(n, Call))


def is_program(work: int, model_work: int = 0, stages: int = 0) -> bool:
    """Whether a region doing ``work`` in a model doing ``model_work``, in ``stages``
    stages of work, is lowered as a program (when it can be): when either work is large
    enough that a program's dearer call does not show (``PROGRAM_MIN_WORK``,
    ``MODEL_PROGRAM_MIN_WORK``), or its kernel long enough that compiling it would cost
    more than the call ever saves (``PROGRAM_MIN_STAGES``).

    >>> is_program(1 << 10), is_program(1 << 20), is_program(1 << 10, 1 << 30)
    (False, True, True)
    >>> is_program(1 << 10, stages=PROGRAM_MIN_STAGES)
    True
    """
    return (
        work >= PROGRAM_MIN_WORK
        or model_work >= MODEL_PROGRAM_MIN_WORK
        or stages >= PROGRAM_MIN_STAGES
    )


def stages_of_work(plan) -> int:
    """The stages of a schedule that do work: all but its views (``schedule.VIEWS``).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 8))
    >>> f = nbyoc.function([x], nbyoc.reshape(nbyoc.exp(x), (32,)).sum())
    >>> stages_of_work(schedule(f, True, 1 << 15))  # (the exp's nest, the sum)
    2
    """
    return sum(not (len(s.nodes) == 1 and s.nodes[0].op.name in VIEWS) for s in plan.stages)
