"""CuTe DSL text for the ``tl_cute_*`` statements of LowerCuteGemm (gemm.py): small emitters,
one per statement, each returning lines for the printer to indent. Every name an emitter
introduces carries the site's suffix, so that sites never share temporaries. Shared tiles
come as iterators (``As.iterator``, or a stage of it), global tensors by name."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import CompileError

COPY_BITS = 128
DTYPES = {
    "float16": "cutlass.Float16", "bfloat16": "cutlass.BFloat16", "float32": "cutlass.Float32",
    "float64": "cutlass.Float64", "int8": "cutlass.Int8", "int16": "cutlass.Int16", "int32": "cutlass.Int32",
    "int64": "cutlass.Int64", "uint8": "cutlass.Uint8", "uint16": "cutlass.Uint16", "uint32": "cutlass.Uint32",
    "uint64": "cutlass.Uint64", "bool": "cutlass.Boolean",
}


def dtype_of(dtype: Any, where: str) -> str:
    name = str(dtype)
    if name not in DTYPES:
        raise CompileError(f"cutedsl codegen: {where} has dtype {name}, which this backend does not map to CuTe DSL")
    return DTYPES[name]


def smem_layout(shape: tuple[int, int], stride: tuple[int, int], swizzle: list[int] | None) -> str:
    """A 2-D view of a row-major tile's offsets, through the tile's swizzle (if it has one:
    then it sees the same storage as every flat access of the tile)."""
    layout = f"cute.make_layout({shape}, stride={stride})"
    if swizzle is None:
        return layout
    bits, base, shift = swizzle
    return f"cute.make_composed_layout(cute.make_swizzle({bits}, {base}, {shift}), 0, {layout})"


def tiled_mma(name: str, config: dict[str, Any], dtype: str) -> list[str]:
    """The tiled MMA of one accumulator: m16n8k16 atoms over a wm x wn warp grid, N permuted
    to 16 per warp so that one ldmatrix.x4 loads B for two atoms; or on sm_90 (wgmma) a
    64 x N warpgroup atom per warpgroup along M, accumulating (C += A B: C starts as the
    kernel's T.clear/T.fill left it)."""
    if config.get("kind") == "wgmma":
        major = {True: "cute.nvgpu.OperandMajorMode.K", False: "cute.nvgpu.OperandMajorMode.MN"}
        return [
            (f"{name} = sm90_utils.make_trivial_tiled_mma({dtype}, {dtype}, {major[config['a_k_major']]}, "
             f"{major[config['b_k_major']]}, cutlass.Float32, ({config['wg']}, 1, 1), tiler_mn=(64, {config['n']}))"),
            f"{name}.set(cute.nvgpu.warpgroup.Field.ACCUMULATE, True)",
            f"{name}_thr = {name}.get_slice(cute.arch.thread_idx()[0])",
        ]
    wm, wn = config["wm"], config["wn"]
    return [
        (f"{name} = cute.make_tiled_mma(cute.nvgpu.warp.MmaF16BF16Op({dtype}, cutlass.Float32, (16, 8, 16)), "
        f"cute.make_layout(({wm}, {wn}, 1)), permutation_mnk=({16 * wm}, {16 * wn}, 16))"),
        f"{name}_thr = {name}.get_slice(cute.arch.thread_idx()[0])",
    ]


def accumulator(name: str, mma: str, config: dict[str, Any]) -> list[str]:
    """The accumulator fragment, and the (row, column) of each of its elements."""
    shape = f"({config['m']}, {config['n']})"
    return [f"{name} = {mma}.make_fragment_C({mma}.partition_shape_C({shape}))",
            f"{name}_coord = {mma}_thr.partition_C(cute.make_identity_tensor({shape}))"]


def gemm(site: str, mma: str, a: str, b: str, c: str, dims: tuple[int, int, int], trans: tuple[bool, bool],
         swizzles: tuple[list[int] | None, list[int] | None], dtype: str) -> list[str]:
    """C += A @ B from shared tiles: per 16-deep k block, ldmatrix (``.trans`` for an
    M/N-major operand) into the MMA's A/B fragments, then ``cute.gemm``."""
    m, n, k = dims
    trans_a, trans_b = trans
    # CuTe's views are A (M, K) and B (N, K); TileLang's tiles are A (M, K) / (K, M) and
    # B (K, N) / (N, K), row-major
    a_layout = smem_layout((m, k), (1, m) if trans_a else (k, 1), swizzles[0])
    b_layout = smem_layout((n, k), (k, 1) if trans_b else (1, n), swizzles[1])
    tid = "cute.arch.thread_idx()[0]"
    return [
        f"sA_{site} = cute.make_tensor({a}, {a_layout})",
        f"sB_{site} = cute.make_tensor({b}, {b_layout})",
        f"rA_{site} = {mma}.make_fragment_A({mma}_thr.partition_A(sA_{site}))",
        f"rB_{site} = {mma}.make_fragment_B({mma}_thr.partition_B(sB_{site}))",
        (f"ldA_{site} = cute.make_tiled_copy_A(cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp({trans_a}, 4), "
        f"{dtype}), {mma})"),
        (f"ldB_{site} = cute.make_tiled_copy_B(cute.make_copy_atom(cute.nvgpu.warp.LdMatrix8x8x16bOp({not trans_b}, 4), "
        f"{dtype}), {mma})"),
        f"xsA_{site} = ldA_{site}.get_slice({tid}).partition_S(sA_{site})",
        f"xrA_{site} = ldA_{site}.get_slice({tid}).retile(rA_{site})",
        f"xsB_{site} = ldB_{site}.get_slice({tid}).partition_S(sB_{site})",
        f"xrB_{site} = ldB_{site}.get_slice({tid}).retile(rB_{site})",
        f"for kb_{site} in cutlass.range_constexpr({k // 16}):",
        f"    cute.copy(ldA_{site}, xsA_{site}[None, None, kb_{site}], xrA_{site}[None, None, kb_{site}])",
        f"    cute.copy(ldB_{site}, xsB_{site}[None, None, kb_{site}], xrB_{site}[None, None, kb_{site}])",
        f"    cute.gemm({mma}, {c}, rA_{site}[None, None, kb_{site}], rB_{site}[None, None, kb_{site}], {c})",
    ]


def store_accumulator(site: str, mma: str, c: str, dst: str, offset: str, origin: tuple[str, str],
                      dims: tuple[int, int], extent: tuple[int, int], dtype: str) -> list[str]:
    """The accumulator to the global tile at ``offset`` (row ``origin[0]``, column
    ``origin[1]`` of a rows x cols tensor), converted to ``dtype``; elements outside the
    tensor are not written (checked only where the tensor does not hold whole tiles)."""
    m, n = dims
    rows, cols = extent
    value = f"{c}[e_{site}]" if dtype == "cutlass.Float32" else f"{c}[e_{site}].to({dtype})"
    lines = [
        f"gD_{site} = cute.make_tensor({dst}.iterator + ({offset}), cute.make_layout(({m}, {n}), stride=({cols}, 1)))",
        f"tDg_{site} = {mma}_thr.partition_C(gD_{site})",
    ]
    if rows % m == 0 and cols % n == 0:
        return lines + [f"for e_{site} in cutlass.range_constexpr(cute.size({c})):",
                        f"    tDg_{site}[e_{site}] = {value}"]
    return lines + [
        f"tDc_{site} = {mma}_thr.partition_C(cute.make_identity_tensor(({m}, {n})))",
        f"for e_{site} in cutlass.range_constexpr(cute.size({c})):",
        f"    if {origin[0]} + tDc_{site}[e_{site}][0] < {rows} and {origin[1]} + tDc_{site}[e_{site}][1] < {cols}:",
        f"        tDg_{site}[e_{site}] = {value}",
    ]


def staged_accumulator_in(site: str, mma: str, acc: str, stage: str, dims: tuple[int, int], clear: bool) -> list[str]:
    """A staged GEMM's accumulator: loaded from its float32 stage (row-major), or zero."""
    m, n = dims
    lines = [f"{acc} = {mma}.make_fragment_C({mma}.partition_shape_C(({m}, {n})))",
             f"tCs_{site} = {mma}_thr.partition_C(cute.make_tensor({stage}, cute.make_layout(({m}, {n}), stride=({n}, 1))))"]
    if clear:
        return [*lines, f"{acc}.fill(cutlass.Float32(0.0))"]
    return [*lines, f"for e_{site} in cutlass.range_constexpr(cute.size({acc})):", f"    {acc}[e_{site}] = tCs_{site}[e_{site}]"]


def store_accumulator_shared(site: str, mma: str, c: str, tile: str, dims: tuple[int, int],
                             swizzle: list[int] | None, dtype: str) -> list[str]:
    """The accumulator into a whole shared tile of its shape, through the tile's own
    row-major (maybe swizzled) offsets, converted to ``dtype``."""
    m, n = dims
    value = f"{c}[e_{site}]" if dtype == "cutlass.Float32" else f"{c}[e_{site}].to({dtype})"
    return [
        f"sD_{site} = cute.make_tensor({tile}, {smem_layout((m, n), (n, 1), swizzle)})",
        f"tDs_{site} = {mma}_thr.partition_C(sD_{site})",
        f"for e_{site} in cutlass.range_constexpr(cute.size({c})):",
        f"    tDs_{site}[e_{site}] = {value}",
    ]


def copy_g2s(site: str, dst: str, src: str, offset: str, tile: tuple[int, int], ld: int, threads: int,
             swizzle: list[int] | None, dtype: str, bits: int) -> list[str]:
    """A whole global tile into a shared tile: a tiled copy of 16-byte ``cp.async`` atoms,
    each thread's 16 bytes along a row (coalesced), committed as one group by the caller."""
    rows, cols = tile
    unit = COPY_BITS // bits
    per_row = cols // unit
    thread_layout = f"cute.make_layout(({threads // per_row}, {per_row}), stride=({per_row}, 1))"
    atom = (f"cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.LoadCacheMode.GLOBAL), "
            f"{dtype}, num_bits_per_copy={COPY_BITS})")
    return [
        (f"gS_{site} = cute.make_tensor(({src}.iterator + ({offset})).align(16), "
        f"cute.make_layout(({rows}, {cols}), stride=({ld}, 1)))"),
        f"sS_{site} = cute.make_tensor({dst}, {smem_layout((rows, cols), (cols, 1), swizzle)})",
        f"cp_{site} = cute.make_tiled_copy_tv({atom}, {thread_layout}, cute.make_layout((1, {unit})))",
        (f"cute.copy(cp_{site}, cp_{site}.get_slice(cute.arch.thread_idx()[0]).partition_S(gS_{site}), "
        f"cp_{site}.get_slice(cute.arch.thread_idx()[0]).partition_D(sS_{site}))"),
    ]


def gmma_layout(tile: dict[str, Any], dtype: str) -> str:
    """A staged wgmma operand tile's layout, CuTe's canonical GMMA one (sm90_utils picks the
    widest swizzle the major extent allows); the kernel and a TMA atom's host half both
    spell it so."""
    layout = "ROW_MAJOR" if tile["k_major"] else "COL_MAJOR"  # ROW_MAJOR: K-major, for A and B
    return (f"sm90_utils.make_smem_layout_{tile['role']}(utils.LayoutEnum.{layout}, {tuple(tile['mnk'])}, "
            f"{dtype}, {tile['stages']})")


def wgmma_tile(name: str, tile: dict[str, Any], dtype: str) -> list[str]:
    """A staged wgmma operand tile, the swizzle on the pointer as wgmma wants it."""
    return [
        f"{name}_layout = {gmma_layout(tile, dtype)}",
        f"{name} = smem.allocate_tensor({dtype}, {name}_layout.outer, byte_alignment=1024, swizzle={name}_layout.inner)",
    ]


def copy_g2s_wgmma(site: str, tile: str, stage: str, src: str, offset: str, shape: tuple[int, int], ld: int,
                   threads: int, k_major: bool, dtype: str, bits: int) -> list[str]:
    """A whole global tile into a stage of a wgmma tile, in CuTe's (M or N, K) coordinates:
    16-byte cp.async atoms along whichever mode is contiguous in memory (the tile's rows)."""
    rows, cols = shape
    unit = COPY_BITS // bits
    if k_major:  # the tile is (M or N, K) as CuTe sees it: rows contiguous along mode 1
        dims, stride, per = (rows, cols), (ld, 1), cols // unit
        threads_layout = f"cute.make_layout(({threads // per}, {per}), stride=({per}, 1))"
        values = f"cute.make_layout((1, {unit}))"
    else:  # stored (K, M or N): mode 0 is contiguous
        dims, stride, per = (cols, rows), (1, ld), cols // unit
        threads_layout = f"cute.make_layout(({per}, {threads // per}), stride=(1, {per}))"
        values = f"cute.make_layout(({unit}, 1))"
    atom = (f"cute.make_copy_atom(cute.nvgpu.cpasync.CopyG2SOp(cache_mode=cute.nvgpu.LoadCacheMode.GLOBAL), "
            f"{dtype}, num_bits_per_copy={COPY_BITS})")
    tid = "cute.arch.thread_idx()[0]"
    return [
        f"gS_{site} = cute.make_tensor(({src}.iterator + ({offset})).align(16), cute.make_layout({dims}, stride={stride}))",
        f"cp_{site} = cute.make_tiled_copy_tv({atom}, {threads_layout}, {values})",
        (f"cute.copy(cp_{site}, cp_{site}.get_slice({tid}).partition_S(gS_{site}), "
         f"cp_{site}.get_slice({tid}).partition_D({tile}[None, None, {stage}]))"),
    ]


def gemm_wgmma(site: str, mma: str, a: str, b: str, c: str, k: int, stage: str, wait: bool = True) -> list[str]:
    """C += A @ B from a stage of the two wgmma tiles: descriptors for every 16-deep k block,
    issued together, then waited for (the next stage's copy may overwrite this one) unless
    the caller waits itself (a TMA ring keeps one group in flight)."""
    lines = [
        f"rA_{site} = {mma}.make_fragment_A({mma}_thr.partition_A({a}))",
        f"rB_{site} = {mma}.make_fragment_B({mma}_thr.partition_B({b}))",
        "cute.nvgpu.warpgroup.fence()",
        f"for kb_{site} in cutlass.range_constexpr({k // 16}):",
        f"    cute.gemm({mma}, {c}, rA_{site}[None, None, kb_{site}, {stage}], rB_{site}[None, None, kb_{site}, {stage}], {c})",
        "cute.nvgpu.warpgroup.commit_group()",
    ]
    return [*lines, "cute.nvgpu.warpgroup.wait_group(0)"] if wait else lines
