"""The nbyoc error hierarchy.

Every error nbyoc raises on purpose derives from :class:`NbyocError`, so
``except nbyoc.NbyocError`` catches all of them. Each also derives from the
built-in exception a Python user would expect (``TypeError`` for a type error,
``ValueError`` for malformed text, ...), so generic handlers keep working.

Messages name the node, argument or line at fault and say how to fix it.

>>> import nbyoc
>>> issubclass(nbyoc.errors.ShapeMismatchError, nbyoc.errors.ArgumentError)
True
"""

from __future__ import annotations

import reprlib


class _Short(reprlib.Repr):
    """Quotes a value read from input, which may be huge (a 60 MB token, an integer of
    5,000 digits, which ``repr`` refuses to write), in at most a few hundred characters."""

    def __init__(self):
        super().__init__()
        self.maxstring, self.maxlong, self.maxother = 80, 60, 200
        self.maxlist = self.maxtuple = self.maxdict = self.maxset = 10
        self.maxlevel = 4

    def repr_int(self, x, level):
        if x.bit_length() > 200:
            return f"<an integer of about {int(x.bit_length() * 0.30103) + 1} digits>"
        return super().repr_int(x, level)


_SHORT = _Short()


def shown(value: object) -> str:
    """``repr(value)``, cut short if it is long: how a message quotes input.

    >>> shown("x" * 1000), len(shown("x" * 1000))
    ("'xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx...xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx'", 80)
    >>> shown(10**5000)
    '<an integer of about 5001 digits>'
    >>> shown([1, 2]), shown("float32")
    ('[1, 2]', "'float32'")
    """
    return _SHORT.repr(value)


class NbyocError(Exception):
    """Base class of every error nbyoc raises on purpose."""


# --- building and checking IR -------------------------------------------------


class IRError(NbyocError):
    """The IR being built or checked is not valid."""


class NbyocTypeError(IRError, TypeError):
    """An op was applied to operands (or attributes) its type rule rejects."""


class UnsupportedDTypeError(NbyocTypeError):
    """A dtype outside the supported set (float32, float64, int32, int64)."""


class UndecidableSizeError(NbyocTypeError):
    """A step needs a fact about a symbolic size (``n > 3``, its value) that only the
    call's concrete shapes can tell; fix the dimension to compile it."""


class WellFormednessError(IRError):
    """``verify`` found a structural problem (free variable, type drift, ...)."""


# --- text and serialised forms ------------------------------------------------


class ParseError(NbyocError, ValueError):
    """Text could not be parsed. Carries ``line`` and ``column`` (1-based)."""

    def __init__(self, message: str, line: int | None = None, column: int | None = None):
        self.line = line
        self.column = column
        if line is None:
            where = ""
        elif column is None:
            where = f"line {line}: "
        else:
            where = f"line {line}, column {column}: "
        super().__init__(where + message)


class LoadError(NbyocError, ValueError):
    """A serialised graph or module is malformed, truncated or of a newer format."""


class LimitError(NbyocError, ValueError):
    """An input asks for more than a limit of ``nbyoc.limits`` allows (a folded constant,
    an archive member, a nesting depth). ``limit`` names the limit, ``value`` is what the
    input asked for and ``maximum`` the limit's value; the message says how to raise it.
    A ``ValueError``, as Python's own limit on integer digits is."""

    def __init__(self, message: str, limit: str = "", value: int = 0, maximum: int = 0):
        super().__init__(message)
        self.limit, self.value, self.maximum = limit, value, maximum

    def within(self, where: str) -> LimitError:
        """The same refusal, its message prefixed by ``where`` (the node or file at fault)."""
        return LimitError(f"{where}: {self}", self.limit, self.value, self.maximum)


# --- registries ---------------------------------------------------------------


class RegistryError(NbyocError, KeyError):
    """A registry lookup or registration failed."""

    def __str__(self) -> str:  # KeyError would repr() the message; keep it readable
        return str(self.args[0]) if self.args else ""


