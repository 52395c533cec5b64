"""A long kernel body cut into chunk functions, so that Numba compiles it in time linear
in its length.

Numba's typing and lowering of one function grow faster than its length: a region of
many small independent stages (``np.stack`` of 60 scaled rows, or a user loop writing
``out[i] = x[i] * i`` row by row) made a kernel of a few thousand lines that took
minutes to compile, almost all of it in Numba's passes over that one function. Here
the kernel's top-level statements are cut, in order, into runs of at most
``CHUNK_LINES`` lines; each run becomes a function ``chunk{k}`` of its own, compiled
apart (typed and lowered once, linked into the kernel and cached with it, as the
parallel loops' group functions are: ``outline``), and the kernel calls them in turn.

A chunk takes the names it reads that were bound before it (the kernel's arguments,
views and values bound by the kernel or returned by an earlier chunk) and returns,
as a tuple, the names it binds that a later statement reads (liveness over the
top-level statements, ``_Flow``). Numba types a chunk's arguments at the call, so an
array, a view or a scalar passes the same way. A statement holding a ``prange`` stays
in the kernel (a chunk is compiled serially). A kernel no longer than twice
``CHUNK_LINES`` is left as it was: ordinary graphs keep their source, their cache keys
and their code.

>>> lines = ["a = x[0:2]", "s = a[0] + a[1]", "y[0] = s", "y[1] = a[1] * s", "y[0] += 1.0"]
>>> kernel, source = chunk_kernel(lines, ["x", "y"], limit=2)
>>> kernel
['(s,) = chunk0(x)', 'chunk1(x, y, s)', 'chunk2(y)']
>>> print("\\n".join(source[7:12]))
def chunk1(x, y, s):
    a = x[0:2]
    y[0] = s
    y[1] = a[1] * s
<BLANKLINE>
"""

from __future__ import annotations

import ast
import re

#: The most lines a chunk holds; a kernel body no longer than twice this is left whole.
#: Measured (bench: Numba's compile of one region's kernel module alone, cache off, one
#: process, loaded 2-core machine) on ``np.stack([x[i] * i for i in range(n)])``, rows
#: of 1000 float64, whole against chunks of 200 lines: n=40 (320 lines) 12.7 s against
#: 13.5 s, no gain; n=80 (600 lines) 18.7 s against 16.2 s; n=160 (1160 lines) 257 s
#: against 75-105 s. Below a few hundred lines Numba's time is about linear in them and
#: a chunk's calls, arguments and returns cost what they save.
CHUNK_LINES = 200
#: A line binding a view: a name, a slice of one with literal bounds, reshaped with a
#: literal shape; a constant read at its address (``outline``'s, and a 0-d constant's).
_VIEW = re.compile(
    r"^\w+ = (\w+(\[[\d:, ]*\])?(\.reshape\(\([\d, ]*\)\)|\.reshape\(\d+\))*"
    r"|carray\(pointer_at\(constants\[\d+\], np\.\w+\), \([\d, ]*\)\)"
    r"(\.reshape\(\(\)\))?)$"
)
#: A chunk function's options: called from the kernel only, so compiled and cached with
#: it; no Python or C entry of its own (neither is ever called, and each costs time).
CHUNK_OPTIONS = (
    'nogil=True, error_model="numpy", boundscheck=False, '
    "no_cpython_wrapper=True, no_cfunc_wrapper=True"
)


