"""A kernel as data: a region whose kernel does nothing but bind views and call stages
runs from a table, and its kernel is never compiled.

Once its stages are functions of their own (``stages``), what is left of a region's
kernel is straight-line code: views of its arrays (slices of a scratch arena,
reshapes, transposes, slices) and calls of stage functions through their addresses,
one at a time or as a driver's run (``drivers``). Numba still took seconds to compile
it (a speech embedding CNN's 300 lines: 4.9 s of its 7 s cold), and compiled it again
for every input shape, since every size in it is a constant.

``read_program`` reads those statements once, at lowering, as an interpreter of that
small language would, into a ``Program``: an int64 *template* holding every call's row
(the stage's address and its arguments, as an entry reads them: ``drivers``), each
array there as its offset from a *base* (an input, an output, a scratch arena, a
constant, a stage function), and a list of *steps*. One fixed function, compiled once
per machine (``EXECUTOR_MODULE``), copies the template, adds each base's address where
a relocation says, and runs the steps: a call through a stage's entry, or a driver's
run. The bases are numbered the call's own arrays first (inputs, outputs, scratch
arenas: their addresses change from call to call), then the fixed ones (constants,
stage functions), and the executor takes the two apart. A statement outside that
language (a loop the kernel kept, a check, a copy) is
named as the reason, and the region keeps its compiled kernel.

What is read is checked as the kernel's compile would have: an array passed where a
stage takes a C-contiguous one must be one, of the stage's rank and dtype; a
table's items must be what its layout string states.

>>> from nbyoc.codegen.llvm.stages import Addressed
>>> stage = Addressed("stage0", "STAGE0", types=('nbt.Array(nbt.float32, 2, "C")',), bounded=True)
>>> program = read_program(
...     ["t0 = s0[4:10].reshape((2, 3))",
...      "# profile: relu 2x3",
...      "call_at(stage_addresses[0], STAGE_AT0_TYPE, (t0, 0, 2,))"],
...     {"s0": Place(0, 0, (16,), (4,), "float32")}, [stage], first_stage=1)
>>> program.table.tolist(), program.relocations.tolist()
([0, 16, 2, 3], [0, 1, 1, 0])
>>> program.steps  # doctest: +NORMALIZE_WHITESPACE
[Step(kind=0, function=('entry', ('nbt.Array(nbt.float32, 2, "C")',)), at=0, values=(0, 2),
      labels=('relu 2x3',))]
"""

from __future__ import annotations

import ast
import math
import re
from dataclasses import dataclass, field

import numpy as np

from ...ir import symbols
from ...ir.symbols import SizeExpr
from .drivers import slots
from .stages import PROFILE_COMMENT, Addressed

#: A step's kinds: a call of one stage through its entry over ``[lo, hi)``; a driver's
#: run of the stages whose header starts at ``at`` (``drivers``).
CALL, DRIVE = 0, 1
#: The int64 slots of a step in the executor's steps: kind, the base of the function it
#: calls (an entry, a driver), ``at``, then lo and hi (a call) or the driver's cut.
STEP_SLOTS = 7

