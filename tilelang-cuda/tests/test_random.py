"""T.rng_init / T.rng_rand / T.rng_rand_float on CUDA (transform/random.py): Philox4x32-10
of tl_device.h, and cuRAND's XORWOW and MRG32k3a through cuRAND's headers (tl_curand.h).

Philox's block function is checked against the known-answer vectors of Random123 (the
reference implementation of the paper that defines Philox), its stream against a Python
model of cuRAND's Philox counter and key, by running tl_device.h's functions on the host
(nvcc). The kernels as lowered run in the lowered-IR emulator with the generators built for
the host; on a GPU the kernels' draws equal the model's and cuRAND's own."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tilelang
import tilelang.language as T
from tilelang.cuda import codegen, toolchain
from tilelang.cuda.transform.random import CURAND_HELPERS as CURAND_GENERATORS
from tilelang.errors import CompileError, LanguageError

SM90 = {"kind": "cuda", "arch": "sm_90"}
HEADER_DIR = Path(toolchain.__file__).parent
needs_nvcc = pytest.mark.skipif(toolchain.nvcc_path() is None, reason="nvcc is not installed")
_MASK = 0xFFFFFFFF


def philox_block(counter: list[int], key: list[int]) -> list[int]:
    """Philox4x32-10 of four counter words and two key words (Salmon et al., SC'11)."""
    c, k = list(counter), list(key)
    for round_ in range(10):
        if round_:
            k = [(k[0] + 0x9E3779B9) & _MASK, (k[1] + 0xBB67AE85) & _MASK]
        p0, p1 = 0xD2511F53 * c[0], 0xCD9E8D57 * c[2]
        c = [((p1 >> 32) ^ c[1] ^ k[0]) & _MASK, p1 & _MASK, ((p0 >> 32) ^ c[3] ^ k[1]) & _MASK, p0 & _MASK]
    return c


def philox_draws(seed: int, subsequence: int, offset: int, n: int) -> list[int]:
    """cuRAND's Philox stream: the key is the seed, the counter's high 64 bits the
    subsequence, its low 64 bits offset // 4, and the first draw is output offset % 4."""
    counter, position = (subsequence << 64) + offset // 4, offset % 4
    key = [seed & _MASK, seed >> 32]
    out: list[int] = []
    while len(out) < n:
        block = philox_block([(counter >> (32 * i)) & _MASK for i in range(4)], key)
        out.extend(block[position:])
        counter, position = counter + 1, 0
    return out[:n]


HARNESS = r"""
#include <cstdio>
#include <cstdlib>
#include "tl_device.h"
int main(int argc, char** argv) {
  unsigned s[11];
  if (argv[1][0] == 'b') {  // b c0 c1 c2 c3 k0 k1 (hex): one block
    for (int i = 0; i < 6; ++i) s[i] = (unsigned)strtoul(argv[2 + i], 0, 16);
    tl_rng_block(s);
    printf("%08x %08x %08x %08x\n", s[6], s[7], s[8], s[9]);
    return 0;
  }
  // s seed subsequence offset n: n draws, then a uniform float and double
  tl_rng_init(s, strtoull(argv[2], 0, 10), strtoull(argv[3], 0, 10), strtoull(argv[4], 0, 10));
  for (int i = 0; i < atoi(argv[5]); ++i) printf("%u\n", tl_rng_next(s));
  printf("%.9g\n", tl_rng_uniform32(s));
  printf("%.17g\n", tl_rng_uniform64(s));
}
"""


@pytest.fixture(scope="module")
def harness(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if toolchain.nvcc_path() is None:
        pytest.skip("nvcc is not installed")
    folder = tmp_path_factory.mktemp("rng")
    (folder / "harness.cu").write_text(HARNESS)
    subprocess.run([toolchain.nvcc_path(), "-I", str(HEADER_DIR), "-o", str(folder / "harness"),
                    str(folder / "harness.cu")], check=True, capture_output=True)
    return folder / "harness"


@pytest.mark.parametrize("words,expected", [
    ("00000000 00000000 00000000 00000000 00000000 00000000", "6627e8d5 e169c58d bc57ac4c 9b00dbd8"),
    ("ffffffff ffffffff ffffffff ffffffff ffffffff ffffffff", "408f276d 41c83b0e a20bc7c6 6d5451fd"),
    ("243f6a88 85a308d3 13198a2e 03707344 a4093822 299f31d0", "d16cfe09 94fdcceb 5001e420 24126ea1"),
])
def test_the_block_function_gives_random123s_known_answers(harness, words, expected):
    out = subprocess.run([str(harness), "b", *words.split()], check=True, capture_output=True, text=True).stdout
    assert out.split() == expected.split()
    values = [int(w, 16) for w in words.split()]
    assert philox_block(values[:4], values[4:]) == [int(w, 16) for w in expected.split()]  # the model too


@pytest.mark.parametrize("seed,subsequence,offset", [(42, 0, 0), (42, 0, 5), (2 ** 40 + 7, 3, 2 ** 33 + 2),
                                                     (1, 2 ** 63, 0), (9, 0, 2 ** 64 - 2)])
def test_the_stream_follows_curands_counter_and_key(harness, seed, subsequence, offset):
    # offset 2^64 - 2: the low 64 counter bits wrap into the subsequence's
    lines = subprocess.run([str(harness), "s", str(seed), str(subsequence), str(offset), "9"], check=True,
                           capture_output=True, text=True).stdout.split()
    draws = philox_draws(seed, subsequence, offset, 13)
    assert [int(v) for v in lines[:9]] == draws[:9]
    assert float(lines[9]) == pytest.approx((draws[9] + 0.5) / 2 ** 32, rel=1e-6)
    bits = (draws[10] << 21) ^ draws[11]
    assert float(lines[10]) == pytest.approx((bits + 0.5) / 2 ** 53, rel=1e-15)


def draws_kernel(blocks: int, threads: int, per_thread: int, seed: int, default_subsequence: bool,
                 generator: str = "curandStatePhilox4_32_10_t"):
    n = blocks * threads * per_thread

    @T.prim_func
    def main(A: T.Tensor((n,), "uint32"), U: T.Tensor((n,), "float32"), G: T.Tensor((n,), "float64")):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            base = (bx * threads + tx) * per_thread
            if default_subsequence:
                T.rng_init(seed, generator=generator)  # the subsequence is the thread's index in the grid
            else:
                T.rng_init(seed, tx, bx * 1000, generator=generator)
            for j in T.serial(per_thread):
                A[base + j] = T.rng_rand()
            for j in T.serial(per_thread):
                U[base + j] = T.rng_rand_float()
            for j in T.serial(per_thread):
                G[base + j] = T.rng_rand_float(bit=64, dist="normal")

    return main


def test_each_thread_gets_one_state_and_the_ops_become_the_helpers():
    source = tilelang.lower(draws_kernel(2, 4, 8, 7, False), target=SM90).device_source
    body = source[source.index('extern "C" __global__'):]
    assert body.count("uint rng_state_ptr[11];") == 1
    assert "tl_rng_init((&(rng_state_ptr[0])), (uint64_t)7ULL, ((uint64_t)((int)threadIdx.x))," in body
    for helper in ("tl_rng_next(", "tl_rng_uniform32(", "tl_rng_normal64("):
        assert helper + "(&(rng_state_ptr[0])))" in body
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "rng")[:4] == b"\x7fELF"


needs_curand = pytest.mark.skipif(toolchain.curand_include_dir() is None,
                                  reason="cuRAND's headers are not installed (pip install 'tilelang-cuda[curand]')")


@pytest.mark.parametrize("generator", sorted(CURAND_GENERATORS))
def test_curands_other_generators_become_its_own_functions(generator):
    source = tilelang.lower(draws_kernel(2, 4, 8, 7, False, generator), target=SM90).device_source
    suffix = CURAND_GENERATORS[generator]
    assert source.startswith(codegen.curand_header())  # before TVM's prelude
    body = source[source.index('extern "C" __global__'):]
    assert body.count("uint64_t rng_state_ptr[8];") == 1 and "tl_rng_" not in body
    assert f"tl_curand_init_{suffix}((&(rng_state_ptr[0])), (uint64_t)7ULL, ((uint64_t)((int)threadIdx.x))," in body
    for helper in ("next", "uniform32", "normal64"):
        assert f"tl_curand_{helper}_{suffix}((&(rng_state_ptr[0])))" in body


@needs_nvcc
@needs_curand
@pytest.mark.parametrize("generator", sorted(CURAND_GENERATORS))
def test_kernels_of_curands_generators_compile_with_its_headers(generator):
    source = tilelang.lower(draws_kernel(2, 4, 8, 7, True, generator), target=SM90).device_source
    assert toolchain._compile_nvcc(source, "sm_90", "rng")[:4] == b"\x7fELF"


def test_a_kernel_of_curands_generators_without_its_headers_says_what_to_install(monkeypatch, tmp_path):
    source = tilelang.lower(draws_kernel(1, 4, 2, 7, False, "curandStateXORWOW_t"), target=SM90).device_source
    monkeypatch.setattr(toolchain, "include_dirs", lambda: (str(tmp_path),))  # a folder without curand_kernel.h
    monkeypatch.setenv("TILELANG_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(CompileError, match=r"kernel 'rng' draws from cuRAND's XORWOW or MRG32k3a generator .*"
                                           r"pip install 'tilelang-cuda\[curand\]'"):
        toolchain.compile_cubin(source, "sm_90", "rng")


def test_one_kernel_draws_from_one_generator():
    @T.prim_func
    def main(A: T.Tensor((32,), "uint32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.rng_init(1, tx, 0, generator="curandStateXORWOW_t")
            A[tx] = T.rng_rand()
            T.rng_init(1, tx, 0, generator="curandStateMRG32k3a_t")
            A[tx] += T.rng_rand()

    with pytest.raises(LanguageError, match=r"T\.rng_init: one kernel draws from one generator; this one names "
                                            r"\['curandStateMRG32k3a_t', 'curandStateXORWOW_t'\]"):
        tilelang.lower(main, target=SM90)


# -- the lowered kernels in the lowered-IR emulator, with the generators built for the host --
# cuRAND's device API compiles for the host where its QUALIFIERS say __host__, and so do
# tl_curand.h's wrappers (TL_CURAND_QUALIFIERS); tl_device.h's Philox is __host__ already.
# The emulator calls them through ctypes on each thread's own state bytes, so a kernel's
# draws as lowered (where its state lives, which arguments reach the init, what persists
# between draws) are checked here against cuRAND called directly (and Philox against the
# Python model above).
HOST_LIBRARY = r"""
#define QUALIFIERS static __forceinline__ __host__ __device__
#define TL_CURAND_QUALIFIERS __host__ __device__ __forceinline__
#include <cstdio>
#include "tl_device.h"
#include "tl_curand.h"
#define EXPORT(NAME, STATE)                                                                          \
  extern "C" void h_init_##NAME(void* s, unsigned long long a, unsigned long long b, unsigned long long c) { \
    tl_curand_init_##NAME(s, a, b, c); }                                                              \
  extern "C" unsigned h_next_##NAME(void* s) { return tl_curand_next_##NAME(s); }                     \
  extern "C" float h_uniform32_##NAME(void* s) { return tl_curand_uniform32_##NAME(s); }              \
  extern "C" double h_uniform64_##NAME(void* s) { return tl_curand_uniform64_##NAME(s); }             \
  extern "C" float h_normal32_##NAME(void* s) { return tl_curand_normal32_##NAME(s); }                \
  extern "C" double h_normal64_##NAME(void* s) { return tl_curand_normal64_##NAME(s); }               \
  extern "C" void reference_##NAME(unsigned* a, float* u, double* g, unsigned long long seed,         \
                                   unsigned long long subsequence, unsigned long long offset, int n) { \
    STATE state;                                                                                      \
    curand_init(seed, subsequence, offset, &state);                                                   \
    for (int j = 0; j < n; ++j) a[j] = curand(&state);                                                \
    for (int j = 0; j < n; ++j) u[j] = curand_uniform(&state);                                        \
    for (int j = 0; j < n; ++j) g[j] = curand_normal_double(&state);                                  \
  }
EXPORT(xorwow, curandStateXORWOW_t)
EXPORT(mrg32k3a, curandStateMRG32k3a_t)
extern "C" void h_init_philox(void* s, unsigned long long a, unsigned long long b, unsigned long long c) {
  tl_rng_init(static_cast<unsigned*>(s), a, b, c); }
extern "C" unsigned h_next_philox(void* s) { return tl_rng_next(static_cast<unsigned*>(s)); }
extern "C" float h_uniform32_philox(void* s) { return tl_rng_uniform32(static_cast<unsigned*>(s)); }
extern "C" double h_uniform64_philox(void* s) { return tl_rng_uniform64(static_cast<unsigned*>(s)); }
extern "C" float h_normal32_philox(void* s) { return tl_rng_normal32(static_cast<unsigned*>(s)); }
extern "C" double h_normal64_philox(void* s) { return tl_rng_normal64(static_cast<unsigned*>(s)); }
"""
_HELPER = re.compile(r"^tl_(?:curand_(init|next|uniform32|uniform64|normal32|normal64)_(xorwow|mrg32k3a)|"
                     r"rng_(init|next|uniform32|uniform64|normal32|normal64))$")


@pytest.fixture(scope="module")
def host_generators(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The generators' helpers built for the host (a shared library), with cuRAND's direct
    draws (``reference_<generator>``) beside them."""
    import ctypes

    curand = toolchain.curand_include_dir()
    if toolchain.nvcc_path() is None or curand is None:
        pytest.skip("needs nvcc and cuRAND's headers (pip install 'tilelang-cuda[curand]')")
    folder = tmp_path_factory.mktemp("host_rng")
    (folder / "generators.cu").write_text(HOST_LIBRARY)
    subprocess.run([toolchain.nvcc_path(), "-shared", "-Xcompiler", "-fPIC", "-I", str(HEADER_DIR), "-I", curand,
                    "-o", str(folder / "generators.so"), str(folder / "generators.cu")], check=True,
                   capture_output=True)
    library = ctypes.CDLL(str(folder / "generators.so"))
    for generator in ("xorwow", "mrg32k3a", "philox"):
        getattr(library, f"h_init_{generator}").argtypes = [ctypes.c_void_p] + [ctypes.c_ulonglong] * 3
        for op, result in (("next", ctypes.c_uint), ("uniform32", ctypes.c_float), ("uniform64", ctypes.c_double),
                           ("normal32", ctypes.c_float), ("normal64", ctypes.c_double)):
            function = getattr(library, f"h_{op}_{generator}")
            function.argtypes, function.restype = [ctypes.c_void_p], result
        if generator != "philox":
            getattr(library, f"reference_{generator}").argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_ulonglong] * 3 + [
                ctypes.c_int]
    return library


def emulated(func: Any, library: Any, *arrays: np.ndarray, scalars: dict[str, int] | None = None) -> None:
    """Runs ``func`` lowered for sm_90 in the emulator, the generators' helpers on the host."""
    from lowered_instructions import extern_for, lowered_kernel

    def helper(name: str) -> Any:
        match = _HELPER.match(name)
        if match is None:
            return extern_for(name)
        op = match.group(1) or match.group(3)
        function = getattr(library, f"h_{op}_{match.group(2) or 'philox'}")

        def run(kernel: Any, args: list[Any], call: Any) -> Any:
            state, rest = args[0], [np.broadcast_to(np.asarray(a), kernel.mask.shape) for a in args[1:]]
            result = np.zeros(kernel.mask.shape, {"init": "uint8", "next": "uint32"}.get(op, str(call.ty.dtype)))
            for t in np.nonzero(kernel.mask)[0]:  # each thread on its own state's bytes
                start = int(state.offset[t])
                data = np.ascontiguousarray(state.memory.data[t, start:])
                value = function(data.ctypes.data, *(int(a[t]) for a in rest))
                state.memory.data[t, start:] = data
                if op != "init":
                    result[t] = value
            return None if op == "init" else result

        return run

    kernel = lowered_kernel(tilelang.lower(func, target=SM90).device_mod)
    kernel._extern_for = helper
    kernel(*arrays, scalars=scalars)


@pytest.mark.parametrize("generator", ["curandStatePhilox4_32_10_t", *sorted(CURAND_GENERATORS)])
@pytest.mark.parametrize("default_subsequence", [False, True])
def test_draws_as_lowered_are_the_generators(host_generators, generator, default_subsequence):
    blocks, threads, per_thread, seed = 2, 32, 6, 2 ** 33 + 5
    n = blocks * threads * per_thread
    a, u, g = np.zeros(n, np.uint32), np.zeros(n, np.float32), np.zeros(n, np.float64)
    emulated(draws_kernel(blocks, threads, per_thread, seed, default_subsequence, generator), host_generators, a, u, g)
    for bx in range(blocks):
        for tx in range(threads):
            sub, off = (bx * threads + tx, 0) if default_subsequence else (tx, bx * 1000)
            at = slice((bx * threads + tx) * per_thread, (bx * threads + tx + 1) * per_thread)
            if generator in CURAND_GENERATORS:
                want = np.zeros(per_thread, np.uint32), np.zeros(per_thread, np.float32), np.zeros(per_thread)
                getattr(host_generators, f"reference_{CURAND_GENERATORS[generator]}")(
                    *(w.ctypes.data for w in want), seed, sub, off, per_thread)
                for got, expected in zip((a, u, g), want):
                    np.testing.assert_array_equal(got[at], expected, err_msg=f"{generator} thread {bx}, {tx}")
            else:
                assert a[at].tolist() == philox_draws(seed, sub, off, per_thread), (bx, tx)
    assert len(set(a.tolist())) == n  # every thread its own stream


def guarded_draws(blocks: int, generator: str) -> Any:
    """Upstream's split-guard shape: the init under a run-time guard, a block-wide scan of
    shared memory (barriers the passes split the guard around) before the draw."""
    threads = 32

    @T.prim_func
    def main(A: T.Tensor((blocks,), "uint32"), n: T.int32):
        with T.Kernel(blocks, threads=threads) as bx:
            tx = T.get_thread_binding()
            counts = T.alloc_shared((threads,), "int32")
            if bx < n:
                T.rng_init(7, 0, bx, generator=generator)
                counts[tx] = 1
                T.cumsum(counts, dim=0)
                if tx == 0:
                    A[bx] = T.rng_rand() + T.cast(counts[threads - 1], "uint32") * 0

    return main


@pytest.mark.parametrize("generator", ["curandStatePhilox4_32_10_t", *sorted(CURAND_GENERATORS)])
def test_a_guarded_init_split_around_barriers_draws_as_an_unguarded_one(host_generators, generator):
    blocks, n = 6, 4
    a = np.full(blocks, 0xDEADBEEF, np.uint32)
    emulated(guarded_draws(blocks, generator), host_generators, a, scalars={"n": n})
    for bx in range(n):
        if generator in CURAND_GENERATORS:
            want = np.zeros(1, np.uint32), np.zeros(1, np.float32), np.zeros(1)
            getattr(host_generators, f"reference_{CURAND_GENERATORS[generator]}")(
                *(w.ctypes.data for w in want), 7, 0, bx, 1)
            assert a[bx] == want[0][0], bx
        else:
            assert a[bx] == philox_draws(7, 0, bx, 1)[0], bx
    assert (a[n:] == 0xDEADBEEF).all()


# -- on a GPU (marked `gpu`, skipped without one) ------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize("default_subsequence", [False, True])
def test_draws_on_the_gpu_equal_the_model(default_subsequence):
    torch = pytest.importorskip("torch")
    blocks, threads, per_thread, seed = 3, 64, 16, 2 ** 33 + 5
    n = blocks * threads * per_thread
    kernel = tilelang.compile(draws_kernel(blocks, threads, per_thread, seed, default_subsequence), target="cuda")
    a = torch.zeros(n, dtype=torch.uint32, device="cuda")
    u = torch.zeros(n, dtype=torch.float32, device="cuda")
    g = torch.zeros(n, dtype=torch.float64, device="cuda")
    kernel(a, u, g)
    got = a.cpu().numpy().astype(np.uint64).reshape(blocks, threads, per_thread)
    for bx in range(blocks):
        for tx in range(threads):
            sub, off = (bx * threads + tx, 0) if default_subsequence else (tx, bx * 1000)
            draws = philox_draws(seed, sub, off, per_thread * 2)
            assert got[bx, tx].tolist() == draws[:per_thread], (bx, tx)
            expected_u = (np.array(draws[per_thread:], dtype=np.float64) + 0.5) / 2 ** 32
            np.testing.assert_allclose(u.cpu().numpy().reshape(blocks, threads, per_thread)[bx, tx], expected_u,
                                       rtol=1e-6)
    uniform, normal = u.cpu().numpy(), g.cpu().numpy()
    assert 0 < uniform.min() and uniform.max() <= 1 and abs(uniform.mean() - 0.5) < 0.03  # 3072 draws: 5 sigma
    assert abs(normal.mean()) < 0.1 and abs(normal.std() - 1) < 0.06


CURAND_KERNEL = r"""
#include <curand_kernel.h>
extern "C" __global__ void curand_draws(unsigned* a, float* u, double* g, unsigned long long seed, int per_thread) {
  STATE state;
  curand_init(seed, threadIdx.x, 1000ull * blockIdx.x, &state);
  const int base = (blockIdx.x * blockDim.x + threadIdx.x) * per_thread;
  for (int j = 0; j < per_thread; ++j) a[base + j] = curand(&state);
  for (int j = 0; j < per_thread; ++j) u[base + j] = curand_uniform(&state);
  for (int j = 0; j < per_thread; ++j) g[base + j] = curand_normal_double(&state);
}
"""


def _curand_draws(blocks: int, threads: int, per_thread: int, seed: int, generator: str):
    """cuRAND's own draws of ``draws_kernel`` (curand_kernel.h through NVRTC, launched with
    the driver API): 32 random bits, uniform floats and normal doubles, as numpy arrays;
    None where cuRAND's headers are not installed."""
    import ctypes

    torch = pytest.importorskip("torch")
    from cuda.bindings import driver, nvrtc
    from cuda.pathfinder import find_nvidia_header_directory

    curand = find_nvidia_header_directory("curand")
    if curand is None:
        return None
    source = CURAND_KERNEL.replace("STATE state;", f"{generator} state;")
    program = nvrtc.nvrtcCreateProgram(source.encode(), b"curand_draws.cu", 0, [], [])[1]
    major, minor = torch.cuda.get_device_capability()
    options = [f"--gpu-architecture=sm_{major}{minor}".encode(), f"-I{curand}".encode(),
               *(f"-I{d}".encode() for d in toolchain.include_dirs())]
    (err,) = nvrtc.nvrtcCompileProgram(program, len(options), options)
    if int(err) != 0:
        log = bytearray(nvrtc.nvrtcGetProgramLogSize(program)[1])
        nvrtc.nvrtcGetProgramLog(program, log)
        raise AssertionError(f"NVRTC could not compile the cuRAND kernel: {bytes(log).decode(errors='replace')}")
    cubin = bytearray(nvrtc.nvrtcGetCUBINSize(program)[1])
    nvrtc.nvrtcGetCUBIN(program, cubin)
    n = blocks * threads * per_thread
    a = torch.zeros(n, dtype=torch.uint32, device="cuda")
    u = torch.zeros(n, dtype=torch.float32, device="cuda")
    g = torch.zeros(n, dtype=torch.float64, device="cuda")
    module = driver.cuModuleLoadData(bytes(cubin))[1]
    function = driver.cuModuleGetFunction(module, b"curand_draws")[1]
    params = ((a.data_ptr(), u.data_ptr(), g.data_ptr(), seed, per_thread),
              (ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_ulonglong, ctypes.c_int))
    (err,) = driver.cuLaunchKernel(function, blocks, 1, 1, threads, 1, 1, 0, torch.cuda.current_stream().cuda_stream,
                                   params, 0)
    assert int(err) == 0, err
    torch.cuda.synchronize()
    return a.cpu().numpy(), u.cpu().numpy(), g.cpu().numpy()


@pytest.mark.gpu
@pytest.mark.parametrize("generator", ["curandStatePhilox4_32_10_t", *sorted(CURAND_GENERATORS)])
def test_draws_on_the_gpu_equal_curands(generator):
    """Philox (tl_device.h's own): its 32-bit draws; cuRAND's other generators (cuRAND's
    functions): every draw, floats included."""
    torch = pytest.importorskip("torch")
    blocks, threads, per_thread, seed = 3, 64, 16, 2 ** 33 + 5
    expected = _curand_draws(blocks, threads, per_thread, seed, generator)
    if expected is None:
        pytest.skip("cuRAND's headers are not installed (nvidia-curand): nothing to compare with")
    n = blocks * threads * per_thread
    a = torch.zeros(n, dtype=torch.uint32, device="cuda")
    u = torch.zeros(n, device="cuda")
    g = torch.zeros(n, dtype=torch.float64, device="cuda")
    tilelang.compile(draws_kernel(blocks, threads, per_thread, seed, False, generator), target="cuda")(a, u, g)
    np.testing.assert_array_equal(a.cpu().numpy(), expected[0])
    if generator in CURAND_GENERATORS:
        np.testing.assert_array_equal(u.cpu().numpy(), expected[1])
        np.testing.assert_array_equal(g.cpu().numpy(), expected[2])
        assert len(set(expected[0].tolist())) > n * 0.99  # distinct streams, not one repeated


def test_the_state_is_allocated_in_the_kernel_when_host_statements_precede_it():
    # a solved dimension (T.Tensor((n * 4,), ...)) puts statements before the launch
    n = T.symbolic("n")

    @T.prim_func
    def main(A: T.Tensor((n * 4,), "uint32")):
        with T.Kernel(1, threads=32):
            tx = T.get_thread_binding()
            T.rng_init(3, tx, 0)
            A[tx] = T.rng_rand()

    source = tilelang.lower(main, target=SM90).device_source
    body = source[source.index('extern "C" __global__'):]
    assert body.count("uint rng_state_ptr[11];") == 1
    if toolchain.nvcc_path() is not None:
        assert toolchain._compile_nvcc(source, "sm_90", "rng_prologue")[:4] == b"\x7fELF"
