"""A tvm_ffi disk-cache hit loads TVM's runtime libraries, not the ``tvm`` package
(tilelang.jit.adapter.tvm_ffi.runtime), and a CUDA build compiles its kernel once, with the
CUDA backend's toolchain (tilelang.cuda.codegen).

Without a GPU, the CUDA path runs against a fake driver: a ``libcuda.so.1`` built here that
reports one sm_90 GPU and fails every call that would need one (module load, launch). That is
enough for TVM's CUDA runtime library to load (it links libcuda), for a CUDA kernel to compile
through tvm_ffi and for a second process to load it from the cache; a launch needs the real
GPU (``test_a_cuda_hit_runs_without_tvm``, marked ``gpu``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from tilelang.errors import CompileError
from tilelang.jit.adapter.tvm_ffi.backend import MODULES, embedded_kinds

# the driver entry points TVM's CUDA runtime library links (nm -D --undefined-only
# libtvm_runtime_cuda.so) and those tilelang.cuda.target probes; CUDA_ERROR_NO_DEVICE = 100
FAKE_DRIVER = textwrap.dedent(
    """
    typedef int CUresult;
    CUresult cuInit(unsigned flags) { return 0; }
    CUresult cuDriverGetVersion(int* version) { *version = 13000; return 0; }
    CUresult cuDeviceGetCount(int* count) { *count = 1; return 0; }
    CUresult cuDeviceGet(int* device, int ordinal) { *device = 0; return 0; }
    /* compute capability 9.0: attribute 75 is the major version, 76 the minor */
    CUresult cuDeviceGetAttribute(int* value, int attribute, int device) {
      *value = attribute == 75 ? 9 : 0; return 0; }
    CUresult cuGetErrorName(int error, const char** name) { *name = "CUDA_ERROR_NO_DEVICE"; return 0; }
    CUresult cuGetErrorString(int error, const char** text) { *text = "fake driver"; return 0; }
    #define NO_DEVICE(name) CUresult name() { return 100; }
    NO_DEVICE(cuDeviceGetName) NO_DEVICE(cuFuncSetAttribute) NO_DEVICE(cuLaunchKernelEx)
    NO_DEVICE(cuModuleGetFunction) NO_DEVICE(cuModuleLoadData) NO_DEVICE(cuModuleUnload)
    NO_DEVICE(cuTensorMapEncodeTiled)
    """
)

KERNELS = textwrap.dedent(
    """
    import tilelang


    @tilelang.jit(out_idx=[-1], target={target}, execution_backend="tvm_ffi")
    def add(M, N, block_M=64, dtype="float32"):
        import tilelang.language as T  # a module-level import would load TVM on a hit too

        @T.prim_func
        def main(A: T.Tensor((M, N), dtype), B: T.Tensor((M, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(M, block_M), threads=128) as bx:
                for i, j in T.Parallel(block_M, N):
                    C[bx * block_M + i, j] = A[bx * block_M + i, j] + B[bx * block_M + i, j]

        return main
    """
)

CHILD = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, {folder!r})
    from kernels import add
    kernel = add(256, 128)
    import tvm_ffi
    loaders = [kind for kind in ("cuda",)
               if tvm_ffi.get_global_func("ffi.Module.load_from_bytes." + kind, allow_missing=True)]
    print(json.dumps({{"from_cache": kernel.from_cache, "tvm": "tvm" in sys.modules, "loaders": loaders,
                      "key": kernel.cache_key}}))
    import tvm  # still imports after a hit loaded TVM's runtime libraries without it
    """
)


def run(code: str, env: dict[str, str]) -> dict:
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def cold_then_hit(folder: Path, env: dict[str, str], cold_env: dict[str, str] | None = None) -> tuple[dict, dict]:
    """A compiling process (in ``cold_env``, default ``env``), then one that found its
    kernel in the cache. The request key hashes the compiler's sources: where they changed
    between the two (others editing this checkout), the pair is run again."""
    code = CHILD.format(folder=str(folder))
    for _ in range(3):
        cold = run(code, cold_env or env)
        hit = run(code, env)
        if hit["from_cache"]:
            return cold, hit
    pytest.fail(f"no process found the kernel in the cache: {hit}")


def entry_of(key: str) -> Path:
    return Path(os.environ["TILELANG_CACHE_DIR"]) / "kernels" / key[:2] / key


@pytest.fixture(scope="module")
def fake_driver(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """What a process that sees the fake driver adds to the environment (each test's own
    TILELANG_CACHE_DIR comes from os.environ at the test's time)."""
    pytest.importorskip("tilelang.cuda")
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        pytest.skip("no C compiler to build the fake CUDA driver")
    folder = tmp_path_factory.mktemp("fake-driver")
    (folder / "driver.c").write_text(FAKE_DRIVER)
    subprocess.run([compiler, "-shared", "-fPIC", "-Wl,-soname,libcuda.so.1", "-o", str(folder / "libcuda.so.1"),
                    str(folder / "driver.c")], check=True, capture_output=True)
    extra = {"LD_LIBRARY_PATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("LD_LIBRARY_PATH")]))}
    probe = ("from tilelang.jit.adapter.tvm_ffi.runtime import load_module_loaders; import json, sys, tvm_ffi;"
             "load_module_loaders(['cuda']); print(json.dumps({'tvm': 'tvm' in sys.modules, 'loader': "
             "tvm_ffi.get_global_func('ffi.Module.load_from_bytes.cuda', allow_missing=True) is not None}))")
    loaded = run(probe, {**os.environ, **extra})
    if not loaded["loader"]:  # e.g. no libcudart.so.13 for TVM's CUDA runtime library
        pytest.skip("TVM's CUDA runtime library does not load here, even with the fake driver")
    assert not loaded["tvm"], "the CUDA loader was registered by importing tvm"
    return extra


def test_a_cuda_hit_loads_the_cuda_runtime_library_not_tvm(tmp_path, fake_driver):
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='{"kind": "cuda", "arch": "sm_90"}'))
    cold, hit = cold_then_hit(tmp_path, {**os.environ, **fake_driver})
    assert cold["tvm"] and not cold["from_cache"]
    assert hit["loaders"] == ["cuda"] and not hit["tvm"], hit
    assert json.loads((entry_of(hit["key"]) / MODULES).read_text()) == {"embedded": ["cuda"]}


def test_a_cuda_library_that_embeds_source_loads_after_importing_tvm(tmp_path, fake_driver):
    """Built where TVM's module factory kept the source (here forced): the load compiles
    it through the CUDA backend's hook, which needs ``import tvm`` first."""
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='{"kind": "cuda", "arch": "sm_90"}'))
    env = {**os.environ, **fake_driver}
    _, hit = cold_then_hit(tmp_path, env, cold_env={**env, "TVM_COMPILE_FORCE_FALLBACK": "1"})
    assert hit["tvm"] and hit["loaders"] == ["cuda"], hit


