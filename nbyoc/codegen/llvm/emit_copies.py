"""The llvm kernel emitter's views (reshape, slice, transpose: no stage of work) and
copies (outputs that are views, inputs, constants; contiguous copies of strided
operands)."""

from __future__ import annotations

import math

from ...ir.nodes import Call, Expr
from ...ir.ops.index import python_slices
from . import rules
from .kernel_arrays import ArrayValue, element_index, shape_literal
from .loops import lead_axes
from .rules import storage_dtype, store
from .schedule import VIEWS
from .stages import (
    Lead,
    StageCall,
)

#: What a kernel taking a transposed view imports.
TRANSPOSED_IMPORT = "from nbyoc.runtime.llvm.stage_table import transposed"


#: The method emitting each view op (``schedule.VIEWS``): a row per op.
_VIEW_EMITTERS = {"reshape": "emit_reshape", "slice": "emit_slice", "transpose": "emit_transpose"}
assert set(_VIEW_EMITTERS) == set(VIEWS), "internal: a view op without its emitter"


class CopyEmission:
    """A part of ``emit.KernelEmitter`` (see there); it reads and writes the emitter's
    state, and is never used alone."""

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
        rows = leading_rows(node)
        if rows is not None:
            # Numba keeps a C array's layout through ``a[i:j]`` (no step, no other
            # index): the rows stay one contiguous array, so a reshape or a stage
            # reading them copies nothing (rows of a user's loop, ``y[i] = x[i] * i``,
            # were each copied first; in a program, each into an arena of its own).
            self.arrays[node] = ArrayValue(name, node.type, self._contiguous(node.args[0]))
            return [f"{name} = {source}[{rows.start}:{rows.stop}]"]
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
            idx = element_index(o.type.shape, o.type.shape)
            lines += self.loops(o.type.shape, [f"{out}[{idx}] = {value}"])
        return lines

    def contiguous_copy(self, node: Expr) -> tuple[list[str], str]:
        """The lines making a C-contiguous copy of ``node``'s (strided) array, and its
        name: in a program a copy stage into a scratch arena of its own (``program``),
        else NumPy's copy."""
        name = self.scope.derived(self.read_array(node), "c")
        if not self.as_program:
            return [f"{name} = np.ascontiguousarray({self.read_array(node)})"], name
        if node in self.contiguous_copies:
            # The copy made for an earlier reader: its arena is its own for the whole
            # program. (A second copy bound the same name to a new, unfilled arena while
            # a queued group of stages read the name only when flushed: basic-pitch at a
            # batch of 3 read the unfilled one, wrong numbers.)
            return [], self.contiguous_copies[node]
        self.contiguous_copies[node] = name
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
            index = element_index(domain, domain)
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
        label = f"copy {'x'.join(map(str, shape))} for {self.label}"
        call = StageCall(function, [*names, *extra], domain, parallel, -1, lead=lead, label=label)
        return lines + self.queue(call) + self.flush()


def leading_rows(node: Call) -> slice | None:
    """The rows ``start:stop`` (step 1) of the first axis a slice call takes when it
    narrows no other axis; else None (sizes that are symbols included).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 3))
    >>> leading_rows(nbyoc.slice(x, [1], [3], [0])), leading_rows(nbyoc.slice(x, [1], [2], [1]))
    (slice(1, 3, 1), None)
    """
    shape = node.args[0].type.shape
    slices = python_slices(node.attrs)
    if not shape or not all(isinstance(n, int) for n in shape):
        return None
    first, rest = slices[0], slices[1:]
    if not all(isinstance(v, int) for v in (first.start, first.stop, first.step)):
        return None
    if first.step != 1 or not 0 <= first.start <= first.stop <= shape[0]:
        return None
    for n, s in zip(shape[1:], rest):
        if (s.start, s.step) != (0, 1) or s.stop is None or s.stop < n:
            return None
    return first
