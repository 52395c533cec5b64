"""The csource runtime: C from the csource codegen, built by the system C
compiler and called through cffi with DLTensors.

``get_function(symbol)`` returns a destination-passing callable. Before any
native code runs, every argument is checked in Python (an exact ndarray, or a
real array under a subclass; count, dtype, shape; inputs that are strided or
misaligned are copied; outputs must be contiguous and writeable, and a
misaligned one is written through an aligned temporary) and
again by the C entry point (device, ndim, dtype, shape, layout, alignment, and
outputs overlapping other arguments). The DLTensor
structs are built once per thread; a call only fills in the data pointers.

The saved form is the external function's JSON and the codegen options; loading
regenerates the C source from it and compiles it (or finds it in the cache):
nothing stored in the file is ever executed.
"""

from __future__ import annotations

import threading

import numpy as np

from ...errors import ArgumentError, ExecutionError, LoadError, NbyocError
from ...ir.nodes import Function
from ...runtime.arguments import (
    ArgumentSpec,
    aligned_destinations,
    check_destinations,
    readable_inputs,
)
from ...runtime.cc import build_shared_library
from ...runtime.module import Module, load_function, register_loader, save_function
from ...runtime.threads import quiet_openmp
from .emit import Subgraph, emit_c
from .rules import DLPACK_DTYPES

TYPE_KEY = "csource"
SAVE_VERSION = 1
#: The entry point's code for an argument whose data is not aligned to its element size
#: (``codegen.csource.entry``): the careful path copies such an input, and has such an
#: output written through an aligned temporary.
MISALIGNED = 5

_STRUCTS = """
typedef struct { int32_t device_type; int32_t device_id; } DLDevice;
typedef struct { uint8_t code; uint8_t bits; uint16_t lanes; } DLDataType;
typedef struct {
  void* data; DLDevice device; int32_t ndim; DLDataType dtype;
  int64_t* shape; int64_t* strides; uint64_t byte_offset;
} DLTensor;
"""


