"""The graphs every backend is measured on, each with the NumPy (and numexpr) code a
user would write for it by hand.

A ``Workload`` gives, for one graph at one size: the nbyoc function, its inputs,
and the hand-written competitors:

- ``numpy``: the obvious NumPy expression, allocating temporaries;
- ``numpy-out``: the same with ``out=``, into buffers allocated on the first call
  and reused on every later one (the best plain NumPy can do; note that it
  hands back the same array every time);
- ``numexpr``: the expression evaluated by numexpr, when it is installed;
- ``jax.jit``: the NumPy version run by ``jax.jit`` with ``jax.numpy`` for ``np``
  (``jax_version``), when JAX is installed: what a user who reaches for JAX writes.
  (torch.compile is not among them: PyTorch's wheels on PyPI for Linux x86-64 are its
  CUDA build, which does not import without NVIDIA's libraries, gigabytes of them.)

>>> w = workload("reference", 4)
>>> [p.name_hint for p in w.function.params], w.shape_label
(['a', 'b', 'c', 'd'], '4x4')
>>> import numpy as np
>>> args = w.inputs()
>>> np.allclose(w.numpy(*args), w.numpy_out()(*args))
True
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import onnx_graphs

import nbyoc
from nbyoc.demo import numpy_reference, reference_graph

try:
    import numexpr
except ImportError:  # optional: pip install '.[bench]'
    numexpr = None
try:
    import jax
    import jax.numpy as jnp
except ImportError:  # optional: pip install '.[bench]'
    jax = jnp = None

#: Every case: the hand-written competitors and ONNX Runtime (on the same graph as an
#: ONNX model, ``onnx_graphs``) first, then nbyoc's.
COMPETITORS = ("numpy", "numpy-out", "numexpr", "jax.jit", "onnxruntime")

#: The square sizes n (arrays of n x n float32) the size-generic graphs run at.
SIZES = (10, 256, 1024, 2048, 4096)
#: The two-layer MLP's fixed shape: a batch of 256 rows, 1024 features, hidden 1024.
MLP_BATCH, MLP_HIDDEN = 256, 1024


#: nbyoc's cases, case id -> (backend, codegen options): every registered backend,
#: and csource's fused form.
NBYOC_CASES = {name: (name, None) for name in nbyoc.codegen.registered_backends()}
NBYOC_CASES["csource-fused"] = ("csource", {"csource": {"fused": True}})


@dataclass(frozen=True)
class Workload:
    """One graph at one size, with its hand-written competitors."""

    graph: str
    shape_label: str
    function: nbyoc.ir.nodes.Function
    numpy: Callable
    numpy_out: Callable[[], Callable] | None  # a factory: each call makes fresh buffers
    numexpr: Callable[[], Callable] | None
    flops: int = 0  # multiply-adds x 2 of the matmuls, for compute-bound graphs
    onnx: Callable[[], object] | None = None  # builds the graph's ONNX model

    def inputs(self, seed: int = 0) -> list[np.ndarray]:
        """Standard-normal float32 inputs of the function's parameter shapes."""
        rng = np.random.default_rng(seed)
        return [
            rng.standard_normal(p.type.shape).astype(p.type.dtype) for p in self.function.params
        ]

    @property
    def traffic(self) -> int:
        """Bytes between memory and the CPU in one ideal pass: every input read once,
        the result read once and written once (a store to memory not in the cache first
        reads the line: write-allocate, which a copy's measured bandwidth includes too)."""
        nbytes = [p.type.size * np.dtype(p.type.dtype).itemsize for p in self.function.params]
        out = self.function.ret_type
        return sum(nbytes) + 2 * out.size * np.dtype(out.dtype).itemsize

    @property
    def footprint(self) -> int:
        """Bytes of the arrays one pass touches (inputs and result): whether it streams
        from memory or partly from the cache depends on this."""
        nbytes = [p.type.size * np.dtype(p.type.dtype).itemsize for p in self.function.params]
        out = self.function.ret_type
        return sum(nbytes) + out.size * np.dtype(out.dtype).itemsize


