"""Backend code generators and their registry.

What a backend supports is declared with the passes (``nbyoc.transform.support``);
a codegen turns one external ``ir.Function`` into a ``nbyoc.runtime.Module``;
``build`` runs the right codegen for every external function of a module.
"""

from .build import build
from .registry import HOST, register_codegen, register_op_support, registered_backends, supports

__all__ = [
    "HOST",
    "build",
    "register_codegen",
    "register_op_support",
    "registered_backends",
    "supports",
]
