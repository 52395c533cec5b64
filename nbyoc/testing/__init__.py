"""Tools to test a backend against the host: random graphs (``strategies``, with
hypothesis: ``pip install 'nbyoc[testing]'``) and input arrays (``inputs``); the
forward error bound a result must lie within is ``nbyoc.runtime.tolerance``.

>>> import nbyoc, nbyoc.testing
>>> x = nbyoc.var("x", (2,))
>>> nbyoc.testing.random_inputs(nbyoc.function([x], x * 2.0))[0].shape
(2,)
"""

from .inputs import assert_same_results, random_inputs

__all__ = ["assert_same_results", "random_inputs"]
