"""TMA tensor maps on the nvrtc path: the CUDA pipeline emits TMA rings for nvrtc (which
encodes the maps itself), core's launch metadata carries each map's recipe, and the
generated launch function encodes the map from the tensor's address and shape — here
through a stand-in for the driver's cuTensorMapEncodeTiled (no GPU needed); the GPU runs
are in test_nvrtc_gpu.py and tilelang-cuda's GPU tests."""

from __future__ import annotations

import dataclasses
import json

import pytest
from tilelang.backend.module import create_backend_context
from tilelang.backend.resolution import execution_specs
from tilelang.engine.lower import lower_with_context as lower
from tilelang.errors import CompileError
from tilelang.jit.adapter.nvrtc import tensor_map
from tilelang.jit.adapter.nvrtc.launch_plan import OperandBuffer, launch_values
from tilelang.testing.kernels import tile_gemm

pytest.importorskip("cuda.bindings.driver")


@pytest.fixture(scope="module")
def gemm():
    context = create_backend_context({"kind": "cuda", "arch": "sm_90"}, execution_backend=None)
    spec = next(s for s in execution_specs(context.module) if s.name == "nvrtc")
    assert spec.operand_kinds == ("tensormap",)  # the CUDA manifest declares nvrtc's tensor maps
    context = dataclasses.replace(context, execution_spec=spec)
    # the ring as written (the CUDA backend would merge its 32-deep K steps in pairs)
    return lower(tile_gemm(1000, 1000, 1024, 128, 128, 32, stages=3), context, out_idx=[-1],
                 pass_configs={"tl.disable_k_step_merge": True})


class Tensor:
    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


class FakeMap:
    def __init__(self, fill: int) -> None:
        import ctypes

        self.storage = (ctypes.c_ubyte * 128)(*([fill] * 128))

    def getPtr(self) -> int:  # cuda-bindings spells it so
        import ctypes

        return ctypes.addressof(self.storage)


def test_a_tensor_map_launcher_gets_tma_and_the_launch_metadata_carries_the_recipes(gemm):
    assert "tl_tma_load_2d" in gemm.device_source
    (launch,) = gemm.launches
    assert launch.arg_types == ("tensormap", "tensormap", "handle")
    a, b = (json.loads(arg.removeprefix("tensormap:")) for arg in launch.args[:2])
    # A is 1000 x 1024 halves: dims innermost first, byte stride of a row, a 32 x 128 box,
    # 64-byte swizzle (2); B 1024 x 1000: 64 x 32 boxes, 128-byte swizzle (3)
    assert (a["param"], a["dims"], a["strides"], a["box"], a["swizzle"]) == (0, ["1024", "1000"], ["2048"],
                                                                            [32, 128], 2)
    assert (b["param"], b["dims"], b["strides"], b["box"], b["swizzle"]) == (1, ["1000", "1024"], ["2000"],
                                                                            [64, 32], 3)
    assert a["dtype"] == "float16" and a["rank"] == 2 and a["oob_fill"] == 0
    assert launch.block[0] == "160"  # the producer warp


def test_the_launch_function_encodes_each_map_once_per_tensor(gemm, monkeypatch):
    calls = []

    def encode(dtype, rank, address, dims, strides, box, elements, interleave, swizzle, l2, oob):
        from cuda.bindings import driver

        # the arrays hold cuda-bindings' integer wrappers (a plain int is refused by the real call)
        assert all(isinstance(d, driver.cuuint64_t) for d in [*dims, *strides])
        assert all(isinstance(b, driver.cuuint32_t) for b in [*box, *elements])
        calls.append((int(address), [int(d) for d in dims], [int(s) for s in strides], [int(b) for b in box],
                      int(swizzle)))
        return driver.CUresult.CUDA_SUCCESS, FakeMap(len(calls))

    monkeypatch.setattr("cuda.bindings.driver.cuTensorMapEncodeTiled", encode)
    values = launch_values(gemm, gemm.launches[0])
    a, b, c = Tensor(0x10000), Tensor(0x20000), Tensor(0x30000)
    *_, operands = values.function(a, b, c)
    assert calls == [(0x10000, [1024, 1000], [2048], [32, 128], 2), (0x20000, [1000, 1024], [2000], [64, 32], 3)]
    assert operands[0] == bytes([1] * 128) and operands[1] == bytes([2] * 128) and operands[2] == 0x30000
    values.function(a, b, c)
    assert len(calls) == 2  # the same tensors: the maps are reused
    values.function(Tensor(0x40000), b, c)
    assert len(calls) == 3 and calls[-1][0] == 0x40000
    buffer = OperandBuffer(values.arg_types)
    buffer.pack(*operands)  # 128 bytes by value each, then the pointer
    assert buffer.offsets == (0, 128, 256)


def test_a_failed_encode_names_the_tensor_and_the_way_out(gemm, monkeypatch):
    from cuda.bindings import driver

    monkeypatch.setattr("cuda.bindings.driver.cuTensorMapEncodeTiled",
                        lambda *args: (driver.CUresult.CUDA_ERROR_INVALID_VALUE, None))
    values = launch_values(gemm, gemm.launches[0])
    with pytest.raises(Exception, match=r"cuTensorMapEncodeTiled failed \(CUDA_ERROR_INVALID_VALUE\) for a tensor "
                                        r"at 0x10002 .*tl.disable_tma_lower"):
        values.function(Tensor(0x10002), Tensor(0x20000), Tensor(0x30000))


def test_a_corrupt_recipe_is_a_compile_error(gemm):
    launch = gemm.launches[0]
    broken = dataclasses.replace(launch, args=("tensormap:{not json", *launch.args[1:]))
    with pytest.raises(CompileError, match="operand #0 is a corrupt tensor-map recipe"):
        launch_values(gemm, broken)
    recipe = json.loads(launch.args[0].removeprefix("tensormap:"))
    recipe["param"] = 7
    wrong = dataclasses.replace(launch, args=("tensormap:" + json.dumps(recipe), *launch.args[1:]))
    with pytest.raises(CompileError, match="names no tensor parameter"):
        launch_values(gemm, wrong)
    assert tensor_map.TENSOR_MAP_BYTES == 128
