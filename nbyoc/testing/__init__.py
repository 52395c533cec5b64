"""A test kit for backend authors: ``check_backend(name)`` runs every op a backend
claims, on every dtype it takes, in small generated graphs (and ONNX's node tests of
those ops, where onnx is installed) against the host, and returns a table of passes
and mismatches.

Its parts are public too: ``strategies`` (hypothesis strategies of random graphs and
of graphs around one op: ``pip install 'nbyoc[testing]'``), ``random_inputs``, and the
comparison with the host (``compare``) within the forward error bound of the
computation (``nbyoc.runtime.tolerance``).

>>> import nbyoc, nbyoc.testing
>>> report = nbyoc.testing.check_backend("csource", ops=["relu"], dtypes=["int32"],
...                                      examples=1, onnx=False)
>>> print(report)
check_backend('csource'): 1 op, 1 op/dtype pairs (graphs drawn by hypothesis)
1 cases run: 1 passed, 0 failed
op    dtype  graphs  onnx  passed  failed  worst  note
relu  int32       1     0       1       0
"""

from .check import check_backend
from .inputs import assert_same_results, random_inputs
from .report import BackendReport, Failure, OpRow

__all__ = [
    "BackendReport",
    "Failure",
    "OpRow",
    "assert_same_results",
    "check_backend",
    "random_inputs",
]
