"""More shared memory than a block may have is a compile error that says how much, the
limit of the arch, and what shrinks it (transform/shared_memory.py) — on the H200 such
a kernel compiled and then failed to launch."""

from __future__ import annotations

import pytest
import tilelang
from test_tma import lower
from tilelang.errors import CompileError
from tilelang.testing.kernels import tile_gemm


def test_five_stages_of_128x256x64_do_not_fit_on_sm_90():
    with pytest.raises(CompileError, match=r"kernel 'main_kernel' needs 246784 bytes of shared memory per block "
                                           r"\(245760 dynamic: its tiles and pipeline stages; 1024 static\), more "
                                           r"than the 232448 a block may have on sm_90; use fewer pipeline stages"):
        lower(tile_gemm(1024, 1024, 1024, 128, 256, 64, stages=5, threads=256))
    assert lower(tile_gemm(1024, 1024, 1024, 128, 256, 64, stages=4, threads=256)).launches[0].dynamic_smem == \
        str(4 * (128 * 64 + 64 * 256) * 2)


@pytest.mark.parametrize("stages,fits", [(3, True), (4, False)])
def test_the_limit_is_the_archs(stages, fits):
    func = tile_gemm(1024, 1024, 1024, 128, 256, 64, stages=stages, threads=256)
    target = {"kind": "cuda", "arch": "sm_80"}  # 163 KiB: 3 x 48 KiB fit, 4 do not
    if fits:
        tilelang.lower(func, target=target, out_idx=[-1])
    else:
        with pytest.raises(CompileError, match=r"more than the 166912 a block may have on sm_80"):
            tilelang.lower(func, target=target, out_idx=[-1])
