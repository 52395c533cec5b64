"""``Backend``: nbyoc as an ONNX backend (``onnx.backend.base.Backend``), so ONNX's own
test runner, and code written for ONNX backends, can run models through nbyoc.

``Backend.prepare(model, device="CPU", backend="llvm", **compile_options)`` returns a
rep whose ``run(inputs)`` returns a tuple of arrays. The rep imports the model with
its dynamic dimensions symbolic (``nbyoc.ir.symbols``) and compiles it once: every
size of those dimensions runs on that one executable. A model whose import needs the
sizes' values (shape arithmetic on them that does not fold) is imported and compiled
per input signature (each input's shape and dtype) instead. Inputs that an op needs
the value of (a reshape's target shape, pads, scales) are bound to their values at the
first run that meets them; the rep then keys its executables by those values too.

>>> import numpy as np
>>> from onnx import helper, TensorProto
>>> graph = helper.make_graph(
...     [helper.make_node("Reshape", ["x", "shape"], ["y"])], "g",
...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N"]),
...      helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
>>> rep = Backend.prepare(helper.make_model(graph), backend="host")
>>> rep.run([np.arange(6, dtype=np.float32), np.array([2, 3])])[0].shape
(2, 3)
>>> rep.bound
('shape',)
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper
from onnx.backend.base import Backend as OnnxBackend
from onnx.backend.base import BackendRep

from ...compiler import compile as nbyoc_compile
from ...errors import ArgumentCountError, ArgumentError, ModelImportError, NeedsConstantError
from .importer import import_model, load_model


class NbyocRep(BackendRep):
    """A prepared model: compiled per input signature, on first use."""

    def __init__(self, model: onnx.ModelProto, backend, compile_options: dict):
        self.model = model
        self.backend = backend
        self.options = compile_options
        initializers = {t.name for t in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in initializers]
        #: Graph inputs bound to their values (found when an op needed them).
        self.bound: tuple[str, ...] = ()
        #: The executables compiled per input signature (shapes and bound values).
        self.executables: dict[tuple, object] = {}
        #: The executables of the model with its dynamic dims symbolic, by bound values;
        #: None once its import has needed the sizes' values.
        self.symbolic: dict[tuple, object] | None = {}

    def run(self, inputs: Any, **kwargs: Any) -> tuple[np.ndarray, ...]:
        """The model's outputs for ``inputs`` (a list in graph-input order, a dict by
        name, or a single array), as a tuple of arrays."""
        arrays = self._by_name(inputs)
        while True:
            key = self._key(arrays)
            executable = self.executables.get(key) or self._size_generic(arrays)
            if executable is not None:
                break
            try:
                func = import_model(
                    self.model,
                    shapes={n: a.shape for n, a in arrays.items() if n not in self.bound},
                    constants={n: arrays[n] for n in self.bound},
                )
            except NeedsConstantError as e:
                new = [n for n in e.inputs if n in arrays and n not in self.bound]
                if not new:
                    raise
                self.bound = (*self.bound, *new)
                continue
            executable = nbyoc_compile(func, backend=self.backend, **self.options)
            self.executables[key] = executable
        result = executable(*(arrays[n] for n in self.input_names if n not in self.bound))
        return result if isinstance(result, tuple) else (result,)

    def _size_generic(self, arrays: dict):
        """The executable of the model with its dynamic dims symbolic (compiled at the
        first run), if it takes these arrays; else None (then one per signature)."""
        if self.symbolic is None:
            return None
        values = self._key(arrays)[1]
        executable = self.symbolic.get(values)
        if executable is None:
            try:
                func = import_model(self.model, shapes={},
                                    constants={n: arrays[n] for n in self.bound})  # fmt: skip
            except NeedsConstantError as e:
                new = [n for n in e.inputs if n in arrays and n not in self.bound]
                if new:  # (an input an op needs the value of: bound, and tried again)
                    self.bound = (*self.bound, *new)
                    return self._size_generic(arrays)
                self.symbolic = None  # (the sizes' values are needed: per signature)
                return None
            except ModelImportError:  # (an input without a shape in the model)
                self.symbolic = None
                return None
            executable = nbyoc_compile(func, backend=self.backend, **self.options)
            self.symbolic[values] = executable
        shapes = [arrays[n].shape for n in self.input_names if n not in self.bound]
        try:
            executable.bind_sizes(shapes)
        except ArgumentError:
            return None  # (shapes that do not fit: the per-signature import says why)
        return executable

    def _by_name(self, inputs) -> dict[str, np.ndarray]:
        if isinstance(inputs, dict):
            items = inputs
        else:
            if isinstance(inputs, np.ndarray):
                inputs = [inputs]
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise ArgumentCountError(
                    f"the model takes {len(self.input_names)} input(s) {self.input_names}, "
                    f"got {len(inputs)}"
                )
            items = dict(zip(self.input_names, inputs))
        missing = [n for n in self.input_names if n not in items]
        if missing:
            raise ArgumentCountError(f"inputs {missing} are missing (the model takes "
                                     f"{self.input_names})")  # fmt: skip
        return {n: _array(items[n]) for n in self.input_names}

    def _key(self, arrays: dict) -> tuple:
        signature = tuple((a.shape, a.dtype.str) for a in arrays.values())
        values = tuple((n, arrays[n].dtype.str, arrays[n].tobytes()) for n in self.bound)
        return signature, values


def _array(value) -> np.ndarray:
    if isinstance(value, onnx.TensorProto):
        return numpy_helper.to_array(value)
    return np.asarray(value)


class Backend(OnnxBackend):
    """nbyoc as an ONNX backend (CPU; any nbyoc backend list via ``backend=``)."""

    @classmethod
    def prepare(
        cls, model: str | bytes | onnx.ModelProto, device: str = "CPU",
        backend: str | Sequence[str] = "llvm", **compile_options: Any,
    ) -> NbyocRep:  # fmt: skip
        """A rep of ``model`` (a path, bytes or ModelProto) that runs on ``backend``."""
        if not cls.supports_device(device):
            raise ValueError(f"nbyoc runs on the CPU, not on {device!r}")
        return NbyocRep(load_model(model), backend, compile_options)

    @classmethod
    def run_model(
        cls, model: str | bytes | onnx.ModelProto, inputs: Any, device: str = "CPU",
        **kwargs: Any,
    ) -> tuple[np.ndarray, ...]:  # fmt: skip
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")