def _buffers(make: Callable[[], Callable]) -> Callable[[], Callable]:
    """A factory whose function allocates its buffers on its first call, so that a
    memory probe sees them as memory held between calls."""

    def factory():
        state = {}

        def run(*args):
            if "fn" not in state:
                state["fn"] = make(*args)
            return state["fn"](*args)

        return run

    return factory


# --- the reference graph ((a + b) - c) * d ---------------------------------------


def _reference_out(a, b, c, d):
    out = np.empty_like(a)

    def run(a, b, c, d):
        np.add(a, b, out=out)
        np.subtract(out, c, out=out)
        return np.multiply(out, d, out=out)

    return run


# --- the diamond t = a * b; (t + c) * (t - d) ------------------------------------


def diamond_graph(n: int) -> nbyoc.ir.nodes.Function:
    a, b, c, d = (nbyoc.var(name, (n, n)) for name in "abcd")
    t = a * b
    return nbyoc.function([a, b, c, d], (t + c) * (t - d))


def numpy_diamond(a, b, c, d):
    t = a * b
    return (t + c) * (t - d)


def _diamond_out(a, b, c, d):
    t, out = np.empty_like(a), np.empty_like(a)

    def run(a, b, c, d):
        np.multiply(a, b, out=t)
        np.add(t, c, out=out)
        np.subtract(t, d, out=t)
        return np.multiply(out, t, out=out)

    return run


# --- a chain of 10 elementwise ops, five of them transcendental or sqrt ---------


def chain_graph(n: int) -> nbyoc.ir.nodes.Function:
    a, b = nbyoc.var("a", (n, n)), nbyoc.var("b", (n, n))
    t = nbyoc.tanh(a * b + a)
    t = nbyoc.sqrt(nbyoc.abs(nbyoc.exp(t * 0.5) - b))
    return nbyoc.function([a, b], nbyoc.sigmoid(nbyoc.maximum(t, a)))


def numpy_chain(a, b):
    t = np.tanh(a * b + a)
    t = np.sqrt(np.abs(np.exp(t * np.float32(0.5)) - b))
    return 1 / (1 + np.exp(-np.maximum(t, a)))


def _chain_out(a, b):
    t = np.empty_like(a)

    def run(a, b):
        np.multiply(a, b, out=t)
        np.add(t, a, out=t)
        np.tanh(t, out=t)
        np.multiply(t, np.float32(0.5), out=t)
        np.exp(t, out=t)
        np.subtract(t, b, out=t)
        np.abs(t, out=t)
        np.sqrt(t, out=t)
        np.maximum(t, a, out=t)
        np.negative(t, out=t)
        np.exp(t, out=t)
        np.add(t, np.float32(1), out=t)
        return np.divide(np.float32(1), t, out=t)

    return run


#: numexpr computes in float64 when a float literal or ``maximum`` meets float32, so
#: constants are passed as float32 scalars and maximum is spelled with ``where``.
F32 = {"half": np.float32(0.5), "one": np.float32(1), "zero": np.float32(0)}


def _evaluate(expression: str, **arrays):
    return numexpr.evaluate(expression, local_dict=arrays, global_dict=F32)


def _chain_numexpr(a, b):
    u = _evaluate("sqrt(abs(exp(tanh(a * b + a) * half) - b))", a=a, b=b)
    return _evaluate("one / (one + exp(-where(u > a, u, a)))", u=u, a=a)


# --- host fallback in the middle: elementwise, matrix-vector product, elementwise --


def fallback_graph(n: int) -> nbyoc.ir.nodes.Function:
    """tanh(a * b + c) @ v, then relu(d - y) * e. From n = 1024 the matrix-vector
    product is past what llvm and examplejson take (``MATMUL_MAX_WORK``), so it
    runs on the host between two external functions; csource never takes it."""
    a, b, c, d, e = (nbyoc.var(name, (n, n)) for name in "abcde")
    v = nbyoc.var("v", (n, 1))
    y = nbyoc.tanh(a * b + c) @ v
    return nbyoc.function([a, b, c, v, d, e], nbyoc.relu(d - y) * e)