def chunk_kernel(
    lines: list[str], parameters: list[str], limit: int | None = None
) -> tuple[list[str], list[str]]:
    """(the kernel body ``lines``, unindented, with its runs of top-level statements cut
    into chunk functions and called in turn; those functions' source). ``parameters``:
    the kernel's own. A body of at most twice ``limit`` lines (``CHUNK_LINES``) comes
    back as it was."""
    limit = CHUNK_LINES if limit is None else limit
    if len(lines) <= 2 * limit:
        return lines, []
    tree = ast.parse("\n".join(lines))
    assert not _binds_chunk(tree), "internal: a kernel name looks like a chunk's"
    statements = tree.body
    # Each statement's lines: from the end of the one before (its comments go with it).
    spans, start = [], 0
    for node in statements:
        spans.append((start, node.end_lineno))
        start = node.end_lineno
    if statements:
        spans[-1] = (spans[-1][0], len(lines))
    flows = [_Flow.of([node]) for node in statements]
    # Liveness, backwards over the top-level statements.
    live_after = [set() for _ in statements]
    live: set[str] = set()
    for i in range(len(statements) - 1, -1, -1):
        live_after[i] = set(live)
        live = flows[i].exposed | (live - flows[i].definite)
    runs = _runs(statements, spans, limit)
    views = _views(statements, lines, parameters)
    # (a view the kernel's own statements read, a prange's, is returned to it)
    kernel_reads = {
        n for run in runs if _kept(run, statements) for i in run for n in flows[i].exposed
    }
    kernel: list[str] = []
    source: list[str] = []
    bound_before = list(parameters)  # in binding order: the order chunks take them in
    known = set(parameters)
    available = set(parameters)  # what the kernel itself has bound
    count = 0
    for run in runs:
        first, last = run[0], run[-1]
        run_lines = lines[spans[first][0] : spans[last][1]]
        if _kept(run, statements):
            kernel += run_lines
            available.update(_Flow.of(statements[first : last + 1]).order)
        else:
            flow = _Flow.of(statements[first : last + 1])
            returns = [
                n
                for n in flow.order
                if n in live_after[last] and (n not in views or n in kernel_reads)
            ]
            rebound = _closure(flow.exposed & views.keys(), views)
            wanted = flow.exposed - set(rebound)
            wanted |= {n for v in rebound for n in views[v][1] if n not in views}
            wanted |= set(returns)
            # (only what the kernel has: a name bound in an earlier chunk and read here
            # first is live there, so that chunk returned it)
            arguments = [n for n in bound_before if n in wanted and n in available]
            call = f"chunk{count}({', '.join(arguments)})"
            count += 1
            kernel.append(f"({', '.join(returns)},) = {call}" if returns else call)
            available.update(returns)
            source += [f"@njit({CHUNK_OPTIONS})", f"def {call}:"]
            source += ["    " + views[v][0] for v in rebound]
            source += ["    " + text if text else text for text in run_lines]
            if returns:
                source.append(f"    return ({', '.join(returns)},)")
            source.append("")
        for n in _Flow.of(statements[first : last + 1]).order:
            if n not in known:
                known.add(n)
                bound_before.append(n)
    return kernel, source


def _kept(run: list[int], statements) -> bool:
    """Whether a run stays in the kernel: a statement holding a ``prange``."""
    return len(run) == 1 and _parallel(statements[run[0]])


def _views(statements, lines: list[str], parameters) -> dict[str, tuple[str, set[str]]]:
    """The names bound once, at the top level, to a view of the kernel's parameters (or
    of such views): each one's binding line and the names it reads. A chunk binds those
    it reads again, as a parallel loop's group function does (``outline``), rather than
    take them as arguments: binding a view reads no memory, and a chunk's parameters
    and returned values cost Numba more than its statements."""
    stored: dict[str, int] = {}
    for node in statements:
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                stored[n.id] = stored.get(n.id, 0) + 1
    views: dict[str, tuple[str, set[str]]] = {}
    for node in statements:
        text = lines[node.lineno - 1].strip()
        if not (
            isinstance(node, ast.Assign)
            and node.lineno == node.end_lineno
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and stored[node.targets[0].id] == 1
            and _VIEW.match(text)
        ):
            continue
        # (globals, a module's functions and imports, are never bound here)
        reads = {n.id for n in ast.walk(node.value) if isinstance(n, ast.Name)} & {
            *stored,
            *parameters,
        }
        if all(n in views or n in parameters for n in reads):
            views[node.targets[0].id] = (text, reads)
    return views


