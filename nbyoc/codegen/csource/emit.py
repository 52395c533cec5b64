"""The ``csource`` backend's codegen: C source in the reference design's shape.

For an external function it emits, as the BYOC guide's C codegen does:

1. the op macros (generalised to any rank, dtype and broadcasting) and one
   macro instance per node, numbered as a visitor from the output meets them;
2. ``<sym>_``, the subgraph function: intermediate buffers (reused by
   liveness, so a chain needs at most two), the node calls in evaluation
   order, and the frees;
3. ``<sym>_wrapper``, taking ``DLTensor*`` arguments (inputs, then outputs);
4. ``<sym>``, the exported entry point, which checks the argument count and
   every tensor's device, ndim, dtype, shape and layout, and returns a
   non-zero code with a message (``<sym>_last_error()``) instead of crashing.

A DLPack-compatible ``DLTensor`` is defined in the source; no TVM headers.
With ``fused=True`` the subgraph function is one loop nest that computes
every node per element instead of one loop per node.

>>> import nbyoc
>>> x = nbyoc.var("x", (4,))
>>> ext = nbyoc.function([x], nbyoc.exp(x) * x).with_attrs(global_symbol="csource_0")
>>> "CSOURCE_BINARY_OP_1D(csource_0_0, *, 4);" in emit_c(ext)
True
"""

from __future__ import annotations

import math

from ..._version import __version__
from ...errors import CompileError, NbyocTypeError
from ...ir.dtypes import dtype_info
from ...ir.nodes import Call, Constant, Expr, Function, Tuple, Var
from ...ir.op import Op
from ...ir.ops.elementwise import loop_dtypes
from ...ir.traversal import last_reads, post_order
from ...ir.types import tensor_types
from . import rules, vecmath
from .entry import entry_point_source
from .loops import (
    ARITY_NAMES,
    PARALLEL_MIN_ELEMENTS,
    broadcast_strides,
    index_expression,
    loop_nest,
    macro_definition,
    macro_name,
)

PRELUDE = """\
#define _DEFAULT_SOURCE /* for madvise */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

/* DLPack's tensor, laid out as in dlpack.h. */
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;

#define NBYOC_EXPORT __attribute__((visibility("default")))

/* Loops are compiled for the widest vectors of x86-64 CPUs too, and the best version
   for the running CPU is picked when the library loads (GCC's and clang's function
   multiversioning): AVX-512 or AVX2 code without building for one machine. */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__AVX2__) && !defined(NBYOC_NO_CLONES)
#define NBYOC_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define NBYOC_VECTOR_CLONES
#endif

/* Buffers of 2 MiB and more ask for transparent huge pages, as NumPy's allocator does:
   touching fresh 4 KiB pages one fault at a time would cost more than the arithmetic. */
static void* nbyoc_alloc_large(size_t bytes) {
  void* p = NULL;
  size_t huge = (size_t)1 << 21;
  if (posix_memalign(&p, bytes >= huge ? huge : 64, bytes) != 0) return NULL;
#ifdef MADV_HUGEPAGE
  if (bytes >= huge) madvise(p, bytes, MADV_HUGEPAGE);
#endif
  return p;
}

/* Large buffers are kept for later calls, up to NBYOC_KEPT of them: a fresh one costs
   page faults (and with huge pages, compaction) that take longer than the arithmetic,
   and malloc's heuristics decide call by call whether to give memory back. The pool
   never holds more buffers than calls running at once have ever held. */
#define NBYOC_KEPT 16
static pthread_mutex_t nbyoc_kept_lock = PTHREAD_MUTEX_INITIALIZER;
static void* nbyoc_kept[NBYOC_KEPT];
static size_t nbyoc_kept_bytes[NBYOC_KEPT];

static void* nbyoc_take_large(size_t bytes) {
  void* p = NULL;
  pthread_mutex_lock(&nbyoc_kept_lock);
  for (int i = 0; i < NBYOC_KEPT && p == NULL; ++i) {
    if (nbyoc_kept[i] != NULL && nbyoc_kept_bytes[i] == bytes) {
      p = nbyoc_kept[i];
      nbyoc_kept[i] = NULL;
    }
  }
  pthread_mutex_unlock(&nbyoc_kept_lock);
  return p != NULL ? p : nbyoc_alloc_large(bytes);
}

static void nbyoc_give_back(void* p, size_t bytes) {
  if (p == NULL) return;
  pthread_mutex_lock(&nbyoc_kept_lock);
  for (int i = 0; i < NBYOC_KEPT && p != NULL; ++i) {
    if (nbyoc_kept[i] == NULL) {
      nbyoc_kept[i] = p;
      nbyoc_kept_bytes[i] = bytes;
      p = NULL;
    }
  }
  pthread_mutex_unlock(&nbyoc_kept_lock);
  free(p);
}

/* Unloading the library (dlclose) frees what the pool keeps. */
__attribute__((destructor)) static void nbyoc_free_kept(void) {
  for (int i = 0; i < NBYOC_KEPT; ++i) free(nbyoc_kept[i]);
}
"""

