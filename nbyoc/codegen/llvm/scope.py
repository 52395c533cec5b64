"""The names an llvm kernel binds at its top level, all from one allocator.

A kernel's statements bind its arguments (``in0``, ``c0``, ``out0``, ``s0``), views of
its scratch arenas and of other arrays (``t3``, ``w7``) and names derived from those
(``t3_flat``, ``in0_scalar``, ``w7_c``). Each comes from the kernel's ``Scope``: an
argument by its family and position, a view as the next free name of its family, a
derived name from a name the scope made and a role. Two values can then never get one
name. A name derived from one the scope made (``t3_blocks``) is the scope's too: an
emitter binding views of the arrays it is given derives their names so, a role per
rank. ``Scope.check``
refuses a body binding an argument, or any other name of these families that the
scope did not make: an emitter's local of that form would shadow a kernel array (a
reduction's local ``c0`` once met the first constant, and Numba refused to unify an
array with an integer; a shadowed array of the same type would have read wrong
numbers).

>>> scope = Scope()
>>> scope.argument("in", 0), scope.fresh("t"), scope.fresh("t"), scope.derived("t1", "flat")
('in0', 't0', 't1', 't1_flat')
>>> scope.check(["t1_flat = t1.reshape(8)", "t0_blocks = t0.reshape((1, 8))"], "f")
>>> scope.check(["for c0 in range(2):"], "f")
Traceback (most recent call last):
    ...
nbyoc.errors.CompileError: internal: the llvm kernel of @f binds c0, which its scope did not make
>>> scope.check(["in0 = in0 + 1"], "f")
Traceback (most recent call last):
    ...
nbyoc.errors.CompileError: internal: the llvm kernel of @f binds its argument(s) in0 again
"""

from __future__ import annotations

import re

from ...errors import CompileError

#: The families of the kernel's own names: arguments (inputs, constants, outputs,
#: scratch arenas) and views (of scratch: ``t``; of anything else: ``w``).
FAMILIES = ("in", "c", "out", "s", "t", "w")
#: A name of a family, with any derived roles.
_OWNED = re.compile(rf"^(?:{'|'.join(FAMILIES)})\d+(?:_[a-z]+)*$")
#: A line binding a name: an assignment (not a comparison) or a for loop's target.
_BINDS = re.compile(r"^\s*(?:for\s+)?([A-Za-z_]\w*)\s*(?:=(?!=)|in\s)")


class Scope:
    """The names one kernel binds at its top level (see the module docstring)."""

    def __init__(self):
        self.names: set[str] = set()
        self.arguments: set[str] = set()
        self._next = dict.fromkeys(FAMILIES, 0)

    def argument(self, family: str, position: int) -> str:
        """The name of the kernel's argument of ``family`` at ``position`` (the runtime
        and ``program`` find the arguments by these names)."""
        name = self._owned(family, position)
        self.names.add(name)
        self.arguments.add(name)
        return name

    def fresh(self, family: str) -> str:
        """The next name of ``family`` no one has."""
        while True:
            name = self._owned(family, self._next[family])
            self._next[family] += 1
            if name not in self.names:
                self.names.add(name)
                return name

    def derived(self, name: str, role: str) -> str:
        """The name of ``name``'s array in ``role`` (its flat view, its contiguous copy,
        its one element): the same for the same pair, so a stage binding it again binds
        the same array."""
        if name not in self.names:
            raise CompileError(f"internal: {name!r} is not a name of the kernel's scope")
        if not role.isalpha() or not role.islower():
            raise CompileError(f"internal: {role!r} is not a role of a derived name")
        derived = f"{name}_{role}"
        self.names.add(derived)
        return derived

    def check(self, body: list[str], symbol: str) -> None:
        """Refuse a kernel ``body`` binding one of its arguments, or a name of the scope's
        families neither made by the scope nor derived from one it made."""
        bound = {m.group(1) for line in body if (m := _BINDS.match(line))}
        again = sorted(bound & self.arguments)
        if again:
            raise CompileError(
                f"internal: the llvm kernel of @{symbol} binds its argument(s) "
                f"{', '.join(again)} again"
            )
        stray = sorted(n for n in bound if _OWNED.match(n) and n.split("_")[0] not in self.names)
        if stray:
            raise CompileError(
                f"internal: the llvm kernel of @{symbol} binds {', '.join(stray)}, "
                "which its scope did not make"
            )

    @staticmethod
    def _owned(family: str, number: int) -> str:
        if family not in FAMILIES:
            raise CompileError(f"internal: {family!r} is not a family of kernel names")
        return f"{family}{number}"