def _closure(names: set[str], views: dict[str, tuple[str, set[str]]]) -> list[str]:
    """``names`` and the views they are views of, in binding order."""
    found, pending = set(), list(names)
    while pending:
        name = pending.pop()
        if name not in found:
            found.add(name)
            pending += [n for n in views[name][1] if n in views]
    return [v for v in views if v in found]


def _runs(statements, spans, limit: int) -> list[list[int]]:
    """The statements' indices in runs: each statement holding a ``prange`` alone, the
    others in order, a run closed before it would pass ``limit`` lines."""
    runs: list[list[int]] = []
    current: list[int] = []
    size = 0
    for i, node in enumerate(statements):
        length = spans[i][1] - spans[i][0]
        if _parallel(node):
            runs += [current] if current else []
            runs.append([i])
            current, size = [], 0
            continue
        if current and size + length > limit:
            runs.append(current)
            current, size = [], 0
        current.append(i)
        size += length
    return runs + ([current] if current else [])


def _parallel(node: ast.stmt) -> bool:
    return any(
        isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "prange"
        for n in ast.walk(node)
    )


def _names(tree: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}


def _binds_chunk(tree: ast.AST) -> bool:
    return any(n.startswith("chunk") and n[5:].isdigit() for n in _names(tree))


class _Flow:
    """What statements read and bind, in order: ``exposed``, the names read before the
    statements bind them (what they need from before); ``definite``, the names bound on
    every path through them; ``order``, every name they bind, first binding first. A
    loop's body may run no time, and only one of an ``if``'s branches runs."""

    def __init__(self):
        self.exposed: set[str] = set()
        self.definite: set[str] = set()
        self.order: list[str] = []

    @classmethod
    def of(cls, statements: list[ast.stmt]) -> _Flow:
        flow = cls()
        flow.definite = flow._block(statements, set())
        return flow

    def _read(self, node: ast.AST | None, defined: set[str]) -> None:
        if node is None:
            return
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and not isinstance(n.ctx, ast.Store) and n.id not in defined:
                self.exposed.add(n.id)

    def _bind(self, target: ast.AST, defined: set[str]) -> None:
        for n in ast.walk(target):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                defined.add(n.id)
                if n.id not in self.order:
                    self.order.append(n.id)
            elif isinstance(n, ast.Name):
                self._read(n, defined)

    def _block(self, statements: list[ast.stmt], defined: set[str]) -> set[str]:
        """Walk ``statements`` with ``defined`` bound before them; what is bound after."""
        defined = set(defined)
        for node in statements:
            if isinstance(node, ast.Assign):
                self._read(node.value, defined)
                for target in node.targets:
                    self._bind(target, defined)
            elif isinstance(node, ast.AugAssign):
                self._read(node.value, defined)
                if isinstance(node.target, ast.Name):  # (``x += 1`` reads x first)
                    self._read(ast.Name(node.target.id, ast.Load()), defined)
                self._bind(node.target, defined)
            elif isinstance(node, ast.For):
                self._read(node.iter, defined)
                inner = set(defined)
                self._bind(node.target, inner)
                self._block(node.body, inner)
                self._block(node.orelse, defined)
            elif isinstance(node, ast.While):
                self._read(node.test, defined)
                self._block(node.body, defined)
                self._block(node.orelse, defined)
            elif isinstance(node, ast.If):
                self._read(node.test, defined)
                both = self._block(node.body, defined) & self._block(node.orelse, defined)
                defined |= both
            else:  # an expression, a raise, anything else: read all, bind nothing surely
                stored = [
                    n.id
                    for n in ast.walk(node)
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)
                ]
                self.order += [n for n in dict.fromkeys(stored) if n not in self.order]
                self._read(node, defined)
        return defined
