"""The llvm lowering's emitting phase: a ``Schedule`` in, the kernel's body out.

``KernelEmitter`` walks the schedule's stages in order and writes each as statements of
the kernel: loop nests (small ones as loops in the kernel, larger ones as stage
functions, ``stages``), row groups (``rows``, ``row_blocks``), convs and matmuls with
their epilogues (``ops.STAGE_RULES``), the other stage ops, views and output copies. It
names the kernel's arrays (``kernel_arrays.ArrayValue``, every name from its
``scope.Scope``) and registers every stage function it calls with
``stages.StageFunctions``; what it produces is plain data (``Emitted``), which
``assemble`` makes into the kernel module's source. Its parts live in a file each, one
kind of stage apiece: ``emit_nests`` (loop nests), ``emit_ops`` (convs, matmuls and the
other stage ops, with their epilogues), ``emit_rows`` (row groups), ``emit_copies``
(views and copies); this file walks the schedule, binds destinations and queues calls.

>>> import nbyoc
>>> from nbyoc.codegen.llvm.schedule import schedule
>>> x = nbyoc.var("x", (4, 8))
>>> f = nbyoc.function([x], nbyoc.exp(x) + 1.0)
>>> emitted = KernelEmitter(f, schedule(f, True, 1 << 15), True, 1 << 15, False, False).emit()
>>> print("\\n".join(emitted.body))
# stage 0: exp, add
in0_flat = in0.reshape(32)
out0_flat = out0.reshape(32)
for i0 in range(32):
    v0 = np.float32(exp_f32(in0_flat[i0]))
    v1 = np.float32(v0 + np.float32(1.0))
    out0_flat[i0] = v1
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import numpy as np

from ...errors import CompileError
from ...ir.nodes import Call, Constant, Expr, Function
from ...ir.traversal import post_order
from . import rules
from .buffers import Scratch
from .emit_copies import CopyEmission
from .emit_nests import NestEmission
from .emit_ops import OpEmission
from .emit_rows import RowEmission
from .kernel_arrays import ArrayValue, shape_literal
from .loops import loop_nest
from .ops import STAGE_RULES
from .reduce import copies_parts
from .rows import ROWS_IMPORT
from .rules import storage_dtype
from .schedule import VIEWS, Schedule, Stage, function_outputs, parallel_size
from .scope import Scope
from .stages import (
    Lead,
    StageCall,
    StageFunctions,
    can_join,
    emit_calls,
    stage_label,
)


@dataclass
class Emitted:
    """A kernel's body as ``KernelEmitter`` wrote it, and what its module needs: the
    scratch arenas ((storage dtype, elements) each, the buffer plan's then the contiguous
    copies'), its constant arrays (``c0``, ``c1``, ...), the import lines and
    ``rules.HELPERS`` its statements use, the runtime intrinsics its stages call, the
    concatenates' tables, whether it runs anything in parallel, and its stage functions."""

    body: list[str]
    scratch: list[tuple[str, int]]
    constants: list[np.ndarray]
    needs: set[str]
    helpers: set[str]
    intrinsics: set[str]
    tables: dict[str, list[tuple[int, int]]]
    parallel: bool
    stages: StageFunctions
    as_program: bool
    scope: Scope


class KernelEmitter(NestEmission, OpEmission, CopyEmission, RowEmission):
    """Emits the kernel body of ``func`` from its ``plan`` (``schedule``); ``fuse``,
    ``threshold`` as ``lower``'s; ``pointers``: call stage functions through their
    addresses; ``as_program``: the kernel is to be a program (``program``), so every
    stage is a function called through its address."""

    def __init__(
        self,
        func: Function,
        plan: Schedule,
        fuse: bool,
        threshold: int,
        pointers: bool,
        as_program: bool,
    ):
        self.func = func
        self.plan = plan
        self.buffer_plan = plan.plan
        self.fuse = fuse
        self.threshold = threshold
        self.as_program = as_program
        self.symbol = func.attrs.get("global_symbol", "kernel")
        self.outputs = function_outputs(func)
        nodes = post_order(self.outputs)
        #: The values computed from constants alone: their shapes are the same whatever
        #: the inputs' sizes (``kernel_arrays.element_index``).
        self.invariant: set[Expr] = set()
        for node in nodes:
            if isinstance(node, Constant) or (
                isinstance(node, Call) and all(a in self.invariant for a in node.args)
            ):
                self.invariant.add(node)
        #: Every name the kernel binds at its top level comes from here.
        self.scope = Scope()
        self.arrays: dict[Expr, ArrayValue] = {}
        self.literals: dict[Expr, str] = {}
        self.constants: list[np.ndarray] = []
        for k, p in enumerate(func.params):
            self.arrays[p] = ArrayValue(self.scope.argument("in", k), p.type)
        # (a 0-d constant is a literal in loops; an op of its own, a gather by a scalar
        # index, reads it as an array too)
        read_whole = {
            a for n in nodes if isinstance(n, Call) and n.op.kind != "elementwise" for a in n.args
        }
        for node in nodes:
            if isinstance(node, Constant):
                if node.type.shape == ():
                    self.literals[node] = rules.literal(node.data[()], node.type.dtype)
                if node.type.shape != () or node in read_whole:
                    self.constant_array(node)
        self.helpers: set[str] = set()
        #: The import lines the kernel's statements need (``assemble`` orders them).
        self.needs: set[str] = set()
        if any(n.type.dtype in rules.STORAGE for n in nodes):  # (float16: emulated)
            self.needs.update(rules.EMULATION_IMPORTS)
        self.stages = StageFunctions(pointers, scalars=as_program)
        self.pending: list[StageCall] = []  # parallel stage calls that may share a prange
        self.group = -1  # the group (``plan_groups``) of the stage being emitted
        self.label = ""  # what the stage being emitted computes (``StageCall.label``)
        self.parallel = False
        self.scratch_views: dict[tuple, str] = {}  # (buffer, shape) -> its view's name
        #: The intrinsics the kernel imports (tiles, tap rows: ``assemble.RUNTIME_NAMES``).
        self.intrinsics: set[str] = set()
        #: The concatenates' tables of (operand, offset) rows: module constants.
        self.tables: dict[str, list[tuple[int, int]]] = {}
        #: The scratch arenas of contiguous copies (``contiguous_copy``), after the plan's.
        self.copy_arenas: list[tuple[str, int]] = []
        #: A program's contiguous copy of each array, made once (``contiguous_copy``).
        self.contiguous_copies: dict = {}

    def emit(self) -> Emitted:
        """The kernel's body: every stage in order, then the outputs' copies."""
        plan = self.plan
        first = {}  # each output's first position
        for k, o in enumerate(self.outputs):
            first.setdefault(o, k)
        out_names = {o: self.scope.argument("out", first[o]) for o in plan.in_place}
        # Each stored value's destination: (its buffer, its view's name), or (None, the
        # output's name) for an output written in place.
        dest: dict[Call, tuple[int | None, str]] = {}
        for stage in plan.stages:
            for node in stage.nodes:
                if node in out_names:
                    dest[node] = (None, out_names[node])
                elif node in plan.plan.home:
                    dest[node] = (plan.plan.home[node], self.scope.fresh("t"))
        body = []
        stages, stored = plan.stages, set(plan.stored)
        for index, stage in enumerate(stages):
            if stage.epilogue:  # emitted by the stage before it
                continue
            after = stages[index + 1] if index + 1 < len(stages) else None
            epilogue = after if after is not None and after.epilogue else None
            body += self.emit_stage(stage, index, plan.groups[index], stored, dest, epilogue)
        body += self.flush() + self.emit_output_copies(out_names)
        scratch = [*self.buffer_plan.arenas, *self.copy_arenas]
        return Emitted(
            body,
            scratch,
            self.constants,
            self.needs,
            self.helpers,
            self.intrinsics,
            self.tables,
            self.parallel,
            self.stages,
            self.as_program,
            self.scope,
        )

    def constant_array(self, node: Constant) -> ArrayValue:
        """The kernel array holding the constant ``node``, read at its address (made once)."""
        if node not in self.arrays:
            name = self.scope.argument("c", len(self.constants))
            self.arrays[node] = ArrayValue(name, node.type)
            # float16 data as its bits (``rules.STORAGE``); read through its address.
            # (ascontiguousarray makes a 0-d array 1-d: shaped back)
            data = np.ascontiguousarray(node.data).reshape(node.data.shape)
            self.constants.append(data.view(storage_dtype(node.type.dtype)))
        return self.arrays[node]

    def bind_destination(self, node: Call, dest) -> list[str]:
        """Name the array ``node`` is written to: an output, or a view of its scratch
        buffer. One view per buffer and shape, bound once: whichever value it holds, it
        is the same array (a reshape per value cost Numba about 40 ms each to compile)."""
        buffer, name = dest[node]
        if buffer is None:
            self.arrays[node] = ArrayValue(name, node.type)
            return []
        within = self.buffer_plan.within.get(node, (None, 0))[1]
        lines, view = self.buffer_view(buffer, node.type.shape, name, within)
        self.arrays[node] = ArrayValue(view, node.type)
        return lines

    def bind_scratch(self, scratch: Scratch) -> tuple[list[str], str]:
        """The lines naming a stage op's scratch array (``buffers.Scratch``), a flat view
        of its buffer, and its name."""
        buffer = self.buffer_plan.home[scratch]
        return self.buffer_view(buffer, (scratch.elements,), self.scope.fresh("t"))

    def buffer_view(
        self, buffer: int, shape: tuple, name: str, within: int = 0
    ) -> tuple[list[str], str]:
        """The lines binding ``name`` to a view of shape ``shape`` of scratch buffer
        ``buffer``, from its element ``within`` on (none when that view is bound
        already), and the view's name."""
        key = (buffer, within, shape)
        view = self.scratch_views.get(key)
        if view is not None:
            return [], view
        self.scratch_views[key] = name
        place = self.buffer_plan.buffers[buffer]
        start = place.offset + within
        stop = start + max(math.prod(shape), 1)
        # A slice of the arena, not ``carray`` at its address (a third of the compile
        # time): Numba's parfor passes take two arrays made from pointers for distinct
        # memory, and dropped a prange's stores through one view as dead when another
        # view of the same place was read after it (ppocrv4-det: every output NaN).
        arena = self.scope.argument("s", place.arena)
        return [f"{name} = {arena}[{start}:{stop}].reshape({shape_literal(shape)})"], name

    def emit_stage(self, stage: Stage, index, group, stored, dest, epilogue=None) -> list[str]:
        self.group = group
        if stage.nest:
            return self.emit_nest(stage, index, group, stored, dest)
        if stage.rows is not None:
            names = ", ".join(n.op.name for n in stage.nodes)
            lines = [*self.flush_unless(group), f"# stage {index}: row group of {names}"]
            self.label = f"row group of {names} {'x'.join(map(str, stage.nodes[0].type.shape))}"
            for node in stage.nodes:
                if node in stored:
                    lines += self.bind_destination(node, dest)
            return lines + self.emit_rows(stage.rows, stored)
        lines = [*self.flush_unless(group), f"# stage {index}: {stage.nodes[0].op.name}"]
        node = stage.nodes[0]
        self.label = stage_label(node)
        name = node.op.name
        if name in VIEWS:
            return lines + self.emit_view(node)
        rule = STAGE_RULES.get(name)
        if rule is None:
            raise CompileError(f"the llvm backend has no lowering for {name!r} in @{self.symbol}")
        lines += self.bind_destination(node, dest)
        operands = [self.read_array(a) for a in node.args]
        if rule.function:
            return lines + self.emit_function_stage(node, operands, epilogue, stored, dest)
        lines = self.flush() + lines  # (no other op joins a group: ``plan_groups``)
        if rule.blocks:  # read as (outer, reduced, inner)
            self.needs.add(ROWS_IMPORT)
            (operand,) = node.args
            if not self.arrays[operand].contiguous:
                copy, name = self.contiguous_copy(operand)
                lines, operands = lines + copy, [name]
            parallel = self.use_parallel(operand.type.shape)
        else:
            parallel = self.use_parallel(node.type.shape)
        if rule.layouts and copies_parts(node, self.as_program):
            return lines + self.emit_part_copies(node, operands, parallel)
        # (a 0-d array passes through no driver's table)
        arrays = [*node.args, node]
        called = self.as_program or (parallel and self.stages.pointers)  # (a program has them)
        if called and not rule.layouts and all(a.type.ndim for a in arrays):
            tasks = self.task_body(node, rule, operands)
            if tasks is not None:
                body, checks = tasks
                call = self.emit_tasks(node, operands, body, rule.blocks, parallel)
                return lines + checks + call
        if rule.layouts:  # which operands share a loop depends on their layouts
            contiguous = [self.arrays[a].contiguous for a in node.args]
            table = f"{name}{index}"
            body, tables = rule.emit(
                node, operands, self.arrays[node].name, parallel, contiguous, table
            )
            self.tables.update(tables)
            return lines + body
        return lines + rule.emit(node, operands, self.arrays[node].name, parallel)

    def parameter_type(self, node: Expr, flat: bool) -> str:
        """The Numba type of ``node``'s array as a stage function's parameter: exact for
        a contiguous one; any layout for a strided view (whose layout Numba decides:
        ``call_at`` passes a contiguous array for it as it is)."""
        array = self.arrays[node]
        if flat or array.contiguous:
            return rules.array_type(array.type.dtype, 1 if flat else array.type.ndim)
        return rules.array_type(array.type.dtype, array.type.ndim, "A")

    def queue_row_call(self, function: str, arguments: list[str], domain) -> list[str]:
        """Lines calling a row group's function over all rows (in parallel when large)."""
        parallel = self.use_parallel(domain.shape)
        lead = Lead.spread(domain.shape[0] if domain.split >= 1 else 0, domain.rows)
        rows = (domain.rows,)
        call = StageCall(function, arguments, rows, parallel, self.group, domain.columns, lead)
        return self.queue(call)

    def queue(self, call: StageCall) -> list[str]:
        """Queue ``call`` behind the stages it may share a prange with (``can_join``),
        flushing those first when it may not; a call not in parallel runs at once."""
        if not call.label:
            call = dataclasses.replace(call, label=self.label)
        joined = can_join(self.pending, call)
        lines = [] if joined else self.flush()
        self.pending.append(call)
        return lines if (call.parallel or joined) and call.domain else lines + self.flush()

    def flush(self) -> list[str]:
        """The calls of the queued stages."""
        lines, self.pending = emit_calls(self.pending, self.stages), []
        return lines

    def flush_unless(self, group: int) -> list[str]:
        """``flush``, unless the queued calls are of ``group``: then a stage's own lines
        (views, bindings: ``plan_groups`` saw that none reads what the queue computes)
        may come before their prange."""
        if self.pending and self.pending[-1].group == group:
            return []
        return self.flush()

    def read_array(self, node: Expr) -> str:
        if node in self.arrays:
            return self.arrays[node].name
        raise CompileError(f"internal: {node!r} was not stored before an op that needs its array")

    def parallel_size(self, shape: tuple[int, ...]) -> bool:
        return parallel_size(shape, self.threshold)

    def use_parallel(self, shape: tuple[int, ...]) -> bool:
        """``parallel_size``, noting that the kernel then needs Numba's parallel mode."""
        if self.parallel_size(shape):
            self.parallel = True
            return True
        return False

    def loops(self, shape: tuple[int, ...], inner: list[str]) -> list[str]:
        return loop_nest(shape, inner, lead="flat" if self.use_parallel(shape) else None)
