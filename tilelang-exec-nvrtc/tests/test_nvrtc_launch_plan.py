"""The generated launch-value functions and operand packing, on real CUDA artifacts
(tilelang.lower needs no GPU) and on hand-made launch metadata."""

from __future__ import annotations

import ctypes
import dataclasses
import struct

import pytest
import tilelang
import tilelang.language as T
from tilelang.engine.artifact import CompiledArtifact, KernelLaunch
from tilelang.errors import CompileError
from tilelang.jit.adapter.nvrtc.launch_plan import OperandBuffer, launch_values
from tilelang.testing.kernels import elementwise_add, row_softmax_sum, tiled_matmul

CUDA_SPEC = {"kind": "cuda", "arch": "sm_90"}


def lower(func: object) -> CompiledArtifact:
    return tilelang.lower(func, target=CUDA_SPEC, out_idx=[-1])


@pytest.fixture(scope="module")
def add_symbolic() -> CompiledArtifact:
    return lower(elementwise_add(T.symbolic("M"), 64))


@pytest.fixture(scope="module")
def softmax_symbolic() -> CompiledArtifact:
    return lower(row_softmax_sum(32))


class Ptr:
    """Stands in for a tensor: the generated code only calls data_ptr()."""

    def __init__(self, address: int) -> None:
        self.address = address

    def data_ptr(self) -> int:
        return self.address


