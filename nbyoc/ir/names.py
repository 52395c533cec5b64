"""The grammar of every name the IR carries, checked once, when a node is built.

Function names and global symbols become C and Python identifiers in generated
code; backend names appear in printed modules; parameter names in exported
headers. Whatever builds IR (the builder, the text parser, the JSON and
ExampleJSON readers, an archive's loader) goes through the node constructors,
which check names here, so no codegen ever meets a name it must escape, and
nothing read from a file can reach generated source unchecked.

>>> check_symbol("csource_0")
'csource_0'
>>> check_symbol("int")
Traceback (most recent call last):
    ...
nbyoc.errors.IRError: symbol 'int' is a C or Python keyword or a type ...
>>> check_var_name("input.1"), check_backend_name("my-backend.v2")
('input.1', 'my-backend.v2')
"""

from __future__ import annotations

import keyword
import re

from ..errors import IRError, shown

#: ASCII identifiers: what C and Python both accept as a name.
IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
#: Parameter names are hints (printed, shown in errors and headers): word characters
#: and ``. : / -``, as model formats spell them ("input.1", "/layer1/Conv_output_0").
VAR_NAME = re.compile(r"[\w.:/\-]{1,256}\Z")
#: Backend names: shown in printed modules and used as keys, never as code.
BACKEND_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,63}\Z")
#: Global symbols are at most this long (C guarantees 63 significant characters for
#: external names; linkers take more, but nothing needs more).
MAX_SYMBOL = 128

# fmt: off
_C_KEYWORDS = frozenset({
    "auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else",
    "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register",
    "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef",
    "union", "unsigned", "void", "volatile", "while", "_Alignas", "_Alignof", "_Atomic", "_Bool",
    "_Complex", "_Generic", "_Imaginary", "_Noreturn", "_Static_assert", "_Thread_local", "asm",
    "typeof", "bool", "true", "false", "alignas", "alignof", "static_assert", "thread_local",
    "nullptr", "constexpr",
})
# fmt: on
#: Prefixes the generated code keeps for its own helpers, and C's reserved ones.
_RESERVED_PREFIXES = ("__", "nbyoc_", "NBYOC_", "CSOURCE_")
_RESERVED_C_PREFIX = re.compile(r"_[A-Z]")
#: Types the generated C defines.
_RESERVED_NAMES = frozenset({"DLTensor", "DLDevice", "DLDataType"})


def check_identifier(name, what: str = "name") -> str:
    """``name`` if it is an ASCII identifier of at most 128 characters (function
    names in a module: an external function's name is also its global symbol)."""
    if not isinstance(name, str) or not IDENTIFIER.match(name) or len(name) > MAX_SYMBOL:
        raise IRError(
            f"{what} {shown(name)} is not an identifier (ASCII letters, digits and '_', not "
            f"starting with a digit, at most {MAX_SYMBOL} characters)"
        )
    return name


def check_symbol(name, what: str = "symbol") -> str:
    """``name`` if it can name a function in generated C and Python: an ASCII
    identifier of at most 128 characters that is no keyword of either language
    and does not take a name or prefix the generated code keeps (``__``, ``_``
    and a capital, ``nbyoc_``, ``NBYOC_``, ``CSOURCE_``, the DLPack types)."""
    check_identifier(name, what)
    if name in _C_KEYWORDS or keyword.iskeyword(name) or name in _RESERVED_NAMES:
        raise IRError(
            f"{what} {shown(name)} is a C or Python keyword or a type the generated "
            f"code defines; choose another name"
        )
    if name.startswith(_RESERVED_PREFIXES) or _RESERVED_C_PREFIX.match(name):
        raise IRError(
            f"{what} {shown(name)} takes a prefix reserved for generated code "
            f"({', '.join(_RESERVED_PREFIXES)} or '_' and a capital); choose another name"
        )
    return name


def check_var_name(name) -> str:
    """``name`` if it is a valid parameter name: 1 to 256 letters, digits, ``_``,
    ``.``, ``:``, ``/`` or ``-``."""
    if not isinstance(name, str) or not VAR_NAME.match(name):
        raise IRError(
            f"a variable name is 1 to 256 letters, digits, '_', '.', ':', '/' or '-', "
            f"got {shown(name)}"
        )
    return name


def check_backend_name(name) -> str:
    """``name`` if it can name a backend: ASCII letters, digits, ``_``, ``.``, ``-``
    (not starting with ``.`` or ``-``), at most 64 characters."""
    if not isinstance(name, str) or not BACKEND_NAME.match(name):
        raise IRError(
            f"a backend name is 1 to 64 ASCII letters, digits, '_', '.' or '-' (starting "
            f"with a letter, digit or '_'), got {shown(name)}"
        )
    return name


def symbol_prefix(compiler: str) -> str:
    """``compiler`` made into a C identifier, to prefix global symbols ``<prefix>_<n>``
    (prefixed with ``b_`` when it would start as generated code's names do).

    >>> symbol_prefix("my-backend.v2"), symbol_prefix("3d"), symbol_prefix("nbyoc_x")
    ('my_backend_v2', '_3d', 'b_nbyoc_x')
    """
    name = "".join(c if c.isascii() and (c.isalnum() or c == "_") else "_" for c in compiler)
    name = name if not name[0].isdigit() else "_" + name
    try:
        check_symbol(f"{name}_0")
    except IRError:
        name = f"b_{name}"
    return name