def test_a_cuda_build_embeds_the_one_cubin_its_toolchain_compiled(tmp_path, fake_driver):
    """TVM's module factory compiles at codegen where its CUDA runtime is loaded; it must
    use this backend's toolchain (its cubin cache: one compile), not TVM's own callback."""
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='{"kind": "cuda", "arch": "sm_90"}'))
    cold = run(CHILD.format(folder=str(tmp_path)), {**os.environ, **fake_driver})
    cubins = list((Path(os.environ["TILELANG_CACHE_DIR"]) / "cubin").glob("*.cubin"))
    assert len(cubins) == 1, cubins
    library = (entry_of(cold["key"]) / "kernel.so").read_bytes()
    assert cubins[0].read_bytes() in library


def test_a_toolchain_error_inside_tvms_module_factory_keeps_its_type(tmp_path, fake_driver):
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='{"kind": "cuda", "arch": "sm_90"}'))
    code = (f"import sys, json; sys.path.insert(0, {str(tmp_path)!r}); import tilelang; from kernels import add\n"
            "from tilelang.engine.callback import register_cuda_postproc\n"
            "register_cuda_postproc(lambda code, target=None: code + '\\nthis is not CUDA;\\n')\n"
            "try:\n    add(256, 128)\nexcept Exception as err:\n"
            "    print(json.dumps({'type': type(err).__name__, 'message': str(err)}))")
    failure = run(code, {**os.environ, **fake_driver})
    assert failure["type"] == "CompileError", failure
    assert re.match(r"(NVRTC compile|nvcc) failed for kernel 'main_kernel' \(sm_90a?\)", failure["message"]), failure


def test_a_source_only_cuda_build_compiles_nothing(tmp_path, fake_driver):
    """tilelang.lower wants CUDA source: TVM's factory keeps it instead of compiling."""
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='{"kind": "cuda", "arch": "sm_90"}'))
    code = (f"import sys, json; sys.path.insert(0, {str(tmp_path)!r}); import tilelang; from kernels import add;"
            "artifact = tilelang.lower(add.get_tir(256, 128), target={'kind': 'cuda', 'arch': 'sm_90'});"
            "print(json.dumps({'global': '__global__' in artifact.device_source}))")
    assert run(code, {**os.environ, **fake_driver}) == {"global": True}
    assert not list((Path(os.environ["TILELANG_CACHE_DIR"]) / "cubin").glob("*.cubin"))


