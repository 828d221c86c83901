"""T.annotate_l2_hit_ratio (upstream's spelling): what the language accepts and refuses, what
the artifact records (the tensor's index among the call's inputs, its ratio), and that a
target backend with no L2 windows (the CPU) warns and computes the same result. CUDA's
launch wrapper is tested in tilelang-cuda/tests/test_l2_window.py."""

from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.cache.validate import InvalidArtifact, check_artifact
from tilelang.engine.artifact import CompiledArtifact
from tilelang.errors import LanguageError

SM90 = {"kind": "cuda", "arch": "sm_90"}


def add_kernel(ratios=None, shared_key=False):
    pick = ratios or (lambda a, b, c: {b: 0.8})

    @T.prim_func
    def add(A: T.Tensor((1024,), T.float32), B: T.Tensor((1024,), T.float32), C: T.Tensor((1024,), T.float32)):
        with T.Kernel(4, threads=256) as bx:
            S = T.alloc_shared((256,), T.float32)
            if shared_key:
                T.annotate_l2_hit_ratio({S: 0.5})
            T.annotate_l2_hit_ratio(pick(A, B, C))
            for i in T.Parallel(256):
                S[i] = B[bx * 256 + i]
            for i in T.Parallel(256):
                C[bx * 256 + i] = A[bx * 256 + i] + S[i]

    return add


def test_the_artifact_records_the_tensors_index_among_the_inputs_and_its_ratio():
    assert tilelang.lower(add_kernel(), target=SM90).l2_windows == ((1, 0.8),)
    with pytest.warns(UserWarning, match="the last one named applies"):
        both = tilelang.lower(add_kernel(lambda a, b, c: {a: 0.25, b: 1}), target=SM90, out_idx=[2])
    assert both.l2_windows == ((0, 0.25), (1, 1.0))
    # out_idx=[0]: the inputs are (B, C), so B is input 0
    assert tilelang.lower(add_kernel(), target=SM90, out_idx=[0]).l2_windows == ((0, 0.8),)


def test_the_windows_survive_the_kernel_cache_and_are_type_checked():
    artifact = tilelang.lower(add_kernel(), target=SM90)
    again = CompiledArtifact.from_json(artifact.to_json())
    assert again.l2_windows == artifact.l2_windows and check_artifact(again) is again
    for bad in ([3, 0.5], [0, 1.5], [0, 1]):  # past the inputs; a ratio > 1; not a float
        data = json.loads(artifact.to_json())
        data["l2_windows"] = [bad]
        with pytest.raises(InvalidArtifact, match="l2_windows"):
            check_artifact(CompiledArtifact.from_json(json.dumps(data)))


def test_the_cpu_ignores_the_hint_with_a_warning_and_computes_the_same():
    a, b = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    with pytest.warns(UserWarning, match=r"kernel 'add': T.annotate_l2_hit_ratio is ignored on the 'cpu' target "
                                         r"backend \(it sets no L2 access-policy windows\); results are the same"):
        kernel = tilelang.compile(add_kernel(), out_idx=[2], target="cpu")
    assert kernel.artifact.l2_windows == ()
    np.testing.assert_array_equal(kernel(a, b), a + b)


def test_several_tensors_warn_that_the_last_one_applies():
    with pytest.warns(UserWarning, match="names 2 tensors, but a stream holds one L2 access-policy window: the last "
                                         "one named applies"):
        tilelang.lower(add_kernel(lambda a, b, c: {a: 0.5, b: 0.5}), target=SM90)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tilelang.lower(add_kernel(), target=SM90)  # one tensor: no warning


@pytest.mark.parametrize("ratios,message", [
    (lambda a, b, c: {b: 0}, r"T.annotate_l2_hit_ratio: the hit ratio of 'B' must be a number in \(0, 1\], got 0"),
    (lambda a, b, c: {b: 1.5}, r"the hit ratio of 'B' must be a number in \(0, 1\], got 1.5"),
    (lambda a, b, c: {b: "high"}, r"the hit ratio of 'B' must be a number in \(0, 1\], got 'high'"),
    (lambda a, b, c: {}, r"T.annotate_l2_hit_ratio takes a dict \{tensor: hit ratio\}, got \{\}"),
    (lambda a, b, c: [b], r"T.annotate_l2_hit_ratio takes a dict \{tensor: hit ratio\}"),
])
def test_bad_ratios_are_refused(ratios, message):
    with pytest.raises(LanguageError, match=message):
        add_kernel(ratios)


def test_an_on_chip_buffer_is_refused():
    with pytest.raises(LanguageError, match=r"T.annotate_l2_hit_ratio: a key must be a tensor parameter \(global "
                                            r"memory\), got .* in 'shared(.dyn)?' memory"):
        add_kernel(shared_key=True)


def test_an_output_the_call_allocates_is_refused():
    with pytest.raises(LanguageError, match=r"kernel 'add': T.annotate_l2_hit_ratio names 'C', an output the call "
                                            r"allocates \(out_idx\); name a tensor the call passes"):
        tilelang.lower(add_kernel(lambda a, b, c: {c: 0.5}), target=SM90, out_idx=[2])
