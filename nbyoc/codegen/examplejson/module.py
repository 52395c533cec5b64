"""The examplejson runtime: an interpreter that walks a subgraph's nodes and calls
one JIT kernel per node.

Each node's kernel is the llvm backend's Numba kernel for that single op on
those exact types, taken from the shared kernel cache (compiled once per
process, on disk across processes). Unlike the guide's example runtime:

- each subgraph keeps its own plan and tensors, and a function fetched for a
  subgraph always runs that subgraph;
- nodes form any DAG, with several outputs, and element counts follow every
  shape and dtype;
- intermediate tensors are planned by liveness (a buffer is reused once its
  value is dead) and kept per thread, so concurrent calls never share them.

>>> import numpy as np
>>> module = ExampleJSONModule('''subgraph_0
...   input 0 2
...   input 1 2
...   add 2 inputs: 0 1 shape: 2
...   mul 3 inputs: 2 2 shape: 2''')
>>> out = np.empty(2, np.float32)
>>> module.get_function("subgraph_0")(np.ones(2, np.float32), np.ones(2, np.float32), out)
>>> out
array([4., 4.], dtype=float32)
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import ExecutionError, LoadError, NbyocError
from ...ir.nodes import Call, Constant, Expr, Function, Tuple, Var
from ...ir.traversal import last_reads, post_order
from ...progress import progress
from ...runtime import scratch
from ...runtime.module import Module, destination_passing, register_loader
from ..llvm import PARALLEL_THRESHOLD, compiled_kernel
from .parse import parse_examplejson

TYPE_KEY = "examplejson"


def op_kernel(call: Call, parallel_threshold: int = PARALLEL_THRESHOLD):
    """(kernel, compiled) for ``call``'s op on its operand types: the cached Numba kernel
    ``kernel(*distinct operands, out)``, each operand passed once however often the call
    reads it (``distinct_operands``: a concatenate of one tensor 600 times takes one
    array, not 600), and the ``CompiledKernel`` to hold while using it. An op whose
    kernel takes more (a matmul's packing scratch, the addresses of the stage functions
    it calls) gets them bound here, the scratch from the thread's pool (``runtime.scratch``)."""
    single = single_op_function(call)
    compiled = compiled_kernel(single, True, parallel_threshold)
    lowered, kernel, trailing = compiled.lowered, compiled.kernel, compiled.trailing
    if lowered.constants:  # one op on parameters has none
        raise NbyocError(f"internal: the {call.op.name} kernel reads constants")
    if not lowered.scratch and not trailing:
        return kernel, compiled
    layout = tuple(lowered.scratch)

    def with_extras(*arrays):
        return kernel(*arrays, *scratch.arenas(layout), *trailing)

    return with_extras, compiled


def op_kernels(calls: list[Call], parallel_threshold: int, symbol: str) -> list[tuple]:
    """``op_kernel`` of each call, each counted as one unit of the compile's progress
    (the llvm kernels they are made of count nothing more)."""
    n = len(calls)
    notice = f"the kernels of the {n} op{'s' * (n != 1)} of {symbol!r}"
    kernels = []
    with progress(n, symbol, notice=notice) as bar:
        for position, call in enumerate(calls):
            bar.describe(f"{call.op.name} ({position + 1}/{n})")
            kernels.append(op_kernel(call, parallel_threshold))
            bar.update()
    return kernels


def distinct_operands(call: Call) -> list[Expr]:
    """``call``'s operands, each once, in the order they first appear."""
    return list(dict.fromkeys(call.args))


def single_op_function(call: Call) -> Function:
    """The function ``op_kernel`` compiles: ``call``'s op on one parameter per distinct
    operand.

    >>> import nbyoc
    >>> x = nbyoc.var("x", (2,))
    >>> f = single_op_function(nbyoc.concatenate([x, x * 2.0, x]))
    >>> [p.name_hint for p in f.params], f.body.args[0] is f.body.args[2]
    (['in0', 'in1'], True)
    """
    params = {a: Var(f"in{k}", a.type) for k, a in enumerate(distinct_operands(call))}
    body = Call(call.op, [params[a] for a in call.args], call.attrs)
    return Function(list(params.values()), body, {"global_symbol": f"ej_{call.op.name}"})


