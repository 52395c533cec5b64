"""``partition_graph``: lift each region into an external function of an ``IRModule``.

Each region becomes a function with attrs ``Compiler`` (its backend) and
``global_symbol`` (``<backend>_<n>``, numbered per backend in evaluation
order, made a C identifier). Its parameters are the values it reads from
outside, in order of first use; it returns every value used outside it, once
each (a tuple when there are several). Constants read only inside one region
are bound into it. ``main`` keeps everything else and calls the external
functions.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_partition", "add")
>>> a, b = nbyoc.var("a", (2,)), nbyoc.var("b", (2,))
>>> mod = nbyoc.partition(nbyoc.function([a, b], nbyoc.exp(a + b)), "doc_partition")
>>> list(mod.functions), dict(mod["doc_partition_0"].attrs)
(['main', 'doc_partition_0'], {'Compiler': 'doc_partition', 'global_symbol': 'doc_partition_0'})
"""

from __future__ import annotations

from collections import defaultdict

from ..errors import WellFormednessError
from ..ir.names import symbol_prefix
from ..ir.nodes import Call, Constant, Expr, Function, GlobalVar, IRModule, Tuple, TupleGetItem, Var
from ..ir.traversal import with_operands
from .regions import Graph, Regions, unit_order

#: The attributes that make a function external (partition_graph sets them).
EXTERNAL_ATTRS = ("Compiler", "global_symbol")


def plain(func: Function) -> Function:
    """``func`` without the attributes of an external function (it is itself when it
    has none), so a function taken out of a partitioned module compiles as any other."""
    if not any(k in func.attrs for k in EXTERNAL_ATTRS):
        return func
    attrs = {k: v for k, v in func.attrs.items() if k not in EXTERNAL_ATTRS}
    return Function(func.params, func.body, attrs)


def partition_graph(regions: Regions, bind_constants: bool = True) -> IRModule:
    """Split ``regions.func`` into ``main`` plus one external function per region.

    With ``bind_constants=False`` every constant a region reads is passed to it
    as a parameter instead of being bound inside.
    """
    func = regions.func
    graph, region_of, order, members = _layout(regions)
    bound = _bound_constants(graph, region_of) if bind_constants else {}

    symbols = _symbols(regions, graph, order, members)
    mapped: dict[int, Expr] = {}  # original node index -> its value in main
    functions: dict[str, Function] = {}
    for kind, key in order:
        if kind == "node":
            node = graph.nodes[key]
            if key not in bound:
                mapped[key] = with_operands(node, [mapped[p] for p in graph.preds[key]])
            continue
        target, symbol = regions.target[graph.nodes[members[key][0]]], symbols[key]
        ext, inputs, outputs = _extract(graph, members[key], bound, key, graph.index[func.body])
        functions[symbol] = ext.with_attrs(Compiler=target, global_symbol=symbol)
        call = Call(GlobalVar(symbol, ext.type), [mapped[p] for p in inputs])
        for k, o in enumerate(outputs):
            mapped[o] = call if len(outputs) == 1 else TupleGetItem(call, k)
    # A function taken out of a partitioned module partitions as a plain function: its
    # own external-function attributes would make "main" claim another symbol.
    main = Function(func.params, mapped[graph.index[func.body]], plain(func).attrs)
    return IRModule({"main": main, **functions})


def region_symbols(regions: Regions) -> dict[int, str]:
    """Region id -> the global symbol ``partition_graph`` gives its external function.

    >>> import nbyoc
    >>> nbyoc.register_op_support("doc_symbols", "exp")
    >>> from nbyoc.transform import annotate_target
    >>> a = nbyoc.var("a", (2,))
    >>> f = nbyoc.function([a], nbyoc.exp(-nbyoc.exp(a)))
    >>> region_symbols(annotate_target(f, "doc_symbols"))
    {0: 'doc_symbols_0', 1: 'doc_symbols_1'}
    """
    graph, _, order, members = _layout(regions)
    return _symbols(regions, graph, order, members)


def _layout(regions: Regions):
    """The function's graph, each node's region, the evaluation order of the contracted
    graph (``unit_order``) and each region's members (node indices, in order)."""
    graph = Graph.of(regions.func)
    region_of = {graph.index[c]: r for c, r in regions.region.items()}
    order = unit_order(graph, region_of)
    if order is None:
        raise WellFormednessError("cannot partition: the regions depend on each other in a cycle")
    members: dict[int, list[int]] = defaultdict(list)
    for i in sorted(region_of):
        members[region_of[i]].append(i)
    return graph, region_of, order, members


def _symbols(regions: Regions, graph: Graph, order: list, members) -> dict[int, str]:
    """``<backend>_<n>`` per region, numbered per backend in evaluation order."""
    symbols, counters = {}, defaultdict(int)
    for kind, key in order:
        if kind == "region":
            prefix = symbol_prefix(regions.target[graph.nodes[members[key][0]]])
            symbols[key] = f"{prefix}_{counters[prefix]}"
            counters[prefix] += 1
    return symbols


def _bound_constants(graph: Graph, region_of: dict[int, int]) -> dict[int, int]:
    """Constant index -> the region it is bound into (constants read by one region only)."""
    bound = {}
    for i, node in enumerate(graph.nodes):
        if isinstance(node, Constant) and graph.succs[i]:
            readers = {region_of.get(s) for s in graph.succs[i]}
            if len(readers) == 1 and None not in readers:
                bound[i] = readers.pop()
    return bound


def _extract(graph: Graph, nodes: list[int], bound: dict[int, int], rid: int, root: int):
    """The external function of one region, its inputs and its outputs (node indices)."""
    inside = set(nodes)
    inputs = list(
        dict.fromkeys(
            p for i in nodes for p in graph.preds[i] if p not in inside and bound.get(p) != rid
        )
    )
    outputs = [i for i in nodes if i == root or any(s not in inside for s in graph.succs[i])]
    local: dict[int, Expr] = {p: Var(f"in{k}", graph.nodes[p].type) for k, p in enumerate(inputs)}
    for p in {p for i in nodes for p in graph.preds[i]} - inside - set(inputs):
        local[p] = graph.nodes[p]  # a bound constant
    for i in nodes:
        local[i] = with_operands(graph.nodes[i], [local[p] for p in graph.preds[i]])
    body = local[outputs[0]] if len(outputs) == 1 else Tuple([local[o] for o in outputs])
    return Function([local[p] for p in inputs], body), inputs, outputs
