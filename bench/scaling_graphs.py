"""Graphs of a chosen number of nodes, for compile time against graph size.

- ``chain``: 256x256 float32 through ``*1.001``, ``tanh``, ``+0.5``, ``sigmoid``
  repeated (one long region on every backend that takes these ops);
- ``dag``: a diamond-rich DAG on 256x256: every node reads the one before it and one
  two or three steps back, through ``tanh``, ``exp``, ``*``, ``+`` and ``maximum``;
- ``blocks``: residual MLP blocks ``x + relu(x @ W1 + b1) @ W2 + b2`` on a 32x64 batch,
  six nodes each, every block with weights of its own (on llvm all of a block in its
  kernel, matmuls as tiles; regions cut every ``nbyoc.partition``'s ``max_size`` calls);
- ``stacked``: ``np.stack([x[i] * i for i in range(rows)])`` on rows of 1000 float32,
  two nodes a row: many small independent stages in one region (on llvm a long kernel,
  cut into chunk functions: ``nbyoc.codegen.llvm.chunks``);
- ``rows``: a user's loop ``y[i] = x[i] * i`` on rows of 1000 float32 as ``nbyoc.jit``
  traces it, four nodes a row (a slice, two reshapes, a product) and one concatenate:
  one region however many rows (views are not counted by ``max_size``), one program
  on llvm whose stage functions are the same at every row count.

>>> [family(name, 30).function.body.type.shape for name in FAMILIES]
[(256, 256), (256, 256), (32, 64), (15, 1000), (7, 1000)]
>>> count_nodes(family("blocks", 60).function)
60
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

import nbyoc

FAMILIES = ("chain", "dag", "blocks", "stacked", "rows")
#: Nodes per residual MLP block.
BLOCK_NODES = 6
#: Nodes per row of ``rows`` (a slice, a reshape to 1-d, the product, a reshape back).
ROW_NODES = 4


@dataclass(frozen=True)
class Scaled:
    """One graph of a family at a size: the function and its inputs."""

    family: str
    nodes: int
    function: nbyoc.ir.Function

    def inputs(self) -> list[np.ndarray]:
        rng = np.random.default_rng(0)
        return [
            rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in self.function.params
        ]


def count_nodes(func) -> int:
    """The op calls of ``func`` (what "nodes" counts here)."""
    return sum(isinstance(n, nbyoc.ir.Call) for n in nbyoc.ir.post_order([func.body]))


def chain(nodes: int, side: int = 256):
    x = nbyoc.var("x", (side, side))
    y = x
    steps = [lambda v: v * 1.001, nbyoc.tanh, lambda v: v + 0.5, nbyoc.sigmoid]
    for k in range(nodes):
        y = steps[k % 4](y)
    return nbyoc.function([x], y)


def dag(nodes: int):
    x = nbyoc.var("x", (256, 256))
    values, made, k = [x], 0, 0
    while made < nodes:
        a, b = values[-1], values[max(0, len(values) - 2 - k % 2)]
        if k % 3 == 0:
            values.append(nbyoc.tanh(a) * b)
        elif k % 3 == 1:
            values.append(nbyoc.maximum(a, b) * 0.5)
        else:
            values.append(a + nbyoc.exp(b * -0.5))
        made, k = made + (3 if k % 3 == 2 else 2), k + 1
    return nbyoc.function([x], values[-1])


def blocks(nodes: int):
    rng = np.random.default_rng(1)
    x = nbyoc.var("x", (32, 64))
    y = x
    for _ in range(max(1, nodes // BLOCK_NODES)):
        w1, w2 = (rng.standard_normal((64, 64)).astype(np.float32) * 0.1 for _ in range(2))
        b1, b2 = (rng.standard_normal(64).astype(np.float32) * 0.1 for _ in range(2))
        hidden = nbyoc.relu(y @ nbyoc.const(w1) + nbyoc.const(b1))
        y = y + (hidden @ nbyoc.const(w2) + nbyoc.const(b2))
    return nbyoc.function([x], y)


def stacked(nodes: int, width: int = 1000):
    rows = max(1, nodes // 2)
    x = nbyoc.var("x", (rows, width))
    scaled = [nbyoc.slice(x, [i], [i + 1], [0]) * float(i) for i in range(rows)]
    return nbyoc.function([x], nbyoc.concatenate(scaled, axis=0))


def _scale_rows(x):
    y = np.zeros_like(x)
    for i in range(x.shape[0]):
        y[i] = x[i] * i
    return y


def rows(nodes: int, width: int = 1000):
    count = max(1, nodes // ROW_NODES)
    return nbyoc.jit(_scale_rows).trace(np.zeros((count, width), np.float32))


def family(name: str, nodes: int) -> Scaled:
    """The graph of family ``name`` with about ``nodes`` op calls."""
    build = {"chain": chain, "dag": dag, "blocks": blocks, "stacked": stacked, "rows": rows}[name]
    func = build(nodes)
    return Scaled(name, count_nodes(func), func)
