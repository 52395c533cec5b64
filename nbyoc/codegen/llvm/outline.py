"""Each parallel loop of an llvm kernel moved into a function of its own, so that the
loop Numba's parfor passes see holds one call over a few arrays.

A kernel binds its views (scratch buffers reshaped, constants at their addresses,
stage functions at theirs) before its ``prange`` loops. Numba passes every name a
parallel loop's body uses as an argument of the function it outlines the body
into, and its passes slow down with their number: PP-OCR's classifier, whose one
loop ran 80 stages over 230 views, took longer to compile in parallel than
serially. Here the loop body becomes a *group function* whose parameters are the
kernel's own arrays it needs (inputs, outputs, arenas, address tables) and the
chunk index; it binds its views itself. That repeats only view bindings, never
work: a loop whose body needs a name bound any other way (a value read before
the loop, a contiguous copy) stays in the kernel as it was.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

#: A kernel line binding a name: ``name = expression``.
_BINDING = re.compile(r"^(\w+) = (.+)$")
#: The expressions that only view memory, never read it: a name, a slice, a reshape
#: or transpose of one (``transposed``); an array at an address.
_VIEW = re.compile(
    r"^(\w+(\[[\d:, ]*\])?(\.(reshape|transpose)\(\([\d, ]*\)\)|\.reshape\(\d+\))*"
    r'|transposed\(\w+, "[\d ]+"\)'
    r"|carray\(pointer_at\(constants\[\d+\], np\.\w+\), \([\d, ]*\)\))$"
)
#: A name bound by an assignment or a ``for`` anywhere in a line.
_BOUND = re.compile(r"^\s*(?:(\w+) = |for (\w+) in )")
_NAME = re.compile(r"\b[A-Za-z_]\w*\b")
_LOOP = re.compile(r"^for c in prange\((\d+)\):$")


@dataclass(frozen=True)
class Group:
    """A parallel loop's body as a function: the kernel arrays it takes (then the chunk
    index ``c``) and its lines, unindented: the views it binds, then the body."""

    parameters: list[str]
    lines: list[str]


def outline_parallel_loops(
    lines: list[str], parameters: list[str], callee, unpassable=()
) -> tuple[list[str], list[Group]]:
    """(the kernel's lines with each parallel loop that can be outlined replaced by a
    ``prange`` over a call of its group function, the groups). ``lines``: the kernel
    body, unindented; ``parameters``: the kernel's parameters; ``callee(k)``: the name
    the kernel calls group ``k`` by.

    >>> body, groups = outline_parallel_loops(
    ...     ["t0 = s0[0:8].reshape((2, 4))", "for c in prange(2):", "    stage(t0, c, c + 1)"],
    ...     ["in0", "s0"], lambda k, arguments: f"group{k}({', '.join(arguments)})")
    >>> body
    ['for c in prange(2):', '    group0(s0, np.int64(c))']
    >>> groups
    [Group(parameters=['s0'], lines=['t0 = s0[0:8].reshape((2, 4))', 'stage(t0, c, c + 1)'])]
    """
    bindings: dict[str, str] = {}  # each name bound at the kernel's top level: its line
    # names bound any other way (in a block, or to two things), or not to be passed
    other: set[str] = set(unpassable)
    kernel: list[str] = []
    groups: list[Group] = []
    index = 0
    while index < len(lines):
        line = lines[index]
        end = index + 1
        while end < len(lines) and lines[end].startswith("    "):
            end += 1
        if _LOOP.match(line):
            body = [text[4:] for text in lines[index + 1 : end]]
            needed = _views_needed(body, bindings, other, set(parameters))
            if needed is not None:
                used = [p for p in parameters if _uses(body + needed, p)]
                # (Numba types a prange's index as uint64; every stage takes int64 bounds)
                call = callee(len(groups), [*used, "np.int64(c)"])
                kernel += [line, f"    {call}"]
                groups.append(Group(used, needed + body))
                index = end
                continue
        elif (match := _BINDING.match(line)) is not None:
            if bindings.get(match.group(1), line) != line:  # (the same view again is fine)
                other.add(match.group(1))
            bindings[match.group(1)] = line
        for text in lines[index + 1 : end]:
            other.update(m.group(1) or m.group(2) for m in _BOUND.finditer(text))
        kernel += lines[index:end]
        index = end
    return (_without_unused_views(kernel) if groups else kernel), groups


def _without_unused_views(lines: list[str]) -> list[str]:
    """``lines`` without the view bindings nothing after them reads any more (those the
    group functions took over): Numba would compile them all the same."""
    kept: list[str] = []
    read: set[str] = set()
    for line in reversed(lines):
        match = _BINDING.match(line)
        if match and _VIEW.match(match.group(2)) and match.group(1) not in read:
            continue
        read.update(_NAME.findall(line if match is None else match.group(2)))
        kept.append(line)
    return kept[::-1]


def _views_needed(body: list[str], bindings: dict[str, str], other: set[str], parameters):
    """The binding lines ``body`` needs, in kernel order, or None if one of them is not
    a view, or a name it uses was bound in a block or twice (``other``)."""
    local = {m.group(1) for text in body if (m := _BINDING.match(text.strip()))}
    needed: set[str] = set()
    pending = [n for text in body for n in _NAME.findall(text)]
    while pending:
        name = pending.pop()
        if name in other:
            return None
        if name in needed or name in parameters or name in local:
            continue
        if name not in bindings:  # a global: a module constant, function or import
            continue
        expression = _BINDING.match(bindings[name]).group(2)
        if not _VIEW.match(expression):
            return None
        needed.add(name)
        pending += _NAME.findall(expression)
    order = list(bindings)
    return [bindings[name] for name in sorted(needed, key=order.index)]


def _uses(lines: list[str], name: str) -> bool:
    return any(name in _NAME.findall(text) for text in lines)
