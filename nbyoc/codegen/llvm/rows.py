"""Row-wise fusion: reductions over a tensor's trailing axes, with the elementwise
ops before and after them, as one loop over rows.

Softmax is ``e = exp(x - max(x)); e / sum(e)`` along the last axis: as separate
stages that is four passes over memory, two of them reductions that run a scalar
at a time. Here a *row group* is a run of stages over one *row domain*: a shape
``S`` split at axis ``k`` into ``rows = prod(S[:k])`` and a row of
``prod(S[k:])`` elements. Its members are

- reductions (sum, mean, max, min, prod) over exactly the axes ``k..``;
- elementwise nodes of shape ``S`` (*full* values), reading full values, per-row
  values (broadcast along the row), per-column values (broadcast across rows)
  and scalars;
- elementwise nodes of a reduction's result shape (*row* values: ``sqrt(var +
  eps)``), reading row values and scalars.

The group runs as one function over a range of rows (parallel over chunks of
rows). For each row it makes a few *passes*: a full value is computed in the
first pass after every reduction it depends on is complete, a reduction
accumulates in the pass of its operand, and a full value needed in a later pass
is kept in a row buffer (the row stays in cache between passes). Softmax: pass 0
reads ``x`` for the max; pass 1 computes ``exp(x - m)`` into the output and sums
it; pass 2 divides. Each row is read from memory once and written once. Where the
first pass only accumulates reductions, the first pass of row ``r + 1`` runs in
the loop of row ``r``'s last pass (``pipelines``).

Reductions vectorise along the row: float sums and products accumulate in float64
with reassociable steps (``nbyoc.runtime.llvm.vecmath.add_step``: several partial sums,
far more accurate than NumPy's pairwise float32 sum), max and min through LLVM's
NaN-propagating ``maximum``/``minimum``.

>>> import nbyoc
>>> x = nbyoc.var("x", (4, 8))
>>> row_domain(nbyoc.sum(x, axis=1, keepdims=True))
RowDomain(shape=(4, 8), split=1)
>>> row_domain(nbyoc.sum(x, axis=0)) is None
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from ...ir.nodes import Call, Expr
from ...ir.ops.elementwise import loop_dtypes
from ...runtime.llvm import target
from . import rules
from .reductions import REDUCTIONS, accumulator_dtype, reduction_code
from .sizes import Sizes

#: The reductions a row group computes: every one the table has.
ROW_REDUCTIONS = tuple(REDUCTIONS)
#: Elements per block of a blocked float32 sum (see ``row_group_function``).
SUM_BLOCK = 256
#: The kernel-module import row groups need.
ROWS_IMPORT = "from nbyoc.runtime.llvm.vecmath import add_step, multiply_step, maximum, minimum"
#: The import of kernels whose row groups prefetch (see ``prefetches``).
PREFETCH_IMPORT = "from nbyoc.runtime.llvm.prefetch import prefetch_read, prefetch_write"
#: Rows of at least this many bytes prefetch the next row during their second pass
#: (``nbyoc.runtime.llvm.prefetch``). Shorter rows gain nothing with two threads: softmax at
#: 2048 x 2048 float32 (8 KiB rows) is even, within noise; at 4096 it runs 20% faster.
PREFETCH_MIN_ROW_BYTES = 8192
#: The import of kernels that stream their results (``streamed_rows``, and flat stages:
#: ``stages.streamed_loop``).
STREAM_IMPORT = "from nbyoc.runtime.llvm.stream import stream_row, stream_run, store_fence"


@dataclass(frozen=True)
class RowDomain:
    """A shape split into rows (the axes before ``split``) and the row's elements."""

    shape: tuple[int, ...]
    split: int

    @property
    def rows(self) -> int:
        return math.prod(self.shape[: self.split])

    @property
    def columns(self) -> int:
        return math.prod(self.shape[self.split :])

    def role(self, shape: tuple[int, ...]) -> str | None:
        """How a value of ``shape`` is read in a loop over this domain (broadcasting as
        NumPy does): "scalar", "row" (one value per row), "column" (one per element of
        a row), "full", or None when it broadcasts some other way."""
        pad = len(self.shape) - len(shape)
        if pad < 0:
            return None
        padded = (1,) * pad + tuple(shape)
        lead, trail = padded[: self.split], padded[self.split :]
        lead_one, trail_one = all(d == 1 for d in lead), all(d == 1 for d in trail)
        if lead_one and trail_one:
            return "scalar"
        lead_full, trail_full = lead == self.shape[: self.split], trail == self.shape[self.split :]
        if lead_full and trail_full:  # (first: with one row, a full value is also a column)
            return "full"
        if lead_full and trail_one:
            return "row"
        if lead_one and trail_full:
            return "column"
        return None


