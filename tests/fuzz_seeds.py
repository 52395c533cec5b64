"""Real inputs the fuzz tests mutate: graphs that use most ops, attribute kinds,
constants of several dtypes and tuples, and the ONNX models of ``frontend/models.py``."""

from __future__ import annotations

import functools

import numpy as np

import nbyoc


def _mixed() -> nbyoc.ir.Function:
    a, b = nbyoc.var("a", (2, 3)), nbyoc.var("b", (3,), "float32")
    i = nbyoc.var("i", (2, 3), "int32")
    t = nbyoc.clip(a * b + nbyoc.const(np.array([1.0, -2.0, 3.5], np.float32)), -1.0, 2.0)
    s = nbyoc.sum(t, axis=1, keepdims=True)
    r = nbyoc.transpose(nbyoc.reshape(t, (3, 2)))
    p = nbyoc.pad(t, pads=(0, 1, 0, 1), mode="reflect")
    c = nbyoc.concatenate([t, nbyoc.leaky_relu(t, alpha=0.1)], axis=0)
    w = nbyoc.where(nbyoc.greater(i, nbyoc.const(np.int32(1))), nbyoc.cast(i, to="float32"), t)
    g = nbyoc.softmax(nbyoc.slice(c, starts=(1,), ends=(3,), axes=(0,)), axis=-1)
    return nbyoc.function([a, b, i], [s, r, p, w, g, nbyoc.argmax(t, axis=0)])


def _spatial() -> nbyoc.ir.Function:
    x = nbyoc.var("x", (1, 2, 6, 6))
    w = nbyoc.const(np.linspace(-1, 1, 2 * 2 * 3 * 3, dtype=np.float32).reshape(2, 2, 3, 3))
    y = nbyoc.conv(x, w, pads=(1, 1, 1, 1))
    y = nbyoc.max_pool(y, kernel_shape=(2, 2), strides=(2, 2))
    y = nbyoc.resize(y, scales=(1.0, 1.0, 2.0, 2.0), mode="linear")
    m = nbyoc.matmul(nbyoc.reshape(y, (2, 36)), nbyoc.const(np.ones((36, 4), np.float32)))
    return nbyoc.function([x], nbyoc.tuple([m, nbyoc.tuple([y])]))


@functools.cache
def graphs() -> list[tuple[str, nbyoc.ir.Function]]:
    """(name, function): the reference graph, two graphs of many ops, the ONNX models."""
    from .frontend.models import MODELS

    a, b, c, d = (nbyoc.var(n, (10, 10)) for n in "abcd")
    found = [("reference", nbyoc.function([a, b, c, d], ((a + b) - c) * d)),
             ("mixed", _mixed()), ("spatial", _spatial())]  # fmt: skip
    for name, (make, shape) in MODELS.items():
        found.append((name, nbyoc.from_onnx(make(), shapes={"x": shape})))
    return found


@functools.cache
def modules() -> list[tuple[str, nbyoc.ir.IRModule]]:
    """(name, module): each graph partitioned for llvm, as archives store it."""
    return [(name, nbyoc.partition(f, "llvm")) for name, f in graphs()]


def onnx_models() -> list[tuple[str, bytes]]:
    """(name, model bytes) of ``frontend/models.py``'s models."""
    from .frontend.models import MODELS

    return [(name, make().SerializeToString()) for name, (make, _) in MODELS.items()]


#: Nesting depths around the limit ``nesting`` (100 by default), and far beyond it.
DEPTHS = (99, 100, 101, 3000)


def deep_tuple_texts() -> list[tuple[str, bytes]]:
    """Functions in the text form whose result is a tuple nested ``DEPTHS`` deep, one
    binding per level (issue 35: 3,000 levels read, then broke printing)."""
    found = []
    for depth in DEPTHS:
        lines = ["fn (%x: Tensor[(3,), float32]) {", "  %0 = (%x,);"]
        lines += [f"  %{k} = (%{k - 1},);" for k in range(1, depth)]
        found.append((f"tuple nested {depth} deep", "\n".join([*lines, f"  %{depth - 1}", "}"])))
    return [(name, text.encode()) for name, text in found]


def deep_tuple_documents() -> list[tuple[str, bytes]]:
    """JSON documents of the same functions: flat lists of nodes, each a tuple of the
    one before."""
    import json

    found = []
    for depth in DEPTHS:
        nodes = [{"kind": "tuple", "fields": [k]} for k in range(depth)]
        function = {"params": [{"name": "x", "shape": [3], "dtype": "float32"}],
                    "nodes": nodes, "result": depth, "attrs": {}}  # fmt: skip
        doc = {"format": "nbyoc-ir", "version": 1, "kind": "function",
               "functions": [function], "constants": []}  # fmt: skip
        found.append((f"tuple nested {depth} deep", json.dumps(doc).encode()))
    return found