@pytest.mark.parametrize("m", [1, 31, 32, 33, 1000])
def test_symbolic_rows_grid_block_and_operands(add_symbolic: CompiledArtifact, m: int) -> None:
    (launch,) = add_symbolic.launches
    values = launch_values(add_symbolic, launch)
    a, b, c = Ptr(0x1000), Ptr(0x2000), Ptr(0x3000)
    gx, gy, gz, bx, by, bz, smem, operands = values.function(a, b, c, M=m)
    assert (gx, gy, gz) == (-(-m // 32), 1, 1)  # ceildiv(M, block_M=32)
    assert (bx, by, bz) == (128, 1, 1)
    assert smem == 0 and values.constant_smem == 0
    assert operands == (0x1000, 0x2000, 0x3000, m)


def test_scalar_parameter_and_symbol(softmax_symbolic: CompiledArtifact) -> None:
    (launch,) = softmax_symbolic.launches
    values = launch_values(softmax_symbolic, launch)
    assert values.source.startswith("def _launch_values(A, scale, S, M):")
    gx, gy, gz, bx, by, bz, smem, operands = values.function(Ptr(16), 0.25, Ptr(32), M=100)
    assert (gx, gy, gz, bx, by, bz, smem) == (7, 1, 1, 128, 1, 1, 0)  # ceildiv(100, 16)
    assert operands == (16, 32, 100, 0.25)  # A, S, M, scale as the kernel declares them


def test_constant_dynamic_shared_memory_is_known_at_load() -> None:
    artifact = lower(tiled_matmul(256, 256, 256, bM=64, bN=64, bK=128))
    (launch,) = artifact.launches
    assert launch_values(artifact, launch).constant_smem == 65536


def test_operand_buffer_packs_every_type_at_natural_alignment() -> None:
    types = ("int8", "handle", "float16", "int32", "bfloat16", "float64", "bool", "uint64")
    buffer = OperandBuffer(types)
    assert buffer.offsets == (0, 8, 16, 20, 24, 32, 40, 48)
    buffer.pack(-3, 0xDEADBEEF00, 1.5, -7, 0x3F80, 2.25, True, 2**63)
    pointers = (ctypes.c_void_p * len(types)).from_address(buffer.params_address)
    read = {
        "int8": ctypes.c_int8, "handle": ctypes.c_uint64, "int32": ctypes.c_int32,
        "float64": ctypes.c_double, "bool": ctypes.c_bool, "uint64": ctypes.c_uint64,
    }
    got = [read[t].from_address(p).value if t in read else ctypes.c_uint16.from_address(p).value
           for t, p in zip(types, pointers)]
    assert got == [-3, 0xDEADBEEF00, struct.unpack("<H", struct.pack("<e", 1.5))[0], -7, 0x3F80, 2.25, True, 2**63]


def test_no_operands_means_null_params() -> None:
    assert OperandBuffer(()).params_address == 0


def _with_launch(artifact: CompiledArtifact, **changes: object) -> tuple[CompiledArtifact, KernelLaunch]:
    launch = dataclasses.replace(artifact.launches[0], **changes)
    return dataclasses.replace(artifact, launches=(launch,)), launch


def test_bfloat16_and_float_scalars_are_converted(softmax_symbolic: CompiledArtifact) -> None:
    artifact, launch = _with_launch(softmax_symbolic, args=("scale", "scale", "M * 2"),
                                    arg_types=("bfloat16", "float16", "int64"))
    _, _, _, _, _, _, _, operands = launch_values(artifact, launch).function(Ptr(0), 1.0, Ptr(0), M=5)
    assert operands == (0x3F80, 1.0, 10)  # bfloat16(1.0) bits


@pytest.mark.parametrize("expr, message", [
    ("__import__('os').system('true')", "only min, max, int and float may be called"),
    ("scale.real", "Attribute is not allowed"),
    ("[M][0]", "Subscript is not allowed"),
    ("N + 1", "unknown name 'N'"),
    ("A + 1", "unknown name 'A'"),  # a tensor, not a scalar
    ("'text'", "is not a number"),
    ("M +", "cannot be evaluated"),
])
def test_metadata_outside_the_grammar_is_a_compile_error(softmax_symbolic: CompiledArtifact, expr: str,
                                                         message: str) -> None:
    artifact, launch = _with_launch(softmax_symbolic, grid=(expr, "1", "1"))
    with pytest.raises(CompileError, match="kernel 'main', launch of 'main_kernel': grid extent") as info:
        launch_values(artifact, launch)
    assert message in str(info.value)


def test_bad_operands_are_compile_errors(softmax_symbolic: CompiledArtifact) -> None:
    artifact, launch = _with_launch(softmax_symbolic, args=("param:1",), arg_types=("handle",))
    with pytest.raises(CompileError, match=r"operand #0 'param:1' names no tensor parameter"):
        launch_values(artifact, launch)
    artifact, launch = _with_launch(softmax_symbolic, args=("M",), arg_types=("float8_e4m3",))
    with pytest.raises(CompileError, match=r"type 'float8_e4m3', which nvrtc cannot pass; supported: handle"):
        launch_values(artifact, launch)
    artifact, launch = _with_launch(softmax_symbolic, args=("M", "M"), arg_types=("int32",))
    with pytest.raises(CompileError, match="2 operands but 1 arg_types"):
        launch_values(artifact, launch)


def test_parameter_names_that_shadow_builtins_are_safe(softmax_symbolic: CompiledArtifact) -> None:
    params = list(softmax_symbolic.params)
    params[1] = dataclasses.replace(params[1], name="max")  # the scalar is called "max"
    artifact = dataclasses.replace(softmax_symbolic, params=tuple(params))
    artifact, launch = _with_launch(artifact, args=("max(max, 2.0)",), arg_types=("float32",),
                                    grid=("max(M, 1)", "1", "1"))
    gx, *_, operands = launch_values(artifact, launch).function(Ptr(0), 0.5, Ptr(0), M=0)
    assert gx == 1 and operands == (2.0,)


def test_generated_source_shows_in_tracebacks(softmax_symbolic: CompiledArtifact) -> None:
    import traceback

    values = launch_values(softmax_symbolic, softmax_symbolic.launches[0])
    with pytest.raises(TypeError) as info:
        values.function(Ptr(0), 0.5, Ptr(0), M="x")
    assert "(M + 15) // 16" in "".join(traceback.format_tb(info.value.__traceback__))
