"""Host-side cost of one kernel call, per installed execution backend, for a small
3-tensor kernel (c = a + b on 256 floats), against torch.add(a, b, out=c) in the same
process: on the GPU when there is one, and on the CPU, for both CPU target kinds (the
default llvm, and c, the C source that the cython backend compiles into its launcher).

Each figure is the median over repeats of (wall time of `calls` back-to-back calls) /
calls, synchronized at the end, so it includes argument checks, binding and the launch.
On the GPU, back-to-back calls of a tiny kernel can also be bound by how fast the GPU
retires kernels; ``*_submit_us`` is the host cost alone (short batches, GPU idle at the
start of each).
Usage: python benchmarks/launch_overhead.py [--calls 20000] [--json out]
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

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


CUPY_ADD = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  c[i] = a[i] + b[i];
}
"""


def cupy_reference(a, b, c, calls: int, sync) -> dict:
    """The same add as a cupy RawKernel on the same torch tensors (zero-copy DLPack views)
    — an outside reference for the cost of a launch from Python, where cupy is installed."""
    try:
        import cupy
    except ImportError:
        return {"cupy": "not installed"}
    kernel = cupy.RawKernel(CUPY_ADD, "add")
    ca, cb, cc = (cupy.from_dlpack(t) for t in (a, b, c))
    # both libraries launch on the legacy default stream here (torch's current stream
    # unless a caller set another), so the calls are ordered with the torch tensors' work
    kernel((2,), (128,), (ca, cb, cc))
    sync()
    __import__("torch").testing.assert_close(c, a + b)
    return {"cupy_rawkernel_us": round(per_call_us(lambda: kernel((2,), (128,), (ca, cb, cc)), calls, sync), 2),
            "cupy_rawkernel_submit_us": round(submit_us(lambda: kernel((2,), (128,), (ca, cb, cc)), sync), 2)}


def measure(target: str, device: str, calls: int) -> dict:
    import torch

    a, b, c = (torch.randn(256, device=device) for _ in range(3))
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    row = {"target": target, "device": device,
           "torch_add_out_us": round(per_call_us(lambda: torch.add(a, b, out=c), calls, sync), 2)}
    if device == "cuda":
        row["torch_add_out_submit_us"] = round(submit_us(lambda: torch.add(a, b, out=c), sync), 2)
    if device == "cuda":
        try:
            row.update(cupy_reference(a, b, c, calls, sync))
        except Exception as err:  # noqa: BLE001 - an outside reference must not stop the run
            row["cupy"] = f"failed: {type(err).__name__}: {err}"[:200]
    context = create_backend_context(target, execution_backend=None)
    row["target"] = f"{target} ({context.target.kind.name})"
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
        row[f"{spec.name}_us"] = round(per_call_us(lambda: kernel(a, b, c), calls, sync), 2)
        row[f"{spec.name}_vs_torch_add"] = round(row[f"{spec.name}_us"] / row["torch_add_out_us"], 2)
        if device == "cuda":
            row[f"{spec.name}_submit_us"] = round(submit_us(lambda: kernel(a, b, c), sync), 2)
    return row


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    rows = []
    if torch.cuda.is_available():
        rows.append(measure("cuda", "cuda", args.calls))
    rows.append(measure("cpu", "cpu", args.calls))
    rows.append(measure("c", "cpu", args.calls))
    for row in rows:
        print(json.dumps(row, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
