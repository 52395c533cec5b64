"""The llvm kernel emitter's row groups (``rows``, ``row_blocks``): the views of their
arrays, and the call of their row function."""

from __future__ import annotations

from ...ir.nodes import Expr
from . import rules
from .row_blocks import SHORT_ROW, row_block_function
from .rows import ROWS_IMPORT, Bindings, RowGroup, row_group_function


class RowEmission:
    """A part of ``emit.KernelEmitter`` (see there); it reads and writes the emitter's
    state, and is never used alone."""

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