#: Intermediate buffers of at least this many bytes come from the pool of kept buffers
#: (glibc's malloc returns blocks this large to the system when they are freed).
LARGE_BUFFER_BYTES = 1 << 17


class Subgraph:
    """What the emitter needs to know about an external function, checked up front."""

    def __init__(self, func: Function):
        self.func = func
        # Function() has checked the symbol's grammar (nbyoc.ir.names); it must be there.
        self.symbol = func.attrs.get("global_symbol")
        if self.symbol is None:
            raise CompileError("csource needs a function with a global_symbol attribute")
        self.outputs = list(func.body.fields) if isinstance(func.body, Tuple) else [func.body]
        self.nodes = post_order(self.outputs)
        for node in self.nodes:
            if isinstance(node, Call):
                if not isinstance(node.op, Op) or node.op.name not in rules.C_RULES:
                    raise CompileError(f"csource cannot compile {node!r} in @{self.symbol}")
            elif not isinstance(node, (Var, Constant)):
                raise CompileError(f"csource cannot compile {node!r} in @{self.symbol}")
        self.calls = [n for n in self.nodes if isinstance(n, Call)]
        self.names: dict[Expr, str] = {p: f"in{k}" for k, p in enumerate(func.params)}
        self.constants = [n for n in self.nodes if isinstance(n, Constant)]
        for k, c in enumerate(self.constants):
            self.names[c] = f"{self.symbol}_const_{k}"
        many = len(self.outputs) > 1
        self.out_names = [f"out{k}" if many else "out" for k in range(len(self.outputs))]

    def arguments(self) -> list[tuple[str, object, bool]]:
        """(C name, tensor type, is_output) of every argument, inputs first."""
        ins = [(self.names[p], p.type, False) for p in self.func.params]
        outs = [(name, o.type, True) for name, o in zip(self.out_names, self.outputs)]
        return ins + outs


def emit_c(func: Function, fused: bool = False) -> str:
    """The C source for external function ``func`` (see the module docstring)."""
    lacking = sorted(
        {t.dtype for n in post_order([func.body, *func.params]) for t in tensor_types(n.type)}
        - set(rules.C_TYPES)
    )
    if lacking:
        raise CompileError(
            f"csource has no C type for {', '.join(lacking)} (in @"
            f"{func.attrs.get('global_symbol', 'the function')}); partitioning leaves such "
            f"calls to the llvm backend or the host"
        )
    graph = Subgraph(func)
    try:
        kernels = _FusedLoop(graph) if fused else _PerNode(graph)
    except NbyocTypeError:  # shapes that do not share one loop nest: one loop per node
        kernels, fused = _PerNode(graph), False
    body = kernels.body()
    loops = {(c.op.name, loop_dtypes(c)) for c in graph.calls}
    helpers = [rules.helper_definition(*h) for h in sorted(loops) if rules.is_helper(*h)]
    parts = [
        f"/* Generated by nbyoc {__version__}, csource codegen: @{graph.symbol}"
        f"{' (fused)' if fused else ''}. */",
        PRELUDE,
        f"static _Thread_local const char* {rules.ERROR_FLAG} = NULL;",
        vecmath.definitions(vecmath.needed(helpers)),
        *helpers,
        "",
        *kernels.definitions(),
        *_constant_definitions(graph),
        "",
        *body,
        "",
        entry_point_source(graph),
    ]
    return "\n".join(parts)


def _constant_definitions(graph: Subgraph) -> list[str]:
    lines = []
    for c in graph.constants:
        values = ", ".join(rules.c_literal(v, c.type.dtype) for v in c.data.reshape(-1)) or "0"
        size = max(c.type.size, 1)
        lines.append(
            f"static const {rules.C_TYPES[c.type.dtype]} {graph.names[c]}[{size}] = {{{values}}};"
        )
    return lines


