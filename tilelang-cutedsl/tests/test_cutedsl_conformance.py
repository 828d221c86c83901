"""The conformance suite on cutedsl without a GPU: every case is lowered to CuTe DSL (for
sm_80: warp-level MMA, which the emulator models) and, unless it is one this backend still
refuses (REFUSED, each with the reason it gives), run by the emulator against the case's
own numpy reference, and compiled by cute.compile where CuTe DSL is installed."""

from __future__ import annotations

import importlib.util
import re

import cute_emulator
import numpy as np
import pytest
import tilelang
from tilelang.errors import CompileError, LanguageError
from tilelang.testing.conformance import CASES

#: case -> the start of the error cutedsl gives for it today (none left: keep the check for
#: the next case the suite grows)
REFUSED: dict[str, str] = {}
TARGET = {"kind": "cuda", "arch": "sm_80", "keys": ["cutedsl", "cuda", "gpu"]}


def _launch_args(func, source: str, args: list) -> list:
    """launch's arguments: the tensors, then LAUNCH_SCALARS (scalar parameters by name,
    symbolic dimensions from the arrays' shapes)."""
    from tvm import tirx

    values: dict[str, object] = {}
    for param, arg in zip(func.params, args):
        if isinstance(param.ty, tirx.BufferType):
            for dim, extent in zip(param.ty.shape, np.shape(arg)):
                if isinstance(dim, tirx.Var):
                    values[str(dim.name)] = int(extent)
        else:
            values[str(param.name)] = arg
    scalars = cute_emulator.load(source)["LAUNCH_SCALARS"]
    return [a for a in args if isinstance(a, np.ndarray)] + [values[name] for name, _ in scalars]


def _outputs(func, out_idx, inputs: list) -> list[np.ndarray]:
    """Zeroed outputs; a symbolic extent takes its value from the inputs' shapes."""
    from tvm import tirx

    params = [p.ty for p in func.params if isinstance(p.ty, tirx.BufferType)]
    symbols = {str(d.name): extent for ty, arg in zip(params, [a for a in inputs if isinstance(a, np.ndarray)])
               for d, extent in zip(ty.shape, arg.shape) if isinstance(d, tirx.Var)}
    return [np.zeros([symbols[str(d.name)] if isinstance(d, tirx.Var) else int(d) for d in params[i].shape],
                     str(params[i].dtype)) for i in out_idx]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_case_on_the_emulator(case) -> None:
    func = case.build()
    if case.name in REFUSED:
        with pytest.raises((CompileError, LanguageError), match=re.escape(REFUSED[case.name])):
            tilelang.lower(func, target=TARGET, out_idx=list(case.out_idx) or None)
        return
    source = tilelang.lower(func, target=TARGET, out_idx=list(case.out_idx) or None).device_source
    inputs = case.inputs(np.random.default_rng(0))
    expected = case.reference(*[x.copy() if isinstance(x, np.ndarray) else x for x in inputs])
    outputs = _outputs(func, case.out_idx, inputs)
    cute_emulator.run(source, *_launch_args(func, source, [*inputs, *outputs]))
    got = inputs[case.checked] if case.checked is not None else outputs[0]
    np.testing.assert_allclose(got, expected, rtol=case.rtol, atol=case.atol, err_msg=case.name)


_CUTE_TYPES = {"float32": "Float32", "float16": "Float16", "int32": "Int32", "uint32": "Uint32"}


@pytest.mark.skipif(importlib.util.find_spec("cutlass") is None, reason="NVIDIA CuTe DSL is not installed")
@pytest.mark.parametrize("case", [c for c in CASES if c.name not in REFUSED], ids=lambda c: c.name)
def test_cute_compile_takes_the_case(case, tmp_path) -> None:
    import cuda.bindings.driver as cuda
    import cutlass
    from cutlass import cute
    from cutlass.cute.runtime import make_ptr
    from tilelang.cutedsl.execution_backend import import_source
    from tvm import tirx

    func = case.build()
    (tmp_path / "kernel_cute.py").write_text(
        tilelang.lower(func, target=TARGET, out_idx=list(case.out_idx) or None).device_source)
    module = import_source(tmp_path / "kernel_cute.py", case.name)
    ptrs = [make_ptr(getattr(cutlass, _CUTE_TYPES[str(p.ty.dtype)]), 1 << 20, cute.AddressSpace.gmem, assumed_align=16)
            for p in func.params if isinstance(p.ty, tirx.BufferType)]
    scalars = [getattr(cutlass, dsl)(7) for _, dsl in module.LAUNCH_SCALARS]
    assert cute.compile(module.launch, *ptrs, *scalars, cuda.CUstream(0)) is not None
