"""One lowering of a size-generic region for every binding of its symbolic sizes: the
program and its buffer plan in terms of the symbols, evaluated per binding.

A region built for one binding of a function with symbolic sizes (``generic``) reads
its sizes at run time, so its stage functions are the same for every binding; what
changed from binding to binding was the rest of its lowering: the buffer plan (each
scratch buffer's size and offset), the program's table (views, sizes, bounds) and the
checks. Lowering that again in Python for each new size cost 30 to 300 ms.

Here the region's *symbolic* function is lowered instead, once, while ``ir.symbols``
answers every comparison of sizes the lowering makes (a tile count, whether a row
fits, whether a size is 1) by the values of the binding at hand, and records it as a
guard, as torch.compile's guards are (``symbols.deciding``). Every size the lowering
computes stays an expression in the symbols: the scratch arenas' lengths, the
program's slots (``Lowered.program_sizes``), the inputs' and outputs' shapes. That
lowering, the *template*, serves every binding its guards hold for: ``lowered_for``
checks them and writes the binding's values into a copy of the program (one compiled
function of the symbols: ``symbols.size_function``). A binding that fails some guard
gets a template of its own, lowered the same way. The first binding of a region is
lowered for its shapes, as a function of fixed shapes is (a symbolic lowering costs 2
to 3 times as much, and many symbolic functions only ever see one size); the template
comes with the second, symbolic only in the sizes that changed (the others taken at
their values, guarded), as torch.compile makes a dimension dynamic once it changes: an
OCR model whose batch varies gets a template in the batch, not in the image's height
and width too, whose expressions through every conv and pool would cost its lowering.

A size used as a number by the lowering (``int()``, ``range()``) is a guard that it
equals its value, and so is a symbol some stage function writes into its text (a size
it would better read at run time: the function is lowered again with that symbol
fixed); the template is only as general as the lowering lets it be. A region that is
not a program (a compiled kernel has its sizes in its code), or whose symbolic
lowering fails, gets no template: it is lowered for its concrete shapes as before.

>>> import numpy as np, nbyoc
>>> from nbyoc.ir.specialize import specialize
>>> from nbyoc.codegen.llvm import generic
>>> x = nbyoc.var("x", ("n", 256))
>>> symbolic = nbyoc.function([x], nbyoc.exp(x) * 2.0)
>>> regions = [specialize(symbolic, {"n": n}) for n in (100, 300, 500)]
>>> for region, n in zip(regions, (100, 300, 500)):
...     generic.register(region, symbolic, {"n": n})
>>> from nbyoc.codegen.llvm.lower import lower
>>> lowering = lambda f: lower(f, True, 1 << 15, True, 1 << 30)
>>> lowered_for(regions[0], "options", lowering) is None  # (the first: for its shapes)
True
>>> (first, _), (second, lowered) = (lowered_for(r, "options", lowering) for r in regions[1:])
>>> [t.shape for t in lowered.inputs], lowered.program is not None, first is second
([(500, 256)], True, True)
"""

from __future__ import annotations

import re
import threading
import weakref
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field, replace

from ...ir.nodes import Function
from ...ir.specialize import specialize
from ...ir.symbols import Guards, SizeExpr, deciding, size, size_function
from ...ir.types import TensorType
from . import generic
from .assemble import Lowered


@dataclass(frozen=True, eq=False)
class Template:
    """A region's lowering in terms of its symbols, and the guards it holds under; its
    symbols renamed (``names``: each symbol's name in it), so that none can be taken
    for a name in the code."""

    lowered: Lowered
    guards: Guards
    options: Hashable
    names: dict
    #: The symbols taken at their values because a stage writes them into its code.
    pinned: frozenset = frozenset()
    #: Its lowering made for a binding (renamed): ``Instantiate``.
    instantiate: Callable | None = None

    def holds(self, binding: dict[str, int]) -> bool:
        try:
            return self.guards.hold(self.renamed(binding))
        except KeyError:  # (a binding without some symbol a guard reads)
            return False

    def renamed(self, binding: dict[str, int]) -> dict[str, int]:
        return {self.names[k]: v for k, v in binding.items() if k in self.names}


#: Each symbolic function's templates (held while the function lives), by its options.
_TEMPLATES: weakref.WeakKeyDictionary[Function, list[Template]] = weakref.WeakKeyDictionary()


@dataclass
class _Seen:
    """What a symbolic function's bindings showed (by options): the first binding, the
    symbols that have changed since (a template keeps only those symbolic: the others
    are taken at their values, guarded, as torch.compile's automatic dynamic shapes
    make a dimension dynamic once it changes), and the symbols its stages write into
    their code (taken at their values in every template)."""

    first: dict
    varying: set = field(default_factory=set)
    pinned: set = field(default_factory=set)


