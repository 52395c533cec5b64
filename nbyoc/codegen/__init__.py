"""Backend code generators (llvm, csource, examplejson) and their registry live here.

A codegen turns one external ``ir.Function`` into a ``nbyoc.runtime`` module.
"""
