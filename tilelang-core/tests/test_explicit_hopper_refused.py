"""Upstream's explicit warp-specialized language (T.alloc_barrier, T.mbarrier_*, T.tma_copy,
T.ws, ...; tilelang/language/barriers.py): its spelling errors, and its refusal by a backend
that does not lower it, before lowering, naming the op and the kernel's line (the CPU lowers
it: test_cpu_warp_roles.py)."""

from __future__ import annotations

import dataclasses

import pytest
import tilelang
import tilelang.language as T
from tilelang.backend.manifest import BackendModule
from tilelang.errors import LanguageError, ManifestError


def barrier_kernel():
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16"), B: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((128, 64), "float16")
            ready = T.alloc_barrier(arrive_count=128)  # the line the refusal names
            with T.ws(0):
                T.tma_copy(A[0, 0], A_shared, barrier=ready)
                T.barrier_arrive(ready)
            with T.ws(1):
                T.barrier_wait(ready, 0)
                T.copy(A_shared, B)

    return main


def roles_kernel():
    @T.prim_func
    def main(A: T.Tensor((256,), "float32")):
        with T.Kernel(1, threads=256):  # noqa: SIM117 (TVMScript takes one frame per `with`)
            with T.ws(1):  # the line the refusal names
                for i in T.Parallel(128):
                    A[128 + i] = A[128 + i] * 2.0

    return main


def fence_kernel():
    @T.prim_func
    def main(A: T.Tensor((128,), "float32")):
        with T.Kernel(1, threads=128):
            S = T.alloc_shared((128,), "float32")
            T.copy(A, S)
            T.fence_proxy_async()  # the line the refusal names
            T.copy(S, A)

    return main


def _line_of(build, text: str) -> int:
    import inspect

    source, first = inspect.getsourcelines(build)
    return first + next(i for i, line in enumerate(source) if text in line)


@pytest.mark.parametrize("build,spelling,marker", [
    (barrier_kernel, "T.alloc_barrier", "ready = T.alloc_barrier"),
    (roles_kernel, "T.ws", "with T.ws(1):"),
    (fence_kernel, "T.fence_proxy_async", "T.fence_proxy_async()"),
])
def test_a_backend_without_the_feature_refuses_it_naming_the_op_and_its_line(build, spelling, marker):
    from tilelang.language.barriers import check_lowerable

    line = _line_of(build, marker)
    with pytest.raises(LanguageError, match=(
            rf"kernel 'main' uses {spelling} \(.*test_explicit_hopper_refused\.py:{line}\): upstream's explicit "
            r"warp-specialized language .* target backend 'toy' does not lower; .* T\.copy inside T\.Pipelined")):
        check_lowerable(build(), "main", "toy", ())
    check_lowerable(build(), "main", "cpu", ("explicit_warp_specialization",))  # a backend that lowers it


def kernel_with(body):
    """A kernel whose body is ``body(A, A_shared)``; spelling errors surface while parsing."""
    @T.prim_func
    def main(A: T.Tensor((128, 64), "float16")):
        with T.Kernel(1, threads=256):
            A_shared = T.alloc_shared((128, 64), "float16")
            body(A, A_shared)

    return main


