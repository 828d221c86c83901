"""The hipcc toolchain: code-object cache, offload-bundle parsing, and what it says when
hipcc is missing."""

from __future__ import annotations

import struct

import pytest
import tilelang
from tilelang.rocm import toolchain

SOURCE = '#include <hip/hip_runtime.h>\nextern "C" __global__ void k(float* a) { a[threadIdx.x] = 1.0f; }\n'


def _bundle(entries: dict[str, bytes]) -> bytes:
    """A clang offload bundle (OffloadBundler.cpp's layout) holding ``entries``."""
    header = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(entries))
    size = len(header) + sum(24 + len(k) for k in entries)
    table, blobs, offset = b"", b"", size
    for entry_id, blob in entries.items():
        table += struct.pack("<QQQ", offset, len(blob), len(entry_id)) + entry_id.encode()
        blobs += blob
        offset += len(blob)
    return header + table + blobs


def test_device_elf_picks_the_arch_entry():
    bundle = _bundle({"host-x86_64-unknown-linux": b"", "hipv4-amdgcn-amd-amdhsa--gfx1030": b"\x7fELF-1030",
                      "hipv4-amdgcn-amd-amdhsa--gfx90a": b"\x7fELF-90a"})
    assert toolchain.device_elf(bundle, "gfx90a") == b"\x7fELF-90a"
    assert toolchain.device_elf(bundle, "gfx1030") == b"\x7fELF-1030"
    assert toolchain.device_elf(b"\x7fELF-plain", "gfx90a") == b"\x7fELF-plain"


def test_device_elf_names_the_entries_when_the_arch_is_missing():
    bundle = _bundle({"host-x86_64-unknown-linux": b"", "hipv4-amdgcn-amd-amdhsa--gfx1030": b"x"})
    with pytest.raises(tilelang.CompileError, match=r"holds no gfx90a entry \(entries: host-x86_64-unknown-linux, "
                                                    r"hipv4-amdgcn-amd-amdhsa--gfx1030\)"):
        toolchain.device_elf(bundle, "gfx90a")


def test_missing_hipcc_is_explained(monkeypatch):
    monkeypatch.setattr(toolchain, "hipcc_path", lambda: None)
    assert "hipcc is not installed" in toolchain.unavailable_reason()
    with pytest.raises(tilelang.BackendUnavailableError, match=r"cannot compile kernel 'k' for gfx90a: hipcc is not "
                                                               r"installed; install the HIP compiler"):
        toolchain._compile_hipcc(SOURCE, "gfx90a", "k")


def test_hipcc_errors_carry_the_log(needs_hipcc):
    with pytest.raises(tilelang.CompileError, match=r"(?s)hipcc failed for kernel 'bad' \(gfx90a\):.*HIP_PLATFORM=amd "
                                                    r".*--genco --offload-arch=gfx90a.*undeclared identifier"):
        toolchain._compile_hipcc(SOURCE.replace("1.0f", "nope"), "gfx90a", "bad")


def test_code_objects_are_cached(needs_hipcc, monkeypatch):
    first = toolchain.compile_code_object(SOURCE, "gfx90a", "k")
    assert toolchain.device_elf(first, "gfx90a")[:4] == b"\x7fELF"

    def no_compiler(*args):
        raise AssertionError("hipcc ran although the code object is cached")

    monkeypatch.setattr(toolchain, "_compile_hipcc", no_compiler)
    assert toolchain.compile_code_object(SOURCE, "gfx90a", "k") == first
    with pytest.raises(AssertionError, match="hipcc ran"):
        toolchain.compile_code_object(SOURCE, "gfx1030", "k")  # another arch is another key


def test_compile_device_callback_reads_the_targets_arch(needs_hipcc):
    from tvm.target import Target

    code_object = toolchain.compile_for_target(SOURCE, Target({"kind": "rocm", "mcpu": "gfx90a"}), "k")
    assert toolchain.device_elf(code_object, "gfx90a")[:4] == b"\x7fELF"


def test_a_compile_leaves_nothing_in_the_temporary_folder(needs_hipcc, tmp_path, monkeypatch):
    # clang makes a <kernel>-XXXXXX folder in TMPDIR for every compile and does not remove it
    import tempfile

    shared = tmp_path / "tmp"
    shared.mkdir()
    monkeypatch.setenv("TMPDIR", str(shared))
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    assert toolchain.device_elf(toolchain._compile_hipcc(SOURCE, "gfx90a", "k"), "gfx90a")[:4] == b"\x7fELF"
    assert sorted(p.name for p in shared.iterdir()) == []