def _signature(graph: Subgraph) -> str:
    # restrict: the entry point refuses outputs that overlap any other argument
    params = [
        f"{'' if out else 'const '}{rules.C_TYPES[t.dtype]}* restrict {name}"
        for name, t, out in graph.arguments()
    ]
    return f"NBYOC_EXPORT int {graph.symbol}_({', '.join(params)})"


def _copies(graph: Subgraph, written: set) -> list[str]:
    """memcpy for outputs that are inputs, constants, or an already written value."""
    lines = []
    for node, name in zip(graph.outputs, graph.out_names):
        if node in written and written[node] == name:
            continue
        source = written.get(node) or graph.names[node]
        nbytes = node.type.size * node.type.itemsize
        if nbytes:
            lines.append(f"  memcpy({name}, {source}, {nbytes});")
    return lines


def _operator(call: Call) -> tuple[str, str]:
    """(macro family stem, operator token or helper name) for a call."""
    op, loop = call.op.name, loop_dtypes(call)
    if not rules.is_helper(op, loop):
        return "OP", rules.C_RULES[op].operator
    return "FN", rules.helper_name(op, loop)


def _parallel(elements: int, calls: list[Call]) -> bool:
    """Should a loop over ``elements`` computing ``calls`` run on all cores? When it is
    large enough, and no call can report an error: the error flag is per thread, and
    OpenMP's threads would set their own."""
    if elements < PARALLEL_MIN_ELEMENTS:
        return False
    return not any(rules.can_fail(c.op.name, loop_dtypes(c)) for c in calls)


def _working_types(call: Call) -> list[str]:
    """The C type each operand of ``call`` is read in: its dtype in the op's loop
    (NumPy's), in that dtype's compute type. A comparison of int64 with uint64 reads
    each as itself; ``where`` reads its condition as _Bool and its branches in their
    common type."""
    return [rules.COMPUTE_TYPES[d] for d in loop_dtypes(call)[:-1]]


class _PerNode:
    """One macro-generated function per node, as in the guide."""

    def __init__(self, graph: Subgraph):
        self.graph = graph
        self.number: dict[Call, int] = {}
        stack = list(reversed(graph.outputs))
        while stack:  # pre-order from the outputs: the outermost call gets 0
            node = stack.pop()
            if isinstance(node, Call) and node not in self.number:
                self.number[node] = len(self.number)
                stack += reversed(node.args)
        self.macros: set[tuple[str, int]] = set()
        self.instances = [self._instance(c) for c in sorted(self.number, key=self.number.get)]

    def _instance(self, call: Call) -> str:
        name = f"{self.graph.symbol}_{self.number[call]}"
        stem, token = _operator(call)
        out = call.type
        rank = len(out.shape)
        dims = [str(d) for d in out.shape]
        operands = call.args
        if (
            len(operands) == 2
            and stem == "OP"
            and all(a.type.dtype == "float32" and a.type.shape == out.shape for a in operands)
            and out.dtype == "float32"
        ):
            self.macros |= {("BINARY_OP_T", rank), ("BINARY_OP", rank)}
            return f"{macro_name('BINARY_OP', rank)}({', '.join([name, token, *dims])});"
        family = f"{ARITY_NAMES[len(operands)]}_{stem}_T"
        self.macros.add((family, rank))
        types = [rules.C_TYPES[a.type.dtype] for a in operands]
        types += [rules.C_TYPES[out.dtype], *_working_types(call)]
        strides = [str(s) for a in operands for s in broadcast_strides(a.type.shape, out.shape)]
        parallel = "1" if _parallel(out.size, [call]) else "0"
        args = [name, token, *types, *dims, *strides, parallel]
        return f"{macro_name(family, rank)}({', '.join(args)});"

    def definitions(self) -> list[str]:
        # General families before the guide's shorthands that expand to them.
        order = sorted(self.macros, key=lambda m: (m[0] == "BINARY_OP", m[0], m[1]))
        return [*(macro_definition(f, r) for f, r in order), "", *self.instances]

    def body(self) -> list[str]:
        graph = self.graph
        order = [n for n in graph.nodes if isinstance(n, Call)]
        last_use = last_reads(order)
        written: dict[Expr, str] = {}
        outputs = dict(zip(reversed(graph.outputs), reversed(graph.out_names)))  # first wins
        buffers: list[list] = []  # [name, dtype, elements, free]
        calls = []
        for position, call in enumerate(order):
            dest = outputs[call] if call in outputs else self._take_buffer(buffers, call.type)
            args = [written.get(a) or graph.names[a] for a in call.args]
            calls.append(f"  {graph.symbol}_{self.number[call]}({', '.join([*args, dest])});")
            written[call] = dest
            for arg in set(call.args):
                if last_use.get(arg) == position and arg not in outputs:
                    for buf in buffers:
                        if buf[0] == written.get(arg):
                            buf[3] = True
        lines = [_signature(graph) + " {"]
        releases = []
        for name, dtype, count, _ in buffers:
            t = rules.C_TYPES[dtype]
            itemsize = dtype_info(dtype).itemsize
            size = f"{itemsize} * {max(count, 1)}"
            if itemsize * count >= LARGE_BUFFER_BYTES:
                lines.append(f"  {t}* {name} = ({t}*)nbyoc_take_large({size});")
                releases.append(f"nbyoc_give_back({name}, {size});")
            else:
                lines.append(f"  {t}* {name} = ({t}*)malloc({size});")
                releases.append(f"free({name});")
        if buffers:
            lines.append(f"  if ({' || '.join('!' + b[0] for b in buffers)}) {{")
            lines += [f"    {r}" for r in releases]
            lines += [
                '    nbyoc_error = "out of memory for intermediate buffers";',
                "    return 4;",
                "  }",
            ]
        lines += calls
        lines += _copies(graph, written)
        lines += [f"  {r}" for r in releases]
        lines += [f"  return {rules.ERROR_FLAG} ? 3 : 0;", "}"]
        return lines

    @staticmethod
    def _take_buffer(buffers: list[list], t) -> str:
        for buf in buffers:
            if buf[3] and buf[1] == t.dtype:
                buf[2] = max(buf[2], t.size)
                buf[3] = False
                return buf[0]
        buffers.append([f"buf_{len(buffers)}", t.dtype, t.size, False])
        return buffers[-1][0]


