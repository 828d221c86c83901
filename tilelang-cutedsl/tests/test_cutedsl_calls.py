"""How the cutedsl launcher calls a compiled kernel (execution_backend.py): through CuTe DSL's
TVM-FFI calling convention — every pointer and the stream as a plain integer in one call —
where that compiles, else (or with TILELANG_CUTEDSL_TVM_FFI=0) through CuTe DSL's own, with
typed pointers and a CUstream. ``cute.compile`` is replaced by a recorder here (a launch
needs a GPU); that CuTe DSL compiles the generated source with the TVM-FFI option, for
sm_90a without a GPU, is checked in a subprocess. The GPU runs are test_cutedsl_gpu.py's."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap

import pytest
import tilelang
from cute_kernels import tile_copy_scale
from tilelang.testing.kernels import tile_gemm

CUTE = importlib.util.find_spec("cutlass") is not None
pytestmark = pytest.mark.skipif(not CUTE, reason="NVIDIA CuTe DSL (nvidia-cutlass-dsl) is not installed")
CPU_DEVICE = 1  # DLPack kDLCPU: host tensors stand in for the GPU's, nothing is launched


class Recorder:
    """Stands for cute.compile: records each compile's options and each call's arguments."""

    def __init__(self, refuse_ffi: bool = False) -> None:
        self.refuse_ffi = refuse_ffi
        self.options: list[str | None] = []
        self.calls: list[tuple] = []

    def compile(self, fn, *args, options=None):
        if options is not None and self.refuse_ffi:
            raise RuntimeError("apache-tvm-ffi is not importable")
        self.options.append(options)
        return lambda *call: self.calls.append(call)


@pytest.fixture
def launcher(tmp_path):
    from tilelang.cutedsl.execution_backend import SOURCE, CuTeDSLLauncher

    artifact = tilelang.lower(tile_copy_scale(), target="cutedsl", out_idx=-1)
    (tmp_path / SOURCE).write_text(artifact.device_source)
    return lambda: CuTeDSLLauncher(artifact, tmp_path / SOURCE, device_type=CPU_DEVICE)


def test_pointers_and_the_stream_go_as_integers(launcher, monkeypatch) -> None:
    import torch
    from cutlass import cute

    recorder = Recorder()
    monkeypatch.setattr(cute, "compile", recorder.compile)
    a = torch.zeros(64, 64, dtype=torch.float16)
    out = launcher()(a, stream=1234)
    assert recorder.options == ["--enable-tvm-ffi"]
    assert recorder.calls == [(a.data_ptr(), out.data_ptr(), 1234)]
    assert all(type(x) is int for x in recorder.calls[0])


def test_without_tvm_ffi_the_launch_takes_cute_dsl_values(launcher, monkeypatch) -> None:
    import cuda.bindings.driver as cuda
    import torch
    from cutlass import cute

    for refuse, env in ((True, "1"), (False, "0")):
        recorder = Recorder(refuse_ffi=refuse)
        monkeypatch.setattr(cute, "compile", recorder.compile)
        monkeypatch.setenv("TILELANG_CUTEDSL_TVM_FFI", env)
        a = torch.zeros(64, 64, dtype=torch.float16)
        out = launcher()(a, stream=99)
        assert recorder.options == [None]
        (a_ptr, out_ptr, stream), = recorder.calls
        assert isinstance(a_ptr, cute.Pointer) and isinstance(stream, cuda.CUstream) and int(stream) == 99
        assert [a_ptr._pointer, out_ptr._pointer] == [a.data_ptr(), out.data_ptr()]  # the runtime pointer's address


@pytest.mark.parametrize("kernel", ["gemm", "copy"])
def test_cute_dsl_compiles_the_source_for_tvm_ffi(kernel: str, tmp_path) -> None:
    """In a subprocess: CUTE_DSL_ARCH is read when cutlass is imported."""
    func = tile_gemm(256, 256, 128, 128, 128, 32, stages=3) if kernel == "gemm" else tile_copy_scale()
    target = {"kind": "cuda", "arch": "sm_90", "keys": ["cutedsl", "cuda", "gpu"]}
    (tmp_path / "kernel_cute.py").write_text(tilelang.lower(func, target=target).device_source)
    dtypes = "(cutlass.Float16, cutlass.Float16, cutlass.Float32)" if kernel == "gemm" else \
        "(cutlass.Float16, cutlass.Float16)"
    script = textwrap.dedent(f"""
        import cuda.bindings.driver as cuda, cutlass
        from cutlass import cute
        from cutlass.cute.runtime import make_ptr
        from tilelang.cutedsl.execution_backend import TVM_FFI_OPTION, import_source
        module = import_source(__import__("pathlib").Path({str(tmp_path / "kernel_cute.py")!r}), "k")
        ptrs = [make_ptr(t, 1 << 20, cute.AddressSpace.gmem, assumed_align=16) for t in {dtypes}]
        print(type(cute.compile(module.launch, *ptrs, cuda.CUstream(0), options=TVM_FFI_OPTION)).__name__)
    """)
    env = dict(os.environ, CUTE_DSL_ARCH="sm_90a", CUTE_DSL_CACHE_DIR=str(tmp_path / "cache"))
    done = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "TVMFFI" in done.stdout
