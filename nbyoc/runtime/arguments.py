"""Checking call arguments against parameter types, before anything runs on them.

nbyoc never casts or reshapes silently: an argument must be a NumPy array of
exactly the parameter's shape and dtype. Everything that compiled code will
read is checked here first.

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
            if a.shape != shape:
                raise ShapeMismatchError(
                    f"{self._which(i)} should be {self.types[i]!r}, got shape {a.shape} {a.dtype}"
                )
        return arrays

    def _which(self, i: int) -> str:
        return f"{self.where}: argument {i} ({self.names[i]})"

    def _as_array(self, i: int, value) -> np.ndarray:
        if isinstance(value, (np.ndarray, np.generic)):  # subclasses and NumPy scalars
            return np.asarray(value)
        raise ArgumentError(
            f"{self._which(i)} should be a numpy.ndarray of {self.types[i]!r}, "
            f"got {type(value).__name__}; "
            f"wrap it with np.asarray(..., dtype=np.{self.dtypes[i].name})"
        )
