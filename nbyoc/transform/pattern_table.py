"""Each backend's composite patterns: ``nbyoc.register_patterns(backend, table)``.

A row is ``(name, pattern)`` or ``(name, pattern, check)``; rows earlier in the table
win where matches overlap. ``name`` is the composite's ``Composite`` attribute, and
starts with the backend's name and a dot (``"vendor.conv_bias_relu"``), so that a
composite says whose kernel it is. ``check(match)``, if given, is asked of each
match (``nbyoc.transform.patterns.Match``) as an op-support predicate is asked of a
call: ``True`` takes it, ``False`` refuses it, a string refuses it and says why.

Registering a table also declares that the backend takes ``composite`` calls of its
own names, through the op-support registry: that is how ``annotate_target`` gives a
composite to its backend, and only to it.

>>> import nbyoc
>>> from nbyoc.transform.patterns import is_op, wildcard
>>> nbyoc.register_patterns("doc_table", [("doc_table.add_relu",
...                                        is_op("relu")(is_op("add")(wildcard(), wildcard())))])
>>> [row.name for row in pattern_table("doc_table")], composite_backend("doc_table.add_relu")
(['doc_table.add_relu'], 'doc_table')
>>> nbyoc.register_patterns("doc_table", [("add_relu", is_op("relu"))], replace=True)
Traceback (most recent call last):
    ...
nbyoc.errors.PatternError: doc_table's pattern table, row 0: a composite's name starts with its
backend's name and a dot, as 'doc_table.add_relu'; got 'add_relu'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import DuplicateRegistrationError, NbyocError, PatternError
from ..ir.attrs import Attr
from ..ir.nodes import Call
from .patterns import Pattern, root_ops
from .support import check_new_backend_name, register_op_support

#: What a check answers: True (taken), False or None (refused), or the reason it refuses.
Check = Callable[[object], "bool | str | None"]


@dataclass(frozen=True)
class CompositePattern:
    """One row of a backend's table; ``ops`` are the ops its root can be a call of."""

    name: str
    backend: str
    pattern: Pattern
    check: Check | None
    ops: frozenset[str]


_TABLES: dict[str, tuple[CompositePattern, ...]] = {}
_OWNER: dict[str, str] = {}  # composite name -> the backend whose table has it


def register_patterns(
    compiler: str, table: Iterable[tuple[Any, ...]], replace: bool = False
) -> None:
    """Register ``compiler``'s composite patterns, in priority order (see the module
    docstring). A second table for the same backend is refused unless ``replace=True``,
    which replaces the whole table."""
    check_new_backend_name(compiler)
    if compiler in _TABLES and not replace:
        raise DuplicateRegistrationError(
            f"{compiler!r} already has a pattern table; pass replace=True to replace it"
        )
    if isinstance(table, (str, bytes)) or not isinstance(table, Iterable):
        raise PatternError(
            f"{compiler}'s pattern table must be a list of (name, pattern[, check]) rows, "
            f"got {table!r}"
        )
    rows = tuple(_row(compiler, i, row) for i, row in enumerate(table))
    names = [row.name for row in rows]
    for name in names:
        if names.count(name) > 1:
            raise PatternError(f"{compiler}'s pattern table names {name!r} twice")
        owner = _OWNER.get(name, compiler)
        if owner != compiler:  # (unreachable while names start with their backend's)
            raise DuplicateRegistrationError(f"{name!r} is already {owner}'s composite")
    for name in [n for n, owner in _OWNER.items() if owner == compiler]:
        del _OWNER[name]
    _OWNER.update(dict.fromkeys(names, compiler))
    _TABLES[compiler] = rows
    register_op_support(compiler, "composite", _owned_by(compiler), replace=True)


def pattern_table(compiler: str) -> list[CompositePattern]:
    """``compiler``'s patterns in priority order (none if it registered no table)."""
    return list(_TABLES.get(compiler, ()))


def composite_backend(name: str) -> str | None:
    """The backend whose table has the composite ``name``, or None."""
    return _OWNER.get(name)


def _owned_by(compiler: str) -> Callable[[Call], bool | str]:
    def takes(call: Call) -> bool | str:
        name = call.attrs["Composite"]
        return _OWNER.get(name) == compiler or f"{name} is not in {compiler}'s pattern table"

    return takes


_NAME = Attr("str")


def _row(compiler: str, i: int, row) -> CompositePattern:
    where = f"{compiler}'s pattern table, row {i}"
    if not isinstance(row, tuple) or len(row) not in (2, 3):
        raise PatternError(f"{where}: a row is (name, pattern) or (name, pattern, check), "
                           f"got {row!r}")  # fmt: skip
    name, pattern, check = (*row, None)[:3]
    if not isinstance(name, str) or not name.startswith(f"{compiler}."):
        example = f"{compiler}.{name if isinstance(name, str) else 'conv_relu'}"
        raise PatternError(
            f"{where}: a composite's name starts with its backend's name and a dot, as "
            f"{example!r}; got {name!r}"
        )
    try:
        _NAME.normalise("composite", "Composite", name)
    except NbyocError as e:
        raise PatternError(f"{where}: {e}") from None
    if not isinstance(pattern, Pattern):
        raise PatternError(
            f"{where}: {name}'s pattern must be built with nbyoc.transform.patterns "
            f"(is_op, wildcard, ...), got {pattern!r}"
        )
    try:
        ops = root_ops(pattern)
    except PatternError as e:
        raise PatternError(f"{where}: {e}") from None
    if check is not None and not callable(check):
        raise PatternError(f"{where}: {name}'s check must be callable, got {check!r}")
    return CompositePattern(name, compiler, pattern, check, ops)
