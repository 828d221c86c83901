"""``name = expr`` in a kernel: a binding where upstream's parser makes one (index
arithmetic assigned once, reading no memory), a variable otherwise. CPU runs compare with
numpy exactly; CUDA is checked on the generated source."""

from __future__ import annotations

import numpy as np
import tilelang.language as T

from test_language_surface import cpu, cuda_source

rng = np.random.default_rng(7)

def _bound_and_variables(func) -> tuple[set[str], set[str]]:
    """Names of the function's immutable bindings, and of its one-element scalar buffers."""
    import tvm_ffi
    from tvm import tirx

    bound, variables = set(), set()
    tvm_ffi.structural_walk(func.body, (tirx.Bind, lambda s, *_: bound.add(s.var.name)),
                            (tirx.AllocBuffer, lambda s, *_: variables.add(s.buffer.name)))
    return bound, variables


def test_a_name_assigned_once_to_index_arithmetic_is_a_binding():
    @T.prim_func
    def reverse(A: T.Tensor((8,), "float32"), B: T.Tensor((8,), "float32")):
        with T.Kernel(8, threads=1) as bx:
            src = 7 - bx  # upstream: a let binding the compiler sees through
            B[bx] = A[src]

    bound, variables = _bound_and_variables(reverse)
    assert "src" in bound and "src" not in variables
    a = rng.standard_normal(8).astype("float32")
    b = np.zeros(8, "float32")
    cpu(reverse)(a, b)
    np.testing.assert_array_equal(b, a[::-1])


def test_names_assigned_again_or_reading_memory_stay_variables():
    @T.prim_func
    def main(A: T.Tensor((4,), "int32"), B: T.Tensor((4, 3), "int32")):
        with T.Kernel(4, threads=1) as bx:
            s = bx * 10
            for _ in T.serial(3):
                s = s + 1            # the same variable each iteration, as Python reads it
            t = bx
            t += 100                 # augmented
            old = A[bx]              # a read: its value is taken here
            A[bx] = -1
            B[bx, 0] = s
            B[bx, 1] = t
            B[bx, 2] = old

    bound, variables = _bound_and_variables(main)
    assert {"s", "t", "old"} <= variables and not {"s", "t", "old"} & bound
    a = np.arange(4, dtype="int32") + 50
    b = np.zeros((4, 3), "int32")
    cpu(main)(a, b)
    np.testing.assert_array_equal(b, [[10 * i + 3, i + 100, 50 + i] for i in range(4)])
    np.testing.assert_array_equal(a, [-1] * 4)


def test_a_macro_called_twice_binds_its_names_each_time():
    @T.macro
    def put(B, i, k):
        scaled = i * k  # assigned once in the macro's own body
        B[i] = B[i] + scaled

    @T.prim_func
    def main(B: T.Tensor((4,), "int32")):
        with T.Kernel(4, threads=1) as bx:
            put(B, bx, 2)
            put(B, bx, 3)

    b = np.ones(4, "int32")
    cpu(main)(b)
    np.testing.assert_array_equal(b, [1 + 5 * i for i in range(4)])


def test_a_reversed_block_index_leaves_no_scalar_in_the_cuda_source():
    @T.prim_func
    def reverse(A: T.Tensor((1024,), "float16"), B: T.Tensor((1024,), "float16")):
        with T.Kernel(8, threads=128) as bx:
            rx = 7 - bx
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[rx * 128 + i]

    body = cuda_source(reverse).split("reverse_kernel(")[-1]
    # before: `alignas(64) int rx_ptr[1];`, and every address read it back
    assert "rx_ptr" not in body and "if (" not in body
    assert "A_ptr[((((int)threadIdx.x) + 896) - (((int)blockIdx.x) * 128))]" in body


def doubled(named: bool):
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float32"), B: T.Tensor((128, 64), "float32")):
        with T.Kernel(1, threads=128) as _:
            rows = 128
            frag = T.alloc_fragment((128, 64), "float32")
            T.copy(A, frag)
            for i, j in T.Parallel(rows if named else 128, 64):
                frag[i, j] = frag[i, j] * 2.0
            T.copy(frag, B)

    return main


def test_a_name_for_a_constant_is_the_constant():
    # before: `rows` was a scalar buffer, the loop over it dynamic, and the fragment
    # demoted to shared memory (`extern __shared__ float frag_ptr[]`)
    named = cuda_source(doubled(named=True))
    assert named == cuda_source(doubled(named=False))
    assert "rows_ptr" not in named and "__shared__" not in named.split("main_kernel(")[-1]
    bound, variables = _bound_and_variables(doubled(named=True))
    assert "rows" not in bound | variables
