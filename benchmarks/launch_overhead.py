"""Host-side cost of one kernel call, per installed execution backend, for a small
3-tensor kernel (c = a + b on 256 floats), against torch.add(a, b, out=c) in the same
process: on the GPU when there is one, and on the CPU, for both CPU target kinds (the
default llvm, and c, the C source that the cython backend compiles into its launcher).
``tvm_ffi_direct`` is the tvm_ffi kernel as a disk hit before ``import tvm_ffi`` calls it
(through libtvm_ffi's C ABI, tilelang/jit/adapter/tvm_ffi/direct.py), for the first
``direct.SWITCH_AFTER_CALLS`` calls; after them the launcher calls through tvm_ffi.

Each figure is the median over repeats of (wall time of `calls` back-to-back calls) /
calls, synchronized at the end, so it includes argument checks, binding and the launch;
launchers are measured in interleaved rounds and the median round is reported.
On the GPU, back-to-back calls of a tiny kernel can also be bound by how fast the GPU
retires kernels; ``*_submit_us`` is the host cost alone (short batches, GPU idle at the
start of each).
Usage: python benchmarks/launch_overhead.py [--calls 20000] [--rounds 5] [--json out]
"""

from __future__ import annotations

import argparse
import atexit
import copy
import functools
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

import tilelang
import tilelang.language as T
from tilelang.backend import create_backend_context


def small_add(n: int = 256):
    @T.prim_func
    def main(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32"), C: T.Tensor((n,), "float32")):
        with T.Kernel(1, threads=128) as bx:
            for i in T.Parallel(n):
                C[bx * n + i] = A[bx * n + i] + B[bx * n + i]

    return main


def per_call_us(fn, calls: int, sync, repeat: int = 5) -> float:
    for _ in range(100):
        fn()
    sync()
    samples = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        samples.append((time.perf_counter() - start) / calls * 1e6)
    return statistics.median(samples)


def submit_us(fn, sync, batch: int = 200, repeat: int = 50) -> float:
    """Host cost alone: the GPU is idle at the start of each batch (synchronized outside the
    timed region), and a batch is short enough never to fill the launch queue, so the GPU's
    own per-kernel time cannot hold the host back."""
    for _ in range(100):
        fn()
    samples = []
    for _ in range(repeat):
        sync()
        start = time.perf_counter()
        for _ in range(batch):
            fn()
        samples.append((time.perf_counter() - start) / batch * 1e6)
    sync()
    return statistics.median(samples)


def through_c_abi(kernel):
    """The tvm_ffi kernel as a disk hit in a process without tvm_ffi calls it: its library
    called through libtvm_ffi's C ABI (tilelang.jit.adapter.tvm_ffi.direct). Built here
    again, since this process compiled through tvm_ffi and a load would take its way."""
    from tilelang.jit.adapter.tvm_ffi import direct
    from tilelang.jit.adapter.tvm_ffi.backend import (
        LIBRARY,
        TVMFFIExecutionBackend,
        TVMFFILauncher,
    )

    artifact = kernel.artifact
    folder = Path(tempfile.mkdtemp(prefix="tilelang-direct-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    (folder / LIBRARY).write_bytes(TVMFFIExecutionBackend().build(artifact, kernel.context)[LIBRARY])
    device_type = artifact.device_type or int(kernel.context.target.get_target_device_type())
    # every timed call direct: no move to tvm_ffi's call after SWITCH_AFTER_CALLS of them
    direct.SWITCH_AFTER_CALLS = 1 << 62
    function = direct.DirectFunction(direct.ffi_library(), str(folder / LIBRARY), artifact.kernel_name,
                                     artifact.params, device_type, lambda: None)
    direct_kernel = copy.copy(kernel)
    direct_kernel.launcher = TVMFFILauncher(function, artifact, device_type)
    return direct_kernel


CUPY_ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
}
"""


def measure(target: str, device: str, calls: int, rounds: int) -> dict:
    """Every launcher measured in each of ``rounds`` interleaved rounds (torch, cupy, then
    each execution backend, repeated), so a drift of the host's speed during the run hits
    them alike; the figure is the median over rounds, ``*_rounds_us`` lists them all."""
    import torch

    a, b, c = (torch.randn(256, device=device) for _ in range(3))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    launchers: dict[str, object] = {"torch_add_out": lambda: torch.add(a, b, out=c)}
    row: dict[str, object] = {"target": target, "device": device}
    if device == "cuda":
        try:
            import cupy

            raw = cupy.RawKernel(CUPY_ADD, "add")
            ca, cb, cc = (cupy.from_dlpack(t) for t in (a, b, c))
            # both libraries launch on the legacy default stream here (torch's current
            # stream unless a caller set another), so the calls are ordered with torch's work
            raw((2,), (128,), (ca, cb, cc))
            sync()
            torch.testing.assert_close(c, a + b)
            launchers["cupy_rawkernel"] = lambda: raw((2,), (128,), (ca, cb, cc))
        except Exception as err:  # noqa: BLE001 - an outside reference must not stop the run
            row["cupy"] = f"unavailable: {type(err).__name__}: {err}"[:200]
    context = create_backend_context(target, execution_backend=None)
    row["target"] = f"{target} ({context.target.kind.name})"
    ours = []
    for spec in context.module.execution_backends:
        if spec.supports_target is not None and not spec.supports_target(context.target):
            row[spec.name] = f"does not support {context.target.kind.name}"
            continue
        try:
            kernel = tilelang.compile(small_add(), target=target, execution_backend=spec.name)
        except tilelang.TileLangError as err:
            row[spec.name] = f"unavailable: {str(err)[:160]}"
            continue
        kernel(a, b, c)
        torch.testing.assert_close(c, a + b)
        launchers[spec.name] = functools.partial(kernel, a, b, c)
        ours.append(spec.name)
        if spec.name == "tvm_ffi":
            direct_kernel = through_c_abi(kernel)
            c.zero_()
            direct_kernel(a, b, c)
            torch.testing.assert_close(c, a + b)
            launchers["tvm_ffi_direct"] = functools.partial(direct_kernel, a, b, c)
            ours.append("tvm_ffi_direct")
    samples: dict[str, list[float]] = {name: [] for name in launchers}
    submits: dict[str, list[float]] = {name: [] for name in launchers}
    for _ in range(rounds):
        for name, fn in launchers.items():
            samples[name].append(per_call_us(fn, calls, sync))
            if device == "cuda":
                submits[name].append(submit_us(fn, sync))
    for name in launchers:
        row[f"{name}_us"] = round(statistics.median(samples[name]), 2)
        if rounds > 1:
            row[f"{name}_rounds_us"] = [round(x, 2) for x in samples[name]]
        if device == "cuda":
            row[f"{name}_submit_us"] = round(statistics.median(submits[name]), 2)
    for name in ours:
        row[f"{name}_vs_torch_add"] = round(row[f"{name}_us"] / row["torch_add_out_us"], 2)
    if ours:
        row["fastest_of_ours"] = min(ours, key=lambda n: row[f"{n}_us"])
    return row


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds per launcher")
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    if torch.cuda.is_available():
        rows.append(measure("cuda", "cuda", args.calls, args.rounds))
    rows.append(measure("cpu", "cpu", args.calls, args.rounds))
    rows.append(measure("c", "cpu", args.calls, args.rounds))
    for row in rows:
        print(json.dumps(row, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
