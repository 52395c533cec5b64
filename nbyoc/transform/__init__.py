"""Graph passes (annotate_target, merge_compiler_regions, partition_graph) live here.

Each pass is a pure function from IR to IR; ``nbyoc.ir.verify`` checks its output.
"""
