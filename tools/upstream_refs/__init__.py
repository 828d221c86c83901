"""Torch references and seeded inputs for the cpu and emulate modes of
tools/upstream_examples.py: what each upstream example's kernel should compute, written from
the kernel's definition (small sizes, float64 where the kernel accumulates in float32).

One module per family of examples (common, gemm, sparse, norm, misc, linear_attention,
attention); the recipe tables (tools/upstream_recipes/) import from them.
"""
