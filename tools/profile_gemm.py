"""Run the example GEMM once per config on the GPU, for a profiler to attach to
(`ncu --launch-skip 2 --launch-count 1 python tools/profile_gemm.py`): two warm-up
launches, then the profiled one. Usage: python tools/profile_gemm.py [n] [bM bN bK threads stages panel]
(TL_PROFILE_SOURCE=path also writes the kernel's CUDA source there, e.g. for cuobjdump)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import tilelang
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from gemm import matmul

n = int(sys.argv[1]) if len(sys.argv) > 1 else 8192
config = [int(v) for v in sys.argv[2:8]] or [128, 128, 64, 128, 3, 8]
kernel = tilelang.compile(matmul.builder(n, n, n, *config), out_idx=[-1], target="cuda")
if os.environ.get("TL_PROFILE_SOURCE"):
    Path(os.environ["TL_PROFILE_SOURCE"]).write_text(kernel.get_kernel_source())
a = torch.randn(n, n, device="cuda", dtype=torch.float16)
b = torch.randn(n, n, device="cuda", dtype=torch.float16)
for _ in range(3):
    kernel(a, b)
torch.cuda.synchronize()
print("done", n, config)
