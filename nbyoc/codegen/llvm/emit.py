"""The llvm lowering's emitting phase: a ``Schedule`` in, the kernel's body out.

``KernelEmitter`` walks the schedule's stages in order and writes each as statements of
the kernel: loop nests (small ones as loops in the kernel, larger ones as stage
functions, ``stages``), row groups (``rows``, ``row_blocks``), convs and matmuls with
their epilogues (``ops.STAGE_RULES``), the other stage ops, views and output copies. It
names the kernel's arrays (``ArrayValue``) and registers every stage function it calls
with ``stages.StageFunctions``; what it produces is plain data (``Emitted``), which
``assemble`` makes into the kernel module's source.

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

import math
from dataclasses import dataclass, replace

import numpy as np

from ...errors import CompileError
from ...ir.nodes import Call, Constant, Expr, Function
from ...ir.ops.elementwise import loop_dtypes
from ...ir.ops.index import python_slices
from ...ir.traversal import post_order
from ...ir.types import TensorType
from ...runtime.llvm import target
from . import rules
from .epilogue import Epilogue, FlatPlanes, FlatRows
from .gemm import uses_tiles
from .loops import lead_axes, loop_nest
from .ops import STAGE_RULES
from .reduce import concatenate_part, copies_parts
from .row_blocks import BLOCK_ELEMENTS, SHORT_ROW, row_block_function
from .rows import ROWS_IMPORT, STREAM_IMPORT, Bindings, RowGroup, row_group_function
from .rules import load, storage_dtype, store
from .schedule import VIEWS, Schedule, Stage, function_outputs, is_function_stage, parallel_size
from .scope import Scope
from .stages import (
    Lead,
    StageBody,
    StageCall,
    StageFunctions,
    call_text,
    can_join,
    emit_calls,
    parallel_loop_body,
)

#: The widest matmul result whose epilogue runs as flat blocks of rows (see
#: ``epilogue``). Measured on one AVX-512 core, bias + relu after a 4096x16 @ 16x32
#: product: 82 us by rows, 64 us flat; from 64 columns the two are as fast.
FLAT_EPILOGUE_MAX = 32
#: What a kernel taking a transposed view imports.
TRANSPOSED_IMPORT = "from nbyoc.runtime.llvm.stage_table import transposed"


#: The method emitting each view op (``schedule.VIEWS``): a row per op.
_VIEW_EMITTERS = {"reshape": "emit_reshape", "slice": "emit_slice", "transpose": "emit_transpose"}
assert set(_VIEW_EMITTERS) == set(VIEWS), "internal: a view op without its emitter"


@dataclass
class ArrayValue:
    """An array in the kernel: a parameter, an output, a scratch view or a view of those."""

    name: str
    type: TensorType
    contiguous: bool = True


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


class KernelEmitter:
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
        #: the inputs' sizes (``_index``).
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
        for node in nodes:
            if isinstance(node, Constant):
                if node.type.shape == ():
                    self.literals[node] = rules.literal(node.data[()], node.type.dtype)
                else:
                    name = self.scope.argument("c", len(self.constants))
                    self.arrays[node] = ArrayValue(name, node.type)
                    # float16 data as its bits (``rules.STORAGE``); read through its address.
                    data = np.ascontiguousarray(node.data).view(storage_dtype(node.type.dtype))
                    self.constants.append(data)
        self.helpers: set[str] = set()
        #: The import lines the kernel's statements need (``assemble`` orders them).
        self.needs: set[str] = set()
        if any(n.type.dtype in rules.STORAGE for n in nodes):  # (float16: emulated)
            self.needs.add(rules.EMULATION_IMPORT)
        self.stages = StageFunctions(pointers, scalars=as_program)
        self.pending: list[StageCall] = []  # parallel stage calls that may share a prange
        self.group = -1  # the group (``plan_groups``) of the stage being emitted
        self.parallel = False
        self.scratch_views: dict[tuple, str] = {}  # (buffer, shape) -> its view's name
        #: The intrinsics the kernel imports (tiles, tap rows: ``assemble.RUNTIME_NAMES``).
        self.intrinsics: set[str] = set()
        #: The concatenates' tables of (operand, offset) rows: module constants.
        self.tables: dict[str, list[tuple[int, int]]] = {}
        #: The scratch arenas of contiguous copies (``contiguous_copy``), after the plan's.
        self.copy_arenas: list[tuple[str, int]] = []

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

    def bind_destination(self, node: Call, dest) -> list[str]:
        """Name the array ``node`` is written to: an output, or a view of its scratch
        buffer. One view per buffer and shape, bound once: whichever value it holds, it
        is the same array (a reshape per value cost Numba about 40 ms each to compile)."""
        buffer, name = dest[node]
        if buffer is None:
            self.arrays[node] = ArrayValue(name, node.type)
            return []
        key = (buffer, node.type.shape)
        view = self.scratch_views.get(key)
        self.arrays[node] = ArrayValue(view or name, node.type)
        if view is not None:
            return []
        self.scratch_views[key] = name
        place = self.buffer_plan.buffers[buffer]
        start, stop = place.offset, place.offset + max(node.type.size, 1)
        shape = shape_literal(node.type.shape)
        # A slice of the arena, not ``carray`` at its address (a third of the compile
        # time): Numba's parfor passes take two arrays made from pointers for distinct
        # memory, and dropped a prange's stores through one view as dead when another
        # view of the same place was read after it (ppocrv4-det: every output NaN).
        arena = self.scope.argument("s", place.arena)
        return [f"{name} = {arena}[{start}:{stop}].reshape({shape})"]

    def emit_stage(self, stage: Stage, index, group, stored, dest, epilogue=None) -> list[str]:
        self.group = group
        if stage.nest:
            return self.emit_nest(stage, index, group, stored, dest)
        if stage.rows is not None:
            names = ", ".join(n.op.name for n in stage.nodes)
            lines = [*self.flush_unless(group), f"# stage {index}: row group of {names}"]
            for node in stage.nodes:
                if node in stored:
                    lines += self.bind_destination(node, dest)
            return lines + self.emit_rows(stage.rows, stored)
        lines = [*self.flush_unless(group), f"# stage {index}: {stage.nodes[0].op.name}"]
        node = stage.nodes[0]
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
        if rule.layouts and copies_parts(node):
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

    def emit_nest(self, stage: Stage, index: int, group: int, stored, dest) -> list[str]:
        """Bind what a loop nest reads and writes, then emit it: a few ops as loops in
        the kernel itself; more as a stage function whose call is queued (a parallel one
        may share a prange with the next)."""
        lines, names, scalars, flat = self.nest_bindings(stage, stored, dest, True)
        domain = (math.prod(stage.shape),) if flat else stage.shape
        if not domain and self.as_program:  # (one element, called over [0, 1) as any stage)
            domain = (1,)
        stream = flat and self.streams_nest(stage, names, stored)
        # In a program every nest is a stage of its own: a few ops' loops in the kernel
        # compile fastest of all while the kernel is compiled, but a program compiles
        # nothing of its own. So is a parallel nest: a ``prange`` in the kernel would go
        # through Numba's parallel pipeline, per shape (see ``emit_output_copies``).
        parallel_nest = self.stages.pointers and self.parallel_size(domain)
        as_function = is_function_stage(stage) or stream or self.as_program or parallel_nest
        arguments = [*names.values(), *scalars.values()]
        if as_function:
            names = {a: f"a{k}" for k, a in enumerate(names)}
            scalars = {a: f"x{k}" for k, a in enumerate(scalars)}
        inner, stores = self.nest_body(stage, stored, names, scalars, flat)
        lines = [f"# stage {index}: {', '.join(n.op.name for n in stage.nodes)}", *lines]
        if not as_function:
            inner += [f"{array}[{i}] = {value}" for array, i, value, _ in stores]
            return self.flush() + lines + self.loops(domain, inner)
        types = [self.parameter_type(a, flat) for a in names]
        types += [rules.scalar_type(a.type.dtype) for a in scalars]
        parameters = [*names.values(), *scalars.values()]
        parallel = self.use_parallel(domain)
        name, address, extra = self.stages.add(
            parameters,
            types,
            domain,
            inner,
            stores,
            len(stage.nodes),
            stream,
            parallel,
            self.as_program,
        )
        arguments += extra
        if stream:
            self.needs.add(STREAM_IMPORT)
        function = name if address is None else f"stage_at{address}"
        outer_indices = math.prod(domain[: lead_axes(domain, parallel)])
        lead = Lead.spread(stage.shape[0] if stage.shape else 0, outer_indices)
        call = StageCall(function, arguments, domain, parallel, group, lead=lead)
        return self.flush_unless(group) + lines + self.queue(call)

    def streams_nest(self, stage: Stage, names, stored) -> bool:
        """Whether a flat nest writes its outputs with streaming stores: when the arrays
        it reads and writes are large enough (``target.writes_streaming``), it runs in
        parallel, and its outputs are stored as their values (not emulated dtypes)."""
        outputs = [n for n in stage.nodes if n in stored]
        written = sum(n.type.size * n.type.itemsize for n in outputs)
        footprint = sum(a.type.size * a.type.itemsize for a in names)
        return (
            bool(outputs)
            and all(storage_dtype(n.dtype) == n.dtype for n in outputs)
            and self.use_parallel(stage.shape)
            and target.writes_streaming(
                footprint - written, written, any(rules.is_heavy(n.op.name) for n in stage.nodes)
            )
        )

    def nest_bindings(self, stage: Stage, stored, dest, flat_ok: bool):
        """What a loop nest needs bound before its loops: (lines binding its outputs'
        arrays, reading its 0-d operands and flattening its arrays; the name each array
        is read by; the name of each 0-d operand's value; whether the nest walks its
        arrays flat)."""
        lines = []
        for node in stage.nodes:
            if node in stored:
                lines += self.bind_destination(node, dest)
        members = set(stage.nodes)
        scalars: dict[Expr, str] = {}
        touched = []
        for a in dict.fromkeys(a for n in stage.nodes for a in n.args):
            if a in members or a in self.literals:
                continue
            if a.type.shape == () and stage.shape:
                # A 0-d array (a constant passed in, a full reduction) is read once, before
                # the loop: Numba's parallel loops cannot index one inside a prange.
                scalars[a] = self.scope.derived(self.read_array(a), "scalar")
                lines.append(f"{scalars[a]} = {load(f'{self.read_array(a)}[()]', a.type.dtype)}")
            else:
                touched.append(a)
        touched += [n for n in stage.nodes if n in stored]
        flat = (
            flat_ok
            and bool(stage.shape)
            and all(
                self.arrays[a].type.shape == stage.shape and self.arrays[a].contiguous
                for a in touched
            )
        )
        names = {}  # what the loop calls each array: the kernel's, or a parameter's name
        for a in touched:
            name = self.arrays[a].name
            names[a] = self.scope.derived(name, "flat") if flat else name
            if flat:  # every array has the nest's shape and is contiguous: walk them flat
                size = math.prod(stage.shape)
                lines.append(f"{names[a]} = {self.arrays[a].name}.reshape({size})")
        return lines, names, scalars, flat

    def nest_body(self, stage: Stage, stored, names, scalars, flat, full_index=None):
        """A loop nest's statements per element, and its stores as (array, index,
        value, storage dtype). Arrays of the nest's shape are read and written at
        ``full_index`` when it is given."""
        inner = []
        values: dict[Expr, str] = {}
        for k, node in enumerate(stage.nodes):
            loop = loop_dtypes(node)  # operands are read as NumPy's loop reads them
            args = [
                self.read(a, stage.shape, values, read_as, names, scalars, flat, full_index)
                for a, read_as in zip(node.args, loop)
            ]
            expression, helpers = rules.call_expression(node, args, loop)
            self.helpers.update(helpers)
            values[node] = f"v{k}"
            inner.append(f"v{k} = {expression}")
        stores = [
            (
                names[n],
                "i0" if flat else full_index or _index(stage.shape, n.type.shape),
                store(values[n], n.dtype),
                storage_dtype(n.dtype),
            )
            for n in stage.nodes
            if n in stored
        ]
        return inner, stores

    def emit_function_stage(self, node: Call, operands, epilogue, stored, dest) -> list[str]:
        """A matmul or conv (and the ``epilogue`` nest after it, if any) as a stage
        function of its own, so Numba's parfor passes and LLVM see one op at a time
        (a 53-conv model inline in one kernel took 212 s to compile). Its parameters
        are named by position: identical stages are one function."""
        params: dict[str, str] = {}  # kernel array -> parameter
        types: dict[str, str | None] = {}  # kernel array -> its Numba type, if known

        def param(array: str, numba_type: str | None) -> str:
            types.setdefault(array, numba_type)
            return params.setdefault(array, f"a{len(params)}")

        lines = []
        sources = []
        for a, operand in zip(node.args, operands):
            if self.arrays[a].contiguous:  # loops and BLAS calls want contiguous operands
                sources.append(param(operand, self.parameter_type(a, False)))
            else:  # a copy (a writable C-contiguous array, whatever it copies)
                copy, name = self.contiguous_copy(a)
                lines += copy
                sources.append(param(name, rules.array_type(a.type.dtype, a.type.ndim)))
        out = param(self.arrays[node].name, self.parameter_type(node, False))
        scalar_arguments, scalar_types, block = [], [], None
        if epilogue is not None:
            before, names, scalars, _ = self.nest_bindings(epilogue, stored, dest, False)
            lines += [f"# epilogue: {', '.join(n.op.name for n in epilogue.nodes)}", *before]
            names = {a: param(array, self.parameter_type(a, False)) for a, array in names.items()}
            scalar_arguments = list(scalars.values())
            scalar_types = [rules.scalar_type(a.type.dtype) for a in scalars]
            scalars = {a: f"x{k}" for k, a in enumerate(scalars)}
            inner, stores = self.nest_body(epilogue, stored, names, scalars, False)
            inner += [f"{array}[{i}] = {value}" for array, i, value, _ in stores]
            flat = self.flat_epilogue(node, epilogue, stored, names, scalars)
            planes = self.plane_epilogue(node, epilogue, stored, names, scalars)
            block = Epilogue(epilogue.shape, inner, flat, planes)
        parallel = self.use_parallel(node.type.shape)
        body = STAGE_RULES[node.op.name].emit(node, sources, out, parallel, block)
        self.intrinsics |= body.imports
        parameters = [*params.values(), *(f"x{k}" for k in range(len(scalar_arguments)))]
        types = [*types.values(), *scalar_types]
        function, arguments = self.body_call(parameters, types, body, [*params, *scalar_arguments])
        if body.tasks is None:
            return [*lines, *self.flush(), call_text(function, arguments)]
        tasks = (body.tasks,)
        call = StageCall(
            function, arguments, tasks, parallel, self.group, body.work, body.lead, windowed=True
        )
        return lines + self.queue(call)

    def body_call(self, params, types, body: StageBody, arguments: list[str]):
        """The stage function running ``body`` over ``params`` of Numba ``types``: the name
        a call uses, and the call's arguments (``arguments``, then the sizes the body
        reads at run time, if any)."""
        name, address = self.stages.add_body(params, types, body)
        if body.sizes is not None and body.sizes.values:
            arguments = [*arguments, body.sizes.argument()]
        return (name if address is None else f"stage_at{address}"), arguments

    def task_body(self, node: Call, rule, operands: list[str]):
        """A parallel stage op (not a function stage) as a stage function of tasks over
        parameters ``a0``, ``a1``, ... (its operands, then its result), so that a driver
        runs it and the kernel keeps no parallel loop (Numba runs its parallel passes
        over the whole kernel for one: a detector's kernel compiled in 31 s without its
        last two, 52 s with them): the rule's own form, sizes read at run time
        (``StageRule.tasks``: it reshapes its result, which must be contiguous), else its
        emitted loop outlined as it is (``parallel_loop_body``); with the lines the
        kernel runs first (checks that raise: a gather's of its indices, which no stage
        in a driver's parallel loop may do); None when neither fits."""
        if rule.tasks is not None and self.arrays[node].contiguous:
            body = rule.tasks(node)
            if body is not None:
                return body, []
        # (names no emitter binds: resize's source indices are a0, a1, ...)
        names = [f"operand{k}" for k in range(len(node.args))]
        code = rule.emit(node, names, "result", True)
        body = parallel_loop_body(code, max(node.type.size, 1))
        if body is None and self.as_program and not any("raise" in line for line in code):
            # (no loop to share out, its first axis one long: in a program, one task)
            body = StageBody(code, 1, max(node.type.size, 1))
        if body is None:
            return None
        checks = []
        if any("raise" in line for line in body.setup):  # the same lines, the kernel's names
            checks = rule.emit(node, operands, self.arrays[node].name, True)[: len(body.setup)]
            body = replace(body, setup=[])
        return replace(body, parameters=[*names, "result"]), checks

    def emit_tasks(
        self, node: Call, operands: list[str], body: StageBody, copied: bool, parallel: bool
    ):
        """A stage op as its stage function of tasks (``task_body``) over ``operands``
        (made contiguous first when ``copied``) and its result, run by a driver when
        ``parallel`` (else called once over every task: in a program)."""
        types = [
            rules.array_type(a.type.dtype, a.type.ndim) if copied else self.parameter_type(a, False)
            for a in node.args
        ]
        types.append(self.parameter_type(node, False))
        params = body.parameters or [f"a{k}" for k in range(len(types))]
        result = self.arrays[node].name
        function, arguments = self.body_call(params, types, body, [*operands, result])
        call = StageCall(function, arguments, (body.tasks,), parallel, self.group, body.work)
        return self.queue(call) + self.flush()

    def emit_part_copies(self, node: Call, operands: list[str], parallel: bool) -> list[str]:
        """A concatenate as one copy per operand (``reduce.concatenate_part``), queued
        to run together: with function pointers, one driver call (``emit_calls``), so
        the kernel keeps no loop of its own for it (a detector at batch 2 had 25 such
        parallel loops, each a function Numba compiles per shape)."""
        lines, offset = [], 0
        axis = node.attrs["axis"]
        whole = self.parameter_type(node, False)
        for part, (a, operand) in enumerate(zip(node.args, operands)):
            if a.type.size:
                source, source_type = operand, self.parameter_type(a, False)
                if not self.arrays[a].contiguous:
                    copy, source = self.contiguous_copy(a)
                    lines += copy
                    source_type = rules.array_type(a.type.dtype, a.type.ndim)
                body = concatenate_part(node, part, offset)
                function, arguments = self.body_call(
                    ["a0", "a1"], [source_type, whole], body, [source, self.arrays[node].name]
                )
                tasks = (body.tasks,)
                call = StageCall(
                    function, arguments, tasks, parallel, self.group, body.work, body.lead
                )
                lines += self.queue(call)
            offset += a.type.shape[axis]
        return lines + self.flush()

    def flat_epilogue(self, node: Call, epilogue: Stage, stored, names, scalars):
        """The flat form of a matmul's epilogue over short rows (``epilogue.FlatRows``),
        or None: for an unbatched tiled product under ``SHORT_ROW`` columns whose
        epilogue reads only contiguous arrays of its shape, per-column vectors and
        scalars. ``names``: each array's parameter; ``scalars``: each 0-d operand's."""
        shape = epilogue.shape
        rule = STAGE_RULES[node.op.name]
        if not rule.row_epilogue or len(shape) != 2 or not uses_tiles(node):
            return None
        rows, n = shape
        if n > FLAT_EPILOGUE_MAX:
            return None
        block_rows = max(1, BLOCK_ELEMENTS // n)
        views, setup = {}, []
        for a, param in names.items():
            if a.type.shape == shape and self.arrays[a].contiguous:
                views[a] = f"{param}_block"
                setup.append(f"{param}_flat = {param}.reshape({rows * n})")
            elif (1,) * (2 - a.type.ndim) + tuple(a.type.shape) == (1, n):
                views[a] = f"{param}_tiled"
                element = f"{param}[{_index((block_rows, n), a.type.shape)}]"  # (as stored)
                setup += [
                    f"{param}_tiled = np.empty({block_rows * n}, {param}.dtype)",
                    f"for i0 in range({block_rows}):",
                    f"    for i1 in range({n}):",
                    f"        {param}_tiled[i0 * {n} + i1] = {element}",
                ]
            else:
                return None
        tiled = {views[a] for a in names if views[a].endswith("_tiled")}
        flat_names = {a: views[a] for a in names}
        inner, stores = self.nest_body(epilogue, stored, flat_names, scalars, True)
        inner += [f"{array}[{i}] = {value}" for array, i, value, _ in stores]
        blocks = {names[a]: v for a, v in views.items() if v not in tiled}
        return FlatRows(inner, blocks, setup, block_rows, n)

    def plane_epilogue(self, node: Call, epilogue: Stage, stored, names, scalars):
        """The plane form of a conv's epilogue (``epilogue.FlatPlanes``: each
        (image, channel) plane walked flat), or None: when every array it reads is
        contiguous of its shape, or constant across a plane (a per-channel bias)."""
        shape = epilogue.shape
        if not STAGE_RULES[node.op.name].plane_epilogue or len(shape) < 3:
            return None
        views, reshaped = {}, []
        for a, param in names.items():
            padded = (1,) * (len(shape) - a.type.ndim) + tuple(a.type.shape)
            per_plane = all(d == 1 for d in padded[2:])  # one value per plane
            # (an invariant one read as such also when its shape is the result's, one
            # position a plane: an SE block's bias then reads the same at every batch)
            if per_plane and a in self.invariant:
                views[a] = param
            elif a.type.shape == shape and self.arrays[a].contiguous:
                views[a] = f"{param}_planes"
                reshaped.append(param)
            elif per_plane:
                views[a] = param
            else:
                return None
        inner, stores = self.nest_body(epilogue, stored, views, scalars, False, "i0, i1, position")
        inner += [f"{array}[{i}] = {value}" for array, i, value, _ in stores]
        return FlatPlanes(inner, reshaped)

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

    def emit_view(self, node: Call) -> list[str]:
        """A view (``schedule.VIEWS``) of its operand's array, named: no stage of work."""
        return getattr(self, _VIEW_EMITTERS[node.op.name])(node, self.scope.fresh("w"))

    def emit_reshape(self, node: Call, name: str) -> list[str]:
        lines, source = [], self.read_array(node.args[0])
        if not self._contiguous(node.args[0]):
            lines, source = self.contiguous_copy(node.args[0])
        self.arrays[node] = ArrayValue(name, node.type)
        return [*lines, f"{name} = {source}.reshape({shape_literal(node.type.shape)})"]

    def emit_slice(self, node: Call, name: str) -> list[str]:
        source = self.read_array(node.args[0])
        subscript = ", ".join(
            f"{s.start}:{'' if s.stop is None else s.stop}:{s.step}"
            for s in python_slices(node.attrs)
        )
        # Numba types a sliced array as layout "A", whatever its strides.
        self.arrays[node] = ArrayValue(name, node.type, not subscript)
        return [f"{name} = {source}[{subscript}]" if subscript else f"{name} = {source}"]

    def emit_transpose(self, node: Call, name: str) -> list[str]:
        source = self.read_array(node.args[0])
        axes = node.attrs["axes"]
        if tuple(axes) == tuple(range(len(axes))):
            # An identity transpose (any 1-d one) is the array itself: Numba's
            # transpose would return it with layout "A", which cannot be reshaped.
            self.arrays[node] = ArrayValue(name, node.type, self._contiguous(node.args[0]))
            return [f"{name} = {source}"]
        self.needs.add(TRANSPOSED_IMPORT)
        self.arrays[node] = ArrayValue(name, node.type, False)
        order = " ".join(map(str, axes))
        return [f'{name} = transposed({source}, "{order}")']

    def _contiguous(self, node: Expr) -> bool:
        return self.arrays[node].contiguous if node in self.arrays else True

    def emit_output_copies(self, out_names) -> list[str]:
        lines = []
        for k, o in enumerate(self.outputs):
            out = self.scope.argument("out", k)
            if out_names.get(o) == out:
                continue
            lines.append(f"# output {k} is a copy")
            # A stage in a program (it stays one) and when large enough to run in
            # parallel: a ``prange`` of the kernel's own is compiled by Numba's parallel
            # pipeline, per shape (a layout model's 0.24 million element transposed copy:
            # 2.9 s of its 12 s compile).
            if self.as_program or (self.stages.pointers and self.parallel_size(o.type.shape)):
                lines += self.copy_stage(out, o)
                continue
            value = store(self.read(o, o.type.shape, {}, o.type.dtype), o.type.dtype)
            idx = _index(o.type.shape, o.type.shape)
            lines += self.loops(o.type.shape, [f"{out}[{idx}] = {value}"])
        return lines

    def contiguous_copy(self, node: Expr) -> tuple[list[str], str]:
        """The lines making a C-contiguous copy of ``node``'s (strided) array, and its
        name: in a program a copy stage into a scratch arena of its own (``program``),
        else NumPy's copy."""
        name = self.scope.derived(self.read_array(node), "c")
        if not self.as_program:
            return [f"{name} = np.ascontiguousarray({self.read_array(node)})"], name
        dtype = storage_dtype(node.type.dtype)
        arena = len(self.buffer_plan.arenas) + len(self.copy_arenas)
        self.copy_arenas.append((dtype, max(node.type.size, 1)))
        shape = shape_literal(node.type.shape)
        arena_name = self.scope.argument("s", arena)
        lines = [f"{name} = {arena_name}[0:{max(node.type.size, 1)}].reshape({shape})"]
        return lines + self.copy_stage(name, node), name

    def copy_stage(self, destination: str, node: Expr) -> list[str]:
        """The lines copying ``node``'s array into the C-contiguous kernel array
        ``destination`` of its shape: a stage called through its address, flat when the
        source is contiguous too (a 0-d array as one element)."""
        source, shape = self.read_array(node), node.type.shape
        dtype = storage_dtype(node.type.dtype)
        lines = []
        if self.arrays[node].contiguous:
            size = max(math.prod(shape), 1)
            names, domain = [self.scope.derived(n, "all") for n in (destination, source)], (size,)
            for name, whole in zip((destination, source), names):
                lines.append(f"{whole} = {name}.reshape({size})")
            types = [rules.array_type(node.type.dtype, 1)] * 2
            index = _index(domain, domain)
        else:
            # Loops over the axes longer than one only: magika's program, whose copies of
            # (1, 256, 512, 1) views looped one element per innermost loop, ran 7% slower
            # than its compiled kernel (NumPy's copies there), and 1% with these.
            long = [k for k, n in enumerate(shape) if n != 1] or [0]
            names, domain = [destination, source], tuple(shape[k] for k in long)
            types = [
                rules.array_type(node.type.dtype, len(shape)),
                self.parameter_type(node, False),
            ]
            loop = {axis: f"i{k}" for k, axis in enumerate(long)}
            index = ", ".join(loop.get(axis, "0") for axis in range(len(shape)))
        stores = [("a0", index, "v0", dtype)]
        parallel = self.use_parallel(domain)
        name, address, extra = self.stages.add(
            ["a0", "a1"], types, domain, [f"v0 = a1[{index}]"], stores, 1, False, parallel, True
        )
        function = name if address is None else f"stage_at{address}"
        lead = Lead.spread(domain[0], math.prod(domain[: lead_axes(domain, parallel)]))
        call = StageCall(function, [*names, *extra], domain, parallel, -1, lead=lead)
        return lines + self.queue(call) + self.flush()

    def read_array(self, node: Expr) -> str:
        if node in self.arrays:
            return self.arrays[node].name
        raise CompileError(f"internal: {node!r} was not stored before an op that needs its array")

    def read(
        self,
        node: Expr,
        domain,
        values: dict,
        dtype: str,
        arrays=None,
        scalars=None,
        flat=False,
        full_index=None,
    ) -> str:
        """Source reading ``node`` at the current element of ``domain``, as ``dtype``: a
        value of the nest, a literal, a number read before the loop (``scalars``), an
        array by the name the loop knows it by (``arrays``; read at ``i0`` when
        ``flat``, at ``full_index`` when given and the array has the domain's shape),
        or a kernel array."""
        if node in values:
            text = values[node]
        elif node in self.literals:
            text = self.literals[node]
        elif scalars and node in scalars:
            text = scalars[node]
        elif arrays and node in arrays:
            index = "i0" if flat else _index(domain, node.type.shape, node in self.invariant)
            per_plane = node in self.invariant and all(d == 1 for d in node.type.shape[2:])
            if full_index and tuple(node.type.shape) == tuple(domain) and not per_plane:
                index = full_index  # (not an invariant's one value a plane: plane_epilogue)
            text = load(f"{arrays[node]}[{index}]", node.type.dtype)
        else:
            index = _index(domain, node.type.shape, node in self.invariant)
            text = load(f"{self.read_array(node)}[{index}]", node.type.dtype)
        return text if node.type.dtype == dtype else rules.cast(text, dtype)

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

    def emit_rows(self, group: RowGroup, stored) -> list[str]:
        """A row group (``rows``): views of its arrays, then the call of its row
        function (blocks of rows under ``SHORT_ROW`` columns, ``row_blocks``), queued to
        run in parallel when large."""
        self.needs.add(ROWS_IMPORT)
        short = group.domain.columns < SHORT_ROW
        bound = self.bind_rows(group, stored, flat=short)
        if short:
            row = row_block_function(group, bound, stored, self.literals, self.as_program)
        else:
            row = row_group_function(group, bound, stored, self.literals)
        self.helpers |= row.helpers
        self.needs |= row.imports
        if row.sizes is None:
            function, extra = self.stages.add_function(row.parameters, row.body), []
        else:
            function, extra = self.stages.add_row_function(
                row.parameters, row.types, row.body, row.sizes
            )
        return bound.lines + self.queue_row_call(function, bound.arguments + extra, group.domain)

    def bind_rows(self, group: RowGroup, stored: set, flat: bool) -> Bindings:
        """The views and parameters of ``group``'s row function (``rows.Bindings``): full
        arrays as ``(rows, columns)`` views, or one flat run of elements when ``flat``.
        Every member in ``stored`` must already be bound to its array."""
        domain = group.domain
        rows, columns = domain.rows, domain.columns
        members = set(group.nodes)
        reductions = set(group.reductions)
        shapes = {
            "full": f"({rows * columns},)" if flat else f"({rows}, {columns})",
            "row": f"({rows},)",
            "column": f"({columns},)",
        }
        found = Bindings([], {}, {}, {}, [])
        scalar_arguments: list[str] = []

        def pass_array(node: Expr, role: str) -> None:
            if node in found.params:
                return
            array = self.arrays[node]
            base = array.name
            if not array.contiguous:
                copy, base = self.contiguous_copy(node)
                found.lines.extend(copy)
            view = self.scope.derived(array.name, f"{role}s")
            found.lines.append(f"{view} = {base}.reshape({shapes[role]})")
            found.params[node], found.roles[node] = f"a{len(found.params)}", role
            found.arguments.append(view)

        def pass_scalar(node: Expr) -> None:
            if node in found.scalars or node in self.literals:
                return
            array = self.read_array(node)
            # (indexed, not reshaped: the array may be a strided view, which Numba cannot reshape)
            element = f"{array}[{', '.join(['0'] * node.type.ndim) or '()'}]"
            name = self.scope.derived(array, "scalar")
            found.lines.append(f"{name} = {rules.load(element, node.type.dtype)}")
            found.scalars[node] = f"x{len(found.scalars)}"
            scalar_arguments.append(name)

        for node in group.nodes:
            for a in node.args:
                if a in members:
                    continue
                role = "row" if node not in group.full and node not in reductions else None
                role = role or domain.role(a.type.shape)
                if a.type.size == 1:
                    pass_scalar(a)
                else:
                    pass_array(a, role)
        for node in group.nodes:
            if node in stored:
                pass_array(node, "full" if node in group.full else "row")
        found.arguments += scalar_arguments
        return found


def shape_literal(shape) -> str:
    items = ", ".join(str(d) for d in shape)
    return f"({items},)" if len(shape) == 1 else f"({items})"


def _index(domain: tuple[int, ...], shape: tuple[int, ...], invariant: bool = False) -> str:
    """Index of an array of ``shape`` at the current element of ``domain`` (broadcasting).
    An ``invariant`` array (computed from constants alone: the same whatever the inputs'
    sizes) is read at 0 on every axis of extent 1, also where the domain's is 1: a
    batch of 1 then runs the code a batch of 2 does (a constant (1, 1, C) read at
    ``[i0, 0, i2]`` made a new stage function at every batch size but the first)."""
    pad = len(domain) - len(shape)
    parts = [
        "0" if shape[d] == 1 and (invariant or domain[pad + d] != 1) else f"i{pad + d}"
        for d in range(len(shape))
    ]
    if not parts:
        return "()"
    return ", ".join(parts) + ("," if len(parts) == 1 else "")