def row_domain(node: Expr) -> RowDomain | None:
    """The row domain of a reduction over its operand's trailing axes (with elements in
    both the rows and the row), else None."""
    if not (isinstance(node, Call) and node.op.name in ROW_REDUCTIONS):
        return None
    shape = node.args[0].type.shape
    axes = list(node.attrs["axis"])
    if not axes or axes != list(range(axes[0], len(shape))):
        return None
    domain = RowDomain(tuple(shape), axes[0])
    return domain if domain.rows > 0 and domain.columns > 0 else None


class RowGroupPlan:
    """The members of one row group as ``schedule.plan_row_groups`` offers it stages in
    order: ``accepts_nest`` and ``accepts_reduction`` say whether each joins, and
    record its nodes as full values, row values or reductions."""

    def __init__(self, domain: RowDomain):
        self.domain = domain
        self.full: set[Call] = set()
        self.row: set[Call] = set()
        self.reductions: list[Call] = []

    def row_shapes(self) -> set[tuple[int, ...]]:
        """The shapes a row value may have: a reduction's result with or without kept dims."""
        lead = self.domain.shape[: self.domain.split]
        ones = (1,) * (len(self.domain.shape) - self.domain.split)
        return {lead + ones, lead}

    def accepts_nest(self, nodes: list[Call], shape: tuple[int, ...]) -> bool:
        """Whether an elementwise nest joins the group (then its nodes are members)."""
        inside = set(nodes)  # (a set: graph values compare by identity only there)
        if shape == self.domain.shape:
            if all(self._full_operand_ok(a) for n in nodes for a in n.args if a not in inside):
                self.full.update(nodes)
                return True
            return False
        if shape in self.row_shapes():
            row_like = self.row | set(nodes)
            for n in nodes:
                for a in n.args:
                    if a in row_like:
                        continue
                    if a in self.full or not self._outside_row_operand_ok(a, shape):
                        return False
            self.row.update(nodes)
            return True
        return False

    def accepts_reduction(self, node: Call) -> bool:
        if row_domain(node) != self.domain:
            return False
        (x,) = node.args
        if x in self.row:
            return False
        if x not in self.full and self.domain.role(x.type.shape) != "full":
            return False
        self.reductions.append(node)
        self.row.add(node)
        return True

    def _full_operand_ok(self, a: Expr) -> bool:
        if a in self.full:
            return True
        if a in self.row:  # broadcast along the row: only with its kept dims
            return self.domain.role(a.type.shape) in ("row", "scalar")
        return self.domain.role(a.type.shape) is not None

    def _outside_row_operand_ok(self, a: Expr, shape) -> bool:
        if a.type.size == 1:
            return True
        pad = len(shape) - len(a.type.shape)
        return pad >= 0 and (1,) * pad + tuple(a.type.shape) == tuple(shape)


