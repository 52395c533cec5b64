"""nbyoc over Dask arrays: one compiled nbyoc function per block task.

``apply(fn, *arrays)`` traces ``fn`` as ``nbyoc.jit`` does, at the arrays' whole
shapes, and returns a lazy Dask array: each of its blocks is computed by one fused
nbyoc kernel, instead of one NumPy pass per op per block. Which axes can stay cut and
which reductions need a tree of partial results is worked out from the traced graph
(``nbyoc.dask.axes``, ``nbyoc.dask.plan``). What Dask ships to a worker is data: the
block functions' JSON text and constants, compiled once per process by nbyoc's own
loader (``nbyoc.dask.tasks``). It needs ``pip install 'nbyoc[dask]'`` (``dask[array]``
and ``distributed``); ``import nbyoc`` does not.

>>> import numpy as np, dask.array as da, nbyoc
>>> x = da.from_array(np.arange(12, dtype=np.float32).reshape(6, 2), chunks=(2, 2))
>>> def softmax(x):
...     e = np.exp(x - x.max(axis=1, keepdims=True))
...     return e / e.sum(axis=1, keepdims=True)
>>> y = nbyoc.dask.apply(softmax, x)
>>> y.chunks, bool(np.allclose(y.compute(), softmax(x.compute())))
(((2, 2, 2), (2,)), True)
>>> total = nbyoc.dask.apply(lambda x: (x * x).sum(axis=0), x, block_bytes=16)
>>> total.compute().tolist()                     # a tree of partial sums over the rows
[220.0, 286.0]
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import MissingDependencyError, NbyocError, NbyocTypeError
from ..frontend.numpy.jit import JitFunction
from ..frontend.numpy.jit import _role as jit_role
from ..ir.builder import call_op
from ..ir.nodes import Call, Constant, Tuple
from ..ir.serialize import to_json
from ..ir.symbols import symbol
from ..ir.traversal import post_order
from . import tasks
from .axes import TREE_COMBINE, analyse
from .blocks import BlockGraph, Cut, partial_reduction
from .plan import BlockError, Plan, plan_blocks

__all__ = ["BlockError", "apply"]

INSTALL_HINT = "nbyoc.dask needs Dask: pip install 'nbyoc[dask]' (dask[array] and distributed)"


def apply(
    fn: Callable[..., Any],
    *arrays: Any,
    backend: str | Sequence[str] | None = None,
    block_bytes: int | None = None,
    split_every: int | None = None,
    **compile_options: Any,
) -> Any:  # fmt: skip  (a dask.array.Array, or a tuple of them: Dask has no types)
    """``fn`` on Dask arrays, as a lazy Dask array whose blocks nbyoc kernels compute.

    ``fn`` is a function ``nbyoc.jit`` can trace (or an ``nbyoc.jit`` function, whose
    backend and options are the defaults); ``arrays`` are its arguments: Dask arrays,
    NumPy arrays (wrapped with ``dask.array.asarray``), Python or NumPy scalars and
    compile-time values as ``nbyoc.jit`` takes them. ``backend`` and
    ``compile_options`` go to ``nbyoc.compile`` for every block function.
    ``block_bytes`` is the most a block may hold when an op needs a whole axis (default:
    Dask's ``array.chunk-size``); ``split_every`` is how many partial results a step
    of a tree reduction combines (Dask's default when None). Returns a Dask array, or
    the tuples, lists, named tuples and dicts of them ``fn`` returns, in that structure.
    """
    da = _dask_array()
    budget = _budget(block_bytes)
    jit = _as_jit(fn, backend, compile_options)
    bound = jit._bind(arrays, {})
    values = [da.asarray(v) if isinstance(v, np.ndarray) else v for v in bound]
    for name, value in zip(jit._names, values):
        if _is_array(value) and any(np.isnan(c) for axis in value.chunks for c in axis):
            raise NbyocError(
                f"nbyoc.dask.apply: argument {name!r} has blocks of unknown length (from "
                f"boolean indexing or a filter); call its .compute_chunk_sizes() first"
            )
    func, structure, _ = jit._trace([_stand_in(v) if _is_array(v) else v for v in values])
    inputs = [v for v, p in zip(values, bound) if _role(p) != "static"]
    if len(inputs) != len(func.params):  # a traced parameter for every non-static argument
        raise AssertionError("nbyoc.dask: parameters and arguments differ")
    builder = _Builder(func, inputs, jit._backend, jit._options, budget, split_every)
    outputs = [builder.output(node) for node in _outputs(func)]
    return outputs[0] if structure == "one" else structure.build(iter(outputs))


def _dask_array():
    try:
        import dask.array as da
    except ImportError:
        raise MissingDependencyError(INSTALL_HINT) from None
    return da


def _as_jit(fn, backend, options) -> JitFunction:
    if isinstance(fn, JitFunction):
        merged = {**fn._options, **options}
        return JitFunction(fn._fn, backend or fn._backend, sorted(fn._static), merged)
    if not callable(fn):
        raise NbyocTypeError(f"nbyoc.dask.apply takes a function first, got {fn!r}")
    if isinstance(fn, np.ufunc) and fn.nin in (1, 2):
        # (its signature has out=, where=, ...: the traced function takes the operands only)
        ufunc = fn
        fn = (lambda x: ufunc(x)) if ufunc.nin == 1 else (lambda x, y: ufunc(x, y))
    return JitFunction(fn, backend or "llvm", (), options)


def _is_array(value) -> bool:
    import dask.array as da

    return isinstance(value, da.Array)


def _role(value) -> str:
    return "array" if _is_array(value) else jit_role(value)


def _stand_in(array) -> np.ndarray:
    """An array of the shape and dtype of ``array`` holding nothing (tracing reads no data)."""
    return np.broadcast_to(np.zeros((), array.dtype), array.shape)


def _outputs(func):
    return list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]


def _budget(block_bytes) -> int:
    import dask
    from dask.utils import parse_bytes

    value = dask.config.get("array.chunk-size") if block_bytes is None else block_bytes
    try:
        budget = parse_bytes(value) if isinstance(value, str) else value
    except ValueError:
        budget = None
    if isinstance(budget, float) and budget.is_integer():
        budget = int(budget)  # 128e6
    if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
        raise NbyocTypeError(
            f"block_bytes must be a positive number of bytes or a size such as '64 MiB', "
            f"got {value!r}"
        )
    return budget


class _Builder:
    """Builds the Dask graph of one traced function (see ``apply``)."""

    def __init__(self, func, inputs, backend, options, budget, split_every):
        self.labels = labels = analyse(func)
        chunks = [v.chunks if _is_array(v) else None for v in inputs]
        self.plan: Plan = plan_blocks(func, labels, chunks, budget)
        self.graph = BlockGraph(func, labels)
        self.backend, self.options, self.split_every = backend, options, split_every
        self.sources: dict[tuple, object] = {}
        for i, (param, value) in enumerate(zip(func.params, inputs)):
            if _is_array(value):
                value = value.rechunk(self._chunks(labels.of(param)))
            else:  # a scalar: the same 0-d array for every block
                value = np.asarray(value, dtype=param.type.dtype)
            self.sources[("param", i)] = value
        nodes = post_order([func.body])
        for node in nodes:
            if isinstance(node, Constant) and any(c in self.plan.chunks for c in labels.of(node)):
                self.graph.lift_constant(node)
                k = len(self.graph.constants) - 1
                self.sources[("const", k)] = _dask_array().from_array(
                    node.data, chunks=self._chunks(labels.of(node))
                )
        tree = set(self.plan.tree)
        for node in nodes:
            if isinstance(node, Call) and tree.intersection(self._reduced(node)):
                self._tree_reduction(node, tree)

    def _chunks(self, label_list) -> tuple:
        return tuple(self.plan.chunks.get(c, (self.labels.facts(c).size,)) for c in label_list)

    def _reduced(self, call: Call) -> list[int]:
        """The labels ``call`` reduces, if it is a reduction a tree can run."""
        labels = self.labels
        if call.op.name == "matmul":
            return [labels.of(call.args[0])[-1]]
        if call.op.name not in TREE_COMBINE:
            return []
        own = labels.of(call.args[0])
        return [own[i] for i in call.attrs["axis"]]

    # -- the Dask graph ---------------------------------------------------------------
    def output(self, node):
        return self._blockwise([self.graph.value(node)], self.labels.of(node))

    def _tree_reduction(self, call: Call, tree: set[int]) -> None:
        """``call`` as partial results per block combined by Dask's ``reduction``; the
        rest of the graph reads the combined result through a ``Cut``."""
        da = _dask_array()
        labels = self.labels
        ndim = call.type.ndim
        if call.op.name == "matmul":
            k = labels.of(call.args[0])[-1]
            part_labels = [*labels.of(call), k]
            combine_op, reduced_axes = "sum", (ndim,)

            def partial(rebuilt):
                product = call_op("matmul", rebuilt(call.args[0]), rebuilt(call.args[1]))
                return call_op("unsqueeze", product, axes=(ndim,))

            def finish(combined):
                return call_op("squeeze", combined, axes=(ndim,))
        else:
            source = labels.of(call.args[0])
            reduced_axes = call.attrs["axis"]
            part_labels = [
                c if i not in reduced_axes or c in tree else labels.fresh(1)
                for i, c in enumerate(source)
            ]
            combine_op = TREE_COMBINE[call.op.name]
            count = int(np.prod([labels.facts(source[i]).size for i in reduced_axes]))

            def partial(rebuilt):
                return partial_reduction(call, rebuilt(call.args[0]))

            def finish(combined):
                value = combined
                if call.op.name == "mean":
                    if value.type.dtype != call.type.dtype:
                        value = call_op("cast", value, to=call.type.dtype)
                    value = call_op("divide", value, np.asarray(count, call.type.dtype))
                if not call.attrs["keepdims"]:
                    value = call_op("squeeze", value, axes=reduced_axes)
                return value

        # The axes the tree combines: those the op reduces along a cut label (another
        # axis of the partials may carry a tree label of a later reduction: it stays).
        cut_axes = tuple(i for i in reduced_axes if part_labels[i] in tree)
        shrink = {part_labels[i] for i in cut_axes}
        partials = self._blockwise([partial], part_labels, shrink=shrink)
        part_dtype = partials.dtype
        combine = functools.partial(tasks.combine, combine_op, self.backend, options=self.options)
        combined = da.reduction(
            partials, chunk=tasks.unchanged, combine=combine, aggregate=combine,
            axis=cut_axes, keepdims=True, dtype=part_dtype, split_every=self.split_every,
            concatenate=True, meta=np.empty((0,) * len(part_labels), part_dtype),
        )  # fmt: skip
        after = [labels.fresh(1) if i in cut_axes else c for i, c in enumerate(part_labels)]
        number = self.graph.cut(call, Cut(after, part_dtype, finish))
        self.sources[("cut", number)] = combined

    def _first_sizes(self) -> dict[int, int]:
        return {c: chunks[0] for c, chunks in self.plan.chunks.items()}

    def _blockwise(self, outputs, out_labels, shrink=frozenset()):
        """A Dask array whose every block one block function computes (``shrink``:
        labels along which each block gives one partial result, of length 1)."""
        import dask
        import dask.array as da

        labels = self.labels
        first, sources = self.graph.build(outputs, self._first_sizes())
        dtype = first.ret_type.dtype
        source_labels = [self._source_labels(s) for s in sources]
        cut = sorted({c for own in source_labels for c in own if c in self.plan.chunks})
        lengths = [sorted(set(self.plan.chunks[c])) for c in cut]
        functions = self._generic_block(outputs, cut, lengths)
        if functions is None:  # (one block function per shape of blocks)
            functions = {}
            for combo in _product(lengths):
                block, _ = self.graph.build(outputs, dict(zip(cut, combo)))
                arrays: list = []
                functions[tuple(p.type.shape for p in block.params)] = (
                    to_json(block, arrays),
                    arrays,
                )
        payload = tasks.make_payload(functions, self.backend, self.options)
        # Compiled here first: errors show now, not on a worker, and the disk cache is warm.
        tasks.compiled(payload, tuple(p.type.shape for p in first.params))
        shipped = dask.delayed(payload, pure=True, name=f"nbyoc-block-{payload['digest']}")
        args = [shipped, None]
        present = set()
        for source, own in zip(sources, source_labels):
            value = self.sources[source]
            args += [value, _indices(own) if _is_array(value) else None]
            present.update(_indices(own) if _is_array(value) else ())
        out_index = _indices(out_labels)
        new_axes = {
            name: labels.facts(c).size
            for name, c in zip(out_index, out_labels)
            if name not in present
        }
        return da.blockwise(
            tasks.run_block, out_index, *args,
            dtype=dtype, new_axes=new_axes, concatenate=True,
            adjust_chunks={_indices([c])[0]: 1 for c in out_labels if c in shrink} or None,
            meta=np.empty((0,) * len(out_labels), dtype),
        )  # fmt: skip

    def _generic_block(self, outputs, cut: list[int], lengths: list[list[int]]):
        """One block function for blocks of every length (a short last block included):
        each cut axis's length a symbolic size (``nbyoc.ir.symbols``), so that every task
        runs one compiled function. None when the blocks are all of one shape, or when
        the function needs its lengths' values (then one function per shape)."""
        if all(len(options) == 1 for options in lengths):
            return None
        sizes = {c: symbol(f"block{i}") for i, c in enumerate(cut)}
        try:
            block, _ = self.graph.build(outputs, sizes)
        except NbyocTypeError:  # (UndecidableSizeError among them)
            return None
        arrays: list = []
        return {tasks.GENERIC: (to_json(block, arrays), arrays)}

    def _source_labels(self, source) -> list[int]:
        kind, k = source
        if kind == "param":
            return self.labels.of(self.graph.func.params[k])
        if kind == "const":
            return self.labels.of(self.graph.constants[k])
        return [self.labels.find(c) for c in self.graph.cut_info(k).labels]


def _indices(labels: list[int]) -> tuple[str, ...]:
    """Dask's index of a tensor with these axis labels. A label repeated in one tensor
    (x + x.T) is pinned, so whole: its later axes get names of their own."""
    return tuple(f"i{c}" if c not in labels[:k] else f"i{c}r{k}" for k, c in enumerate(labels))


def _product(lists):
    if not lists:
        yield ()
        return
    for head in lists[0]:
        for rest in _product(lists[1:]):
            yield (head, *rest)
