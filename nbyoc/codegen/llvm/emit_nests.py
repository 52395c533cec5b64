"""The llvm kernel emitter's loop nests: elementwise ops of one shape computed together,
as loops in the kernel or as a stage function (``stages``)."""

from __future__ import annotations

import math

from ...ir.nodes import Expr
from ...ir.ops.elementwise import loop_dtypes
from ...runtime.llvm import target
from . import rules
from .kernel_arrays import element_index
from .loops import lead_axes
from .rows import STREAM_IMPORT
from .rules import load, storage_dtype, store
from .schedule import Stage, is_function_stage
from .stages import (
    Lead,
    StageCall,
)

#: The ops whose code is the same for a constant operand and a variable one: a literal
#: read only by these may be a stage function's argument (``lifted_literals``).
LIFTED_OPS = frozenset({"add", "subtract", "multiply", "maximum", "minimum"})
#: The dtypes of such literals: those whose values are their storage (no float16 bits),
#: but int64: a program's table passes an int64 argument as itself, a literal
#: (``drivers.slots``), and a number read at its address only of other types (lifted,
#: magika's int64 literals left its region a compiled kernel whose driver table could
#: not pass them: the region fell back to the host, 84 ms a call against 3.4). Since
#: ``lower`` emits a refused program again as a kernel, leaving int64 out keeps such a
#: region a program (the faster call), no longer a condition of its being correct.
LIFTED_DTYPES = frozenset({"float32", "float64", "int32"})


class NestEmission:
    """A part of ``emit.KernelEmitter`` (see there); it reads and writes the emitter's
    state, and is never used alone."""

    def emit_nest(self, stage: Stage, index: int, group: int, stored, dest) -> list[str]:
        """Bind what a loop nest reads and writes, then emit it: a few ops as loops in
        the kernel itself; more as a stage function whose call is queued (a parallel one
        may share a prange with the next)."""
        lines, names, scalars, flat = self.nest_bindings(stage, stored, dest, True)
        domain = (math.prod(stage.shape),) if flat else stage.shape
        if not domain and self.as_program:  # (one element, called over [0, 1) as any stage)
            domain, flat = (1,), True
            for a, name in list(names.items()):  # (its 0-d arrays as one element each)
                names[a] = self.scope.derived(name, "flat")
                lines.append(f"{names[a]} = {name}.reshape(1)")
        stream = flat and self.streams_nest(stage, names, stored)
        # In a program every nest is a stage of its own: a few ops' loops in the kernel
        # compile fastest of all while the kernel is compiled, but a program compiles
        # nothing of its own. So is a parallel nest: a ``prange`` in the kernel would go
        # through Numba's parallel pipeline, per shape (see ``emit_output_copies``).
        parallel_nest = self.stages.pointers and self.parallel_size(domain)
        as_function = is_function_stage(stage) or stream or self.as_program or parallel_nest
        # (a parallel stage's run is a driver's, whose table passes a number only in a
        # program: a kernel's number would keep its run in a ``prange`` of the kernel)
        if as_function and stage.shape and (self.as_program or not self.use_parallel(domain)):
            for a in self.lifted_literals(stage):
                if not self.as_program:  # (the literal itself, passed)
                    scalars[a] = self.literals[a]
                    continue
                # (a program's numbers are read at their addresses: ``program``)
                scalars[a] = self.scope.derived(self.constant_array(a).name, "scalar")
                lines.append(f"{scalars[a]} = {load(f'{self.read_array(a)}[()]', a.type.dtype)}")
        arguments = [*names.values(), *scalars.values()]
        if as_function:
            names = {a: f"a{k}" for k, a in enumerate(names)}
            scalars = {a: f"x{k}" for k, a in enumerate(scalars)}
        inner, stores = self.nest_body(stage, stored, names, scalars, flat)
        ops = ", ".join(n.op.name for n in stage.nodes)
        lines = [f"# stage {index}: {ops}", *lines]
        self.label = f"{ops} {'x'.join(map(str, domain))}"
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

    def lifted_literals(self, stage: Stage) -> list[Expr]:
        """The literals a stage function takes as arguments (in a program, read from
        constant arrays as a 0-d constant is: it knows no other numbers), so that stages
        equal up to them are one function, compiled once: the rows of ``np.stack([x[i] * i for i in
        range(n)])`` were n stage modules of one body, one compile each (60 rows: 60
        modules). Only the operands of ops whose code a constant does not change
        (``LIFTED_OPS``: no division LLVM would make a product, no power it would make a
        square), of dtypes stored as themselves."""
        members = set(stage.nodes)
        found: dict[Expr, bool] = {}
        for node in stage.nodes:
            for a in node.args:
                if a in self.literals and a not in members and a.type.dtype in LIFTED_DTYPES:
                    found[a] = found.get(a, True) and node.op.name in LIFTED_OPS
        return [a for a, ok in found.items() if ok]

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
                "i0" if flat else full_index or element_index(stage.shape, n.type.shape),
                store(values[n], n.dtype),
                storage_dtype(n.dtype),
            )
            for n in stage.nodes
            if n in stored
        ]
        return inner, stores

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
        elif scalars and node in scalars:  # (before literals: a literal may be an argument)
            text = scalars[node]
        elif node in self.literals:
            text = self.literals[node]
        elif arrays and node in arrays:
            index = "i0" if flat else element_index(domain, node.type.shape, node in self.invariant)
            per_plane = node in self.invariant and all(d == 1 for d in node.type.shape[2:])
            if full_index and tuple(node.type.shape) == tuple(domain) and not per_plane:
                index = full_index  # (not an invariant's one value a plane: plane_epilogue)
            text = load(f"{arrays[node]}[{index}]", node.type.dtype)
        else:
            index = element_index(domain, node.type.shape, node in self.invariant)
            text = load(f"{self.read_array(node)}[{index}]", node.type.dtype)
        return text if node.type.dtype == dtype else rules.cast(text, dtype)