@dataclass
class RowGroup:
    """A planned row group: its members in evaluation order and their roles."""

    domain: RowDomain
    nodes: list[Call]
    full: set[Call]
    reductions: list[Call]

    def passes(self) -> tuple[dict[Call, int], dict[Call, int]]:
        """(pass of each full value and reduction, first pass each row value is ready in)."""
        computed: dict[Call, int] = {}
        ready: dict[Call, int] = {}
        reductions = set(self.reductions)
        for node in self.nodes:
            if node in reductions:
                (x,) = node.args
                computed[node] = computed.get(x, 0)
                ready[node] = computed[node] + 1
            elif node in self.full:
                computed[node] = max(
                    [computed.get(a, 0) if a in self.full else ready.get(a, 0) for a in node.args]
                    or [0]
                )
            else:
                ready[node] = max([ready.get(a, 0) for a in node.args] or [0])
        return computed, ready


@dataclass
class Bindings:
    """What a row function reads from outside its group and stores: the kernel lines
    making its views, each array value's parameter and role, each scalar's parameter,
    and the arguments of the call (views, then scalars)."""

    lines: list[str]
    params: dict[Expr, str]
    roles: dict[Expr, str]
    scalars: dict[Expr, str]
    arguments: list[str]


@dataclass
class RowFunction:
    """A row group's function, as data: its parameters (``Bindings.params``'s, then its
    scalars') of Numba ``types``, its body over rows ``lo, hi``, the sizes it reads at run
    time (None: it has no sizes parameter, and its call no sizes argument), and what its
    module needs (``rules.HELPERS`` names, import lines)."""

    parameters: list[str]
    types: list[str]
    body: list[str]
    sizes: Sizes | None
    helpers: set[str] = field(default_factory=set)
    imports: set[str] = field(default_factory=set)


def last_reads(group: RowGroup, computed, ready) -> dict[Expr, int]:
    """The last pass each full value of ``group`` is read in."""
    last_read: dict[Expr, int] = {}
    for u in group.nodes:
        for a in u.args:
            if a in group.full:
                last_read[a] = max(last_read.get(a, 0), computed.get(u, ready.get(u, 0)))
    return last_read


#: A row value's reciprocal stands in for it as a divisor while it is normal: then
#: ``x * (1 / r)`` is within 1.5 ulp of ``x / r`` (two roundings of half an ulp each,
#: and the reciprocal's), and a multiply costs a fraction of a divide (softmax's last
#: pass at 2048x2048: vdivps, 0.18 ms a million elements). Outside it (zero, inf, NaN,
#: subnormal reciprocals) the row divides.
RECIPROCAL_RANGE = {
    "float32": ("np.float32(1.1754943508222875e-38)", "np.float32(8.507059173023462e+37)"),
    "float64": ("2.2250738585072014e-308", "4.49423283715579e+307"),
}


def pass_loops(loop_body, after, block_sums, columns, prefetch=()) -> list[str]:
    """The loops of one pass over a row: ``loop_body`` over its elements (in blocks when
    it feeds blocked sums or ``prefetch``es a block of the next row per block), then
    ``after`` in a loop of its own. A ``prefetch`` line may use the block's bounds
    ``b0`` and ``b1``."""
    lines = []
    if block_sums or (prefetch and loop_body):
        lines += [
            f"for b0 in range(0, {columns}, {SUM_BLOCK}):",
            f"    b1 = min(b0 + {SUM_BLOCK}, {columns})",
            *(f"    {line}" for line in prefetch),
            *(f"    {block} = np.float32(0)" for block, _ in block_sums),
            "    for j in range(b0, b1):",
            *("        " + line for line in loop_body),
            *(f"    {acc} += np.float64({block})" for block, acc in block_sums),
        ]
    elif loop_body:
        lines += [f"for j in range({columns}):", *("    " + line for line in loop_body)]
    if after:
        lines += [f"for j in range({columns}):", *("    " + line for line in after)]
    return lines