def test_a_cpu_hit_records_no_device_module_and_imports_no_tvm(tmp_path):
    (tmp_path / "kernels.py").write_text(KERNELS.format(target='"cpu"'))
    _, hit = cold_then_hit(tmp_path, dict(os.environ))
    assert not hit["tvm"], hit
    assert json.loads((entry_of(hit["key"]) / MODULES).read_text()) == {"embedded": []}


def test_a_kind_without_a_runtime_library_imports_tvm():
    """The fallback: a module kind whose sidecar is not where TVM keeps its libraries."""
    code = ("from tilelang.jit.adapter.tvm_ffi.runtime import load_module_loaders; import json, sys;"
            "load_module_loaders(['no_such_kind']); print(json.dumps({'tvm': 'tvm' in sys.modules}))")
    assert run(code, dict(os.environ)) == {"tvm": True}


def test_the_embedded_kinds_record(tmp_path):
    assert embedded_kinds(tmp_path) is None  # an entry written before the record: import tvm
    (tmp_path / MODULES).write_text('{"embedded": ["cuda"]}')
    assert embedded_kinds(tmp_path) == ["cuda"]
    (tmp_path / MODULES).write_text('{"embedded": "cuda"}')
    with pytest.raises(CompileError, match=r"modules.json: 'embedded' is not a list of module kinds"):
        embedded_kinds(tmp_path)


GPU_KERNELS = textwrap.dedent(
    """
    import tilelang


    @tilelang.jit(out_idx=[-1], target="cuda", execution_backend="tvm_ffi")
    def gemm(M, N, K, bM=128, bN=128, bK=32, num_stages=3, dtype="float16", accum_dtype="float32"):
        import tilelang.language as T

        @T.prim_func
        def main(A: T.Tensor((M, K), dtype), B: T.Tensor((K, N), dtype), C: T.Tensor((M, N), dtype)):
            with T.Kernel(T.ceildiv(N, bN), T.ceildiv(M, bM), threads=128) as (bx, by):
                As = T.alloc_shared((bM, bK), dtype)
                Bs = T.alloc_shared((bK, bN), dtype)
                Cl = T.alloc_fragment((bM, bN), accum_dtype)
                T.clear(Cl)
                for k in T.Pipelined(T.ceildiv(K, bK), num_stages=num_stages):
                    T.copy(A[by * bM, k * bK], As)
                    T.copy(B[k * bK, bx * bN], Bs)
                    T.gemm(As, Bs, Cl)
                T.copy(Cl, C[by * bM, bx * bN])

        return main
    """
)

GPU_CHILD = textwrap.dedent(
    """
    import json, sys
    import torch
    torch.zeros(1, device="cuda")  # a torch program has its context before it calls a kernel
    sys.path.insert(0, {folder!r})
    from kernels import gemm
    kernel = gemm(512, 256, 1024)
    loaded_tvm = "tvm" in sys.modules
    torch.manual_seed(0)
    a = torch.randn(512, 1024, device="cuda", dtype=torch.float16)
    b = torch.randn(1024, 256, device="cuda", dtype=torch.float16)
    c = kernel(a, b)
    ref = (a.float() @ b.float())
    # fp32 accumulation of 1024 products, one fp16 rounding of the result: within 1e-2 relative
    ok = bool(torch.allclose(c.float(), ref, rtol=1e-2, atol=1e-1))
    # on a side stream (torch's are non-blocking): A is written there after a 20 ms sleep, so a
    # kernel launched on any other stream would read it unwritten
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(40_000_000)
        a2 = a * 2
        c2 = kernel(a2, b)
    torch.cuda.synchronize()
    on_stream = bool(torch.allclose(c2.float(), 2 * ref, rtol=1e-2, atol=2e-1))
    print(json.dumps({{"from_cache": kernel.from_cache, "tvm": loaded_tvm, "tvm_after_call": "tvm" in sys.modules,
                      "tvm_ffi_after_call": "tvm_ffi" in sys.modules, "ok": ok, "on_stream": on_stream,
                      "key": kernel.cache_key}}))
    """
)


@pytest.mark.gpu
def test_a_cuda_hit_runs_without_tvm(tmp_path):
    pytest.importorskip("tilelang.cuda")
    (tmp_path / "kernels.py").write_text(GPU_KERNELS)
    code, env = GPU_CHILD.format(folder=str(tmp_path)), dict(os.environ)
    for _ in range(3):  # see cold_then_hit
        cold = run(code, env)
        hit = run(code, env)
        if hit["from_cache"]:
            break
    assert cold["ok"] and not cold["from_cache"], cold
    assert hit["from_cache"] and hit["ok"] and hit["on_stream"], hit
    assert not hit["tvm"] and not hit["tvm_after_call"], hit
    assert not hit["tvm_ffi_after_call"], hit  # called through libtvm_ffi's C ABI (direct.py)
    assert cold["on_stream"], cold  # and through tvm_ffi alike
