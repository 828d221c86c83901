"""Branches that only some threads take, whose shared-memory accesses no two threads share
(core's transform/gpu/race_free.py): TVM's ThreadSync refused them ("Cannot insert syncs
inside condition"); they now compile with no barrier inside, and a branch where two
threads do share an element is still refused.

Upstream's forms: a bitonic sort's compare-and-swap step (DeepSeek-V3.2's sparse-attention
top-k, ``examples/dsa_sparse_finetune/indexer_topk_reducesum.py``) and issue 1026's
``if tx % 2 == 0: shared[tx ^ 1] = shared[tx]``. The sort runs in the lowered-IR emulator
here and on the GPU with ``-m gpu``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from lowered_instructions import lowered_kernel


def bitonic_sort(n: int = 256, threads: int = 128):
    """Sorts ``V`` (descending) in shared memory, carrying each value's index along in
    ``I``: log2(n) stages of compare-and-swap steps over pairs ``(i, i ^ 2^s)``, one
    barrier after each step."""
    stages = int(math.log2(n))

    @T.prim_func
    def main(V: T.Tensor((n,), "float32"), I: T.Tensor((n,), "int32")):
        with T.Kernel(1, threads=threads):
            vs = T.alloc_shared([n], "float32")
            ids = T.alloc_shared([n], "int32")
            T.copy(V, vs)
            for i in T.Parallel(n):
                ids[i] = i
            T.sync_threads()
            for i1 in T.serial(stages):
                for i2 in T.serial(i1 + 1):
                    for i in T.Parallel(n):
                        ascending = (i & (1 << (i1 + 1))) != 0
                        j = i ^ (1 << (i1 - i2))
                        if i < j and ((ascending and vs[i] > vs[j]) or (not ascending and vs[i] < vs[j])):
                            val = vs[i]
                            vs[i] = vs[j]
                            vs[j] = val
                            idx = ids[i]
                            ids[i] = ids[j]
                            ids[j] = idx
                    T.sync_threads()
            T.copy(vs, V)
            T.copy(ids, I)

    return main


def pair_swap(neighbour: int):
    """Issue 1026's kernel: even threads copy their element to ``tx ^ neighbour``."""

    @T.prim_func
    def main(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            shared = T.alloc_shared((32,), "float32")
            shared[tx] = A[tx]
            T.sync_threads()
            if tx % 2 == 0:
                a = shared[tx]
                shared[tx ^ neighbour] = a
            T.sync_threads()
            A[tx] = shared[tx]

    return main


def lowered(func, arch: str = "sm_90"):
    return tilelang.lower(func, target={"kind": "cuda", "arch": arch})


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_a_bitonic_sort_compiles_with_no_barrier_inside_its_swap(arch):
    artifact = lowered(bitonic_sort(), arch)
    # after the initial copy and after each step; none inside the branch or its loop
    assert artifact.kernel_source.count("__syncthreads()") == 2
    values = np.random.default_rng(0).standard_normal(256).astype(np.float32)
    before = values.copy()
    indices = np.zeros(256, np.int32)
    lowered_kernel(artifact.device_mod)(values, indices)
    np.testing.assert_array_equal(values, np.sort(before)[::-1])
    np.testing.assert_array_equal(before[indices], values)


def test_issue_1026_needs_no_barrier_in_its_branch():
    """Even threads read their own element and write the odd one beside it: reads and
    writes never meet. Upstream's test asserts the kernel has no barrier at all; here the
    two the kernel asks for around the branch stay."""
    artifact = lowered(pair_swap(1))
    source = artifact.kernel_source
    branch = source[source.index("% 2) == 0)"):]
    assert "__syncthreads" not in branch[:branch.index("}")]
    a = np.arange(32, dtype=np.float32)
    lowered_kernel(artifact.device_mod)(a)
    expected = np.arange(32, dtype=np.float32)
    expected[1::2] = expected[0::2]
    np.testing.assert_array_equal(a, expected)


def test_a_branch_where_threads_share_an_element_is_still_refused():
    """``tx ^ 2`` from an even thread is the even element that thread ``tx ^ 2`` reads:
    a barrier would be needed inside the branch, which no thread layout removes."""
    with pytest.raises(tilelang.errors.CompileError) as caught:
        lowered(pair_swap(2))
    assert "A barrier (__syncthreads) is needed inside a loop or branch whose condition may differ" in \
        str(caught.value)


@pytest.mark.gpu
@pytest.mark.parametrize("backend", ["tvm_ffi", "nvrtc", "cython"])
def test_the_bitonic_sort_matches_torch_on_the_gpu(backend):
    torch = pytest.importorskip("torch")
    kernel = tilelang.compile(bitonic_sort(1024, 256), target="cuda", execution_backend=backend)
    values = torch.randn(1024, device="cuda")
    before = values.clone()
    indices = torch.zeros(1024, dtype=torch.int32, device="cuda")
    kernel(values, indices)
    torch.testing.assert_close(values, torch.sort(before, descending=True).values, rtol=0, atol=0)
    torch.testing.assert_close(before[indices.long()], values, rtol=0, atol=0)
