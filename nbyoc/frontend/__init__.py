"""Frontends: ways for models and programs to become nbyoc graphs.

- ``nbyoc.frontend.numpy``: plain NumPy functions, traced per signature of their
  arguments and compiled (``nbyoc.jit``).
- ``nbyoc.frontend.onnx``: ONNX models (``nbyoc.from_onnx``), and an ONNX backend
  for ONNX's own test runner. Needs the ``onnx`` package (``pip install 'nbyoc[onnx]'``).
"""
