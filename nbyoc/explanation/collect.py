"""``explain``: partition a function as ``nbyoc.compile`` would, and say why at each step.

The partition is the compiler's own (``fold_batch_norm``, ``merge_composite``, ``legalize``,
``annotate_target``, ``merge_compiler_regions``, ``without_small``, ``partition_graph``,
run here one by one), so the report cannot drift from what a compile does. Along the way
it asks each backend, in priority order, why it refused each op call
(``OperatorSupport.refusals``); notes the calls a backend took whose region was too small
to keep; and, for two regions of one backend where one reads the other, says why they
stayed apart: the merged region would exceed ``max_size``, or a path through another
node (named as in the function's text) leads from one to the other, so that merging
would make a cycle.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from ..errors import NbyocError
from ..ir.nodes import Function, IRModule, Var
from ..ir.printer import value_names
from ..ir.types import tensor_types
from ..transform.inline import inline_externals
from ..transform.merge import counted_calls
from ..transform.partition import partition_graph, plain, region_symbols
from ..transform.pipeline import MAX_REGION_CALLS, partition_stages
from ..transform.regions import Graph, Regions, is_op_call
from ..transform.support import HOST
from .report import Explanation, OpRow, RegionRow

if TYPE_CHECKING:
    from ..runtime.executable import Executable


def explain(
    func: Function | IRModule | Executable,
    backend: str | Sequence[str] | None = None,
    *,
    merge: bool = True,
    min_size: int = 1,
    max_size: int | None = MAX_REGION_CALLS,
) -> Explanation:
    """Where each op of ``func`` runs, and why not elsewhere.

    ``func`` is an nbyoc ``Function``, a partitioned ``IRModule`` or an ``Executable``
    (whose backends are the default ``backend``); ``backend`` is one name or several in
    priority order (default ``"llvm"``); ``merge``, ``min_size`` and ``max_size`` are
    ``nbyoc.compile``'s. The ``Explanation`` prints as a table: every op call with the
    backend (and external function) that runs it and each refusal before it ("no rule
    for op ...", "dtype float16 not supported ...", the predicate's own reason, "region
    below min_size"); then every region with its ops, the bytes crossing its boundary and
    why it was not merged with a neighbour ("would make a cycle through %12").
    ``to_svg()`` draws the graph coloured by backend; ``to_json()`` gives the data.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (4, 4), "int32")
    >>> report = nbyoc.explain(nbyoc.function([x], (x @ x) + 1), backend="csource")
    >>> print(report)
    2 op calls (csource 1, host 1) in 1 region
    <BLANKLINE>
    value     op      runs on    why not elsewhere               type
    %0        matmul  host       csource: no rule for op matmul  Tensor[(4, 4), int32]
    (result)  add     csource_0                                  Tensor[(4, 4), int32]
    <BLANKLINE>
    region     backend  calls  reads  returns  bytes read  bytes returned  ops
    csource_0  csource  1      1      1        64          64              add
    """
    func, backends, fallbacks = _function_and_backends(func, backend)
    stages = partition_stages(func, backends, merge, min_size, max_size)
    support, annotated, final = stages.support, stages.annotated, stages.regions
    prepared = final.func
    names = value_names(prepared)
    graph = Graph.of(prepared)
    symbols = region_symbols(final)
    module = partition_graph(final)
    ops = _op_rows(final, annotated, support, names, symbols, min_size)
    regions = _region_rows(final, module, symbols, graph, names, max_size, merge)
    if fallbacks:
        ops, regions = _moved(ops, regions, fallbacks)
    inputs = tuple(names[p] for p in prepared.params)
    return Explanation(tuple(support.backends), ops, regions, inputs, _edges(graph, names))


def _function_and_backends(func, backend) -> tuple[Function, list[str], list]:
    """The function to partition, the backends, and an executable's fallbacks (the
    regions it moved: its partition is this one, then those moves)."""
    from ..runtime.executable import Executable

    fallbacks = []
    if isinstance(func, Executable):
        backend = func.backend if backend is None else backend
        fallbacks = func.fallbacks
        func = func.module
    if isinstance(func, IRModule):
        func = inline_externals(func)
    if not isinstance(func, Function):
        raise NbyocError(
            f"explain takes an nbyoc Function, IRModule or Executable, got "
            f"{type(func).__name__} (for an ONNX model: nbyoc.explain(nbyoc.from_onnx(path)))"
        )
    backend = "llvm" if backend is None else backend
    backends = [backend] if isinstance(backend, str) else list(backend)
    return plain(func), backends, fallbacks


def _moved(ops, regions, fallbacks) -> tuple[tuple, tuple]:
    """The rows with each region an executable moved (``fn.fallbacks``) on its new home."""
    moves = {record.symbol: record for record in fallbacks}

    def note(record) -> str:
        return f"moved from {record.backend} at {record.when}: {record.reason}"

    ops = tuple(
        replace(row, target=moves[row.symbol].to, note=note(moves[row.symbol]))
        if row.symbol in moves
        else row
        for row in ops
    )
    regions = tuple(
        replace(row, backend=moves[row.symbol].to) if row.symbol in moves else row
        for row in regions
    )
    return ops, regions


def _op_rows(final: Regions, annotated: Regions, support, names, symbols, min_size) -> tuple:
    """One row per op call, in evaluation order (the order ``annotate_target`` tags)."""
    rows = []
    for call, target in final.target.items():
        taker = annotated.target[call]
        note = (
            f"{taker} took it, but its region had fewer than min_size={min_size} calls"
            if target == HOST and taker != HOST
            else ""
        )
        rows.append(OpRow(
            names.get(call, "(result)"), _op_name(call), repr(call.type), target,
            symbols.get(final.region.get(call)), tuple(support.refusals(call)), note,
        ))  # fmt: skip
    return tuple(rows)


def _op_name(call) -> str:
    """A call's op, a composite by the name of its kernel (what its backend runs)."""
    return call.attrs.get("Composite") or call.op.name