class _Program:
    """One subgraph, planned: kernels, where each value lives, what dies when."""

    def __init__(self, func: Function, parallel_threshold: int):
        outputs = list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]
        nodes = post_order(outputs)
        slot: dict[Expr, int] = {p: k for k, p in enumerate(func.params)}
        n_in = len(func.params)
        self.constants: list[tuple[int, np.ndarray]] = []
        for node in nodes:
            if isinstance(node, Constant):
                slot[node] = len(slot)
                # A private writeable copy: the kernels' signatures take writeable arrays.
                self.constants.append((slot[node], np.array(node.data)))
        calls = [n for n in nodes if isinstance(n, Call)]
        last_use = last_reads(calls)
        out_of = {}
        for k, o in enumerate(outputs):
            out_of.setdefault(o, k)
        # Intermediates: buffers by (shape, dtype), reused once their value is dead.
        self.buffers: list[tuple[tuple[int, ...], np.dtype]] = []
        free: list[int] = []
        holder: dict[Expr, int] = {}
        self.steps = []
        self.ops: list[str] = []  # each step's op, for error messages
        self.compiled: list = []
        self.symbol = func.attrs.get("global_symbol", "subgraph")
        kernels = op_kernels(calls, parallel_threshold, self.symbol)
        for position, call in enumerate(calls):
            args = tuple(slot[a] for a in distinct_operands(call))
            if call in out_of:
                dest = ("out", out_of[call])
            else:
                key = (call.type.shape, np.dtype(call.type.dtype))
                reuse = next((b for b in free if self.buffers[b] == key), None)
                if reuse is None:
                    self.buffers.append(key)
                    reuse = len(self.buffers) - 1
                else:
                    free.remove(reuse)
                holder[call] = reuse
                dest = ("buf", reuse)
            slot[call] = len(slot)
            kernel, compiled = kernels[position]
            self.compiled.append(compiled)  # (keeps each kernel loaded while this runs)
            self.steps.append((kernel, args, dest, slot[call]))
            self.ops.append(call.op.name)
            for a in set(call.args):
                if last_use[a] == position and a in holder and a not in out_of:
                    free.append(holder[a])
        self.n_slots = len(slot)
        self.n_in = n_in
        # Outputs not written by their own node: inputs, constants, repeats.
        self.copies = [
            (k, slot[o])
            for k, o in enumerate(outputs)
            if not (o in out_of and out_of[o] == k and isinstance(o, Call))
        ]
        self._per_thread: dict[int, list[np.ndarray]] = {}

    def run(self, inputs, outputs) -> None:
        buffers = self._per_thread.get(threading.get_ident())
        if buffers is None:
            buffers = [np.empty(shape, dtype) for shape, dtype in self.buffers]
            self._per_thread[threading.get_ident()] = buffers
        values = [None] * self.n_slots
        # (the kernels' signatures take writeable arrays; a read-only input is copied)
        values[: self.n_in] = [x if x.flags.writeable else x.copy() for x in inputs]
        for index, data in self.constants:
            values[index] = data
        for step, (kernel, args, (where, k), into) in enumerate(self.steps):
            dest = outputs[k] if where == "out" else buffers[k]
            try:
                kernel(*[values[a] for a in args], dest)
            except Exception as e:  # e.g. a gather index out of range, 2 ** -1 on integers
                raise ExecutionError(
                    f"{self.symbol}: node {step + 1} of {len(self.steps)} "
                    f"({self.ops[step]}) failed: {type(e).__name__}: {e}"
                ) from e
            values[into] = dest
        for k, source in self.copies:
            np.copyto(outputs[k], values[source])


@register_loader(TYPE_KEY)
class ExampleJSONModule(Module):
    """Subgraphs in ExampleJSON text, run by the interpreter above."""

    type_key = TYPE_KEY
    source_comment = "#"

    def __init__(self, text: str, parallel_threshold: int = PARALLEL_THRESHOLD):
        self.text = text
        self.subgraphs = parse_examplejson(text)
        self.parallel_threshold = parallel_threshold
        self._programs: dict[str, _Program] = {}
        self._lock = threading.Lock()

    def get_function(self, symbol: str):
        """The destination-passing function of subgraph ``symbol`` (inputs, then outputs)."""
        if symbol not in self.subgraphs:
            raise NbyocError(
                f"no subgraph {symbol!r} in this ExampleJSON module; "
                f"it has {', '.join(self.subgraphs)}"
            )
        with self._lock:
            program = self._programs.get(symbol)
            if program is None:
                program = _Program(self.subgraphs[symbol], self.parallel_threshold)
                self._programs[symbol] = program
        return destination_passing(self.subgraphs[symbol], program.run)

    def get_source(self) -> str:
        return self.text

    def save_to_bytes(self) -> bytes:
        return self.text.encode()

    @classmethod
    def load_from_bytes(cls, data: bytes) -> ExampleJSONModule:
        try:
            text = data.decode("utf-8")
        except (UnicodeDecodeError, AttributeError) as e:
            raise LoadError(f"ExampleJSON must be UTF-8 text: {e}") from None
        return cls(text)
