"""``merge_composite``: each sub-graph a backend's pattern matches becomes one
``composite`` call (``Composite="vendor.conv_bias_relu"``, its body the matched calls).

It runs before ``legalize``, so a pattern can name an op that legalize would decompose
(``gelu``): a composite's body is an attribute, which legalize and the partitioning
passes do not look into.
``annotate_target`` then gives each composite to the backend whose table has it.

Which matches are taken:

- backends in priority order, each one's table in its order, and each pattern tried
  at every call from the outputs back (so an optional op at a pattern's root is taken
  with the rest, not left out by a match at its operand);
- a call belongs to one composite: a match overlapping one taken before is refused;
- a match is refused when a value computed inside it, other than its root's, is also
  used outside it: the composite returns only its root's value. That is also what
  keeps the rewrite from making a cycle: every path out of the match starts at its
  root, so none can lead back into one of its inputs (the diamond ``m = a * b``,
  ``m + exp(m)`` matched as ``add(multiply(..), ..)`` would read ``exp(m)``, which
  needs ``m`` from inside);
- a match of a backend is refused when a backend listed before it takes one of the
  calls (a priority order holds for composites as it does for single ops);
- last, the pattern's check is asked.

>>> import nbyoc
>>> from nbyoc.transform.patterns import is_op, wildcard
>>> nbyoc.register_patterns("doc_composite", [
...     ("doc_composite.add_relu", is_op("relu")(is_op("add")(wildcard(), wildcard())))])
>>> a, b = nbyoc.var("a", (2,)), nbyoc.var("b", (2,))
>>> f = merge_composite(nbyoc.function([a, b], nbyoc.relu(a + b) * b), ["doc_composite"])
>>> call = f.body.args[0]
>>> call.op.name, call.attrs["Composite"], [n.name_hint for n in call.args]
('composite', 'doc_composite.add_relu', ['a', 'b'])
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import NbyocError, UndecidableSizeError
from ..ir.nodes import Call, Expr, Function, Var
from ..ir.traversal import operands, post_order, with_operands
from .pattern_table import CompositePattern, pattern_table
from .patterns import Match, bindings
from .regions import is_op_call
from .support import OperatorSupport, supports


@dataclass(eq=False)  # (IR nodes refuse ==)
class Composites:
    """What ``find_composites`` found: the matches taken, each with its row, in the
    order they were taken, and those refused, as (row, root call, reason)."""

    func: Function
    taken: list[tuple[CompositePattern, Match]] = field(default_factory=list)
    refused: list[tuple[CompositePattern, Call, str]] = field(default_factory=list)


def merge_composite(func: Function, backends: str | Sequence[str] | OperatorSupport) -> Function:
    """``func`` with every match taken (see the module docstring) replaced by a
    ``composite`` call; ``func`` itself when nothing matches."""
    found = find_composites(func, backends)
    return _rewritten(func, found.taken) if found.taken else func


def find_composites(func: Function, backends: str | Sequence[str] | OperatorSupport) -> Composites:
    """The matches ``merge_composite`` takes in ``func``, and those it refuses, with why."""
    support = backends if isinstance(backends, OperatorSupport) else OperatorSupport(backends)
    found = Composites(func)
    rows = [(k, row) for k, b in enumerate(support.backends) for row in pattern_table(b)]
    if not rows:
        return found
    nodes = post_order([func.body])
    users: dict[Expr, set] = {n: set() for n in nodes}
    for node in nodes:
        for arg in operands(node):
            users[arg].add(node)
    users[func.body].add(None)  # (the function's result is used outside every match)
    owner: dict[Call, str] = {}
    for k, row in rows:
        earlier = support.backends[:k]
        for node in reversed(nodes):
            if node in owner or not is_op_call(node) or node.op.name not in row.ops:
                continue
            first_reason = None
            for bound in bindings(row.pattern, node):
                match = Match.of(bound, node)
                reason = _refusal(row, match, owner, users, earlier)
                if reason is None:
                    found.taken.append((row, match))
                    owner.update(dict.fromkeys(match.calls, row.name))
                    break
                first_reason = first_reason or reason
            else:
                if first_reason is not None:
                    found.refused.append((row, node, first_reason))
    return found


def _refusal(row, match: Match, owner, users, earlier) -> str | None:
    """Why ``match`` cannot be taken, or None (cheap structural reasons first: the check
    is the backend's code, asked last)."""
    calls = set(match.calls)
    for call in match.calls:
        if call in owner:
            return f"its {call.op.name} call is already in {owner[call]}"
        if call is not match.root and not users[call] <= calls:
            return (
                f"the value of its {call.op.name} call is also used outside it (a composite "
                f"returns its root's value only)"
            )
    for backend in earlier:
        taken = next((c for c in match.calls if supports(backend, c)), None)
        if taken is not None:
            return f"{backend}, listed before {row.backend}, takes its {taken.op.name} call"
    if not match.inputs:
        return "it reads no value"
    if row.check is None:
        return None
    try:
        answer = row.check(match)
    except UndecidableSizeError as e:
        return f"its check depends on symbolic sizes only a binding settles ({e})"
    except Exception as e:
        raise NbyocError(f"the check of pattern {row.name} failed on {match.root!r}: {e}") from e
    if isinstance(answer, str):
        return answer or "its check refused"
    return None if answer else "its check refused"


def composite_call(row: CompositePattern, match: Match, args: Sequence[Expr]) -> Call:
    """The ``composite`` call of ``match`` on ``args`` (the values of its inputs): its
    body is the matched calls, on parameters ``in0``, ``in1``, ... for the inputs."""
    params = [Var(f"in{i}", value.type) for i, value in enumerate(match.inputs)]
    inner: dict[Expr, Expr] = dict(zip(match.inputs, params))
    for call in match.calls:  # (evaluation order: operands first)
        inner[call] = with_operands(call, [inner[a] for a in call.args])
    body = Function(params, inner[match.root])
    return Call("composite", args, {"Composite": row.name, "body": body})


def _rewritten(func: Function, taken) -> Function:
    at_root = {match.root: (row, match) for row, match in taken}
    inside = {c for _, match in taken for c in match.calls if c is not match.root}
    new: dict[Expr, Expr] = {}
    for node in post_order([func.body]):
        if node in inside:  # (read by its composite only: never rebuilt)
            continue
        if node in at_root:
            row, match = at_root[node]
            new[node] = composite_call(row, match, [new.get(i, i) for i in match.inputs])
            continue
        args = [new.get(a, a) for a in operands(node)]
        if any(a is not b for a, b in zip(args, operands(node))):
            new[node] = with_operands(node, args)
    return Function(func.params, new.get(func.body, func.body), func.attrs)
