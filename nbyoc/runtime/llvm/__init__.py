"""The llvm backend's run-time library: what generated kernels import (vector math,
register tiles, float16 emulation, streaming stores, prefetch, stage addresses), and the
kernel cache that compiles and loads them (``kernels``, ``numba_cache``, the compile
workers). Imports no codegen: the lowering (``nbyoc.codegen.llvm``) writes code against
this package, never the reverse."""
