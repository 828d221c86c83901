"""NVRTC compiles TVM's CUDA prelude without its std type-trait block when no kernel code
names a trait (tilelang.cuda.toolchain.trim_for_nvrtc): the header behind it was 0.40 s of
the canonical GEMM's 0.49 s NVRTC compile. The trim must leave the machine code unchanged
and keep the block whenever anything could use it."""

from __future__ import annotations

import struct

import pytest
import tilelang
from tilelang.cuda import toolchain
from tilelang.testing.kernels import elementwise_add, row_softmax_sum, tiled_matmul

TRAITS_INCLUDE = "#include <cuda/std/type_traits>"

SOURCES = {
    "gemm_sm90": (lambda: tiled_matmul(256, 256, 128), "sm_90"),
    "gemm_sm80": (lambda: tiled_matmul(256, 256, 128), "sm_80"),
    "add_bf16": (lambda: elementwise_add(512, 128, dtype="bfloat16"), "sm_90"),
    "softmax": (lambda: row_softmax_sum(64), "sm_80"),
}


def device_source(name: str) -> str:
    build, arch = SOURCES[name]
    return tilelang.lower(build(), target={"kind": "cuda", "arch": arch}, out_idx=[-1]).device_source


@pytest.mark.parametrize("name", sorted(SOURCES))
def test_generated_kernels_lose_exactly_the_trait_block(name):
    source = device_source(name)
    trimmed = toolchain.trim_for_nvrtc(source)
    assert TRAITS_INCLUDE in source and TRAITS_INCLUDE not in trimmed
    start = source.index(TRAITS_INCLUDE)
    start = source.rindex("\n", 0, start) + 1
    end = source.index("}\n", start) + 2
    assert source[:start] + source[end:] == trimmed
    block = [line.strip() for line in source[start:end].splitlines()]
    assert block[:2] == [TRAITS_INCLUDE, "namespace std {"] and block[-1] == "}"
    assert all(line.startswith("using cuda::std::") for line in block[2:-1]), block
    assert "#include <cuda/std/cstdint>" in trimmed  # the integer types stay


@pytest.mark.parametrize("use", [
    "template <typename T> __device__ bool f() { return std::is_same<T, float>::value; }",
    "template <typename T> __device__ bool f() { return std::is_same_v<T, float>; }",
    "template <bool B> using pick = typename std::conditional<B, int, float>::type;",
    "template <typename T> __device__ bool f() { return cuda::std::is_signed<T>::value; }",
    "using namespace std;",
])
def test_the_block_stays_when_anything_may_use_it(use):
    source = device_source("gemm_sm80") + "\n" + use + "\n"
    assert toolchain.trim_for_nvrtc(source) == source


def test_a_source_without_the_block_is_unchanged():
    source = '__global__ void k(int* x) { x[0] = 1; }\n'
    assert toolchain.trim_for_nvrtc(source) is source


def elf_sections(binary: bytes) -> dict[str, bytes]:
    """Section name -> contents of a little-endian ELF64 file (a cubin)."""
    shoff, = struct.unpack_from("<Q", binary, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", binary, 0x3A)
    headers = [struct.unpack_from("<IIQQQQ", binary, shoff + i * shentsize) for i in range(shnum)]
    names_at = headers[shstrndx][4]
    sections = {}
    for name_offset, kind, _flags, _addr, offset, size in headers:
        end = binary.index(b"\0", names_at + name_offset)
        data = b"" if kind == 8 else binary[offset:offset + size]  # SHT_NOBITS holds no bytes
        sections[binary[names_at + name_offset:end].decode()] = data
    return sections


@pytest.mark.parametrize("name", ["gemm_sm90", "gemm_sm80"])
def test_nvrtc_makes_the_same_machine_code_without_the_block(name, monkeypatch):
    if toolchain.nvrtc_unavailable_reason() is not None:
        pytest.skip(f"NVRTC: {toolchain.nvrtc_unavailable_reason()}")
    source = device_source(name)
    arch = toolchain.arch_for_source(source, SOURCES[name][1])
    trimmed = toolchain._compile_nvrtc(source, arch, "kernel")
    monkeypatch.setattr(toolchain, "trim_for_nvrtc", lambda text: text)
    full = toolchain._compile_nvrtc(source, arch, "kernel")
    ours, theirs = elf_sections(trimmed), elf_sections(full)
    code = [s for s in theirs if s.startswith((".text.", ".nv.shared.", ".nv.constant0."))]
    assert any(s.startswith(".text.") for s in code)
    for section in code:
        assert ours[section] == theirs[section], section


def test_nvrtc_compiles_imported_code_that_uses_the_preludes_names():
    """T.import_source's code goes after TVM's prelude: upstream's dequantize gemv helpers
    declare `uint` values, which NVRTC (no system headers) has only from the prelude."""
    if toolchain.nvrtc_unavailable_reason() is not None:
        pytest.skip(f"NVRTC: {toolchain.nvrtc_unavailable_reason()}")
    import tilelang.language as T

    helper = "__device__ int triple(int x) { uint three = 3u; return x * (int)three; }"

    @T.prim_func
    def main(A: T.Tensor((128,), "int32")):
        with T.Kernel(1, threads=128) as _:
            T.import_source(helper)
            tx = T.get_thread_binding()
            A[tx] = T.call_extern("int32", "triple", A[tx])

    source = tilelang.lower(main, target={"kind": "cuda", "arch": "sm_90"}).device_source
    assert toolchain._compile_nvrtc(source, "sm_90", "kernel")[:4] == b"\x7fELF"