def _region_rows(final: Regions, module, symbols, graph, names, max_size, merge) -> tuple:
    members = final.members()
    rows = []
    for rid, calls in members.items():
        symbol = symbols[rid]
        ext = module[symbol]
        outputs = tensor_types(ext.ret_type)
        rows.append(RegionRow(
            symbol, final.target[calls[0]], len(calls),
            dict(Counter(_op_name(c) for c in calls)),
            len(ext.params), len(outputs),
            _bytes([p.type for p in ext.params]), _bytes(outputs),
            tuple(_apart(rid, members, final, symbols, graph, names, max_size, merge)),
        ))  # fmt: skip
    return tuple(rows)


def _edges(graph: Graph, names) -> tuple[tuple[str, str], ...]:
    """(operand, reader) by name between parameters and op calls, through the nodes
    between them (tuples, their fields, constants)."""
    shown = [isinstance(n, Var) or is_op_call(n) for n in graph.nodes]
    sources: list[tuple[int, ...]] = []  # per node: the drawn nodes its value comes from
    edges = []
    for i, node in enumerate(graph.nodes):
        came = dict.fromkeys(s for p in graph.preds[i] for s in sources[p])
        if shown[i]:
            name = names.get(node, "(result)")
            edges += [(names.get(graph.nodes[s], "(result)"), name) for s in came]
            sources.append((i,))
        else:
            sources.append(tuple(came))
    return tuple(edges)


def _bytes(types) -> int | str:
    total = 0
    for t in (tt for x in types for tt in tensor_types(x)):
        total = total + t.size * t.itemsize
    return total if isinstance(total, int) else str(total)


def _apart(rid, members, final: Regions, symbols, graph: Graph, names, max_size, merge):
    """(symbol, reason) for each other region of this one's backend that it reads from."""
    mine = {graph.index[c] for c in members[rid]}
    target = final.target[members[rid][0]]
    producers: dict[int, None] = {}
    for i in mine:
        for p in graph.preds[i]:
            other = final.region.get(graph.nodes[p])
            if other is not None and other != rid and final.target[graph.nodes[p]] == target:
                producers[other] = None
    for other in producers:
        theirs = {graph.index[c] for c in members[other]}
        calls = counted_calls(graph.nodes[i] for i in mine | theirs)  # (views not counted)
        if not merge:
            why = "merge=False"
        elif max_size is not None and calls > max_size:
            why = f"together they would exceed max_size ({calls} calls > {max_size})"
        else:
            through = _path_between(graph, theirs, mine)
            why = (
                f"merging would make a cycle through {names.get(graph.nodes[through], '?')}"
                if through is not None
                else "not merged"
            )
        yield symbols[other], why


def _path_between(graph: Graph, source: set[int], dest: set[int]) -> int | None:
    """The first node outside ``source`` and ``dest`` on a path from one to the other
    (the node merging would pull into a cycle), or None when every path is direct."""
    seen: dict[int, int] = {}
    queue = deque()
    for i in source:
        for s in graph.succs[i]:
            if s not in source and s not in dest and s not in seen:
                seen[s] = s
                queue.append(s)
    while queue:
        i = queue.popleft()
        for s in graph.succs[i]:
            if s in dest:
                return seen[i]
            if s not in source and s not in seen:
                seen[s] = seen[i]
                queue.append(s)
    return None