#: The executor: one fixed module, so one compile per machine (then the disk cache's).
#: A C callback over the addresses and lengths of its int64 arrays (the table to fill,
#: its template, the relocations, the call's own bases, the fixed ones, the steps):
#: the runtime calls it through cffi at its address, which a later process reads from
#: its machine code (``runtime.llvm.machine_code``) without building a Numba
#: dispatcher; the first dispatcher a process loads costs Numba about 0.1 s of set-up
#: (its typing registries), a fifth of a warm compile. It raises nothing and allocates
#: nothing: its caller checked every argument, and passes the table.
EXECUTOR_MODULE = f"""\
import numpy as np
from numba import carray, cfunc
from numba.core import types as nbt
from nbyoc.runtime.llvm.jit_address import call_at

TABLE = nbt.Array(nbt.int64, 1, "C")
ENTRY_TYPE = nbt.FunctionType(nbt.void(TABLE, nbt.int64, nbt.int64, nbt.int64))
DRIVER_TYPE = nbt.FunctionType(nbt.void(TABLE, *[nbt.int64] * 5))
ARRAY = nbt.CPointer(nbt.int64)
SIGNATURE = nbt.void(*[ARRAY, ARRAY, nbt.int64], *[ARRAY, nbt.int64] * 4)


@cfunc(SIGNATURE, cache=True, boundscheck=False)
def execute(
    table_at, template_at, length, relocations_at, n_relocations, dynamic_at, n, fixed_at,
    n_fixed, steps_at, n_steps,
):
    table = carray(table_at, length)
    template = carray(template_at, length)
    relocations = carray(relocations_at, n_relocations)
    dynamic = carray(dynamic_at, n)
    fixed = carray(fixed_at, n_fixed)
    steps = carray(steps_at, n_steps)
    for k in range(length):
        table[k] = template[k]
    for r in range(0, n_relocations, 2):
        b = relocations[r + 1]
        table[relocations[r]] += dynamic[b] if b < n else fixed[b - n]
    for s in range(0, n_steps, {STEP_SLOTS}):
        function, at = fixed[steps[s + 1] - n], steps[s + 2]
        if steps[s] == {CALL}:
            call_at(function, ENTRY_TYPE, (table, at, steps[s + 3], steps[s + 4]))
        else:
            cut = (steps[s + 3], steps[s + 4], steps[s + 5], steps[s + 6])
            call_at(function, DRIVER_TYPE, (table, at, *cut))
"""
#: The C type of the executor's callback, as cffi reads it.
EXECUTOR_TYPE = "void(*)(int64_t *, int64_t *, int64_t" + ", int64_t *, int64_t" * 4 + ")"


class NotAProgram(Exception):
    """A kernel statement a program cannot hold (its message says which, and why)."""