@pytest.mark.parametrize("body,message", [
    (lambda A, S: T.alloc_barrier(0), r"T\.alloc_barrier\(0\): the arrive count is a positive int"),
    (lambda A, S: T.alloc_barrier([]), r"T\.alloc_barrier\(\[\]\): the arrive count"),
    (lambda A, S: T.mbarrier_wait_parity(0, 0), r"T\.mbarrier_wait_parity: expected a barrier from T\.alloc_barrier"),
    (lambda A, S: T.tma_copy(A[0, 0], S), r"T\.tma_copy\(src, dst\): a global -> shared copy needs barrier="),
    (lambda A, S: T.tma_copy(S, A[0, 0], barrier=T.alloc_barrier(1)),
     r"T\.tma_copy\(shared, global, barrier=\.\.\.\): a TMA store takes no barrier"),
    (lambda A, S: T.tma_copy(S, S, barrier=T.alloc_barrier(1)),
     (r"T\.tma_copy: copies a global tile into a shared tile; got A_shared \(shared\.dyn\) -> A_shared "
      r"\(shared\.dyn\)")),
    (lambda A, S: T.tma_copy(A[0, 0], S, barrier=T.alloc_barrier(1), cluster_mask=3),
     r"T\.tma_copy\(\.\.\., cluster_mask=\.\.\.\) is only valid inside a T\.ClusterKernel frame"),
    (lambda A, S: T.tma_copy(A[0, 0], S, barrier=T.alloc_barrier(1), eviction_policy=1),
     r"T\.tma_copy\(eviction_policy=1\): one of evict_normal, evict_first, evict_last"),
    (lambda A, S: T.tma_copy(A[0, 0], S, barrier=T.alloc_barrier(1), evict=1),
     (r"T\.tma_copy: keyword\(s\) \['evict'\] are not supported; supported: barrier=, cluster_mask=, "
      r"leader_scope_threads=, eviction_policy=")),
    (lambda A, S: T.mbarrier_arrive(T.alloc_barrier(1), cta_id=1), r"needs thread-block clusters"),
    (lambda A, S: T.set_max_nreg(100, 1), r"T\.set_max_nreg\(100, \.\.\.\): the register count is a multiple of 8"),
    (lambda A, S: T.set_max_nreg(240, 2), r"is_inc=2\): 1 raises the budget, 0 lowers it"),
    (lambda A, S: T.get_warp_group_idx(32, 6), r"only the default warpgroup"),
])
def test_spelling_errors_are_language_errors(body, message):
    with pytest.raises(LanguageError, match=message):
        kernel_with(body)


@pytest.mark.parametrize("groups,message", [
    ((0, 2), r"T\.ws\(0, 2\): the warpgroups of one role must be contiguous"),
    ((), r"T\.ws\(\): name one or more warpgroups"),
    ((2,), r"T\.ws: warpgroup 2 needs threads up to 383, but the kernel has 256"),
])
def test_roles_must_name_warpgroups_the_block_has(groups, message):
    def body(A, S):
        with T.ws(*groups):
            T.copy(A, S)

    with pytest.raises(LanguageError, match=message):
        kernel_with(body)


def test_outside_a_kernel_is_a_language_error():
    with pytest.raises(LanguageError, match=r"T\.alloc_barrier is only valid inside a T\.Kernel frame"):
        T.alloc_barrier(128)


def test_a_manifest_declares_language_features_by_name():
    from tilelang.backend.registry import REGISTRY

    cpu = REGISTRY.backends["cpu"]
    assert cpu.language_features == ("explicit_warp_specialization",)
    with pytest.raises(ManifestError, match=r"language_features must be lower_snake_case names"):
        dataclasses.replace(cpu, language_features=("Explicit Sync",))
    assert isinstance(dataclasses.replace(cpu, language_features=["explicit_warp_specialization"]).language_features,
                      tuple)
    assert BackendModule.__dataclass_fields__["language_features"].default == ()


def test_the_cpu_refuses_thread_block_clusters_naming_the_backends_that_have_them():
    @T.prim_func
    def main(A: T.Tensor((8,), T.int32)):
        with T.ClusterKernel(8, threads=32, cluster_dims=2) as bx:
            A[bx] = T.block_rank_in_cluster()

    from tilelang.backend.registry import REGISTRY

    able = sorted(n for n, m in REGISTRY.backends.items() if "thread_block_clusters" in m.language_features)
    expected = (f"target backend {able[0]!r} does" if able else "no installed target backend does")
    with pytest.raises(LanguageError, match=rf"kernel 'main' uses T\.ClusterKernel\(cluster_dims=\(2, 1, 1\)\): "
                                            rf"thread-block clusters, which target backend 'cpu' does not compile; "
                                            rf"{expected}"):
        tilelang.compile(main, target="cpu")


def test_cluster_ops_in_a_plain_kernel_are_refused_on_the_cpu_too():
    @T.prim_func
    def main(A: T.Tensor((8,), T.int32)):
        with T.Kernel(8, threads=32):
            T.cluster_sync()

    with pytest.raises(LanguageError, match=r"kernel 'main' uses T\.cluster_arrive\(\): thread-block clusters"):
        tilelang.compile(main, target="cpu")