@register_loader(TYPE_KEY)
class CSourceModule(Module):
    """One external function compiled from C. ``fused`` selects the one-loop form,
    ``native`` code for this machine's CPU (``-march=native``)."""

    type_key = TYPE_KEY

    def __init__(self, func: Function, fused: bool = False, native: bool = False):
        import cffi  # only when the csource backend is used

        for name, value in (("fused", fused), ("native", native)):
            if not isinstance(value, bool):
                raise NbyocError(f"csource option {name} must be True or False, got {value!r}")
        graph = Subgraph(func)
        self.func, self.fused, self.native, self.symbol = func, fused, native, graph.symbol
        self.source = emit_c(func, fused=fused)
        self.library_path = build_shared_library(self.source, self.symbol, native=native)
        self._ffi = cffi.FFI()
        self._ffi.cdef(
            _STRUCTS + f"int {self.symbol}(DLTensor**, int32_t);\n"
            f"const char* {self.symbol}_last_error(void);"
        )
        # If this loads libgomp, its idle threads wait as threads.wait_environment says.
        # RTLD_NODELETE: unloading the library (when this module is collected, or at
        # exit) must not unload the OpenMP runtime under its worker threads (with
        # OMP_WAIT_POLICY=active they spin in its code, and the process crashed at exit).
        flags = self._ffi.RTLD_NOW | self._ffi.RTLD_NODELETE
        with quiet_openmp():
            self._lib = self._ffi.dlopen(str(self.library_path), flags)
        self._entry = getattr(self._lib, self.symbol)
        self._last_error = getattr(self._lib, f"{self.symbol}_last_error")
        arguments = graph.arguments()
        self._n_inputs = len(func.params)
        self._types = [t for _, t, _ in arguments]
        self._writable = [out for _, _, out in arguments]
        self._inputs = ArgumentSpec.of(
            [(n, t) for n, t, o in arguments if not o], f"{self.symbol} inputs"
        )
        self._outputs = ArgumentSpec.of(
            [(n, t) for n, t, o in arguments if o], f"{self.symbol} outputs"
        )
        self._signature = ArgumentSpec.of([(n, t) for n, t, _ in arguments], self.symbol)
        # Per-thread DLTensors, by thread id (cheaper to look up than threading.local).
        self._per_thread: dict[int, tuple] = {}
        self._keep_alive: list = []

    # -- calling ---------------------------------------------------------------

    def _thread_tensors(self):
        """This thread's DLTensors, shapes and dtypes filled in once: the pointer array,
        and per argument (tensor, dtype, shape, is_output)."""
        state = self._per_thread.get(threading.get_ident())
        if state is None:
            ffi = self._ffi
            n = len(self._types)
            tensors = ffi.new("DLTensor[]", n)
            pointers = ffi.new("DLTensor*[]", n)
            shapes = [ffi.new("int64_t[]", list(t.shape) or [0]) for t in self._types]
            for i, t in enumerate(self._types):
                tensors[i].device.device_type = 1  # kDLCPU
                tensors[i].ndim = len(t.shape)
                tensors[i].dtype.code, tensors[i].dtype.bits = DLPACK_DTYPES[t.dtype]
                tensors[i].dtype.lanes = 1
                tensors[i].shape = shapes[i]
                pointers[i] = tensors + i
            self._keep_alive.append((tensors, shapes))  # the cdata objects own the memory
            rows = [
                (tensors[i], np.dtype(t.dtype), t.shape, writable)
                for i, (t, writable) in enumerate(zip(self._types, self._writable))
            ]
            state = (pointers, rows)
            self._per_thread[threading.get_ident()] = state
        return state

    def get_function(self, symbol: str):
        if symbol != self.symbol:
            raise NbyocError(f"this csource module provides {self.symbol!r}, not {symbol!r}")
        n_args = len(self._types)
        entry = self._entry
        from_buffer = self._ffi.from_buffer
        per_thread, get_ident = self._per_thread, threading.get_ident
        careful, ndarray = self._run_carefully, np.ndarray

        def run(*arrays, **named):
            if named:
                raise self._signature.keywords_refused(named)
            pointers, rows = per_thread.get(get_ident()) or self._thread_tensors()
            try:
                if len(arrays) != n_args:
                    raise TypeError
                # The fast path, for exact ndarrays only: any other object's .shape and
                # .dtype are whatever it says (a bytearray subclass can claim a megabyte).
                # from_buffer refuses strided or (for outputs) read-only buffers; the C
                # entry point refuses misaligned ones (MISALIGNED, below).
                for (slot, dtype, shape, writable), a in zip(rows, arrays):
                    if (
                        type(a) is not ndarray
                        or a.shape != shape
                        or (a.dtype is not dtype and a.dtype != dtype)
                    ):
                        raise TypeError
                    slot.data = from_buffer(a, require_writable=writable)
            except (TypeError, ValueError, BufferError, AttributeError):
                return careful(arrays, pointers, rows)
            rc = entry(pointers, n_args)
            if rc == MISALIGNED:
                return careful(arrays, pointers, rows)
            if rc:
                self._raise(rc)

        run.__name__ = symbol
        return run

    def _run_carefully(self, arrays, pointers, rows) -> None:
        """Check everything with clear errors (only real arrays get through), copy inputs
        that are strided or misaligned, and run."""
        inputs = self._inputs.check(arrays[: self._n_inputs])
        outputs = self._outputs.check(arrays[self._n_inputs :])
        check_destinations(self._outputs.where, outputs, inputs)
        written, copies = aligned_destinations(outputs)
        arrays = [*readable_inputs(inputs), *written]  # (kept alive until the call returns)
        from_buffer = self._ffi.from_buffer
        for (slot, _, _, writable), a in zip(rows, arrays):
            slot.data = from_buffer(a, require_writable=writable)
        rc = self._entry(pointers, len(arrays))
        if rc:
            self._raise(rc)
        for out, result in copies:
            np.copyto(out, result)

    def _raise(self, rc: int):
        message = self._ffi.string(self._last_error()).decode(errors="replace")
        if rc in (1, 2, MISALIGNED):
            raise ArgumentError(f"{self.symbol}: {message}")
        raise ExecutionError(f"{self.symbol} failed: {message or f'error code {rc}'}")

    # -- source, saving, loading ----------------------------------------------

    def get_source(self) -> str:
        return self.source

    def save_to_bytes(self) -> bytes:
        options = {"fused": self.fused, "native": self.native}
        return save_function(TYPE_KEY, SAVE_VERSION, self.func, options)

    @staticmethod
    def export_modules(modules: dict, path):
        """Write ``modules`` (this backend's, by symbol) as one library at ``path``
        (``nbyoc.runtime.export``)."""
        from .export import export_csource

        return export_csource(modules, path)

    @classmethod
    def load_from_bytes(cls, data: bytes) -> CSourceModule:
        func, options = load_function(TYPE_KEY, SAVE_VERSION, data)
        options.setdefault("native", False)  # saved before the option existed
        for name in ("fused", "native"):
            if not isinstance(options.get(name), bool):
                raise LoadError(f"saved csource module: option {name!r} must be true or false")
        return cls(func, fused=options["fused"], native=options["native"])