def prefetches(
    group: RowGroup, bound: Bindings, stored: set, passes: int, streamed=frozenset()
) -> list[str]:
    """The calls asking for block ``b0:b1`` of row ``nxt`` of each full array the group
    reads (to read) or stores (to write; not one it streams), for its second pass; none
    for a group of one pass or short rows (see PREFETCH_MIN_ROW_BYTES)."""
    full = [node for node, role in bound.roles.items() if role == "full"]
    row_bytes = max([group.domain.columns * node.type.itemsize for node in full] or [0])
    if passes < 2 or group.domain.rows < 2 or row_bytes < PREFETCH_MIN_ROW_BYTES:
        return []
    return [
        f"prefetch_{'write' if node in stored else 'read'}({bound.params[node]}, nxt, b0, b1)"
        for node in full
        if node not in streamed
    ]


def streamed_rows(group: RowGroup, bound: Bindings, stored: set) -> set[Expr]:
    """The full values ``group`` stores with streaming stores (``nbyoc.runtime.llvm.stream``):
    all of them (not emulated dtypes) once the group's full arrays together reach
    ``target.stream_min_bytes()``; none below it, where the cache holds them."""
    full = [node for node, role in bound.roles.items() if role == "full"]
    footprint = sum(node.type.size * node.type.itemsize for node in full)
    if footprint < target.stream_min_bytes():
        return set()
    return {
        node
        for node in full
        if node in stored and rules.value_dtype(node.type.dtype) == node.type.dtype
    }


def row_hosts(group: RowGroup, buffers, stored: set, computed, last_read, widening) -> dict:
    """buffered value -> the stored value whose row can hold it instead of a row buffer:
    one of the same float dtype, computed in the buffered value's last pass, after every
    reader of it in that pass (each element is read before it is overwritten, and
    nothing reads it later). A value a widening reduction reads in a loop of its own
    keeps its buffer."""
    order = {node: k for k, node in enumerate(group.nodes)}
    hosts: dict[Call, Call] = {}
    for guest in buffers:
        dtype = rules.value_dtype(guest.type.dtype)
        if dtype not in ("float32", "float64") or any(r.args[0] is guest for r in widening):
            continue
        last = last_read[guest]
        readers = [
            u for u in group.nodes if any(a is guest for a in u.args) and computed.get(u) == last
        ]
        for host in group.nodes:
            if (
                host in stored
                and host in group.full
                and all(host is not h for h in hosts.values())
                and host.type.dtype == dtype
                and computed[host] == last
                and all(order[u] <= order[host] for u in readers)
            ):
                hosts[guest] = host
                break
    return hosts


@dataclass
class RowPass:
    """One pass of a row group over a row, as lines: ``before`` its loop (row values,
    reduction starts, reciprocals), the loop's ``body``, ``after`` (widening reductions,
    in a loop of their own), its blocked sums as (block, accumulator) and the lines
    ``finals`` after it. With ``tests`` (row values in RECIPROCAL_RANGE) the loop comes
    in two versions, the second with the lines ``dividing`` maps replaced."""

    before: list[str] = field(default_factory=list)
    body: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)
    block_sums: list[tuple[str, str]] = field(default_factory=list)
    finals: list[str] = field(default_factory=list)
    tests: list[str] = field(default_factory=list)
    dividing: dict[str, str] = field(default_factory=dict)

    def loops(self, columns: int, prefetch=()) -> list[str]:
        """The pass's loops (see ``pass_loops``), in two versions when it divides."""
        loops = pass_loops(self.body, self.after, self.block_sums, columns, prefetch)
        if not self.tests:
            return loops
        slow = []
        for line in loops:
            text = line.lstrip()
            slow.append(line[: len(line) - len(text)] + self.dividing.get(text, text))
        tests = " and ".join(self.tests)
        return [f"if {tests}:", *("    " + line for line in loops), "else:"] + [
            "    " + line for line in slow
        ]

    def joined(self, other: RowPass) -> RowPass:
        """This pass and ``other`` (no lines after a loop, no tests) in one loop."""
        assert not other.after and not other.tests
        return RowPass(
            body=self.body + other.body,
            after=self.after,
            block_sums=self.block_sums + other.block_sums,
            tests=self.tests,
            dividing=self.dividing,
        )


