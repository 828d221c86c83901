"""Staged GEMMs for LowerCuteGemm: a ``T.gemm`` whose accumulator must stay a TileLang
fragment (flash-attention's scores feed row reductions; its second GEMM takes a register
A) still runs on CuTe MMA atoms, through shared memory:

    T.copy(A_fragment, A_stage)        (a fragment A only)
    T.copy(C, C_stage)                 (unless clear_accum)
    barrier; tl_cute_gemm_staged(A, B, C_stage, ...); barrier
    T.copy(C_stage, C)

The copies are ordinary tile ops (LowerTileOps lowers them in the fragments' own layouts);
``tl_cute_gemm_staged`` loads a tiled MMA accumulator from C_stage, runs the warp-level MMA
(ldmatrix from the swizzled A/B tiles) and stores it back. Two round trips through shared
memory per GEMM are cheap beside the SIMT loops they replace."""

from __future__ import annotations

from typing import Any

from tilelang.plugin import TILE_OPS, block_barrier, extern_call, static_ints


def _full(buffer: Any) -> Any:
    import tvm
    from tvm import tirx

    return tirx.BufferRegion(buffer, [tvm.ir.Range.from_min_extent(0, d) for d in buffer.shape])


def _copy(src: Any, dst: Any) -> Any:
    import tvm
    from tvm import tirx

    return tirx.Evaluate(tvm.ir.Call(tvm.ir.Op.get(TILE_OPS["copy"]), [_full(src), _full(dst)], ret_ty="int32"))


def _origin(buffer: Any) -> Any:
    from tvm import tirx

    return tirx.BufferLoad(buffer, [tirx.const(0, "int32")] * len(buffer.shape))


class Staging:
    def __init__(self, plan: Any, threads: int) -> None:
        self.plan, self.threads = plan, threads
        self.stages: dict[Any, Any] = {}  # fragment -> its shared stage

    def stage(self, buffer: Any, dtype: str) -> Any:
        from tvm import tirx

        key = self.plan.find(buffer, self.stages)
        if key is None:
            self.stages[buffer] = tirx.decl_buffer(buffer.shape, dtype, name=f"{buffer.name}_stage", scope="shared")
            key = buffer
        return self.stages[key]

    def takes(self, args: Any) -> bool:
        return any(a.same_as(args) for a in self.plan.staged)

    def gemm(self, args: Any) -> Any:
        from tvm import tirx

        plan = self.plan
        a, b, c = (r.source for r in args[:3])
        config = plan.gemm_config(args, self.threads, fragment_a=True)
        trans_a, trans_b, clear = (int(x.value) for x in args[3:6])
        stmts = []
        if a.scope() not in ("shared", "shared.dyn"):
            a_stage = self.stage(a, str(a.dtype))
            stmts.append(_copy(a, a_stage))
            a = a_stage
        for tile in (a, b):
            if plan.find(tile, plan.operands) is None:
                plan.operands.append(tile)  # swizzled: ldmatrix reads it
        c_stage = self.stage(c, "float32")
        plan.staged_mma[str(c_stage.name)] = config
        if not clear:
            stmts.append(_copy(c, c_stage))
        k = static_ints(a.shape)[0 if trans_a else 1]
        stmts += [block_barrier(),
                  extern_call("tl_cute_gemm_staged", _origin(a), _origin(b), _origin(c_stage), config["m"],
                              config["n"], k, trans_a, trans_b, clear),
                  block_barrier(), _copy(c_stage, c)]
        return tirx.SeqStmt(stmts)

    def allocate(self, body: Any) -> Any:
        """Each stage allocated right after its fragment, in the same scope."""
        import tvm_ffi
        from tvm import tirx

        if not self.stages:
            return body

        def on_seq(seq: Any) -> Any:
            out: list[Any] = []
            for stmt in seq.seq:
                out.append(stmt)
                if isinstance(stmt, tirx.AllocBuffer):
                    key = self.plan.find(stmt.buffer, self.stages)
                    if key is not None:
                        out.append(tirx.AllocBuffer(self.stages[key]))
            return tirx.SeqStmt(out) if len(out) != len(seq.seq) else seq

        return tvm_ffi.structural_map(body, (tirx.SeqStmt, on_seq), order="post")
