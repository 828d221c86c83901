"""T.CUDASourceCodeKernel (a kernel written in CUDA C++) on a backend that does not compile
CUDA source: refused by name at the user's line. tilelang-cuda's tests check the CUDA
lowering."""

from __future__ import annotations

import pytest
import tilelang
import tilelang.language as T
from tilelang.errors import LanguageError

SOURCE = 'extern "C" __global__ void copy(float* A, float* B) { B[threadIdx.x] = A[threadIdx.x]; }\n'


def test_a_cuda_source_kernel_on_the_cpu_is_refused_at_its_line():
    @T.prim_func
    def main(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
        T.CUDASourceCodeKernel(1, threads=64, source_code_or_path=SOURCE, entry_name="copy")

    with pytest.raises(LanguageError, match=r"kernel 'main': T.CUDASourceCodeKernel is a kernel written in CUDA "
                                            r"C\+\+, which target backend 'cpu' does not compile; compile the "
                                            r"function for CUDA(.|\n)*test_source_kernel_refused.py:\d+"):
        tilelang.compile(main, target="cpu")
