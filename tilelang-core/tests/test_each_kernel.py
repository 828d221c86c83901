"""tilelang.plugin.each_kernel / kernels_of: a per-kernel rewrite over a function that launches
several kernels (upstream's split-KV decoding writes a split and a combine kernel sharing a
T.alloc_global workspace in one function)."""

from __future__ import annotations

import pytest
import tilelang.language as T
from tilelang.plugin import each_kernel, kernels_of
from tvm import tirx


@T.prim_func
def two_kernels(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    partial = T.alloc_global((64,), "float32")
    with T.Kernel(2, threads=32) as bx:
        tx = T.get_thread_binding()
        partial[bx * 32 + tx] = A[bx * 32 + tx] * 2.0
    with T.Kernel(1, threads=64):
        tx = T.get_thread_binding()
        B[tx] = partial[tx] + 1.0


def test_each_kernel_runs_the_rewrite_on_each_kernel_and_puts_the_results_in_place():
    assert len(kernels_of(two_kernels.body)) == 2
    seen = []

    def run(func):
        (kernel,) = kernels_of(func.body)  # one kernel at a time, as a function of its own
        assert func.params == two_kernels.params
        seen.append(kernel.node.thread_tag)
        marked = tirx.AttrStmt(tirx.IntImm("int32", 0), "test.kernel", tirx.IntImm("int32", len(seen)), kernel)
        return func.with_body(marked).with_attr("test.max_seen", tirx.IntImm("int32", len(seen)))

    out = each_kernel(run)(two_kernels)
    assert seen == ["blockIdx.x", "blockIdx.x"]
    marks = []
    import tvm_ffi

    tvm_ffi.structural_walk(out.body, (tirx.AttrStmt, lambda a: marks.append(int(a.value.value))
                                       if a.attr_key == "test.kernel" else None))
    assert marks == [1, 2]  # each kernel's own result, in its own place
    assert int(out.attrs["test.max_seen"].value) == 2  # integers merged: the largest
    assert "partial" in out.script()  # the function-level workspace stays


def test_a_function_of_one_kernel_is_the_rewrite_itself():
    @T.prim_func
    def one(A: T.Tensor((32,), "float32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            A[tx] = A[tx] + 1.0

    assert each_kernel(lambda func: func.with_attr("test.tag", "once"))(one).attrs["test.tag"] == "once"


def test_kernels_that_set_an_attribute_differently_are_refused():
    with pytest.raises(ValueError, match="kernels of one function set 'test.name' to"):
        each_kernel(lambda func: func.with_attr("test.name", str(len(func.script()))))(two_kernels)


def test_lists_of_names_the_kernels_set_are_merged_as_their_union():
    """(the CUDA backend names each kernel's padded tiles: upstream's fused MoE launches two
    kernels with tiles of their own; the differing lists were refused)"""
    out = each_kernel(lambda func: func.with_attr("test.names", ["shared", f"k{len(func.script())}"]))(two_kernels)
    names = [str(n) for n in out.attrs["test.names"]]
    assert len(names) == 3 and names[-1] == "shared" and names == sorted(names)
