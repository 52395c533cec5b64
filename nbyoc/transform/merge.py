"""``merge_compiler_regions``: join neighbouring regions of the same backend.

Two passes: a region joins the regions of its operands (producer and consumer), then
*siblings* join: regions of one backend that read the same value (a parameter or a
computed value, not a constant), with no path between them, become one, so that
``[a + b, a - b]`` is one region and its backend reads ``a`` and ``b`` once (one loop
on llvm) instead of two kernels each passing over them.

Two regions may be joined only if no path leads from one to the other
through a third node or region: joining them would make the combined region
depend on itself (the classic diamond ``A -> host op -> B`` with ``A -> B``).
The check runs on the contracted graph, where every region is one node, so
cycles through several regions are caught too.

>>> import nbyoc
>>> nbyoc.register_op_support("doc_merge", "add")
>>> nbyoc.register_op_support("doc_merge", "multiply")
>>> a = nbyoc.var("a", (2,))
>>> t = a + a
>>> f = nbyoc.function([a], (t * t) + nbyoc.exp(t))     # exp stays on the host
>>> from nbyoc.transform import annotate_target
>>> len(merge_compiler_regions(annotate_target(f, "doc_merge")).members())
2
>>> b = nbyoc.var("b", (2,))
>>> siblings = nbyoc.function([a, b], nbyoc.tuple([a + b, a * b]))
>>> len(merge_compiler_regions(annotate_target(siblings, "doc_merge")).members())
1
"""

from __future__ import annotations

from ..ir.nodes import Call, Constant, Expr
from .regions import Graph, Regions

#: Ops whose result NumPy makes a view of their operand: they compute no element, and a
#: backend binds a view or copies at most, so ``max_size`` does not count them (it
#: bounds a unit's compile time, which grows with the work it holds). The rows of a
#: user's loop ``y[i] = x[i] * i`` are a slice and two reshapes around each multiply:
#: counted, 200 rows of 1000 were 801 calls cut into 138 regions (222 s to compile cold,
#: 7.3 ms a call against NumPy's 0.28 ms); uncounted, 201 calls in one region, one
#: program (5.8 s, 0.15 ms; loaded 2-core machine).
VIEW_OPS = frozenset({"reshape", "slice", "transpose", "squeeze", "unsqueeze", "flatten"})


def counted_calls(nodes) -> int:
    """How many of ``nodes`` count towards a region's ``max_size``: its calls that are
    not views (``VIEW_OPS``).

    >>> import nbyoc
    >>> x = nbyoc.var("x", (2, 3))
    >>> row = nbyoc.reshape(nbyoc.slice(x, [0], [1], [0]), (3,))
    >>> counted_calls([row, row.args[0], row * 2.0])
    1
    """
    return sum(_counts(n) for n in nodes)


def _counts(node: Expr) -> bool:
    return isinstance(node, Call) and getattr(node.op, "name", None) not in VIEW_OPS


def merge_compiler_regions(regions: Regions, max_size: int | None = None) -> Regions:
    """Merge regions of one target that feed each other, never into a cycle, and
    (with ``max_size``) never into a region of more than ``max_size`` calls, views not
    counted (``VIEW_OPS``).

    Nodes are visited in evaluation order; each tagged call tries to join the
    regions of its operands that have its target. A chain longer than the cap
    splits into runs of ``max_size`` calls, so a backend compiles pieces of a bounded
    size however large the graph. Region ids are renumbered in evaluation order.
    Merging an already merged result changes nothing.
    """
    graph = Graph.of(regions.func)
    region_of = {graph.index[c]: r for c, r in regions.region.items()}
    merger = _Merger(graph, region_of, max_size)
    for i, node in enumerate(graph.nodes):
        if node not in regions.region:
            continue
        for p in graph.preds[i]:
            producer = graph.nodes[p]
            if producer in regions.region and regions.target[producer] == regions.target[node]:
                merger.try_merge(merger.find(p), merger.find(i))
    # Siblings: the regions of one target reading one value, each tried against the
    # region gathering them (at first the first of them, in evaluation order) in turn.
    # When the two are too large together, the smaller gathers the readers after it:
    # the 45 rows of ``np.stack([x[i] * i for i in range(300)])`` that did not fit the
    # stack's region joined as one region, where trying each against the full first
    # one left 45 regions of one row each, every one a kernel of its own to compile.
    for i, node in enumerate(graph.nodes):
        if isinstance(node, Constant):
            continue
        gathering: dict[str, int] = {}
        for u in graph.succs[i]:
            reader = graph.nodes[u]
            if reader in regions.region:
                target = regions.target[reader]
                if target not in gathering:
                    gathering[target] = u
                    continue
                a, b = merger.find(gathering[target]), merger.find(u)
                if merger.try_merge(a, b) or a == b or not merger.too_large(a, b):
                    continue
                if merger.calls[b] < merger.calls[a]:
                    gathering[target] = u
    group = {graph.nodes[i]: merger.find(i) for i in range(len(graph.nodes))}
    group = {node: key for node, key in group.items() if node in regions.region}
    return Regions.grouped(regions.func, regions.target, group)


class _Merger:
    """Union-find over node indices, with each region's members and the nodes
    just outside it that read its values."""

    def __init__(self, graph: Graph, region_of: dict[int, int], max_size: int | None):
        self.graph = graph
        self.max_size = max_size
        self.parent = list(range(len(graph.nodes)))
        self.members = {i: [i] for i in range(len(graph.nodes))}
        #: Each region's calls as ``max_size`` counts them (``counted_calls``).
        self.calls = {i: int(_counts(node)) for i, node in enumerate(graph.nodes)}
        self.users = {i: set(graph.succs[i]) for i in range(len(graph.nodes))}
        first_of: dict[int, int] = {}
        for i in sorted(region_of):  # keep the grouping the input already has
            rid = region_of[i]
            if rid in first_of:
                self._union(self.find(first_of[rid]), self.find(i))
            else:
                first_of[rid] = i

    def find(self, i: int) -> int:
        while self.parent[i] != i:
            self.parent[i] = self.parent[self.parent[i]]
            i = self.parent[i]
        return i

    def _union(self, a: int, b: int) -> None:
        if len(self.members[a]) < len(self.members[b]):
            a, b = b, a
        self.parent[b] = a
        self.members[a] += self.members.pop(b)
        self.calls[a] += self.calls.pop(b)
        users = self.users[a] | self.users.pop(b)
        self.users[a] = {u for u in users if self.find(u) != a}

    def try_merge(self, a: int, b: int) -> bool:
        if a == b or self.too_large(a, b):
            return False
        if self._reaches_via_other(a, b) or self._reaches_via_other(b, a):
            return False
        self._union(a, b)
        return True

    def too_large(self, a: int, b: int) -> bool:
        return self.max_size is not None and self.calls[a] + self.calls[b] > self.max_size

    def _reaches_via_other(self, src: int, dst: int) -> bool:
        """Is there a path src -> ... -> dst through some unit other than the two?"""
        # Every node on such a path comes before dst's last member in evaluation order.
        limit = max(self.members[dst])
        seen = set()
        stack = [u for u in self.users[src] if u < limit and self.find(u) not in (src, dst)]
        while stack:
            unit = self.find(stack.pop())
            if unit in seen:
                continue
            seen.add(unit)
            for u in self.users[unit]:
                if u > limit:
                    continue
                target = self.find(u)
                if target == dst:
                    return True
                if target != src and target not in seen:
                    stack.append(u)
        return False