class DuplicateRegistrationError(RegistryError):
    """A name was registered twice."""


class UnknownOpError(RegistryError):
    """No op of that name is registered."""


class UnknownBackendError(RegistryError):
    """No backend of that name is registered; the message lists the known ones."""


class PatternError(NbyocError, ValueError):
    """A composite pattern or a backend's pattern table is malformed (``nbyoc.transform.
    patterns``, ``nbyoc.register_patterns``); the message says which part and how to
    write it."""


# --- compiling and running ----------------------------------------------------


class CompileError(NbyocError):
    """A backend failed to compile a function."""


class CodegenError(CompileError):
    """One backend's codegen failed on one external function (it raised, returned no
    ``Module``, or a module that does not provide the function): unless ``strict=True``,
    ``nbyoc.compile`` moves that region to the next backend or the host instead."""


class VerificationError(NbyocError):
    """An external function's results lie beyond their tolerance of the host's
    (``nbyoc.compile(..., verify=True)``); ``report`` is the ``VerificationReport``,
    naming each failing region and, where bisection found it, the first op that diverges."""

    def __init__(self, message: str, report: object = None) -> None:
        super().__init__(message)
        self.report = report


class ArgumentError(NbyocError, TypeError):
    """A compiled function was called with arguments that do not match its parameters."""


class ArgumentCountError(ArgumentError):
    """Wrong number of arguments."""


class ShapeMismatchError(ArgumentError, ValueError):
    """An argument has the wrong shape."""


class DTypeMismatchError(ArgumentError):
    """An argument has the wrong dtype (nbyoc never casts silently)."""


class ValueOutOfRangeError(NbyocError, OverflowError):
    """A value cannot be represented in the dtype it must take (a Python int argument
    of ``nbyoc.jit`` that does not fit the array it meets), as NumPy 2 refuses it."""


class EmptyReductionError(NbyocError, ValueError):
    """A reduction without an identity (max, argmax...) of a selection the data left empty
    (``x[mask].max()`` with no True in ``mask``): NumPy's ValueError, and its message."""


class ExecutionError(NbyocError, RuntimeError):
    """An operation failed while running; the message names the node."""


class AllocationError(NbyocError, MemoryError):
    """A result array could not be allocated; the message names its shape, dtype and size
    (``except MemoryError`` still catches it)."""


class ConfigurationError(NbyocError, ValueError):
    """An environment variable (or setting) has a value nbyoc cannot use; the message
    names it and says what it takes."""


class CacheSecurityError(NbyocError, PermissionError):
    """The cache directory, or a file in it, could be written by someone else; the message
    says which path, why, and how to fix it (``chmod``/``chown``, or another
    ``NBYOC_CACHE_DIR``)."""


# --- frontends and optional dependencies ----------------------------------------


class MissingDependencyError(NbyocError, ImportError):
    """A feature needs an optional package that is not installed; the message says
    what to install (``pip install 'nbyoc[onnx]'``)."""


class ModelImportError(NbyocError, ValueError):
    """A model cannot be imported: unreadable, unsupported ops (all listed at once),
    dynamic dims without ``shapes=``, or a feature refused on purpose (named)."""


class NeedsConstantError(ModelImportError):
    """An op needs the value of an input that depends on graph inputs (a reshape's
    shape, a slice's bounds, ...); ``inputs`` names those graph inputs, which
    ``constants=`` can fix."""

    def __init__(self, message: str, inputs: tuple[str, ...]):
        super().__init__(message)
        self.inputs = inputs


class PerShapeWarning(UserWarning):
    """A function with symbolic sizes compiled for a backend that builds each binding of
    them for its shapes (csource, examplejson): every new size compiles there."""


class FallbackWarning(UserWarning):
    """A region moved off the backend it was given to (its codegen raised, or its module
    failed its first call) to the next backend of the compile or to the host; the message
    names the region, the backend and the reason, and ``fn.fallbacks`` records it.
    ``nbyoc.compile(..., strict=True)`` raises instead."""
