"""The llvm kernel emitter's stage ops: a conv or matmul with its epilogue (in its flat
or plane form, ``epilogue``), another op as a stage function of tasks, a concatenate
as one copy per operand."""

from __future__ import annotations

import math
from dataclasses import replace

from ...ir.nodes import Call, Constant
from . import rules
from .epilogue import Epilogue, FlatPlanes, FlatRows
from .gemm import uses_tiles
from .generic import symbolic_size
from .kernel_arrays import element_index
from .ops import STAGE_RULES
from .reduce import concatenate_part
from .row_blocks import BLOCK_ELEMENTS
from .schedule import Stage, slice_along
from .stages import (
    PROFILE_COMMENT,
    StageBody,
    StageCall,
    call_text,
    parallel_loop_body,
)

#: The widest matmul result whose epilogue runs as flat blocks of rows (see
#: ``epilogue``). Measured on one AVX-512 core, bias + relu after a 4096x16 @ 16x32
#: product: 82 us by rows, 64 us flat; from 64 columns the two are as fast.
FLAT_EPILOGUE_MAX = 32


class OpEmission:
    """A part of ``emit.KernelEmitter`` (see there); it reads and writes the emitter's
    state, and is never used alone."""

    def emit_function_stage(self, node: Call, operands, epilogue, stored, dest) -> list[str]:
        """A matmul or conv (and the ``epilogue`` nest after it, if any) as a stage
        function of its own, so Numba's parfor passes and LLVM see one op at a time
        (a 53-conv model inline in one kernel took 212 s to compile). Its parameters
        are named by position: identical stages are one function. The emitter gets the
        operands' parameters, then its scratch arrays' (``StageRule.scratch``)."""
        params: dict[str, str] = {}  # kernel array -> parameter
        types: dict[str, str | None] = {}  # kernel array -> its Numba type, if known

        def param(array: str, numba_type: str | None) -> str:
            types.setdefault(array, numba_type)
            return params.setdefault(array, f"a{len(params)}")

        lines = []
        sources = []
        rule = STAGE_RULES[node.op.name]
        for index, (a, operand) in enumerate(zip(node.args, operands)):
            packed = rule.packs(node, index) if rule.packs and isinstance(a, Constant) else None
            if packed is not None:  # (a constant in the layout the stage reads)
                name = self.scope.argument("c", len(self.constants))
                self.constants.append(packed)
                sources.append(param(name, rules.array_type(packed.dtype.name, packed.ndim)))
            elif self.arrays[a].contiguous:  # loops and BLAS calls want contiguous operands
                sources.append(param(operand, self.parameter_type(a, False)))
            else:  # a copy (a writable C-contiguous array, whatever it copies)
                copy, name = self.contiguous_copy(a)
                lines += copy
                sources.append(param(name, rules.array_type(a.type.dtype, a.type.ndim)))
        out = param(self.arrays[node].name, self.parameter_type(node, False))
        for scratch in self.plan.scratch.get(self.plan.stage_of[node], []):
            bound, name = self.bind_scratch(scratch)
            lines += bound
            sources.append(param(name, rules.array_type(scratch.dtype, 1)))
        if rule.checks is not None:
            lines += rule.checks(node, operands)
        scalar_arguments, scalar_types, block = [], [], None
        if epilogue is not None:
            before, names, scalars, _ = self.nest_bindings(epilogue, stored, dest, False)
            ops = ", ".join(n.op.name for n in epilogue.nodes)
            lines += [f"# epilogue: {ops}", *before]
            self.label += f" + {ops}"
            names = {a: param(array, self.parameter_type(a, False)) for a, array in names.items()}
            scalar_arguments = list(scalars.values())
            scalar_types = [rules.scalar_type(a.type.dtype) for a in scalars]
            scalars = {a: f"x{k}" for k, a in enumerate(scalars)}
            inner, stores = self.nest_body(epilogue, stored, names, scalars, False)
            inner += [f"{array}[{i}] = {value}" for array, i, value, _ in stores]
            flat = self.flat_epilogue(node, epilogue, stored, names, scalars)
            planes = self.plane_epilogue(node, epilogue, stored, names, scalars)
            block = Epilogue(epilogue.shape, inner, flat, planes)
        parallel = self.use_parallel((rule.work(node),) if rule.by_work else node.type.shape)
        if not parallel and rule.parallel_work and rule.work(node) >= rule.parallel_work:
            parallel = self.use_parallel((rule.work(node),))  # (and the kernel's threshold)
        body = rule.emit(node, sources, out, parallel, block)
        self.intrinsics |= body.imports
        self.helpers |= body.helpers
        parameters = [*params.values(), *(f"x{k}" for k in range(len(scalar_arguments)))]
        types = [*types.values(), *scalar_types]
        function, arguments = self.body_call(parameters, types, body, [*params, *scalar_arguments])
        if body.tasks is None:
            return [*lines, *self.flush(), PROFILE_COMMENT + self.label,
                    call_text(function, arguments)]  # fmt: skip
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
                return body, rule.checks(node, operands) if rule.checks is not None else []
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
        inner = math.prod(node.type.shape[axis + 1 :])
        for part, (a, operand) in enumerate(zip(node.args, operands)):
            # (an operand computed in its slice of the result already: nothing to copy)
            if a.type.size and not self.in_place_part(node, a, offset * inner):
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

    def in_place_part(self, node: Call, operand, at: int) -> bool:
        """Whether ``operand`` of concatenate ``node``, whose slice of the result starts
        at element ``at``, is there already: it was computed there, or it is a slice of
        a value computed there (``schedule.concatenated_in_place``)."""
        placed = self.buffer_plan.within

        def is_at(value, start: int) -> bool:
            holder, where = placed.get(value, (None, None))
            return holder is node and where == start

        if is_at(operand, at):
            return True
        cut = slice_along(operand, node.attrs["axis"])
        inner = math.prod(node.type.shape[node.attrs["axis"] + 1 :])
        return cut is not None and is_at(cut[0], at - cut[1] * inner)

    def flat_epilogue(self, node: Call, epilogue: Stage, stored, names, scalars):
        """The flat form of a matmul's epilogue over short rows (``epilogue.FlatRows``),
        or None: for an unbatched tiled product under ``SHORT_ROW`` columns whose
        epilogue reads only contiguous arrays of its shape, per-column vectors and
        scalars. ``names``: each array's parameter; ``scalars``: each 0-d operand's."""
        shape = epilogue.shape
        rule = STAGE_RULES[node.op.name]
        if not rule.row_epilogue or len(shape) != 2 or not uses_tiles(node):
            return None
        _, n = shape
        if n > FLAT_EPILOGUE_MAX or symbolic_size(node, -1):  # (its blocks are per width)
            return None
        block_rows = max(1, BLOCK_ELEMENTS // n)
        views, setup = {}, []
        for a, param in names.items():
            if a.type.shape == shape and self.arrays[a].contiguous:
                views[a] = f"{param}_block"
                # (its size read at run time: the row count is a batch, the stage per structure)
                setup.append(f"{param}_flat = {param}.reshape({param}.size)")
            elif (1,) * (2 - a.type.ndim) + tuple(a.type.shape) == (1, n):
                views[a] = f"{param}_tiled"
                element = f"{param}[{element_index((block_rows, n), a.type.shape)}]"  # (as stored)
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
