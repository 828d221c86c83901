"""The printer's half for LowerCuteGemm's ``tl_cute_*`` statements (gemm.py, stages.py):
which tiled MMA an accumulator has, where a tile (or its stage) starts, and which emitter of
cute_emit.py writes each statement. Mixed into KernelPrinter; uses its ``names``, ``expr``,
``mma``, ``mma_names``, ``prologue``, ``swizzles``, ``buffer_names``, ``dtypes``,
``stage_align``, ``stage_sizes``, ``wgmma_tiles``, ``tma_rings``, ``tma_atoms`` and ``name``."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import CompileError

from . import cute_emit, cute_tma, tma_ring
from .cute_emit import DTYPES, dtype_of


class CuteStatements:
    def tiled_mma(self, accumulator: str) -> str:
        if accumulator not in self.mma_names:
            name = f"tiled_mma_{len(self.mma_names)}"
            config = self.mma[accumulator]
            self.prologue += cute_emit.tiled_mma(name, config, DTYPES[config["dtype"]])
            self.mma_names[accumulator] = name
        return self.mma_names[accumulator]

    def operand(self, load: Any) -> tuple[str, str]:
        """(printed name, flat offset) of a buffer load that stands for a tile's origin."""
        kind = type(load).__name__
        if kind not in ("BufferLoad", "TensorLoad") or len(load.indices) != 1:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: a CuTe statement's operand is {load}")
        buffer = getattr(load, "buffer", None) or load.source
        name = self.names.get(hash(buffer))
        if name is None:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: buffer {buffer.name!r} is used "
                               "before it is declared")
        return name, self.expr(load.indices[0])

    def staged(self, tile: str, stage: Any = None) -> str:
        """The iterator of a tile, or of its stage ``stage`` (a swizzled tile's stages start
        at 1024-byte multiples where they are that large, so each has the bank pattern of
        the first)."""
        if stage is None:
            return f"{tile}.iterator"
        # a dynamic offset loses the allocation's alignment, which copy atoms check
        offset = f"({self.expr(stage)}) * {self.stage_sizes[tile]}"
        return f"({tile}.iterator + ({offset})).align({self.stage_align[tile]})"

    def cute_statement(self, op: str, args: list[Any]) -> list[str]:
        site = str(len(self.lines))
        ints = [int(a.value) if type(a).__name__ == "IntImm" else None for a in args]
        if op == "tl_cute_fill":
            return [f"{self.operand(args[0])[0]}.fill({self.expr(args[1])})"]
        if op == "tl_cute_cp_async_commit":
            return ["cute.arch.cp_async_commit_group()"]
        if op == "tl_cute_cp_async_wait":
            wait = [f"cute.arch.cp_async_wait_group({ints[0]})"]
            # wgmma reads shared memory through the async proxy, cp.async wrote it through the
            # generic one: order them (PTX ISA, "Proxies"), before the barrier that publishes
            return wait + ['cute.arch.fence_proxy("async.shared", space="cta")'] if self.wgmma_tiles else wait
        if op in ("tl_cute_gemm", tma_ring.GEMM_ASYNC):
            return self.gemm(site, args, ints, wait=op == "tl_cute_gemm")
        if op.startswith("tl_cute_tma_") or op == tma_ring.WGMMA_WAIT:
            return self.tma_statement(site, op, args, ints)
        if op == "tl_cute_gemm_staged":  # staged.py
            (a, _), (b, _), (c_stage, _) = (self.operand(x) for x in args[:3])
            mma = self.tiled_mma(self.buffer_names[c_stage])
            m, n, k = ints[3:6]
            swizzles = (self.swizzles.get(self.buffer_names[a]), self.swizzles.get(self.buffer_names[b]))
            acc = f"acc_{site}"
            lines = cute_emit.staged_accumulator_in(site, mma, acc, f"{c_stage}.iterator", (m, n), bool(ints[8]))
            lines += cute_emit.gemm(site, mma, f"{a}.iterator", f"{b}.iterator", acc, (m, n, k),
                                    (bool(ints[6]), bool(ints[7])), swizzles, dtype_of(self.dtypes[a], "a GEMM operand"))
            return lines + [f"for e_{site} in cutlass.range_constexpr(cute.size({acc})):",
                            f"    tCs_{site}[e_{site}] = {acc}[e_{site}]"]
        if op == "tl_cute_store_acc":
            (c, _), (dst, offset) = self.operand(args[0]), self.operand(args[1])
            return cute_emit.store_accumulator(site, self.tiled_mma(self.buffer_names[c]), c, dst, offset,
                                               (self.expr(args[2]), self.expr(args[3])), tuple(ints[4:6]),
                                               tuple(ints[6:8]), dtype_of(self.dtypes[dst], "a GEMM result"))
        if op == "tl_cute_store_acc_shared":
            (c, _), (tile, _) = self.operand(args[0]), self.operand(args[1])
            config = self.mma[self.buffer_names[c]]
            return cute_emit.store_accumulator_shared(site, self.tiled_mma(self.buffer_names[c]), c, f"{tile}.iterator",
                                                      (config["m"], config["n"]),
                                                      self.swizzles.get(self.buffer_names[tile]),
                                                      dtype_of(self.dtypes[tile], "a GEMM result"))
        if op == "tl_cute_g2s":
            (dst, _), (src, offset) = self.operand(args[0]), self.operand(args[1])
            dtype = self.dtypes[dst]
            tile = self.wgmma_tiles.get(self.buffer_names[dst])
            if tile is not None:
                return cute_emit.copy_g2s_wgmma(site, dst, self.expr(args[6]), src, offset, tuple(ints[2:4]),
                                                ints[4], ints[5], tile["k_major"], dtype_of(dtype, "a copied tile"),
                                                dtype.bits)
            staged = self.staged(dst, args[6] if len(args) > 6 else None)
            return cute_emit.copy_g2s(site, staged, src, offset, tuple(ints[2:4]), ints[4], ints[5],
                                      self.swizzles.get(self.buffer_names[dst]), dtype_of(dtype, "a copied tile"),
                                      dtype.bits)
        raise CompileError(f"cutedsl codegen, kernel {self.name!r}: CuTe statement {op} is unknown")

    def tma_statement(self, site: str, op: str, args: list[Any], ints: list[int | None]) -> list[str]:
        """A statement of a TMA stage ring (tma_ring.py); its barriers are ``tma_bar_<ring>``."""
        if op == tma_ring.WGMMA_WAIT:
            return [f"cute.nvgpu.warpgroup.wait_group({ints[0]})"]
        if op == tma_ring.INIT:
            ring, stages, threads = ints[:3]
            self.tma_rings[ring] = stages
            self.smem_bytes += 16 * stages  # 2 * stages 8-byte mbarriers
            return cute_tma.barriers(f"tma_bar_{ring}", stages, threads)
        if op == tma_ring.COPY:
            (tile, _), (tensor, _) = self.operand(args[0]), self.operand(args[1])
            layout = self.wgmma_tiles[self.buffer_names[tile]]
            atom = self.tma_atom(tensor, tile, layout, ints[4], ints[5])
            stage = self.expr(args[7])
            return cute_tma.box(site, atom, f"{atom}_tensor", tile, stage, cute_tma.tile_shape(layout),
                                (self.expr(args[2]), self.expr(args[3])), f"tma_bar_{ints[6]} + ({stage})")
        ring = ints[0]
        if ring not in self.tma_rings:
            raise CompileError(f"cutedsl codegen, kernel {self.name!r}: {op} of TMA ring {ring} before its barriers")
        if op == tma_ring.EXPECT:
            return ["if cute.arch.lane_idx() == 0:",  # one arrival of the issuing warp
                    f"    cute.arch.mbarrier_arrive_and_expect_tx(tma_bar_{ring} + ({self.expr(args[1])}), {ints[2]})"]
        if op == tma_ring.WAIT:  # full barriers first, then the empty ones
            offset = ints[1] * self.tma_rings[ring]
            return [f"cute.arch.mbarrier_wait(tma_bar_{ring} + {offset} + ({self.expr(args[2])}), {self.expr(args[3])})"]
        if op == tma_ring.ARRIVE:
            return [f"cute.arch.mbarrier_arrive(tma_bar_{ring} + {self.tma_rings[ring]} + ({self.expr(args[1])}))"]
        raise CompileError(f"cutedsl codegen, kernel {self.name!r}: CuTe statement {op} is unknown")

    def tma_atom(self, tensor: str, tile: str, layout: dict[str, Any], height: int, ld: int) -> str:
        """The kernel parameter of the TMA atom that loads ``tile`` from ``tensor`` (the
        launch function builds it: launch_source.py); ``<atom>_tensor`` is its coordinates."""
        key = (tensor, tile)
        if key not in self.tma_atoms:
            dtype = dtype_of(self.dtypes[tile], "a TMA tile")
            self.tma_atoms[key] = {"name": f"tma_{len(self.tma_atoms)}", "tensor": tensor,
                                   "view": cute_tma.global_view(layout, height, ld),
                                   "smem_layout": cute_emit.gmma_layout(layout, dtype),
                                   "shape": cute_tma.tile_shape(layout)}
        return self.tma_atoms[key]["name"]

    def gemm(self, site: str, args: list[Any], ints: list[int | None], wait: bool = True) -> list[str]:
        (a, _), (b, _), (c, _) = (self.operand(x) for x in args[:3])
        mma = self.tiled_mma(self.buffer_names[c])
        if self.mma[self.buffer_names[c]].get("kind") == "wgmma":
            return cute_emit.gemm_wgmma(site, mma, a, b, c, ints[5], self.expr(args[8]), wait)
        swizzles = (self.swizzles.get(self.buffer_names[a]), self.swizzles.get(self.buffer_names[b]))
        dtype = dtype_of(self.dtypes[a], "a GEMM operand")
        stage = args[8] if len(args) > 8 else None
        return cute_emit.gemm(site, mma, self.staged(a, stage), self.staged(b, stage), c, tuple(ints[3:6]),
                              (bool(ints[6]), bool(ints[7])), swizzles, dtype)
