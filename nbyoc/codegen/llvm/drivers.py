"""The table driver: one compiled function runs any parallel run of stages.

A parallel run of addressed stages (``stages.emit_calls``) is one call of the
driver, which holds the ``prange`` over chunks of the run's leading axis and calls
each stage on its part of every chunk. A driver whose parameters were the stages'
own arguments was one function per tuple of stage types, and Numba's time for it
grows with the number of arguments it passes into the ``prange``: a speech
embedding CNN's 25 stages at batch 2 made a driver of 200 arguments that took 20 s
to compile, more than the rest of the model.

The driver now reads everything from one int64 array, the *table*, which the
kernel builds in one call before the driver's (``runtime.llvm.stage_table``)::

    table[at]                     the number of stages, S
    table[at + 1 + 4s : + 4]      stage s: its entry's address, the offset of its
                                  row from ``at``, and its lead share (unit, per;
                                  see Lead)
    row: table[at + offset]       the stage's own address
         table[offset + 1 :]      its arguments: an array as its data address and
                                  extents, an int64 as itself, a tuple of sizes as
                                  its values

A stage's *entry* rebuilds its arguments from its row and calls it through its
address; it depends only on the stage's parameter types, so stages of one
signature share an entry (built as LLVM IR, not by Numba: ``runtime.llvm.entry_code``),
and the driver's source is fixed: one module, compiled once per machine and cached.
Arrays of at least one axis (C-contiguous or strided views), int64 values and tuples
of int64 sizes pass through a table (``entry_source`` says None for any other type,
and the run keeps a ``prange`` of the kernel's).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from ...runtime.llvm.entry_code import DTYPES, entry_text

#: The Numba type of a driver's table (and of an entry's first parameter).
TABLE_TYPE = 'nbt.Array(nbt.int64, 1, "C")'
#: The slots of the table's header per stage: entry address, row offset, unit, per.
HEADER_SLOTS = 4
#: The driver's parameters after the table: where in it the run's stages start (a
#: kernel's own table: 0; a program's holds every run, ``program``), how many chunks,
#: and the leading axis they cut: ``units`` runs of ``unit`` elements, ``size`` in all
#: (the last run maybe shorter).
DRIVER_PARAMETERS = ("at", "chunks", "units", "unit", "size")

#: The driver's module (its names fixed, as every addressed stage's: ``stages.stage_module``).
DRIVER_PREAMBLE = [
    f"ENTRY = nbt.void({TABLE_TYPE}, nbt.int64, nbt.int64, nbt.int64)",
    "ENTRY_TYPE = nbt.FunctionType(ENTRY)",
]
DRIVER_BODY = [
    "count = table[at]",
    "for c in prange(chunks):",
    "    k = np.int64(c)",  # (Numba types a prange's index as uint64)
    "    lead_lo = k * units // chunks * unit",
    "    lead_hi = min(size, (k + 1) * units // chunks * unit)",
    "    for s in range(count):",
    f"        h = at + 1 + {HEADER_SLOTS} * s",
    "        u, p = table[h + 2], table[h + 3]",
    "        lo, hi = lead_lo // u * p, (lead_hi + u - 1) // u * p",
    "        call_at(table[h], ENTRY_TYPE, (table, at + table[h + 1], lo, hi))",
]

_ARRAY = re.compile(r'nbt\.Array\(nbt\.(\w+), (\d+), "([CA])"\)')
_SIZES = re.compile(r"nbt\.UniTuple\(nbt\.int64, (\d+)\)")
_SCALAR = re.compile(r"nbt\.(boolean|u?int(?:8|16|32|64)|float32|float64)")


@dataclass(frozen=True)
class Slot:
    """How one argument sits in a row: ``kind`` "array" (data address, then its
    extents), "strided" (data address, extents, byte strides), "value" (one int64),
    "values" (int64 sizes) or "scalar" (the address of a number held in an array: only
    a program's table, ``program``, has one), ``count`` slots in all."""

    kind: str
    count: int


def slots(types: list[str], scalars: bool = False) -> list[Slot] | None:
    """The row slots of arguments of Numba types ``types`` (the stage's own, without its
    bounds), or None when one cannot pass through a table; a number of another type
    than int64, and a 0-d array, pass by their address when ``scalars`` (in a program's
    table).

    >>> slots(['nbt.Array(nbt.float32, 2, "C")', "nbt.int64", "nbt.UniTuple(nbt.int64, 3)"])
    [Slot(kind='array', count=3), Slot(kind='value', count=1), Slot(kind='values', count=3)]
    >>> slots(['nbt.Array(nbt.float32, 2, "A")'])  # (a strided view: strides too)
    [Slot(kind='strided', count=5)]
    >>> slots(["nbt.float32"]) is None, slots(["nbt.float32"], scalars=True)
    (True, [Slot(kind='scalar', count=1)])
    """
    found = []
    for numba_type in types:
        if (array := _ARRAY.fullmatch(numba_type)) is not None:
            axes = int(array.group(2))
            if axes == 0 and not scalars:  # (a kernel's table packs none: ``table_of``)
                return None
            found.append(
                Slot("array", 1 + axes) if array.group(3) == "C" else Slot("strided", 1 + 2 * axes)
            )
        elif numba_type == "nbt.int64":
            found.append(Slot("value", 1))
        elif (sizes := _SIZES.fullmatch(numba_type)) is not None:
            found.append(Slot("values", int(sizes.group(1))))
        elif scalars and _SCALAR.fullmatch(numba_type):
            found.append(Slot("scalar", 1))
        else:
            return None
    return found


def entry_source(types: list[str], scalars: bool = False) -> str | None:
    """The text of the entry (``runtime.llvm.entry_code``, which builds it) of a stage
    whose parameters (without its bounds) have Numba types ``types``: ``stage(table, at,
    lo, hi)`` reads the stage's address and arguments from the row at ``table[at]`` and
    calls it over ``[lo, hi)``; None when an argument cannot pass through a table
    (``slots``).

    >>> print(entry_source(['nbt.Array(nbt.float32, 2, "C")', "nbt.int64"]))
    # nbyoc stage entry (nbyoc.runtime.llvm.entry_code)
    array float32 2
    value
    >>> entry_source(['nbt.Array(nbt.complex64, 1, "C")']) is None
    True
    """
    layout = slots(types, scalars)
    if layout is None:
        return None
    items = []
    for numba_type, slot in zip(types, layout):
        if slot.kind in ("array", "strided"):
            dtype = _ARRAY.fullmatch(numba_type).group(1)
            axes = slot.count - 1 if slot.kind == "array" else (slot.count - 1) // 2
            items.append((slot.kind, dtype, axes))
        elif slot.kind == "scalar":
            items.append((slot.kind, _SCALAR.fullmatch(numba_type).group(1)))
        elif slot.kind == "values":
            items.append((slot.kind, slot.count))
        else:
            items.append((slot.kind,))
    if any(item[1] not in DTYPES for item in items if item[0] in ("array", "strided")):
        return None
    return entry_text(items)


def table_lines(
    table: str, runs: list[tuple[str, str, list[str], list[Slot], tuple[int, int]]]
) -> list[str]:
    """The kernel lines building the table ``table`` (``runtime.llvm.stage_table``) for
    stages given as (entry address, stage address, arguments, their slots, (unit, per))
    each: one call, whose layout string the kernel's compile checks the items against.

    >>> print("\\n".join(table_lines("t", [("e", "s", ["a", "n"],
    ...       [Slot("array", 3), Slot("value", 1)], (1, 4))])))
    t = table_of("v v v v v v a2 v", (1, e, 5, 1, 4, s, a, n,))
    """
    header = 1 + HEADER_SLOTS * len(runs)
    sizes = [1 + sum(slot.count for slot in run[3]) for run in runs]
    kinds, items = ["v"], [str(len(runs))]
    for k, (entry, _, _, _, (unit, per)) in enumerate(runs):
        kinds += ["v"] * HEADER_SLOTS
        items += [entry, str(header + sum(sizes[:k])), str(unit), str(per)]
    for _, stage, arguments, layout, _ in runs:
        kinds.append("v")
        items.append(stage)
        kinds += [_KINDS[slot.kind](slot.count) for slot in layout]
        items += arguments
    return [f'{table} = table_of("{" ".join(kinds)}", ({", ".join(items)},))']


#: A slot's kind in ``table_of``'s layout string ("p": a scalar's address, which only a
#: program's table holds: ``table_of`` refuses it).
_KINDS = {
    "array": lambda n: f"a{n - 1}",
    "strided": lambda n: f"s{(n - 1) // 2}",
    "value": lambda n: "v",
    "values": lambda n: f"t{n}",
    "scalar": lambda n: "p",
}


def _tuple(items: list[str]) -> str:
    return f"({', '.join(items)}{',' * (len(items) == 1)})"
