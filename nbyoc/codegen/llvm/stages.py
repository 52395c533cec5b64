"""The llvm kernel's elementwise stages as functions of their own, and how the
kernel calls them.

A stage's loop nest becomes a function over a range ``[lo, hi)`` of its outer
(flattened leading) index, with parameters named by position (``a0``, ``a1``
for arrays, ``x0`` for scalars), so identical stages, in one kernel or in
kernels of identical regions, are one function compiled once. The kernel
calls it over the whole range, or, for a parallel stage, from a ``prange``
over chunks; consecutive parallel stages over the same domain share one
``prange``, each chunk running them in turn while its data is in cache. Numba's
parfor passes, whose cost grows much faster than the body they outline, so
only ever see a few calls.

Large stages are called through their address (``nbyoc.runtime.llvm.jit_address``)
so that their code is generated once rather than again inside the kernel.

>>> stages = StageFunctions(pointers=False)
>>> types = ["nbt.float32[::1]"] * 2
>>> name, _, _ = stages.add(["a0", "a1"], types, (8,), [], [("a1", "i0", "a0[i0]", "float32")], 1)
>>> print("\\n".join(stages.source))  # doctest: +ELLIPSIS
@njit(nogil=True, error_model="numpy", boundscheck=False, no_cpython_wrapper=True, ...)
def stage0(a0, a1, lo, hi):
    for i0 in range(np.uint64(lo), np.uint64(hi)):
        a1[i0] = a0[i0]
<BLANKLINE>
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field

from ...ir.symbols import maximum, minimum
from .drivers import (
    DRIVER_BODY,
    DRIVER_PARAMETERS,
    DRIVER_PREAMBLE,
    TABLE_TYPE,
    Slot,
    entry_source,
    slots,
    table_lines,
)
from .loops import lead_axes, loop_nest
from .sizes import PARAMETER, Sizes

#: Options of every stage function (those called through their address also carry
#: their signature and ``cache=True``: the kernel's cache does not hold their code).
#: Only compiled code calls a stage, so Numba makes none of the wrappers it makes by
#: default for Python and C callers (unboxing every argument): a tenth of the compile
#: time of a text recogniser's stage modules (10.4 -> 9.3 s for its 16 largest).
STAGE_OPTIONS = (
    'nogil=True, error_model="numpy", boundscheck=False, '
    "no_cpython_wrapper=True, no_cfunc_wrapper=True"
)
#: A parallel stage runs on chunks of about this many elements, at most MAX_CHUNKS of
#: them: a call costs nanoseconds, a chunk of 4096 float32 operations microseconds, and
#: its 16 KiB per array stay in cache from one stage of a group to the next.
CHUNK_ELEMENTS = 4096
MAX_CHUNKS = 256
#: Stages of at least this many ops are called through their address (smaller ones
#: are cheap to generate twice, and a direct call lets LLVM inline them), and every
#: stage of a program (``program``).
POINTER_MIN_OPS = 16
#: Flat stages of at least this many ops compute a block of BLOCK elements into a
#: buffer, then copy it out. A long chain of ops is bound by latency, and only runs
#: fast while the CPU overlaps consecutive iterations; when the output sits a few
#: bytes after the input modulo 4096 (common: large arrays start at the same page
#: offset), every load waits for the previous iteration's store ("4K aliasing"):
#: measured 78 ms instead of 21 ms for a 130-op chain at 256x256, depending only on
#: where the buffers were. Storing into a private buffer first keeps 20-21 ms for every
#: placement. For shorter chains the copy costs more than it saves (chain10: 8.0 ms
#: blocked, 6.5-7.4 ms direct whatever the placement).
BLOCKED_MIN_OPS = 32
BLOCK = 64
#: Elements per block of a streamed flat stage (see ``streamed_loop``). A block's
#: streaming stores go out in one burst, each holding a fill buffer the next block's
#: loads need until its line reaches memory, so shorter bursts stall less, until the
#: loop overhead per block shows: the reference graph at 4096 x 4096 took 10.4, 9.1,
#: 8.8, 8.5, 8.9 ms with blocks of 64, 128, 256, 512 and 1024 elements (4096: 9.1,
#: 16384: 9.4); at 512 against 1024, ``a*2+1`` 0.91x, a chain of 10 ops 0.93x, ``a/b+c``
#: and ``tanh(a*b+c)`` level (float32, 4096 x 4096, side by side on the Xeon).
STREAM_BLOCK = 512


def blocked_loop(inner: list[str], stores) -> list[str]:
    """A flat loop over ``range(lo, hi)`` computing ``inner`` a block at a time into
    private buffers, each block then copied to the outputs (see BLOCKED_MIN_OPS).

    >>> print("\\n".join(blocked_loop(["v0 = a0[i0] * 2"], [("a1", "i0", "v0", "float32")])))
    buffer0 = np.empty(64, np.float32)
    for b0 in range(np.uint64(lo), np.uint64(hi), np.uint64(64)):
        b1 = min(b0 + np.uint64(64), np.uint64(hi))
        for i0 in range(b0, b1):
            v0 = a0[i0] * 2
            buffer0[i0 - b0] = v0
        for i0 in range(b0, b1):
            a1[i0] = buffer0[i0 - b0]
    """
    lines = [*_buffered_blocks(inner, stores, BLOCK), "    for i0 in range(b0, b1):"]
    lines += [f"        {a}[i0] = buffer{k}[i0 - b0]" for k, (a, *_) in enumerate(stores)]
    return lines


def _buffered_blocks(inner: list[str], stores, block: int) -> list[str]:
    """The buffers of ``stores`` and a flat loop over ``range(lo, hi)`` in blocks of
    ``block``, each computing ``inner`` into the buffers (what follows in the block's
    loop writes them out)."""
    lines = [f"buffer{k} = np.empty({block}, np.{dtype})" for k, (*_, dtype) in enumerate(stores)]
    lines += [
        f"for b0 in range(np.uint64(lo), np.uint64(hi), np.uint64({block})):",
        f"    b1 = min(b0 + np.uint64({block}), np.uint64(hi))",
    ]
    lines += ["    for i0 in range(b0, b1):", *("        " + line for line in inner)]
    return lines + [f"        buffer{k}[i0 - b0] = {v}" for k, (_, _, v, _) in enumerate(stores)]


def streamed_loop(inner: list[str], stores) -> list[str]:
    """A flat loop over ``range(lo, hi)`` computing ``inner`` a block at a time into
    private buffers, each block then written to the outputs with streaming stores
    (``nbyoc.runtime.llvm.stream``), for stages whose arrays outgrow the last-level cache:
    the output's lines are not read first (the reference graph at 4096 x 4096: 10.2 ->
    8.5 ms).

    >>> print("\\n".join(streamed_loop(["v0 = a0[i0] * 2"], [("a1", "i0", "v0", "float32")])))
    buffer0 = np.empty(512, np.float32)
    for b0 in range(np.uint64(lo), np.uint64(hi), np.uint64(512)):
        b1 = min(b0 + np.uint64(512), np.uint64(hi))
        for i0 in range(b0, b1):
            v0 = a0[i0] * 2
            buffer0[i0 - b0] = v0
        stream_run(a1, b0, buffer0, b1 - b0)
    store_fence()
    """
    lines = _buffered_blocks(inner, stores, STREAM_BLOCK)
    lines += [f"    stream_run({a}, b0, buffer{k}, b1 - b0)" for k, (a, *_) in enumerate(stores)]
    return [*lines, "store_fence()"]


@dataclass
class StageBody:
    """A stage op's code (a matmul's, a conv's) as the body of a function of its own.
    With ``tasks``, the body runs one ``task`` of ``range(lo, hi)`` and the kernel shares
    the tasks out (each about ``work`` elements of work, for chunking); without, it is
    called once, and any ``prange`` in it makes the function parallel."""

    lines: list[str]
    tasks: int | None = None
    work: int = 1
    setup: list[str] = field(default_factory=list)  # run once per call, before the tasks
    #: The intrinsics it calls (tiles, tap rows: ``assemble.RUNTIME_NAMES``).
    imports: set[str] = field(default_factory=set)
    #: How the tasks cover the result's leading axis, as ``StageCall.lead`` (None: they
    #: do not, in an order a chunk of that axis could take).
    lead: Lead | None = None
    #: The sizes the body reads at run time (``sizes.Sizes``), if any: the function
    #: takes them as its parameter ``z``, and every call passes their values.
    sizes: Sizes | None = None
    #: The function's parameter names, when the body chose them (else a0, a1, ...).
    parameters: list[str] = field(default_factory=list)
    #: The ``rules.HELPERS`` it calls (a recurrence's activations).
    helpers: set[str] = field(default_factory=set)


_PARALLEL_LOOP = re.compile(r"for (\w+) in prange\((\d+)\):")


def parallel_loop_body(lines: list[str], work: int) -> StageBody | None:
    """``lines`` (an emitter's code ending in one top-level ``prange`` loop over a
    literal count) as a stage function of tasks: what comes before the loop runs once
    per call, each task one iteration. None for other code, or a loop that raises (a
    stage called in a driver's parallel loop may not; the caller moves what raises
    before it out). ``work``: the elements of work of all the iterations together.

    >>> body = parallel_loop_body(["v = a0.reshape(6)", "for o0 in prange(3):",
    ...                            "    for o1 in range(2):", "        a1[o0, o1] = v[o1]"], 6)
    >>> body.setup, body.tasks, body.lines
    (['v = a0.reshape(6)'], 3, ['o0 = task', 'for o1 in range(2):', '    a1[o0, o1] = v[o1]'])
    """
    starts = [k for k, line in enumerate(lines) if _PARALLEL_LOOP.fullmatch(line)]
    if len(starts) != 1 or any("raise" in line for line in lines[starts[0] :]):
        return None
    (start,) = starts
    rest = lines[start + 1 :]
    if not rest or not all(line.startswith("    ") for line in rest):
        return None
    name, count = _PARALLEL_LOOP.fullmatch(lines[start]).groups()
    body = [f"{name} = task", *(line[4:] for line in rest)]
    return StageBody(body, int(count), max(1, work // int(count)), setup=lines[:start])


@dataclass(frozen=True)
class Lead:
    """How a stage's outer indices cover the leading axis (of ``size``) of what it writes:
    each run of ``unit`` leading elements (the last run maybe shorter) is ``per``
    consecutive indices, and reads only those elements of the group's values. Stages
    of one group with the same leading axis may then share one prange over chunks of
    it, even when their index spaces differ (a matmul's row tiles, a row group's rows, a
    conv's tasks per image, an elementwise nest's elements).

    >>> Lead(4096, 258, 1).bounds("a", "b")  # tiles of 258 rows
    ('a // 258', '(b + 257) // 258')
    >>> Lead(8, 1, 3072).bounds("a", "b")  # 3072 elements an image
    ('a * 3072', 'b * 3072')
    """

    size: int
    unit: int = 1
    per: int = 1

    @classmethod
    def spread(cls, size: int, indices: int) -> Lead | None:
        """``indices`` outer indices, the same number for each of ``size`` leading
        elements (None without a leading axis)."""
        return cls(size, 1, indices // size) if size else None

    def bounds(self, lo: str, hi: str) -> tuple[str, str]:
        """This stage's index range for the leading elements ``[lo, hi)`` (``lo`` a
        multiple of ``unit``, ``hi`` one too or ``size``)."""
        scale = "" if self.per == 1 else f" * {self.per}"
        if self.unit == 1:
            return f"{lo}{scale}", f"{hi}{scale}"
        return f"{lo} // {self.unit}{scale}", f"({hi} + {self.unit - 1}) // {self.unit}{scale}"


#: Stages join a chunked leading axis only while it still gives this many chunks (or
#: as many as it gave before): a matmul of 8 rows tiled 8 at a time would leave one.
MIN_LEAD_CHUNKS = 8


@dataclass
class StageCall:
    """One elementwise stage as the kernel runs it."""

    function: str  # the stage function, or the variable holding its address's function
    arguments: list[str]  # kernel expressions, in parameter order
    domain: tuple[int, ...]
    parallel: bool
    group: int  # consecutive parallel stages of one group may share a prange
    #: Elements of work per outer index (a row group's row length), for chunking.
    row_elements: int = 1
    #: How the outer indices cover the leading axis, when a chunk of it may be taken.
    lead: Lead | None = None
    #: Whether a task reads the values its group computed beyond its own part of them:
    #: a conv's or pool's window reaches neighbouring rows, a matmul's tile whole rows
    #: of its operand. Such a call shares a prange only chunk by leading element, never
    #: index by index (two chained 3x3 convs of 16 tasks each, chunked by task, read
    #: rows the other chunk had not written yet).
    windowed: bool = False
    #: What it computes, for a profile (``stage_label``; the kernel writes it as a
    #: ``# profile:`` comment before the statement that runs it, which ``program`` reads).
    label: str = ""

    def call(self, lo: str, hi: str) -> str:
        args = [*self.arguments, lo, hi] if self.domain else self.arguments
        return call_text(self.function, args)

    def joins(self, later: StageCall) -> bool:
        """Whether ``later`` may run in this call's prange, chunk by chunk (when the
        first call there runs in parallel): of one group (liveness kept their buffers
        apart; the group's planner checked that each stage reads the group's values
        only where a chunk wrote them), over one domain or one leading axis."""
        if self.group != later.group or not later.domain:
            return False
        if self.same_indices(later) and not later.windowed:
            return True
        leads = (self.lead, later.lead)
        return None not in leads and self.lead.size == later.lead.size

    def same_indices(self, other: StageCall) -> bool:
        """Whether an outer index means the same part of the work in both calls (two
        matmuls of 16 tasks may tile 4096 rows 256 or 258 at a time)."""
        return self.domain == other.domain and self.lead == other.lead

    def work(self) -> int:
        return math.prod(self.domain) * self.row_elements


def _chunks(units, work):
    """How many chunks a driver cuts ``units`` doing ``work`` into: one per
    ``CHUNK_ELEMENTS`` of work, at most ``MAX_CHUNKS`` and ``units``, at least one. An
    expression of the sizes when they are symbolic (a template's: ``templates``), not a
    decision: the driver takes it as an argument.

    >>> _chunks(10, 1 << 30), _chunks(10, 10)
    (10, 1)
    """
    return maximum(1, minimum(minimum(units, work // CHUNK_ELEMENTS), MAX_CHUNKS))


def can_join(pending: list[StageCall], call: StageCall) -> bool:
    """Whether ``call`` may share the prange of the queued ``pending`` calls."""
    if not pending or not pending[0].parallel or not all(p.joins(call) for p in pending):
        return False
    if all(p.same_indices(call) for p in pending):
        return True
    before, after = _coarsest_unit(pending), _coarsest_unit([*pending, call])
    if before is None or after is None:
        return False
    size = call.lead.size
    return -(-size // after) >= min(-(-size // before), MIN_LEAD_CHUNKS)


def _coarsest_unit(calls: list[StageCall]) -> int | None:
    """The calls' coarsest ``Lead.unit``, or None when one has no lead or the units do
    not nest (every unit must divide the coarsest)."""
    leads = [c.lead for c in calls]
    if any(lead is None for lead in leads):
        return None
    unit = max(lead.unit for lead in leads)
    return None if any(unit % lead.unit for lead in leads) else unit


@dataclass(frozen=True)
class Addressed:
    """A function the kernel calls through its address (``call_at``): ``function`` of
    Numba type ``signature``, either in the kernel's module (``module`` None: the body
    of a ``prange``, ``outline``) or in a module of its own, whose source ``module`` is.
    A stage's module holds nothing but it and what it imports, its names fixed
    (``stage``, ``SIGNATURE``), so identical stages of any kernel, model or process are
    one module, compiled once and cached on disk by its content. ``types``: the Numba
    types of its parameters before its bounds; ``bounded``: whether it ends with the
    bounds ``lo, hi`` (an entry or a driver calls it over them)."""

    function: str
    signature: str
    module: str | None = None
    types: tuple[str, ...] = ()
    bounded: bool = False


#: The fixed names of the function and its type in a stage's own module.
STAGE_FUNCTION, STAGE_SIGNATURE = "stage", "SIGNATURE"
#: The lines every stage module starts with; the kernel module's other imports follow
#: when the stage uses what they import.
STAGE_MODULE_HEAD = [
    "import math",
    "import numpy as np",
    "from numba import njit, prange",
    "from numba.core import types as nbt",
]
_IDENTIFIER = re.compile(r"[A-Za-z_]\w*")
_FROM_IMPORT = re.compile(r"from ([\w.]+) import (.+)")


def stage_module(definition: list[str], imports: list[str], helpers: dict[str, str]) -> list[str]:
    """The lines of a stage's own module: ``STAGE_MODULE_HEAD``, the names of the kernel's
    ``imports`` lines (``from m import a, b``) the ``definition`` uses, and the
    ``helpers`` (name -> source) it calls.

    >>> print("\\n".join(stage_module(["def stage(a0):", "    a0[0] = opaque(1)"],
    ...                               ["from nbyoc.runtime.llvm.opaque import opaque"], {})))
    import math
    import numpy as np
    from numba import njit, prange
    from numba.core import types as nbt
    from nbyoc.runtime.llvm.opaque import opaque
    <BLANKLINE>
    def stage(a0):
        a0[0] = opaque(1)
    """
    used = set(_IDENTIFIER.findall("\n".join(definition)))
    lines, chosen = list(STAGE_MODULE_HEAD), {}
    for line in imports:
        match = _FROM_IMPORT.fullmatch(line)
        if match is None or line in STAGE_MODULE_HEAD:
            continue
        names = {n.strip() for n in match.group(2).split(",")} & used
        chosen.setdefault(match.group(1), set()).update(names)
    # Sorted, so that a stage's module is the same text whatever kernel it came from.
    for module, names in sorted(chosen.items()):
        if names:
            lines.append(f"from {module} import {', '.join(sorted(names))}")
    lines.append("")
    lines += [helpers[name] for name in sorted(used & helpers.keys())]
    return lines + definition


class StageFunctions:
    """The stage functions of one kernel, one per distinct body."""

    def __init__(self, pointers: bool, scalars: bool = False):
        self.pointers = pointers
        #: Whether tables pass numbers by their address (a program's: ``drivers.slots``).
        self.scalars = scalars
        self.source: list[str] = []
        self.by_body: dict[tuple, str] = {}
        #: The stages called through their address, in order.
        self.addressed: list[Addressed] = []
        #: Each addressed stage's definition in its own module, by kernel name.
        self.definitions: dict[str, list[str]] = {}
        #: Whether a run of stages is driven (the kernel fills a table: ``drivers``).
        self.driven = False

    def add(
        self,
        params,
        types,
        domain,
        inner,
        stores,
        ops: int,
        stream=False,
        parallel=False,
        by_address=False,
    ) -> tuple[str, int | None, list[str]]:
        """The function computing ``inner`` over ``domain`` and storing ``stores``
        ((array parameter, index, value, dtype) each), with parameters ``params`` of Numba
        types ``types`` (None where a stage may not be called by address); the index of
        its address when the kernel calls it through one; and the arguments a call
        passes after ``params``' (the extents of the domain's inner axes, read at run
        time). ``stream``: a flat stage writes its outputs with streaming stores
        (``streamed_loop``). A ``parallel`` stage is called through its address whatever
        its size, so that a driver runs it (``emit_calls``) rather than a ``prange`` of
        the kernel's, which Numba would compile per shape; so is any stage ``by_address``
        (every stage of a program: ``program``)."""
        extra = []
        if not domain:
            body = inner + [f"{a}[{i}] = {v}" for a, i, v, _ in stores]
        elif len(domain) == 1 and stream:
            body = streamed_loop(inner, stores)
        elif len(domain) == 1 and ops >= BLOCKED_MIN_OPS:
            body = blocked_loop(inner, stores)
        else:
            sizes = Sizes()
            shape = (domain[0], *sizes.dims(domain[1:]))  # (the first: lo and hi)
            stored = [f"{a}[{i}] = {v}" for a, i, v, _ in stores]
            axes = lead_axes(shape, parallel)
            nest = loop_nest(shape, inner + stored, lead="span", axes=axes)
            body = [*sizes.binding(), *nest]
            if sizes.values:
                params, types = [*params, PARAMETER], [*types, sizes.numba_type()]
                extra = [sizes.argument()]
        bounds = ["lo", "hi"] if domain else []
        addressed = by_address or ops >= POINTER_MIN_OPS or parallel
        return (*self._define(params, bounds, types, body, STAGE_OPTIONS, addressed), extra)

    def add_body(self, params: list[str], types: list[str | None], body: StageBody):
        """The function running ``body`` (see ``StageBody``) with parameters ``params`` of
        Numba types ``types``, by name; identical ones are one function. A matmul's or
        conv's code is large: it is called through its address when it can be (its
        ``types`` all known), else LLVM inlines a copy at every call (100 residual
        blocks' 200 matmuls inlined in one kernel did not compile in ten minutes)."""
        binding = []
        if body.sizes is not None and body.sizes.values:
            params, types = [*params, PARAMETER], [*types, body.sizes.numba_type()]
            binding = body.sizes.binding()
        if body.tasks is None:
            parallel = any("prange(" in line for line in body.lines)
            options = STAGE_OPTIONS + (', parallel={"fusion": False}' if parallel else "")
            return self._define(params, [], types, binding + body.lines, options, True)
        lines = [*binding, *body.setup, "for task in range(lo, hi):"]
        lines += ["    " + x for x in body.lines]
        return self._define(params, ["lo", "hi"], types, lines, STAGE_OPTIONS, True)

    def add_row_function(self, params, types, body: list[str], sizes: Sizes):
        """A row group's function over rows ``[lo, hi)`` (``rows``), with parameters
        ``params`` of Numba types ``types`` and the run-time ``sizes`` its ``body`` reads;
        identical ones are one function, called through its address (from a module of
        its own) when it can be. Returns the name a call uses and the arguments it
        passes after ``params``'."""
        extra = []
        if sizes.values:
            params, types = [*params, PARAMETER], [*types, sizes.numba_type()]
            body, extra = [*sizes.binding(), *body], [sizes.argument()]
        name, address = self._define(params, ["lo", "hi"], types, body, STAGE_OPTIONS, True)
        return (name if address is None else f"stage_at{address}"), extra

    def add_function(self, params: list[str], body: list[str]) -> str:
        """A function over ``[lo, hi)`` with the body given (a row group's), by name;
        identical ones are one function."""
        name, _ = self._define(params, ["lo", "hi"], [None] * len(params), body, STAGE_OPTIONS)
        return name

    def add_driver(self, functions: list[str]) -> tuple[str, list[tuple[str, list[Slot]]]] | None:
        """The table driver (``drivers``) for a parallel run of the addressed stages
        ``functions`` (``stage_at<k>`` each, over ``[lo, hi)``), by the name a call uses,
        with each stage's entry (its address's expression) and row slots; None when one
        of them cannot be driven (not addressed, or an argument a table cannot pass)."""
        if not self.pointers:
            return None
        entries = []
        for function in functions:
            match = _ADDRESSED.fullmatch(function)
            if match is None:
                return None
            types = self.bounded_types(int(match.group(1)))
            if types is None or entry_source(types, self.scalars) is None:
                return None
            entries.append(types)
        self.driven = True
        driven = [
            (f"stage_addresses[{self.add_entry(types)}]", slots(types, self.scalars))
            for types in entries
        ]
        return f"stage_at{self.add_driver_function()}", driven

    def bounded_types(self, index: int) -> list[str] | None:
        """The parameter types, without its bounds, of the addressed stage at ``index``;
        None when it takes no bounds ``lo, hi`` (an entry calls it over its bounds)."""
        stage = self.addressed[index]
        return list(stage.types) if stage.bounded else None

    def add_entry(self, types: list[str]) -> int:
        """The address index of the entry (``drivers.entry_source``) of stages whose
        parameters before their bounds have Numba types ``types`` (a table can pass
        each: ``drivers.slots``)."""
        source = entry_source(types, self.scalars)
        assert source is not None, "internal: an entry of a stage a table cannot pass"
        key = ("entry", source)
        name = self.by_body.get(key)
        if name is None:  # (its module is the entry's text: no definition of ours)
            name = self.by_body[key] = f"stage{len(self.by_body)}"
            self._declare(name, [TABLE_TYPE, "nbt.int64"], ["lo", "hi"], source)
        return next(k for k, a in enumerate(self.addressed) if a.function == name)

    def add_driver_function(self) -> int:
        """The address index of the table driver (one fixed function)."""
        params = ["table", *DRIVER_PARAMETERS]
        types = [TABLE_TYPE, *["nbt.int64"] * len(DRIVER_PARAMETERS)]
        options = STAGE_OPTIONS + ', parallel={"fusion": False}'
        _, address = self._define(params, [], types, DRIVER_BODY, options, True, DRIVER_PREAMBLE)
        assert address is not None, "internal: a driver is always addressed"
        return address

    def _define(self, params, bounds, types, body, options, large=False, preamble=()):
        """The function ``def name(*params, *bounds): body`` (by name, and the index of
        its address when the kernel calls it through one: ``large``, pointers allowed and
        every parameter's type known); identical ones are one function. ``preamble``:
        lines its module needs before it (only for a function called by address)."""
        addressed = self.pointers and large and None not in types
        assert addressed or not preamble, "internal: a preamble outside a stage's module"
        key = (tuple(params), tuple(bounds), tuple(types), tuple(body), options, addressed)
        name = self.by_body.get(key)
        if name is None:
            name = f"stage{len(self.by_body)}"
            self.by_body[key] = name
            parameters = ", ".join([*params, *bounds])
            code = ["    " + line for line in body]
            if addressed:  # (in a module of its own: only its type is in the kernel's)
                void = self._declare(name, types, bounds)
                self.definitions[name] = [
                    *preamble,
                    f"{STAGE_SIGNATURE} = {void}",
                    f"@njit({STAGE_SIGNATURE}, cache=True, {options})",
                    f"def {STAGE_FUNCTION}({parameters}):",
                    *code,
                    "",
                ]
            else:
                self.source += [f"@njit({options})", f"def {name}({parameters}):", *code, ""]
        index = next((k for k, a in enumerate(self.addressed) if a.function == name), None)
        return name, index

    def _declare(self, name: str, types, bounds, module: str | None = None) -> str:
        """Add the addressed stage ``name`` of parameter types ``types`` (then int64
        ``bounds``), its type declared in the kernel's source, its module's source
        ``module`` when known now; return its Numba signature's text."""
        assert bounds in ([], ["lo", "hi"]), "internal: a stage's bounds are lo, hi"
        signature = name.upper()
        void = f"nbt.void({', '.join([*types, *['nbt.int64'] * len(bounds)])})"
        self.source += [
            f"{signature} = {void}",
            f"{signature}_TYPE = nbt.FunctionType({signature})",
        ]
        self.addressed.append(Addressed(name, signature, module, tuple(types), bool(bounds)))
        return void


#: The name a kernel calls the stage function at ``stage_addresses[k]`` by.
_ADDRESSED = re.compile(r"stage_at(\d+)")


def call_text(function: str, arguments: list[str]) -> str:
    """The call of ``function`` by its name or, for ``stage_at<k>``, through its address
    (``nbyoc.runtime.llvm.jit_address.call_at``; its type is ``STAGE_AT<k>_TYPE``).

    >>> call_text("stage3", ["a", "lo"]), call_text("stage_at2", ["a"])
    ('stage3(a, lo)', 'call_at(stage_addresses[2], STAGE_AT2_TYPE, (a,))')
    """
    match = _ADDRESSED.fullmatch(function)
    if match is None:
        return f"{function}({', '.join(arguments)})"
    k = match.group(1)
    return f"call_at(stage_addresses[{k}], STAGE_AT{k}_TYPE, ({', '.join(arguments)},))"


#: The kernel's name for the table it fills before a driver's call (``drivers``).
TABLE = "drive_table"


def emit_calls(calls: list[StageCall], stages: StageFunctions | None = None) -> list[str]:
    """The kernel lines running ``calls``: one call, or a run of parallel calls that
    ``joins`` one another, which share one ``prange`` over chunks of their domain.

    With ``stages``, a parallel run of addressed stages is one call of the table
    driver (``drivers``), which holds the ``prange`` and calls each stage through the
    address the kernel wrote into its table. The kernel then holds no parallel loop for
    it (Numba outlines and compiles each ``prange`` of a kernel as a function of its
    own: a detector's 62 of them took 96 s), and the driver, whose chunk counts and
    bounds are arguments and whose stages are data, is one function for every run."""
    if not calls:
        return []
    first = calls[0]
    assert all(first.joins(c) for c in calls[1:]), "only parallel calls of one group share"
    if not first.domain:
        return [line for c in calls for line in (*profile_comment([c]), c.call("", ""))]
    same = all(first.same_indices(c) and not c.windowed for c in calls[1:])
    if same:
        total = math.prod(first.domain[: lead_axes(first.domain, first.parallel)])
        if not first.parallel:
            return [line for c in calls
                    for line in (*profile_comment([c]), c.call("0", str(total)))]  # fmt: skip
        chunks = _chunks(total, first.work())
        cut, shares = (chunks, total, 1, total), [(1, 1)] * len(calls)
    else:
        unit = _coarsest_unit(calls)
        assert unit is not None, "internal: calls of different domains without nested leads"
        size = first.lead.size
        units = -(-size // unit)
        chunks = _chunks(units, sum(c.work() for c in calls))
        cut, shares = (chunks, units, unit, size), [(c.lead.unit, c.lead.per) for c in calls]
    drive = None if stages is None else stages.add_driver([c.function for c in calls])
    if drive is not None:
        driver, entries = drive
        runs = []
        for call, share, (entry, layout) in zip(calls, shares, entries):
            address = _ADDRESSED.fullmatch(call.function).group(1)
            runs.append((entry, f"stage_addresses[{address}]", call.arguments, layout, share))
        cut_arguments = [f"np.int64({n})" for n in (0, *cut)]  # (its run starts at 0)
        return [
            *table_lines(TABLE, runs),
            *profile_comment(calls),
            call_text(driver, [TABLE, *cut_arguments]),
        ]
    if same:
        return [
            f"for c in prange({chunks}):",
            f"    lo = c * {total} // {chunks}",
            f"    hi = (c + 1) * {total} // {chunks}",
            *(f"    {c.call('lo', 'hi')}" for c in calls),
        ]
    return _lead_chunks(calls, *cut)


#: The comment a kernel line holds before a statement that runs stages: one per stage
#: it runs, in order (a driver's rows), for ``Executable.profile``'s steps.
PROFILE_COMMENT = "# profile: "


def profile_comment(calls: list[StageCall]) -> list[str]:
    """The ``# profile:`` lines naming what ``calls`` compute, one per call.

    >>> profile_comment([StageCall("f", [], (4,), False, 0, label="exp 4")])
    ['# profile: exp 4']
    """
    return [PROFILE_COMMENT + (c.label or c.function) for c in calls]


def stage_label(node) -> str:
    """What a stage computing ``node`` does, for a profile: its op and result shape, and
    a conv's weight shape, strides and groups, or a matmul's operand shapes.

    >>> import nbyoc
    >>> x, w = nbyoc.var("x", (1, 8, 10, 10)), nbyoc.var("w", (4, 8, 3, 3))
    >>> stage_label(nbyoc.conv(x, w, strides=(2, 2), pads=[1, 1, 1, 1]))
    'conv 1x4x5x5 w4x8x3x3 /2x2'
    >>> stage_label(nbyoc.var("a", (6, 5)) @ nbyoc.var("b", (5, 3)))
    'matmul 6x3 (6x5 @ 5x3)'
    """

    def shape(t) -> str:
        return "x".join(map(str, t.shape)) or "0-d"

    text = f"{node.op.name} {shape(node.type)}"
    if node.op.name == "conv":
        text += f" w{shape(node.args[1].type)}"
        strides = node.attrs.get("strides") or ()
        if any(s != 1 for s in strides):
            text += " /" + "x".join(map(str, strides))
        if node.attrs.get("group", 1) != 1:
            text += f" group {node.attrs['group']}"
    elif node.op.name == "matmul":
        text += f" ({shape(node.args[0].type)} @ {shape(node.args[1].type)})"
    return text


def _lead_chunks(calls: list[StageCall], chunks: int, units: int, unit: int, size: int):
    """One prange over ``chunks`` chunks of the calls' shared leading axis (see ``Lead``;
    ``units`` runs of ``unit`` of its ``size`` elements), each chunk running every call
    over its own indices for those leading elements."""
    lines = [
        f"for c in prange({chunks}):",
        f"    lead_lo = c * {units} // {chunks} * {unit}",
        f"    lead_hi = min({size}, (c + 1) * {units} // {chunks} * {unit})",
    ]
    for c in calls:
        lo, hi = c.lead.bounds("lead_lo", "lead_hi")
        lines += [f"    {c.call(lo, hi)}"]
    return lines