def numpy_fallback(a, b, c, v, d, e):
    y = np.tanh(a * b + c) @ v
    return np.maximum(d - y, 0) * e


def _fallback_out(a, b, c, v, d, e):
    t, y, out = np.empty_like(a), np.empty_like(v), np.empty_like(a)

    def run(a, b, c, v, d, e):
        np.multiply(a, b, out=t)
        np.add(t, c, out=t)
        np.tanh(t, out=t)
        np.matmul(t, v, out=y)
        np.subtract(d, y, out=out)
        np.maximum(out, 0, out=out)
        return np.multiply(out, e, out=out)

    return run


def _fallback_numexpr(a, b, c, v, d, e):
    y = _evaluate("tanh(a * b + c)", a=a, b=b, c=c) @ v
    return _evaluate("where(d > y, d - y, zero) * e", d=d, y=y, e=e)


# --- a two-layer MLP: relu(x @ w1 + b1) @ w2 + b2 ---------------------------------


def mlp_graph() -> nbyoc.ir.nodes.Function:
    x = nbyoc.var("x", (MLP_BATCH, MLP_HIDDEN))
    w1, w2 = nbyoc.var("w1", (MLP_HIDDEN, MLP_HIDDEN)), nbyoc.var("w2", (MLP_HIDDEN, MLP_HIDDEN))
    b1, b2 = nbyoc.var("b1", (MLP_HIDDEN,)), nbyoc.var("b2", (MLP_HIDDEN,))
    return nbyoc.function([x, w1, b1, w2, b2], nbyoc.relu(x @ w1 + b1) @ w2 + b2)


def numpy_mlp(x, w1, b1, w2, b2):
    return np.maximum(x @ w1 + b1, 0) @ w2 + b2


def _mlp_out(x, w1, b1, w2, b2):
    h, out = np.empty((MLP_BATCH, MLP_HIDDEN), x.dtype), np.empty((MLP_BATCH, MLP_HIDDEN), x.dtype)

    def run(x, w1, b1, w2, b2):
        np.matmul(x, w1, out=h)
        np.add(h, b1, out=h)
        np.maximum(h, 0, out=h)
        np.matmul(h, w2, out=out)
        return np.add(out, b2, out=out)

    return run


def _mlp_numexpr(x, w1, b1, w2, b2):
    h = _evaluate("where(h + b1 > zero, h + b1, zero)", h=x @ w1, b1=b1)
    return _evaluate("out + b2", out=h @ w2, b2=b2)


# --- the neural-network graphs: defined as ONNX models (onnx_graphs), imported -------


def numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def numpy_log_softmax(x):
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _layer_norm(scale, bias):
    def run(x):
        centred = x - x.mean(axis=-1, keepdims=True)
        var = (centred * centred).mean(axis=-1, keepdims=True)
        return centred / np.sqrt(var + np.float32(1e-5)) * scale + bias

    return run


def _rms_norm(scale, eps):
    def run(x):
        return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * scale

    return run


GELU_K, GELU_C = np.float32(np.sqrt(2 / np.pi)), np.float32(0.044715)


def numpy_gelu(x):
    return np.float32(0.5) * x * (np.float32(1) + np.tanh(GELU_K * (x + GELU_C * x * x * x)))


def _gelu_numexpr(x):
    return numexpr.evaluate(
        "half * x * (one + tanh(k * (x + c * x * x * x)))",
        local_dict={"x": x}, global_dict={**F32, "k": GELU_K, "c": GELU_C},
    )  # fmt: skip


def _numexpr(expression: str, names: list[str]) -> Callable[[], Callable]:
    """A factory of functions evaluating ``expression`` on arguments bound to ``names``."""

    def factory():
        def run(*args):
            return _evaluate(expression, **dict(zip(names, args)))

        return run

    return factory


def _plain(fn: Callable) -> Callable[[], Callable]:
    return lambda: fn