def pipelines(group: RowGroup, computed, ready, last: int, slots, rows_out, stored, widening):
    """Whether the first pass of row ``r + 1`` may run in the loop of row ``r``'s last
    pass. Rows in cache are compute-bound: softmax's last pass only stores and its first
    only loads, and together they overlap (softmax at 2048 x 2048: 0.89 -> 0.84 ms).
    The first pass must leave nothing in the row but reductions' accumulators (no row
    values before it, no buffer, no store, no loop after it), and the last must have
    a loop to join."""
    if last < 1:
        return False
    first_full = [n for n in group.nodes if computed.get(n) == 0 and n in group.full]
    first_reductions = [n for n in group.reductions if computed[n] == 0]
    row_values = [
        n for n in group.nodes if n not in group.full and n in ready and n not in computed
    ]
    return (
        bool(first_reductions)
        and not any(ready[n] == 0 for n in row_values)
        and not any(n in slots or n in rows_out or n in stored for n in first_full)
        and not any(n in widening for n in first_reductions)
        and any(computed.get(n) == last for n in group.nodes)
    )


def row_group_function(group: RowGroup, bound: Bindings, stored: set, literals) -> RowFunction:
    """The row function running ``group`` over rows ``lo, hi``, reading what ``bound``
    passes it (``Bindings``: its arrays as ``(rows, columns)`` views) and the kernel's
    ``literals`` (a source literal by node), and storing the members in ``stored``."""
    domain = group.domain
    # (the row's length read at run time: one function for every row group of this
    # structure, softmax over 1000 or 1024 columns alike)
    sizes = Sizes()
    columns = sizes.dim(domain.columns)
    reductions = set(group.reductions)
    computed, ready = group.passes()
    params, roles, scalars = bound.params, bound.roles, bound.scalars
    helpers: set[str] = set()
    imports: set[str] = set()
    last_read = last_reads(group, computed, ready)
    # A reduction accumulating wider than the values it reads (float32 values into
    # float64 partial sums) must not sit in the loop computing the values: it would make
    # LLVM vectorise everything four lanes wide instead of eight (measured: softmax's
    # exp pass 1.8x slower). A float32 sum or mean is *blocked*: the loop runs over
    # blocks of SUM_BLOCK elements, summing each in float32 partial sums (eight lanes,
    # several accumulators: a handful of additions deep) and adding the block sums in
    # float64, which is also more accurate than NumPy's pairwise sum. So is one reading
    # an input (layer norm's mean at 2048 x 2048: 1.11 -> 1.04 ms). Any other widening
    # reduction (a product) reads a row buffer in a loop of its own.
    blocked = {
        r
        for r in group.reductions
        if r.op.name in ("sum", "mean") and rules.value_dtype(r.args[0].type.dtype) == "float32"
    }
    widening = {
        r
        for r in group.reductions
        if r.args[0] in group.full
        and accumulator_dtype(r) != rules.value_dtype(r.args[0].type.dtype)
    }
    widening -= blocked
    buffers: dict[Call, str] = {}
    for node in group.nodes:
        later = node in group.full and last_read.get(node, 0) > computed[node]
        if later or any(r.args[0] is node for r in widening):
            buffers[node] = f"buf{len(buffers)}"
    # A streamed value's row goes to a row buffer, then to memory at once.
    streamed = streamed_rows(group, bound, stored)
    # A buffered value whose last reader is a stored value lives in that value's row:
    # softmax writes exp(x - max) to the output row and scales it there, as ONNX
    # Runtime does. The row's lines are then fetched while the exp pass computes, not in
    # the short pass that scales (softmax at 2048 x 2048: 1.05 -> 0.92 ms).
    hosts = row_hosts(group, buffers, stored, computed, last_read, widening)
    slots = {node: f"{buffers[node]}[j]" for node in buffers}
    rows_out = {}
    for k, node in enumerate(n for n in group.nodes if n in streamed):
        guest = next((b for b, host in hosts.items() if host is node), None)
        rows_out[node] = buffers[guest] if guest is not None else f"out{k}"
    for guest, host in hosts.items():
        if host not in streamed:
            slots[guest] = f"{params[host]}[r, j]"
            del buffers[guest]
    allocated = {**{b: n for n, b in rows_out.items()}, **{b: n for n, b in buffers.items()}}
    body = [
        f"{b} = np.empty({columns}, {rules.NP_TYPES[rules.value_dtype(n.type.dtype)]})"
        for b, n in allocated.items()
    ]
    last = max([*computed.values(), *ready.values(), 0])
    # The first pass of row r + 1 runs in the loop of row r's last pass (see
    # ``pipelines``): row r's stores and row r + 1's loads then overlap.
    pipelined = pipelines(group, computed, ready, last, slots, rows_out, stored, widening)
    if pipelined:
        body.append("if np.uint64(lo) < np.uint64(hi):")  # the first row's first pass
    body.append("for r in range(np.uint64(lo), np.uint64(hi)):")
    ahead = prefetches(group, bound, stored, last + 1, streamed)
    if ahead:  # the next row (the last row asks for itself: a no-op, in bounds)
        imports.add(PREFETCH_IMPORT)
        # (when the pass prefetching also reads the next row, the row after it)
        distance = 2 if pipelined and last == 1 else 1
        last_row = sizes.dim(domain.rows - 1)
        body.append(f"    nxt = min(r + np.uint64({distance}), np.uint64({last_row}))")
    local: dict[Expr, str] = {}  # values held in locals: row values, this pass's full values

    def read(a: Expr, dtype: str, row: str) -> str:
        if a in local:
            text = local[a]
        elif a in slots:
            text = slots[a]
        elif a in literals:
            text = literals[a]
        elif a in scalars:
            text = scalars[a]
        else:
            index = {"full": f"{row}, j", "row": row, "column": "j"}[roles[a]]
            text = rules.load(f"{params[a]}[{index}]", a.type.dtype)
        return text if a.type.dtype == dtype else rules.cast(text, dtype)

    #: per pass: the lines dividing by a row value, as the same line dividing (the
    #: fast line multiplies by the row value's reciprocal, see RECIPROCAL_RANGE)
    dividing: dict[str, str] = {}
    divisors: dict[str, tuple[str, str]] = {}  # row value -> (its reciprocal, dtype)

    def compute(node: Call, name: str, row: str) -> str:
        loop = loop_dtypes(node)
        args = [read(a, d, row) for a, d in zip(node.args, loop)]
        expression, needed = rules.call_expression(node, args, loop)
        helpers.update(needed)
        local[node] = name
        line = f"{name} = {expression}"
        divisor = node.args[1] if node.op.name == "divide" else None
        by_row = (
            divisor is not None
            and node in group.full
            and divisor not in group.full
            and divisor in local
            and loop[0] == loop[1] == divisor.type.dtype
            and loop[0] in RECIPROCAL_RANGE
        )
        if not by_row:
            return line
        row_value = local[divisor]
        reciprocal, _ = divisors.setdefault(row_value, (f"inv_{row_value}", loop[0]))
        fast = rules.scalar_expression("multiply", [args[0], reciprocal], node.type.dtype, loop, {})
        dividing[f"{name} = {fast}"] = line
        return f"{name} = {fast}"

    def one_pass(step: int, row: str = "r") -> RowPass:
        """Pass ``step`` over row ``row`` (a variable): its parts, not yet in loops."""
        part = RowPass()
        for k, node in enumerate(group.nodes):
            if node not in group.full and node not in reductions and ready[node] == step:
                part.before.append(compute(node, f"rv{k}", row))
                if node in stored:
                    value = rules.store(local[node], node.type.dtype)
                    part.before.append(f"{params[node]}[{row}] = {value}")
        for k, node in enumerate(group.nodes):
            if computed.get(node) != step:
                continue
            if node in group.full:
                part.body.append(compute(node, f"v{k}", row))
                if node in slots:
                    part.body.append(f"{slots[node]} = {local[node]}")
                if node in rows_out:
                    part.body.append(f"{rows_out[node]}[j] = {local[node]}")
                elif node in stored:
                    value = rules.store(local[node], node.type.dtype)
                    part.body.append(f"{params[node]}[{row}, j] = {value}")
            else:  # a reduction accumulating in this pass
                (x,) = node.args
                # (its own dtype: no cast; an array's float16 loads as its float32 value)
                value = slots[x] if node in widening else read(x, x.type.dtype, row)
                start, update, result = reduction_code(node, value, columns, f"acc{k}")
                part.before.append(start)
                if node in blocked:
                    part.block_sums.append((f"block{k}", f"acc{k}"))
                    part.body.append(f"block{k} = add_step(block{k}, {value})")
                else:
                    (part.after if node in widening else part.body).append(update)
                part.finals.append(f"rv{k} = {result}")
                if node in stored:
                    value = rules.store(f"rv{k}", node.type.dtype)
                    part.finals.append(f"{params[node]}[{row}] = {value}")
        if divisors:  # one version multiplying by the reciprocals, one dividing
            for row_value, (inv, dtype) in divisors.items():
                low, high = RECIPROCAL_RANGE[dtype]
                part.before.append(f"{inv} = {rules.literal(1, dtype)} / {row_value}")
                part.tests.append(f"{low} <= abs({row_value}) <= {high}")
            part.dividing = dict(dividing)
            dividing.clear()
            divisors.clear()
        part.finals[:0] = [
            f"stream_row({params[node]}, r, {out})"
            for node, out in rows_out.items()
            if computed[node] == step
        ]
        for node in group.nodes:  # full values do not outlive their pass's loop
            if node in group.full and computed[node] == step:
                local.pop(node, None)
        for k, node in enumerate(group.nodes):
            if node in reductions and computed[node] == step:
                local[node] = f"rv{k}"
        return part

    if pipelined:
        first = one_pass(0)
        prologue = ["r = np.uint64(lo)", *first.before, *first.loops(columns), *first.finals]
        at = body.index("if np.uint64(lo) < np.uint64(hi):") + 1
        body[at:at] = ["    " + line for line in prologue]
    for step in range(1 if pipelined else 0, last + 1):
        part = one_pass(step)
        prefetch = ahead if step == 1 else ()
        if pipelined and step == last:
            next_first = one_pass(0, "rn")
            fused = part.joined(next_first)
            inner = [
                *part.before,
                "if r + np.uint64(1) < np.uint64(hi):",
                "    rn = r + np.uint64(1)",
                *("    " + line for line in next_first.before),
                *("    " + line for line in fused.loops(columns, prefetch)),
                *("    " + line for line in part.finals + next_first.finals),
                "else:",
                *("    " + line for line in part.loops(columns, prefetch)),
                *("    " + line for line in part.finals),
            ]
        else:
            inner = [*part.before, *part.loops(columns, prefetch), *part.finals]
        body += ["    " + line for line in inner]
    if rows_out:
        imports.add(STREAM_IMPORT)
        body.append("store_fence()")
    parameters = [*params.values(), *scalars.values()]
    types = row_parameter_types(bound, flat=False)
    return RowFunction(parameters, types, body, sizes, helpers, imports)


def row_parameter_types(bound: Bindings, flat: bool) -> list[str]:
    """The Numba types of a row function's parameters (``Bindings``' views are
    contiguous: full values 2-D, or 1-D when ``flat``; rows and columns 1-D), then its
    scalars'."""
    ranks = {"full": 1 if flat else 2, "row": 1, "column": 1}
    arrays = [rules.array_type(node.type.dtype, ranks[bound.roles[node]]) for node in bound.params]
    return arrays + [rules.scalar_type(node.type.dtype) for node in bound.scalars]
