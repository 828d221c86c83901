"""fmha: flash-attention forward in fp16 on [batch, seq, heads, dim] tensors, head dims 64 and
128, causal or not, against F.scaled_dot_product_attention. The kernels and the non-causal
tile configs are benchmarks/flash_attention.py's (tilelang.testing.kernels.flash_attention;
causal: the key loop cut at the diagonal, the mask as the first GEMM's starting value, as
upstream's causal examples write it).

tilelang-cuda moves that mask after the GEMM, onto the key blocks that cross the diagonal
(transform/mask_after_gemm.py), where shared memory holds one block per SM; "/mask-after"
forces it on the other configs, "/mask-as-written" keeps the kernel as written."""

from __future__ import annotations

from .common import Case, KernelSpec, Variant, load_benchmark, sm_count

SHAPES = ((8, 16, 4096, 64), (8, 16, 4096, 128))  # batch, heads, seq_len, dim
SMALL_SHAPE = (1, 2, 128, 64)


def _variants(shape: tuple, causal: bool, quick: bool) -> list[Variant]:
    from tilelang.testing.kernels import flash_attention

    benchmark = load_benchmark("flash_attention")
    configs = benchmark.CAUSAL_CONFIGS if causal else benchmark.CONFIGS
    configs = configs[:2] if quick else configs
    # the labels benchmarks/flash_attention.py prints: each option named (/mma, /overlap, /pp-first)
    variants = [Variant(benchmark.label(c, options),
                        lambda c=c, o=options: [KernelSpec(flash_attention(*shape, *c, causal=causal), o or None)])
                for c, options in configs]
    if not causal and not quick:  # one block per SM walking the tiles (flash_attention.py's PERSISTENT)
        from tilelang.testing.kernels import flash_attention_persistent

        def persistent(c: tuple, o: dict) -> list[KernelSpec]:
            return [KernelSpec(flash_attention_persistent(*shape, *c, sm_num=sm_count()), o or None)]

        variants += [Variant("persistent/" + benchmark.label(c, options), lambda c=c, o=options: persistent(c, o))
                     for c, options in benchmark.PERSISTENT]
    return variants


def _inputs(batch: int, heads: int, seq_len: int, dim: int, device: str) -> dict:
    import torch

    q, k, v = (torch.randn(batch, seq_len, heads, dim, device=device, dtype=torch.float16) for _ in range(3))
    return {"q": q, "k": k, "v": v, "o": torch.empty_like(q)}


def _launch(kernels: list, t: dict):
    kernels[0](t["q"], t["k"], t["v"], t["o"])
    return t["o"]


def _reference(t: dict, causal: bool):
    import torch.nn.functional as F

    # SDPA wants [batch, heads, seq, dim]: views of the same tensors, as benchmarks/flash_attention.py
    q, k, v = (x.transpose(1, 2) for x in (t["q"], t["k"], t["v"]))
    return F.scaled_dot_product_attention(q, k, v, is_causal=causal).transpose(1, 2)


def make_case(shape: tuple, causal: bool, variants: list[Variant], device: str = "cuda") -> Case:
    batch, heads, seq_len, dim = shape
    flop = 4.0 * batch * heads * seq_len * seq_len * dim * (0.5 if causal else 1.0)
    return Case("fmha", f"d{dim}" + (" causal" if causal else ""),
                {"batch": batch, "heads": heads, "seq": seq_len, "dim": dim, "causal": causal}, "TFLOP/s", flop,
                variants, lambda: _inputs(*shape, device), _launch, lambda t: _reference(t, causal),
                atol=2e-3, rtol=1e-2)  # outputs are averages of ~seq values: mostly well below 1


def cases(quick: bool) -> list[Case]:
    # quick: head dim 64 plain, head dim 128 causal
    pairs = [(s, c) for s in SHAPES for c in ((s[3] == 128,) if quick else (False, True))]
    return [make_case(shape, causal, _variants(shape, causal, quick)) for shape, causal in pairs]


def small_cases() -> list[Case]:
    return [make_case(SMALL_SHAPE, causal, _variants(SMALL_SHAPE, causal, quick=True)[:1], device="cpu")
            for causal in (False, True)]