#: graph -> NumPy version of its model (given the model's weights by name), numexpr
NN_GRAPHS = {
    "softmax": (lambda w: numpy_softmax, None),
    "log_softmax": (lambda w: numpy_log_softmax, None),
    "layer_norm": (lambda w: _layer_norm(w["scale"], w["bias"]), None),
    "rms_norm": (lambda w: _rms_norm(w["scale"], w["eps"]), None),
    "gelu": (lambda w: numpy_gelu, _plain(_gelu_numexpr)),
}

#: graph name -> (builder of size n, numpy, numpy-out maker, numexpr expression or function)
SQUARE_GRAPHS = {
    "reference": (
        lambda n: reference_graph((n, n)),
        numpy_reference,
        _reference_out,
        "((a + b) - c) * d",
    ),
    "diamond": (diamond_graph, numpy_diamond, _diamond_out, "(a * b + c) * (a * b - d)"),
    "chain10": (chain_graph, numpy_chain, _chain_out, _plain(_chain_numexpr)),
    "fallback": (fallback_graph, numpy_fallback, _fallback_out, _plain(_fallback_numexpr)),
}
GRAPHS = (*SQUARE_GRAPHS, *NN_GRAPHS, "mlp")


def jax_version(numpy_function: Callable) -> Callable:
    """``numpy_function`` under ``jax.jit``, with ``jax.numpy`` where it says ``np`` (the
    same code: its operators and methods act on JAX arrays as on NumPy's), called with
    NumPy arrays and returning one, as a NumPy user calls it.

    >>> import numpy as np
    >>> if jax is not None:  # (pip install '.[bench]')
    ...     f = jax_version(numpy_softmax)
    ...     assert np.allclose(f(np.ones((2, 4), np.float32)), 0.25)
    """
    code = numpy_function.__code__
    names = {**numpy_function.__globals__, "np": jnp}
    traced = type(numpy_function)(code, names, code.co_name, None, numpy_function.__closure__)
    compiled = jax.jit(traced)

    def run(*args):
        return np.asarray(compiled(*args).block_until_ready())

    return run


def candidate(work: Workload, case: str) -> Callable | None:
    """The function ``case`` runs for ``work`` (nbyoc cases are compiled here), or None
    if that case is not available (numexpr not installed)."""
    if case == "numpy":
        return work.numpy
    if case == "numpy-out":
        return work.numpy_out() if work.numpy_out else None
    if case == "numexpr":
        return work.numexpr() if work.numexpr else None
    if case == "jax.jit":
        return jax_version(work.numpy) if jax is not None else None
    if case == "onnxruntime":
        return onnx_graphs.session(work.onnx()) if work.onnx and onnx_graphs.helper else None
    backend, options = NBYOC_CASES[case]
    return nbyoc.compile(work.function, backend=backend, options=options)


def workload(graph: str, n: int | None = None) -> Workload:
    """The workload of ``graph`` at n x n (the MLP has one fixed size and ignores n)."""
    if graph == "mlp":
        return Workload(
            "mlp", f"{MLP_BATCH}x{MLP_HIDDEN}", mlp_graph(), numpy_mlp, _buffers(_mlp_out),
            _plain(_mlp_numexpr) if numexpr else None, flops=2 * 2 * MLP_BATCH * MLP_HIDDEN**2,
            onnx=lambda: onnx_graphs.mlp(MLP_BATCH, MLP_HIDDEN),
        )  # fmt: skip
    if graph in NN_GRAPHS:
        model = onnx_graphs.onnx_model(graph, n)
        naive, ne = NN_GRAPHS[graph]
        return Workload(
            graph, f"{n}x{n}", nbyoc.from_onnx(model), naive(onnx_graphs.weights(model)), None,
            ne if numexpr else None, onnx=lambda: model,
        )  # fmt: skip
    build, naive, out, ne = SQUARE_GRAPHS[graph]
    function = build(n)
    if numexpr is None:
        ne = None
    elif isinstance(ne, str):
        ne = _numexpr(ne, [p.name_hint for p in function.params])
    return Workload(
        graph, f"{n}x{n}", function, naive, _buffers(out), ne,
        onnx=lambda: onnx_graphs.onnx_model(graph, n),
    )  # fmt: skip
