"""T.ldg*/T.stg*/T.lds*/T.sts* in CUDA: 16-byte word loads become one vector access of
the elements (ld.global.v4 for an aligned address); nvcc compiles them and the
interpreter, which faults on a misaligned vector, agrees with numpy."""

from __future__ import annotations

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel
from tilelang.cuda import toolchain

SM90 = {"kind": "cuda", "arch": "sm_90"}


def staged_copy(n: int = 256):
    """Global -> shared in 128-bit words, shared -> global in 64-bit words, and the first
    half of a third tensor with predicated 32-bit words."""
    @T.prim_func
    def main(X: T.Tensor((n,), T.float16), Y: T.Tensor((n,), T.float16), Z: T.Tensor((n // 2,), T.float32)):
        with T.Kernel(1, threads=n // 8) as _:
            t = T.get_thread_binding()
            S = T.alloc_shared((n,), T.float16)
            T.sts128(S[t * 8 : t * 8 + 8], T.ldg128(X[t * 8 : t * 8 + 8]))
            T.stg64(Y[t * 8 : t * 8 + 4], T.lds64(S[t * 8 : t * 8 + 4]))
            T.stg64(Y[t * 8 + 4 : t * 8 + 8], T.lds64(S[t * 8 + 4 : t * 8 + 8]))
            for k in T.serial(4):
                T.stg32(Z[t * 4 + k], T.ldg32(X[t * 8 + 2 * k : t * 8 + 2 * k + 2]), pred=t < n // 16)

    return main


def test_word_accesses_compile_to_vectors_and_move_bits_unchanged():
    artifact = tilelang.lower(staged_copy(), target=SM90)
    source = artifact.device_source
    assert "uint4 v_ = *(uint4*)(X_ptr + (((int)threadIdx.x) * 8));" in source  # one 16-byte load
    assert "*(uint4*)(S_ptr + (((int)threadIdx.x) * 8)) =" in source  # one 16-byte store
    assert source.count("*(half4*)(Y_ptr") == 2  # two 8-byte stores
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "words")[:4] == b"\x7fELF"
    x = np.random.default_rng(2).standard_normal(256).astype(np.float16)
    y, z = np.zeros(256, np.float16), np.zeros(128, np.float32)
    lowered_kernel(artifact.device_mod)(x, y, z)
    np.testing.assert_array_equal(y, x)
    expected = np.zeros(128, np.float32)
    expected[:64] = x[:128].view(np.float32)
    np.testing.assert_array_equal(z.view(np.uint32), expected.view(np.uint32))


@pytest.mark.gpu
def test_word_accesses_on_the_gpu():
    torch = pytest.importorskip("torch")
    x = torch.randn(256, dtype=torch.float16, device="cuda")
    y, z = torch.zeros_like(x), torch.zeros(128, dtype=torch.float32, device="cuda")
    tilelang.compile(staged_copy(), target="cuda")(x, y, z)
    torch.testing.assert_close(y, x, rtol=0, atol=0)
    assert torch.equal(z[:64].view(torch.int32), x[:128].view(torch.int32))
    assert torch.equal(z[64:], torch.zeros(64, device="cuda"))