@dataclass(frozen=True)
class Place:
    """Where an array lives: ``offset`` bytes from base number ``base``'s address, with
    ``shape`` and byte ``strides``, elements of NumPy ``dtype`` (storage dtypes)."""

    base: int
    offset: int
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    dtype: str

    @classmethod
    def array(cls, base: int, shape: tuple[int, ...], dtype: str, offset: int = 0) -> Place:
        """A C-contiguous array at ``offset`` bytes from base ``base``.

        >>> Place.array(2, (3, 4), "float64").strides
        (32, 8)
        """
        itemsize = np.dtype(dtype).itemsize
        strides = tuple(itemsize * math.prod(shape[k + 1 :]) for k in range(len(shape)))
        return cls(base, offset, tuple(shape), strides, dtype)

    @property
    def contiguous(self) -> bool:
        """Whether it is C-contiguous (axes of one element may have any stride)."""
        expected = np.dtype(self.dtype).itemsize
        for n, stride in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and stride != expected:
                return False
            expected *= n
        return True

    def span(self) -> tuple[int, int]:
        """The bytes it covers from its base's address: [low, high) (empty: 0, 0).

        >>> Place(0, 8, (2, 3), (-12, 4), "float32").span()
        (-4, 20)
        """
        if 0 in self.shape:
            return 0, 0
        low = self.offset + sum(min(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        high = self.offset + sum(max(0, (n - 1) * s) for n, s in zip(self.shape, self.strides))
        return low, high + np.dtype(self.dtype).itemsize

    def reshape(self, shape: tuple[int, ...]) -> Place:
        if not self.contiguous or math.prod(shape) != math.prod(self.shape):
            raise NotAProgram(f"a reshape of a strided {self.shape} array to {shape}")
        return Place.array(self.base, shape, self.dtype, self.offset)

    def transpose(self, axes: tuple[int, ...]) -> Place:
        if sorted(axes) != list(range(len(self.shape))):
            raise NotAProgram(f"a transpose by {axes} of a {len(self.shape)}-d array")
        shape = tuple(self.shape[a] for a in axes)
        strides = tuple(self.strides[a] for a in axes)
        return Place(self.base, self.offset, shape, strides, self.dtype)

    def sliced(self, slices: tuple[slice, ...]) -> Place:
        """The view ``array[slices]`` (Python's rules for starts, stops and steps)."""
        if len(slices) > len(self.shape):
            raise NotAProgram(f"{len(slices)} slices of a {len(self.shape)}-d array")
        offset, shape, strides = self.offset, list(self.shape), list(self.strides)
        for axis, s in enumerate(slices):
            start, length, step = _picked(self.shape[axis], s)
            if length:
                offset += start * self.strides[axis]
            shape[axis], strides[axis] = length, self.strides[axis] * step
        return Place(self.base, offset, tuple(shape), tuple(strides), self.dtype)


def _picked(n, s: slice) -> tuple:
    """The first index, the count and the step of ``range(n)[s]``, for a size ``n`` and
    bounds that may be symbolic (a program lowered for every binding: ``templates``),
    with Python's rules; a decision they leave open is the lowering's guard."""
    if all(isinstance(x, int | None) for x in (n, s.start, s.stop, s.step)):
        picked = range(n)[s]
        return picked.start, len(picked), picked.step
    step = 1 if s.step is None else s.step
    if not isinstance(step, int) or step <= 0:
        raise NotAProgram(f"a slice {s} of a symbolic size by a step not a positive constant")

    def bound(x, default):
        if x is None:
            return default
        x = x + n if x < 0 else x
        return min(max(x, 0), n)

    start, stop = bound(s.start, 0), bound(s.stop, n)
    length = max((stop - start + step - 1) // step, 0)
    return start, length, step


@dataclass(frozen=True)
class Step:
    """One step: ``kind`` CALL or DRIVE; ``function``, what it calls: ("stage", k) the
    kernel's addressed stage k (a driver), or ("entry", types) the entry of stages of
    those parameter types; ``at``, where its row or run starts in the table; ``values``:
    lo and hi, or the driver's cut (chunks, units, unit, size); ``labels``, what it
    computes."""

    kind: int
    function: tuple
    at: int
    values: tuple[int, ...]
    #: What it computes, one label per stage it runs (a driver's rows in order), read
    #: from the ``# profile:`` comments before it (``stages.profile_comment``).
    labels: tuple[str, ...] = ()


@dataclass
class Program:
    """A kernel as data (see the module docstring): ``table``, the template; its
    ``relocations``, (slot, base) pairs flattened; the ``steps``. A program read from
    a kernel lowered for every binding of its symbolic sizes (``templates``) holds
    sizes in some slots: ``sized``, each (slot, size), the template holding 0 there."""

    table: np.ndarray
    relocations: np.ndarray
    steps: list[Step] = field(default_factory=list)
    sized: tuple[tuple[int, SizeExpr], ...] = ()

    def step_array(self, function_base) -> tuple[np.ndarray, tuple]:
        """The steps as the executor reads them, given ``function_base(function)``: the
        base number holding the address of what a step calls; and their sized slots."""
        rows = [
            [step.kind, function_base(step.function), step.at, *step.values]
            + [0] * (STEP_SLOTS - 3 - len(step.values))
            for step in self.steps
        ]
        return int64_cells([v for row in rows for v in row])


def int64_cells(values: list) -> tuple[np.ndarray, tuple]:
    """``values`` as int64, each symbolic size a 0 there; and (slot, size) of those."""
    sized = tuple((k, v) for k, v in enumerate(values) if isinstance(v, SizeExpr))
    if sized:
        values = [0 if isinstance(v, SizeExpr) else v for v in values]
    return np.array(values, np.int64), sized


_NUMBA_ARRAY = re.compile(r'nbt\.Array\(nbt\.(\w+), (\d+), "([CA])"\)')


def read_program(
    body: list[str],
    places: dict[str, Place],
    stages: list[Addressed],
    first_stage: int,
    symbols: frozenset[str] = frozenset(),
) -> Program:
    """The program of a kernel whose statements are ``body`` (its top level, no checks),
    given the ``places`` of the arrays it starts with (inputs, outputs, scratch,
    constants: by name, each a whole base of its own), the addressed ``stages``
    (their parameter types and whether they take bounds), and the base number of
    ``stage_addresses[0]`` (stage k's address is base ``first_stage + k``). Where a
    literal is expected, an expression in the names ``symbols`` is a symbolic size.
    Raises NotAProgram."""
    assert len({p.base for p in places.values()}) == len(places), "internal: one place a base"
    sizes = {p.base: p.span()[1] for p in places.values()}
    reader = _Reader(dict(places), sizes, stages, first_stage, symbols)
    source = "\n".join(body)
    reader.lines = source.split("\n")
    try:
        statements = ast.parse(source).body
    except SyntaxError as e:
        raise NotAProgram(f"unreadable kernel statements: {e}") from None
    for statement in statements:
        reader.statement(statement)
    table, sized = int64_cells(reader.table)
    return Program(table, np.array(reader.relocations, np.int64).reshape(-1), reader.steps, sized)


class _Reader:
    """Reads kernel statements one by one into the template, relocations and steps."""

    def __init__(self, places, sizes, stages, first_stage, symbols=frozenset()):
        self.symbols = symbols
        self.read: dict[str, object] = {}  # (a literal's text -> its value, with symbols)
        self.places: dict[str, Place] = places
        self.sizes: dict[int, int] = sizes  # each base's bytes
        self.tables: dict[str, int] = {}  # a table's name -> where its run starts
        self.numbers: dict[str, Place] = {}  # a number's name -> the element it was read from
        self.stages: list[Addressed] = stages
        self.first_stage = first_stage
        self.table: list = []  # (ints; sizes of symbols where the program has them)
        self.relocations: list[tuple[int, int]] = []
        self.steps: list[Step] = []
        self.lines: list[str] = []  # the statements' source, for messages
        self.labels: list[str] = []  # (``# profile:`` comments read since the last step)
        self.scanned = 0  # (the lines read for them)

    def statement(self, node: ast.stmt) -> None:
        # (its source lines as they are: ``ast.unparse`` of every statement was half of
        # reading a 330-statement program)
        text = "\n".join(self.lines[node.lineno - 1 : node.end_lineno]).strip()
        for line in self.lines[self.scanned : node.lineno - 1]:
            if line.strip().startswith(PROFILE_COMMENT):
                self.labels.append(line.strip()[len(PROFILE_COMMENT) :])
        self.scanned = node.end_lineno
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            (target,) = node.targets
            if isinstance(target, ast.Name):
                self.assign(target.id, node.value, text)
                return
        if isinstance(node, ast.Expr) and _called(node.value) == "call_at":
            self.call(node.value, text)
            return
        raise NotAProgram(f"the kernel statement {text!r}")

    # -- views and tables --------------------------------------------------------

    def assign(self, name: str, value: ast.expr, text: str) -> None:
        self.tables.pop(name, None)
        self.places.pop(name, None)
        self.numbers.pop(name, None)
        if _called(value) == "table_of":
            self.tables[name] = self.table_of(value, text)
        elif isinstance(value, ast.Subscript) and _is_index(value.slice):
            self.numbers[name] = self.element(value, text)
        else:
            self.places[name] = self.view(value, text)

    def element(self, value: ast.Subscript, text: str) -> Place:
        """The one element ``array[i, j, ...]`` a number is read from, as a place."""
        place = self.place(value.value, text)
        index = self.literal(value.slice, text)
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != len(place.shape) or not all(
            type(i) is int and 0 <= i < n for i, n in zip(index, place.shape)
        ):
            raise NotAProgram(f"an element outside its array: {text!r}")
        offset = place.offset + sum(i * s for i, s in zip(index, place.strides))
        return Place(place.base, offset, (1,), (np.dtype(place.dtype).itemsize,), place.dtype)

    def view(self, value: ast.expr, text: str) -> Place:
        if isinstance(value, ast.Name):
            return self.place(value, text)
        if isinstance(value, ast.Subscript):
            return self.place(value.value, text).sliced(_slices(value.slice, text, self.literal))
        if _called(value) == "np.ascontiguousarray" and len(value.args) == 1:
            place = self.view(value.args[0], text)
            if not place.contiguous:
                raise NotAProgram(f"a copy of a strided array: {text!r}")
            return place
        if _called(value) == "transposed" and len(value.args) == 2:
            order = value.args[1]
            if isinstance(order, ast.Constant) and isinstance(order.value, str):
                axes = tuple(int(a) for a in order.value.split())
                return self.view(value.args[0], text).transpose(axes)
        if isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute):
            method, source = value.func.attr, self.view(value.func.value, text)
            if method in ("reshape", "transpose") and len(value.args) == 1:
                literal = self.literal(value.args[0], text)
                shape = (literal,) if isinstance(literal, int | SizeExpr) else tuple(literal)
                return source.reshape(shape) if method == "reshape" else source.transpose(shape)
        raise NotAProgram(f"the view {text!r}")

    def place(self, node: ast.expr, text: str) -> Place:
        if isinstance(node, ast.Name) and node.id in self.places:
            return self.places[node.id]
        raise NotAProgram(f"an array the program does not know in {text!r}")

    def table_of(self, value: ast.Call, text: str) -> int:
        """Append a driver's table (``runtime.llvm.stage_table.table_of``): where it starts."""
        if len(value.args) != 2 or not isinstance(value.args[1], ast.Tuple):
            raise NotAProgram(f"the table {text!r}")
        kinds = self.literal(value.args[0], text).split()
        items = value.args[1].elts
        if len(kinds) != len(items):
            raise NotAProgram(f"a table whose layout does not fit its items: {text!r}")
        start = len(self.table)
        for kind, item in zip(kinds, items):
            if kind == "v":
                self.value(item, text)
            elif kind[0] in "as":
                place = self.place(item, text)
                if len(place.shape) != int(kind[1:]) or (kind[0] == "a" and not place.contiguous):
                    raise NotAProgram(f"a table item unlike its layout {kind!r}: {text!r}")
                self.array(place, kind[0] == "s")
            elif kind == "p":
                self.number(item, None, text)
            elif kind[0] == "t":
                values = self.literal(item, text)
                if len(values) != int(kind[1:]):
                    raise NotAProgram(f"a table item unlike its layout {kind!r}: {text!r}")
                self.table += [_integer(v, text) for v in values]
            else:
                raise NotAProgram(f"a table layout {kind!r}: {text!r}")
        return start

    # -- calls ------------------------------------------------------------------

    def call(self, value: ast.Call, text: str) -> None:
        if len(value.args) != 3 or not isinstance(value.args[2], ast.Tuple):
            raise NotAProgram(f"the call {text!r}")
        stage = self.stage(value.args[0], text)
        arguments = value.args[2].elts
        first = arguments[0] if arguments else None
        if isinstance(first, ast.Name) and first.id in self.tables:
            cut = [self.integer(a, text) for a in arguments[1:]]
            if len(cut) != 5 or cut[0] != 0:
                raise NotAProgram(f"a driver's call unlike a driver's: {text!r}")
            at = self.tables[first.id]
            self.steps.append(Step(DRIVE, ("stage", stage), at, tuple(cut[1:]), self.taken()))
            return
        called = self.stages[stage]
        if not called.bounded or len(arguments) != len(called.types) + 2:
            raise NotAProgram(f"a call of a stage without bounds: {text!r}")
        inner = list(called.types)
        layout = slots(inner, scalars=True)
        if layout is None:
            raise NotAProgram(f"a stage argument no table can pass: {text!r}")
        at = len(self.table)
        self.relocate(self.first_stage + stage)
        self.table.append(0)
        for argument, numba_type, slot in zip(arguments, inner, layout):
            if slot.kind in ("array", "strided"):
                place = self.place(argument, text)
                element, ndim, _ = _NUMBA_ARRAY.fullmatch(numba_type).groups()
                dtype = "bool" if element == "boolean" else element
                if (place.dtype, len(place.shape)) != (dtype, int(ndim)):
                    raise NotAProgram(f"an argument unlike its {numba_type}: {text!r}")
                if slot.kind == "array" and not place.contiguous:
                    raise NotAProgram(f"a strided argument for a contiguous one: {text!r}")
                self.array(place, slot.kind == "strided")
            elif slot.kind == "value":
                self.table.append(self.integer(argument, text))
            elif slot.kind == "scalar":
                self.number(argument, numba_type, text)
            else:
                values = self.literal(argument, text)
                if not isinstance(values, tuple) or len(values) != slot.count:
                    raise NotAProgram(f"sizes unlike the stage's: {text!r}")
                self.table += [_integer(v, text) for v in values]
        lo, hi = (self.integer(a, text) for a in arguments[-2:])
        self.steps.append(Step(CALL, ("entry", tuple(inner)), at, (lo, hi), self.taken()))

    def taken(self) -> tuple[str, ...]:
        """The labels read since the last step, for the step being read."""
        labels, self.labels = tuple(self.labels), []
        return labels

    def stage(self, node: ast.expr, text: str) -> int:
        index = _stage_index(node)
        if index is None or index >= len(self.stages):
            raise NotAProgram(f"a call of what is not a stage: {text!r}")
        return index

    def value(self, item: ast.expr, text: str) -> None:
        """A table's integer: a literal, or a stage's address."""
        if _stage_index(item) is not None:
            self.relocate(self.first_stage + self.stage(item, text))
            self.table.append(0)
        else:
            self.table.append(self.integer(item, text))

    def number(self, node: ast.expr, numba_type: str | None, text: str) -> None:
        """A number's slot: the address of the element it was read from (of the dtype
        ``numba_type`` names, when known)."""
        if not (isinstance(node, ast.Name) and node.id in self.numbers):
            raise NotAProgram(f"a number the program does not know in {text!r}")
        place = self.numbers[node.id]
        if numba_type is not None and numba_type != _numba_scalar(place.dtype):
            raise NotAProgram(f"a {place.dtype} number for a {numba_type}: {text!r}")
        self.array(place, False)
        self.table.pop()  # (its address only: no extent)

    def literal(self, node: ast.expr, text: str):
        if not self.symbols:
            return _literal(node, text)
        # (a program lowered in symbols writes the same sizes many times: each text read
        # once)
        segment = self.segment(node)
        found = self.read.get(segment)
        if found is None:
            found = self.read[segment] = _literal(node, text, self.symbols)
        return found

    def segment(self, node: ast.expr) -> str:
        lines = self.lines[node.lineno - 1 : node.end_lineno]
        if len(lines) == 1:
            return lines[0][node.col_offset : node.end_col_offset]
        return "\n".join(
            [lines[0][node.col_offset :], *lines[1:-1], lines[-1][: node.end_col_offset]]
        )

    def integer(self, node: ast.expr, text: str) -> int:
        if _called(node) == "np.int64" and len(node.args) == 1:
            node = node.args[0]
        return _integer(self.literal(node, text), text)

    def array(self, place: Place, strided: bool) -> None:
        # (views of a base never leave it: slices clip, reshapes keep the size; checked
        # all the same, since the executor's stages would read and write there)
        low, high = place.span()
        if low < 0 or high > self.sizes[place.base]:
            raise AssertionError(
                f"internal: a view of bytes [{low}, {high}) of a base of {self.sizes[place.base]}"
            )
        self.relocate(place.base)
        self.table += [place.offset, *place.shape, *(place.strides if strided else ())]

    def relocate(self, base: int) -> None:
        """The next slot holds an offset from base ``base``'s address."""
        self.relocations.append((len(self.table), base))


def _called(node: ast.expr) -> str | None:
    """The dotted name a call expression calls, or None."""
    return _dotted(node.func) if isinstance(node, ast.Call) else None


def _dotted(node: ast.expr) -> str | None:
    """``a.b.c`` of a name or attributes of one, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value)
        return None if base is None else f"{base}.{node.attr}"
    return None


def _stage_index(node: ast.expr) -> int | None:
    """k of ``stage_addresses[k]``, else None."""
    if (
        isinstance(node, ast.Subscript)
        and isinstance(node.value, ast.Name)
        and node.value.id == "stage_addresses"
        and isinstance(node.slice, ast.Constant)
        and type(node.slice.value) is int
    ):
        return node.slice.value
    return None


def _literal(node: ast.expr, text: str, symbols: frozenset[str] = frozenset()):
    # (numbers and tuples of them, the common literals, read directly: literal_eval
    # of each was half of reading a detector's 290 statements)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Tuple) and all(isinstance(e, ast.Constant) for e in node.elts):
        return tuple(e.value for e in node.elts)
    try:
        return ast.literal_eval(node)
    except ValueError:
        if symbols:
            return _size(node, text, symbols)
        raise NotAProgram(f"a value that is not a literal in {text!r}") from None


#: The arithmetic a size expression's text holds (``ir.symbols``' printed form).
_SIZE_OPERATORS = {ast.Add: symbols.add, ast.Mult: symbols.multiply,
                   ast.Sub: lambda a, b: symbols.add(a, symbols.multiply(b, -1)),
                   ast.FloorDiv: symbols.floordiv, ast.Mod: symbols.mod}  # fmt: skip
_SIZE_FUNCTIONS = {"floordiv": symbols.floordiv, "min": symbols.minimum, "max": symbols.maximum}


def _size(node: ast.expr, text: str, names: frozenset[str]):
    """A literal of sizes written in the symbols ``names`` (a tuple of them too)."""
    if isinstance(node, ast.Tuple):
        return tuple(_size(e, text, names) for e in node.elts)
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.Name) and node.id in names:
        return symbols.symbol(node.id)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return symbols.multiply(_size(node.operand, text, names), -1)
    if isinstance(node, ast.BinOp) and type(node.op) in _SIZE_OPERATORS:
        left, right = _size(node.left, text, names), _size(node.right, text, names)
        return _SIZE_OPERATORS[type(node.op)](left, right)
    function = _called(node)
    if function in _SIZE_FUNCTIONS and node.args and not node.keywords:
        args = [_size(a, text, names) for a in node.args]
        result = args[0]
        for a in args[1:]:
            result = _SIZE_FUNCTIONS[function](result, a)
        return result
    raise NotAProgram(f"a value that is not a literal in {text!r}")


def _integer(value, text: str) -> int:
    if isinstance(value, SizeExpr):
        return value
    if type(value) is not int:
        raise NotAProgram(f"{value!r} is not an integer in {text!r}")
    return value


def _is_index(node: ast.expr) -> bool:
    """Whether a subscript is an element's index: integers, or ``()``."""
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    return all(isinstance(p, ast.Constant) and type(p.value) is int for p in parts)


def _numba_scalar(dtype: str) -> str:
    return "nbt.boolean" if dtype == "bool" else f"nbt.{dtype}"


def _slices(node: ast.expr, text: str, literal) -> tuple[slice, ...]:
    parts = node.elts if isinstance(node, ast.Tuple) else [node]
    slices = []
    for part in parts:
        if not isinstance(part, ast.Slice):
            raise NotAProgram(f"an index that is not a slice in {text!r}")
        ends = [None if e is None else _integer(literal(e, text), text)
                for e in (part.lower, part.upper, part.step)]  # fmt: skip
        slices.append(slice(*ends))
    return tuple(slices)


def stage_programs(program: tuple, labels: tuple) -> list[tuple[str, tuple]]:
    """Each stage of ``program`` (its template, relocations and step array, as
    ``Lowered.program``) as a program of its own that runs that stage alone, with what
    it computes (``labels``: ``Lowered.program_labels``): a call step as it is, and each
    row of a driver's run as the run of that row only (its header row swapped into the
    first place and its count set to 1, the relocations of the two rows swapped with
    them). Run in order, they compute what the program does, one stage at a time; for
    ``Executable.profile``. A step without labels is named by its position.

    >>> import numpy as np
    >>> template = np.array([2, 100, 9, 1, 1, 200, 9, 1, 1], np.int64)  # a run of 2 rows
    >>> relocations = np.array([1, 5, 5, 6], np.int64)  # (their entries' addresses)
    >>> steps = np.array([DRIVE, 7, 0, 2, 2, 1, 2], np.int64)
    >>> runs = stage_programs((template, relocations, steps), (("conv", "add"),))
    >>> [(label, t.tolist()[:5], r.tolist()) for label, (t, r, _) in runs]
    [('conv', [1, 100, 9, 1, 1], [1, 5, 5, 6]), ('add', [1, 200, 9, 1, 1], [5, 5, 1, 6])]
    """
    from .drivers import HEADER_SLOTS

    template, relocations, steps = program
    runs = []
    for k in range(len(steps) // STEP_SLOTS):
        step = steps[k * STEP_SLOTS : (k + 1) * STEP_SLOTS]
        names = labels[k] if k < len(labels) else ()
        if step[0] != DRIVE:
            label = names[0] if len(names) == 1 else f"step {k}"
            runs.append((label, (template, relocations, step)))
            continue
        at = int(step[2])
        count = int(template[at])
        for row in range(count):
            label = names[row] if len(names) == count else f"step {k}, stage {row}"
            first, this = at + 1, at + 1 + HEADER_SLOTS * row
            alone = template.copy()
            alone[first : first + HEADER_SLOTS] = template[this : this + HEADER_SLOTS]
            alone[this : this + HEADER_SLOTS] = template[first : first + HEADER_SLOTS]
            alone[at] = 1
            moved = relocations.copy()
            slots = moved[0::2]  # (a view: the pairs' slots)
            in_first = (slots >= first) & (slots < first + HEADER_SLOTS)
            in_this = (slots >= this) & (slots < this + HEADER_SLOTS)
            slots[in_first] += this - first
            slots[in_this] -= this - first
            runs.append((label, (alone, moved, step)))
    return runs
