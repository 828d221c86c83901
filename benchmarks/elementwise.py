"""GPU elementwise add on 2^26 elements (f32 and f16): TileLang against torch.add and against
a device-to-device copy, all timed in the same process with CUDA events.

Bandwidth counts bytes moved: add reads two and writes one tensor, a copy reads one and
writes one. The ratio that matters is TileLang's add bandwidth over the copy bandwidth
(the issue's aim: >= 0.95). Usage: python benchmarks/elementwise.py [--log2n 26] [--json out]
"""

from __future__ import annotations

import argparse
import json

import tilelang
import tilelang.language as T
import torch
from cuda_timing import time_ms


def add_kernel(n: int, dtype: str, block: int, threads: int):
    @T.prim_func
    def main(A: T.Tensor((n,), dtype), B: T.Tensor((n,), dtype), C: T.Tensor((n,), dtype)):
        with T.Kernel(T.ceildiv(n, block), threads=threads) as bx:
            for i in T.Parallel(block):
                C[bx * block + i] = A[bx * block + i] + B[bx * block + i]

    return main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--log2n", type=int, default=26)
    parser.add_argument("--json", default=None)
    args = parser.parse_args()
    n = 1 << args.log2n
    results = []
    for dtype in ("float32", "float16"):
        tdtype = getattr(torch, dtype)
        a = torch.randn(n, device="cuda").to(tdtype)
        b = torch.randn(n, device="cuda").to(tdtype)
        c = torch.empty_like(a)
        nbytes = a.element_size() * n
        t_copy = time_ms(lambda: c.copy_(a))
        t_torch = time_ms(lambda: torch.add(a, b, out=c))
        copy_gbps = 2 * nbytes / t_copy / 1e6
        row = {"dtype": dtype, "n": n, "copy_GBps": round(copy_gbps, 1),
               "torch_add_GBps": round(3 * nbytes / t_torch / 1e6, 1), "tilelang": []}
        for block, threads in ((4096, 256), (8192, 512), (2048, 128)):
            for backend in ("tvm_ffi", "nvrtc"):
                try:
                    kernel = tilelang.compile(add_kernel(n, dtype, block, threads), target="cuda",
                                              execution_backend=backend)
                except tilelang.TileLangError as err:
                    row["tilelang"].append({"backend": backend, "error": str(err)[:200]})
                    continue
                kernel(a, b, c)
                torch.testing.assert_close(c, a + b)
                t = time_ms(lambda: kernel(a, b, c))
                gbps = 3 * nbytes / t / 1e6
                row["tilelang"].append({"backend": backend, "block": block, "threads": threads,
                                        "GBps": round(gbps, 1), "ratio_vs_copy": round(gbps / copy_gbps, 3),
                                        "ratio_vs_torch_add": round(t_torch / t, 3)})
        ok = [r for r in row["tilelang"] if "GBps" in r]
        row["best_ratio_vs_copy"] = max((r["ratio_vs_copy"] for r in ok), default=None)
        results.append(row)
        print(json.dumps(row, indent=1), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
