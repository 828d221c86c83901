"""tilelang.contrib.nvcc: upstream's CUDA toolchain queries (examples gate on
get_target_compute_version(); scripts build source with compile_cuda)."""

from __future__ import annotations

import pytest
from tilelang.contrib import nvcc
from tilelang.cuda.target import device_arch
from tilelang.cuda.toolchain import nvcc_path
from tilelang.errors import BackendUnavailableError, CompileError

needs_nvcc = pytest.mark.skipif(nvcc_path() is None, reason="no nvcc on this machine")
SOURCE = 'extern "C" __global__ void fill(float* x) { x[threadIdx.x] = 1.0f; }\n'


@pytest.mark.parametrize(("version", "parsed", "arch"), [
    ("9.0", (9, 0), "sm_90a"), ("sm_80", (8, 0), "sm_80"), ("sm_90a", (9, 0), "sm_90a"),
    ((8, 6), (8, 6), "sm_86"), ("10.0", (10, 0), "sm_100a"),
])
def test_compute_versions_parse_in_every_spelling(version, parsed, arch):
    assert nvcc.parse_compute_version(version) == parsed
    assert nvcc.get_target_arch(version) == arch


def test_a_bad_compute_version_says_what_it_expected():
    with pytest.raises(ValueError, match="neither 'major.minor' nor 'sm_XY'"):
        nvcc.parse_compute_version("ampere")


def test_the_compute_version_of_a_target_names_its_arch():
    assert nvcc.get_target_compute_version({"kind": "cuda", "arch": "sm_90"}) == "9.0"
    assert nvcc.get_target_compute_version("cuda -arch=sm_80") == "8.0"
    assert nvcc.have_tensorcore("8.0") and not nvcc.have_tensorcore("6.1")
    assert nvcc.have_fp16("5.3") and not nvcc.have_fp16("5.2") and nvcc.have_int8("6.1")


@pytest.mark.skipif(device_arch() is not None, reason="a GPU answers")
def test_without_a_gpu_or_an_arch_the_error_says_what_to_pass():
    with pytest.raises(BackendUnavailableError, match=r"no GPU to ask .* pass one, e\.g\. "
                                                      r"get_target_compute_version\(\{'kind': 'cuda'"):
        nvcc.get_target_compute_version()


@pytest.mark.gpu
@pytest.mark.skipif(device_arch() is None, reason="needs a CUDA GPU")
def test_with_a_gpu_the_compute_version_is_the_gpus():
    major, minor = nvcc.parse_compute_version(device_arch())
    assert nvcc.get_target_compute_version() == f"{major}.{minor}"


@needs_nvcc
def test_compile_cuda_builds_ptx_and_cubins(tmp_path):
    ptx = nvcc.compile_cuda(SOURCE, "ptx", arch="sm_90")
    assert b".visible .entry fill" in ptx and b".target sm_90" in ptx
    out = tmp_path / "fill.fatbin"
    fatbin = nvcc.compile_cuda(SOURCE, "fatbin", arch=["sm_80", "sm_90a"], path_target=str(out))
    assert out.read_bytes() == fatbin and len(fatbin) > 0
    assert nvcc.compile_cuda(SOURCE, "cubin", arch="sm_80")[:4] == b"\x7fELF"
    assert nvcc.get_cuda_version()[0] >= 11


@needs_nvcc
def test_compile_cuda_reports_nvccs_error_and_refuses_unknown_formats():
    with pytest.raises(CompileError, match="nvcc failed"):
        nvcc.compile_cuda("this is not CUDA", "ptx", arch="sm_90")
    with pytest.raises(ValueError, match="ptx, cubin, fatbin"):
        nvcc.compile_cuda(SOURCE, "obj", arch="sm_90")