class _FusedLoop:
    """One loop nest over the broadcast shape of the whole subgraph; every node is
    a local value computed once per element, outputs are stored as they appear."""

    def __init__(self, graph: Subgraph):
        from ...ir.ops.elementwise import broadcast_shapes

        self.graph = graph
        self.domain = broadcast_shapes("fused loop", tuple(n.type for n in graph.nodes))

    def definitions(self) -> list[str]:
        return []

    def body(self) -> list[str]:
        graph = self.graph
        value: dict[Expr, str] = {}
        inner = []
        for k, call in enumerate(graph.calls):
            t = rules.C_TYPES[call.type.dtype]
            reads = [self._read(a, value, w) for a, w in zip(call.args, _working_types(call))]
            stem, token = _operator(call)
            if stem == "FN":
                expr = f"{token}({', '.join(reads)})"
            elif len(reads) == 2:
                expr = f"{reads[0]} {token} {reads[1]}"
            else:
                expr = f"{token} {reads[0]}"
            value[call] = f"v{k}"
            inner.append(f"const {t} v{k} = ({t})({expr});")
        written = {}
        for node, name in zip(graph.outputs, graph.out_names):
            if isinstance(node, Call) and node not in written:
                index = index_expression(broadcast_strides(node.type.shape, self.domain))
                inner.append(f"{name}[{index}] = {value[node]};")
                written[node] = name
        lines = ["NBYOC_VECTOR_CLONES " + _signature(graph) + " {"]
        parallel = "1" if _parallel(math.prod(self.domain), graph.calls) else None
        lines += loop_nest(self.domain, inner, parallel=parallel) if graph.calls else []
        lines += _copies(graph, written)
        lines += [f"  return {rules.ERROR_FLAG} ? 3 : 0;", "}"]
        return lines

    def _read(self, node: Expr, value: dict, t: str) -> str:
        """``node``'s value at the current element, converted to C type ``t``: a value
        computed in the loop is converted too (C's own conversions would compare a
        uint32 with an int32, or subtract them, in unsigned arithmetic)."""
        if node in value:
            return f"({t}){value[node]}"
        index = index_expression(broadcast_strides(node.type.shape, self.domain))
        return f"({t}){self.graph.names[node]}[{index}]"
