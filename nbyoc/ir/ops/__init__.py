"""The built-in ops and their builder functions. Importing this package registers the
ops; each module holds the type rules and NumPy references of one family.

Every registered op has a builder here, named after it: the one its family module
spells out (with its own signature and example), else one made from the op's row
(``nbyoc.ir.builder.op_builder``). So a new row is a new builder, with no other edit.

>>> from nbyoc.ir import ops
>>> ops.softmax.__doc__.splitlines()[0], ops.FAMILY_OF["less"]
('softmax(x, axis=-1)', 'compare')
"""

import importlib

from ..builder import op_builder
from ..op import list_ops

#: The families, in the order their modules register their ops. A module imported by
#: an earlier one registers its ops while that one imports (scan imports nn), so it
#: comes before it: the check below keeps every family's ops under its own name.
FAMILY_NAMES = (
    "elementwise", "compare", "reduce", "nn", "scan", "sort", "tensor", "linalg", "index",
    "scatter", "conv", "recurrent", "control", "composite",
)  # fmt: skip
#: op name -> the family module that registered it.
FAMILY_OF: dict[str, str] = {}
_FAMILIES = []
for _family in FAMILY_NAMES:
    _before = set(list_ops())
    _FAMILIES.append(importlib.import_module(f"{__name__}.{_family}"))
    FAMILY_OF.update({name: _family for name in list_ops() if name not in _before})
assert set(FAMILY_OF.values()) == set(FAMILY_NAMES), "internal: a family module imported early"


def _builder(name: str):
    for family in _FAMILIES:
        explicit = getattr(family, name, None)
        if callable(explicit) and getattr(explicit, "__module__", None) == family.__name__:
            return explicit
    return op_builder(name)


#: op name -> builder function, for every op registered by the families above.
BUILDERS = {name: _builder(name) for name in list_ops()}
globals().update(BUILDERS)
__all__ = sorted(BUILDERS)
