"""``Regions``: a function whose op calls are tagged with a target and grouped.

``annotate_target`` makes one (every supported call alone in its region),
``merge_compiler_regions`` joins regions, ``partition_graph`` turns each region
into an external function. The function itself is untouched IR; the tags
live beside it, keyed by node (IR nodes are immutable and hash by identity).

Printing shows the function with each call's target and region as a comment.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from ..errors import WellFormednessError
from ..ir.nodes import Call, Expr, Function
from ..ir.op import Op
from ..ir.printer import astext
from ..ir.traversal import operands, post_order
from ..ir.verify import verify
from .support import HOST


@dataclass(frozen=True)
class Graph:
    """A function's nodes in evaluation order, with operand and user indices."""

    nodes: list[Expr]
    index: dict[Expr, int]
    preds: list[list[int]]
    succs: list[list[int]]

    @classmethod
    def of(cls, func: Function) -> Graph:
        nodes = post_order([func.body])
        index = {n: i for i, n in enumerate(nodes)}
        preds = [[index[a] for a in operands(n)] for n in nodes]
        succs: list[list[int]] = [[] for _ in nodes]
        for i, ps in enumerate(preds):
            for p in dict.fromkeys(ps):
                succs[p].append(i)
        return cls(nodes, index, preds, succs)


def is_op_call(node) -> bool:
    return isinstance(node, Call) and isinstance(node.op, Op)


@dataclass(frozen=True, eq=False)
class Regions:
    """``func`` with ``target[call]`` for every op call and ``region[call]`` for
    every call not on the host. Region ids are 0, 1, ... in evaluation order."""

    func: Function
    target: Mapping[Call, str]
    region: Mapping[Call, int]

    def __post_init__(self):
        object.__setattr__(self, "target", MappingProxyType(dict(self.target)))
        object.__setattr__(self, "region", MappingProxyType(dict(self.region)))

    @classmethod
    def grouped(cls, func: Function, target: Mapping[Call, str], group: Mapping) -> Regions:
        """Regions from any grouping key per call, numbered 0, 1, ... by first appearance."""
        ids: dict = {}
        region = {}
        for node in post_order([func.body]):
            if node in group:
                region[node] = ids.setdefault(group[node], len(ids))
        return cls(func, target, region)

    def members(self) -> dict[int, list[Call]]:
        """Region id -> its calls, in evaluation order."""
        out: dict[int, list[Call]] = {}
        for node in post_order([self.func.body]):
            if node in self.region:
                out.setdefault(self.region[node], []).append(node)
        return dict(sorted(out.items()))

    def without_small(self, min_size: int) -> Regions:
        """The same tags, but regions of fewer than ``min_size`` calls go back to the host."""
        small = {c for calls in self.members().values() if len(calls) < min_size for c in calls}
        target = {c: HOST if c in small else t for c, t in self.target.items()}
        kept = {c: r for c, r in self.region.items() if c not in small}
        return Regions.grouped(self.func, target, kept)

    def verify(self) -> Regions:
        """Check the tags: every op call tagged, one target per region, and no
        region depending on itself through other nodes (the regions can run in
        some order). Returns ``self``."""
        verify(self.func)
        graph = Graph.of(self.func)
        for node in graph.nodes:
            if is_op_call(node) and node not in self.target:
                raise WellFormednessError(f"{node!r} has no target")
            tagged = self.target.get(node, HOST)
            if (tagged == HOST) == (node in self.region):
                raise WellFormednessError(
                    f"{node!r} on {tagged!r}: host calls have no region, others need one"
                )
        for rid, calls in self.members().items():
            targets = {self.target[c] for c in calls}
            if len(targets) != 1:
                raise WellFormednessError(f"region {rid} mixes targets {sorted(targets)}")
        order = unit_order(graph, {graph.index[c]: r for c, r in self.region.items()})
        if order is None:
            raise WellFormednessError("the regions depend on each other in a cycle")
        return self

    def __str__(self) -> str:
        def note(node):
            if node in self.region:
                return f"{self.target[node]}, region {self.region[node]}"
            return HOST if node in self.target else ""

        return astext(self.func, note=note)


def unit_order(graph: Graph, region_of: dict[int, int]) -> list | None:
    """Evaluation order of the contracted graph, where each region is one unit
    ``("region", id)`` and every other node its own unit ``("node", index)``.
    ``None`` if the contracted graph has a cycle. Ties go to the unit whose
    first node comes first, so the order is deterministic."""

    def unit(i):
        return ("region", region_of[i]) if i in region_of else ("node", i)

    first: dict = {}
    for i in range(len(graph.nodes)):
        first.setdefault(unit(i), i)
    indegree = dict.fromkeys(first, 0)
    edges: dict = {u: set() for u in first}
    for i, ps in enumerate(graph.preds):
        for p in ps:
            a, b = unit(p), unit(i)
            if a != b and b not in edges[a]:
                edges[a].add(b)
                indegree[b] += 1
    ready = [(first[u], u) for u, d in indegree.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        _, u = heapq.heappop(ready)
        order.append(u)
        for v in edges[u]:
            indegree[v] -= 1
            if indegree[v] == 0:
                heapq.heappush(ready, (first[v], v))
    return order if len(order) == len(first) else None
