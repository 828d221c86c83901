"""tl.bounds_check on CUDA: in device code a failed check prints the access (its index
values, block, thread and the kernel's source line) and traps. The generated code is
checked here without a GPU; the GPU run checks the report in a child process, since a
trapped kernel leaves the CUDA context unusable for the rest of the process."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap

import pytest
import tilelang

SM90 = {"kind": "cuda", "arch": "sm_90"}

KERNEL = textwrap.dedent('''
    import tilelang
    import tilelang.language as T


    @T.prim_func
    def shift(A: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32"), off: T.int32):
        with T.Kernel(2, threads=128) as bx:
            for i in T.Parallel(128):
                B[bx * 128 + i] = A[bx * 128 + i + off]
''')


def shift_kernel(tmp_path):
    """The kernel from a file (kernels are parsed from their source)."""
    (tmp_path / "shift_kernel.py").write_text(KERNEL)
    sys.path.insert(0, str(tmp_path))
    try:
        import shift_kernel as module
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("shift_kernel", None)
    return module.shift


def test_device_code_prints_the_access_and_traps(tmp_path):
    source = tilelang.lower(shift_kernel(tmp_path), target=SM90, pass_configs={"tl.bounds_check": True}).device_source
    body = source[source.index('extern "C" __global__'):]
    assert re.search(r'printf\("tl\.bounds_check: out-of-bounds read of A\[%lld\] \(shape \(256\)\) at '
                     r'\S*shift_kernel\.py:10, block \(%d, %d, %d\) thread \(%d, %d, %d\)\\n", ', body)
    assert "__trap();" in body
    # B's index is provably inside B: no check for it
    assert "out-of-bounds write" not in body


def test_without_the_config_nothing_is_checked(tmp_path):
    source = tilelang.lower(shift_kernel(tmp_path), target=SM90).device_source
    assert "tl.bounds_check" not in source and "__trap" not in source


RUN = textwrap.dedent('''
    import sys
    import torch
    from kernel import shift
    import tilelang

    kernel = tilelang.compile(shift, target="cuda", pass_configs={"tl.bounds_check": True})
    a = torch.arange(256, device="cuda", dtype=torch.float32)
    b = torch.zeros(256, device="cuda", dtype=torch.float32)
    kernel(a, b, 0)
    torch.cuda.synchronize()
    assert torch.equal(a, b), "in-bounds launch changed"
    print("in bounds: ok", flush=True)
    kernel(a, b, int(sys.argv[1]))
    torch.cuda.synchronize()
    print("out of bounds: no error", flush=True)
''')


@pytest.mark.gpu
def test_an_out_of_bounds_read_on_the_gpu_is_reported_not_performed(tmp_path):
    pytest.importorskip("torch")
    (tmp_path / "kernel.py").write_text(KERNEL)
    (tmp_path / "run.py").write_text(RUN)
    proc = subprocess.run([sys.executable, "run.py", "1"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=300, check=False)
    output = proc.stdout + proc.stderr
    assert "in bounds: ok" in output, output
    assert proc.returncode != 0 and "out of bounds: no error" not in output, output
    # the one thread past the end: block 1, thread 127 reads A[256]
    assert "tl.bounds_check: out-of-bounds read of A[256] (shape (256)) at" in output, output
    assert "block (1, 0, 0) thread (127, 0, 0)" in output, output
