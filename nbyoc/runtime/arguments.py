"""Checking call arguments against parameter types, before anything runs on them.

nbyoc never casts or reshapes silently: an argument must be a NumPy array of
exactly the parameter's shape and dtype. Everything that compiled code will
read is checked here first.

Call arguments are untrusted. Only an exact ``numpy.ndarray`` is believed about
its shape, dtype and flags (they are read from the array object itself, in C);
an object of any other type, a subclass of ``ndarray`` included, may answer
``.shape`` or ``.dtype`` with anything, so it is either refused or replaced by
``np.asarray(value)`` (for a subclass: a plain array over its real buffer) before
anything is compared. Compiled code reads inputs C-contiguous and aligned (others
are copied) and writes outputs that are C-contiguous, writeable, aligned and
overlap no other argument (a misaligned one through an aligned temporary; others
are refused).

>>> import numpy as np
>>> from nbyoc.ir.types import TensorType
>>> spec = ArgumentSpec.of([("a", TensorType((2, 2), "float32"))], "main")
>>> spec.check([np.zeros((2, 3), np.float32)])
Traceback (most recent call last):
    ...
nbyoc.errors.ShapeMismatchError: main: argument 0 (a) should be Tensor[(2, 2), float32], got ...
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..errors import ArgumentCountError, ArgumentError, DTypeMismatchError, ShapeMismatchError
from ..ir.types import TensorType


@dataclass(frozen=True)
class ArgumentSpec:
    """What a function accepts: names and types of its parameters."""

    where: str
    names: tuple[str, ...]
    types: tuple[TensorType, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[np.dtype, ...]

    @classmethod
    def of(cls, params: Sequence[tuple[str, TensorType]], where: str) -> ArgumentSpec:
        names = tuple(n for n, _ in params)
        types = tuple(t for _, t in params)
        return cls(where, names, types, tuple(t.shape for t in types),
                   tuple(np.dtype(t.dtype) for t in types))  # fmt: skip

    def signature(self) -> str:
        return ", ".join(f"{n}: {t!r}" for n, t in zip(self.names, self.types))

    def check(self, args: Sequence) -> Sequence[np.ndarray]:
        """Return ``args`` as arrays if they match, else raise an ``ArgumentError``."""
        if len(args) == len(self.types):
            # The common case, kept cheap: exact ndarrays of the right dtype and shape.
            for a, shape, dtype in zip(args, self.shapes, self.dtypes):
                if (
                    type(a) is not np.ndarray
                    or a.shape != shape
                    or (a.dtype is not dtype and a.dtype != dtype)
                ):
                    break
            else:
                return args
        return self._check_slowly(args)

    def _check_slowly(self, args: Sequence) -> list[np.ndarray]:
        if len(args) != len(self.types):
            raise ArgumentCountError(
                f"{self.where} takes {len(self.types)} argument(s) ({self.signature()}), "
                f"got {len(args)}"
            )
        arrays = list(args)
        for i, (a, shape, dtype) in enumerate(zip(args, self.shapes, self.dtypes)):
            if type(a) is not np.ndarray:
                arrays[i] = a = self._as_array(i, a)
            if a.dtype != dtype:
                raise DTypeMismatchError(
                    f"{self._which(i)} should be {self.types[i]!r}, got dtype {a.dtype}; "
                    f"convert it with .astype(np.{dtype.name}) (nbyoc never casts silently)"
                )
            if a.shape != shape and not _fits(a.shape, shape):
                raise ShapeMismatchError(
                    f"{self._which(i)} should be {self.types[i]!r}, got shape {a.shape} {a.dtype}"
                )
        return arrays

    def _which(self, i: int) -> str:
        return f"{self.where}: argument {i} ({self.names[i]})"

    def _as_array(self, i: int, value) -> np.ndarray:
        if isinstance(value, (np.ndarray, np.generic)):
            # A subclass may override .shape, .dtype or .flags; np.asarray reads its real
            # buffer (in C) into a plain ndarray, which is what gets checked and used.
            array = np.asarray(value)
            if type(array) is np.ndarray:
                return array
        raise ArgumentError(
            f"{self._which(i)} should be a numpy.ndarray of {self.types[i]!r}, "
            f"got {type(value).__name__}; "
            f"wrap it with np.asarray(..., dtype=np.{self.dtypes[i].name})"
        )

    def keywords_refused(self, named: dict) -> ArgumentError:
        """The error for a call that passed arguments by keyword (``named``)."""
        return ArgumentError(
            f"{self.where} takes its arguments by position, in this order: "
            f"({self.signature()}); got keyword argument(s) {', '.join(map(repr, named))}. "
            f"Call it as fn({', '.join(self.names)})"
        )


def _fits(actual: tuple[int, ...], shape: tuple) -> bool:
    """Same rank, and equal on every fixed dimension (symbolic ones are bound later)."""
    return len(actual) == len(shape) and all(
        d == e for d, e in zip(actual, shape) if e.__class__ is int
    )


def readable_inputs(arrays, writeable: bool = False) -> list[np.ndarray]:
    """Checked input arrays as compiled code reads them: C-contiguous and aligned, and
    writeable too if ``writeable`` (Numba's kernels take mutable arrays); any other is
    copied (an unaligned one, e.g. a float32 view at an odd offset of a byte buffer,
    included).

    >>> buffer = np.zeros(17, np.uint8)
    >>> odd = buffer[1:].view(np.float32)
    >>> odd.flags.aligned, readable_inputs([odd])[0].flags.aligned
    (False, True)
    """
    return [
        a
        if a.flags.c_contiguous and a.flags.aligned and (a.flags.writeable or not writeable)
        else np.array(a, order="C")
        for a in arrays
    ]


def check_destinations(where: str, outputs, inputs) -> None:
    """Refuse checked output arrays that compiled code could not write safely: not
    C-contiguous, read-only, or sharing memory with an input or another output
    (``where`` names the function in the message). A misaligned output is accepted:
    ``aligned_destinations`` gives the code an aligned one to write.

    >>> data = np.zeros(4, np.float32)
    >>> check_destinations("f outputs", [data], [data])
    Traceback (most recent call last):
        ...
    nbyoc.errors.ArgumentError: f outputs: out0 overlaps another argument; pass distinct arrays
    """
    for k, out in enumerate(outputs):
        flags = out.flags
        if not (flags.c_contiguous and flags.writeable):
            problem = "read-only" if flags.c_contiguous else "not C-contiguous"
            raise ArgumentError(
                f"{where}: out{k} must be C-contiguous and writeable, and it is {problem}; "
                f"pass an array made by np.empty({out.shape}, np.{out.dtype.name})"
            )
        for other in (*inputs, *outputs[:k]):
            if np.may_share_memory(out, other):
                raise ArgumentError(
                    f"{where}: out{k} overlaps another argument; pass distinct arrays"
                )


def aligned_destinations(outputs) -> tuple[list[np.ndarray], list[tuple]]:
    """Checked outputs as compiled code writes them, and the (caller's array, temporary)
    pairs to copy after the run: a misaligned output is written through an aligned
    temporary.

    >>> odd = np.zeros(17, np.uint8)[1:].view(np.float32)
    >>> outs, copies = aligned_destinations([odd])
    >>> outs[0].flags.aligned, len(copies)
    (True, 1)
    """
    outs, copies = list(outputs), []
    for k, out in enumerate(outputs):
        if not out.flags.aligned:
            outs[k] = np.empty_like(out, order="C")
            copies.append((out, outs[k]))
    return outs, copies