#: Each symbolic function's ``_Seen``, by options.
_SEEN: weakref.WeakKeyDictionary[Function, dict] = weakref.WeakKeyDictionary()
#: The symbolic functions a template was refused for (by options), with why.
_REFUSED: weakref.WeakKeyDictionary[Function, dict] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def lowered_for(region: Function, options: Hashable, lower: Callable) -> tuple | None:
    """The template serving ``region`` (one binding of a registered symbolic function:
    ``generic.register``) and the lowering made from it for this binding; None
    when the region has no symbolic function or no template can serve it (it is then
    lowered for its shapes). ``lower(func)`` lowers a function with the ``options``
    (which key the templates)."""
    symbolic, binding = generic.source_of(region), generic.binding_of(region)
    if symbolic is None or binding is None:  # (every symbol of the model: ``mark_symbolic``)
        return None
    with _LOCK:
        if options in _REFUSED.get(symbolic, {}):
            return None
        templates = _TEMPLATES.setdefault(symbolic, [])
        template = next((t for t in templates if t.options == options and t.holds(binding)), None)
        if template is None:
            seen = _SEEN.setdefault(symbolic, {})
            if options not in seen:  # (the first binding: lowered for its shapes, as fast)
                seen[options] = _Seen(dict(binding))
                return None
            state = seen[options]
            state.varying |= {k for k, v in binding.items() if state.first.get(k) != v}
            own = set().union(*(p.type.symbols for p in symbolic.params))
            fixed = (set(binding) - state.varying) | state.pinned
            if own <= fixed:  # (none of its sizes varies, or its stages write them all)
                return None
            template = _make(symbolic, binding, options, lower, fixed)
            if template is None:
                return None
            state.pinned |= template.pinned - (set(binding) - state.varying)
            templates.append(template)
    return template, template.instantiate(template.renamed(binding))


def seen(region: Function, options: Hashable) -> bool:
    """Whether ``region`` is a later binding of a symbolic function (one lowered for
    ``options`` before): made from a template, not lowered for its shapes."""
    symbolic = generic.source_of(region)
    return symbolic is not None and options in _SEEN.get(symbolic, {})


def _make(
    symbolic: Function, binding: dict, options, lower: Callable, pinned=frozenset()
) -> Template | None:
    """A template of ``symbolic`` lowered at ``binding``. A symbol whose size some stage
    writes into its code (rather than reading it at run time: ``sizes.Dim``) is taken at
    its value, as a guard, and the function lowered again: the template is then as
    general as its stages let it be (``pinned``: the symbols to take at their values
    from the start, as the last template had to)."""
    symbols = sorted(binding)
    names = {name: f"{RENAMED}{k}" for k, name in enumerate(symbols)}
    hint = {names[k]: v for k, v in binding.items()}
    pinned = set(pinned) & set(symbols)
    while True:
        values = {n: binding[n] if n in pinned else size(names[n]) for n in symbols}
        renamed = specialize(symbolic, values)  # (its types compared as written: outside)
        with deciding(hint) as guards:
            try:
                lowered = lower(renamed)
            except Exception as e:  # (the lowering for the shapes then says what is wrong)
                _REFUSED.setdefault(symbolic, {})[options] = f"{type(e).__name__}: {e}"
                return None
        if lowered.program is None:
            _REFUSED.setdefault(symbolic, {})[options] = f"not a program: {lowered.not_a_program}"
            return None
        written = {symbols[k] for k in _written(lowered)} - pinned
        if not written:
            break
        pinned |= written
    for name in pinned:
        guards.value(size(names[name]))
    # (its text, shown by get_source, in the function's own names)
    lowered = replace(
        lowered, source=_RENAMED_TOKEN.sub(lambda m: symbols[int(m[1])], lowered.source)
    )
    return Template(lowered, guards, options, names, frozenset(pinned), Instantiate(lowered))


#: The prefix of a template's symbols (``Template.names``).
RENAMED = "nbyoc_size_"
_RENAMED_TOKEN = re.compile(rf"\b{RENAMED}(\d+)\b")


def _written(lowered: Lowered) -> set[int]:
    """The symbols (by number) some stage function writes into its text."""
    return {int(k) for a in lowered.addressed if a.module
            for k in _RENAMED_TOKEN.findall(a.module)}  # fmt: skip


def refused(symbolic: Function) -> dict:
    """Why templates were refused for ``symbolic``, by options (for tests and reports)."""
    return dict(_REFUSED.get(symbolic, {}))


def at(template: Lowered, binding: dict[str, int]) -> Lowered:
    """``template`` with the sizes of ``binding``: its types, arenas and program slots.

    >>> from nbyoc.ir.symbols import size
    >>> n = size("n")
    >>> lowered = at(Lowered("", "k", [TensorType((n, 2))], [], [], [("float32", 4 * n)]), {"n": 3})
    >>> lowered.inputs, lowered.scratch
    ([Tensor[(3, 2), float32]], [('float32', 12)])
    """
    return Instantiate(template)(binding)


class Instantiate:
    """A template's lowering made for one binding: every size in it (its inputs' and
    outputs' shapes, its arenas' lengths, its program's slots) computed by one
    compiled function of the symbols (``symbols.size_function``)."""

    def __init__(self, template: Lowered):
        self.template = template
        types = [*template.inputs, *template.outputs]
        sizes = [d for t in types for d in t.shape]
        sizes += [n for _, n in template.scratch]
        sizes += [size for _, _, size in template.program_sizes]
        self.symbols = sorted(set().union(*(s.symbols for s in sizes if isinstance(s, SizeExpr))))
        self.sizes = size_function(sizes, self.symbols)

    def __call__(self, binding: dict[str, int]) -> Lowered:
        template = self.template
        values = iter(self.sizes(*[binding[name] for name in self.symbols]))
        types = [TensorType(tuple(next(values) for _ in t.shape), t.dtype)
                 for t in [*template.inputs, *template.outputs]]  # fmt: skip
        scratch = [(dtype, next(values)) for dtype, _ in template.scratch]
        program = template.program
        if program is not None and template.program_sizes:
            arrays = [a.copy() if k != 1 else a for k, a in enumerate(program)]
            for (which, slot, _), value in zip(template.program_sizes, values):
                arrays[which][slot] = value
            program = tuple(arrays)
        n_in = len(template.inputs)
        return replace(template, inputs=types[:n_in], outputs=types[n_in:], scratch=scratch,
                       program=program, program_sizes=())  # fmt: skip
