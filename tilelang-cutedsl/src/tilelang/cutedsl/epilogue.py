"""T.Parallel nests over a CuTe accumulator (a relu, a scale, a bias: ``C[i, j] = f(C[i, j],
...)``) for LowerCuteGemm: the accumulator lives in the tiled MMA's register layout, so a
nest that touches it only at its own indices (i, j) becomes a loop over the thread's own
accumulator elements, each with its (i, j) from the MMA's partition of an identity tensor
(``tl_cute_acc_coord(C[0], e, mode)``, printed as ``C_coord[e][mode]``). Fully unrolled:
a register tensor indexed dynamically would move to local memory."""

from __future__ import annotations

from typing import Any

UNROLLED = 3  # tirx.ForKind.UNROLLED


def own_index_nests(body: Any, c: Any) -> bool:
    """Every element access of ``c`` is made by a T.Parallel nest over exactly its shape, at
    the nest's own indices, and no such nest touches another fragment."""
    from tilelang.plugin import accessed_by_own_nests

    return accessed_by_own_nests(body, c, alone=True)


def rewrite_nests(body: Any, c: Any, reg: Any, per_thread: int) -> Any:
    """The nests over ``c`` as loops over its ``per_thread`` register elements ``reg[e]``."""
    import tvm_ffi
    from tilelang.plugin import parallel_nest
    from tvm import tirx
    from tvm.ir import TensorLoad

    def on_for(loop: Any) -> Any:
        if loop.kind != tirx.ForKind.PARALLEL:
            return loop
        nest, inner = parallel_nest(loop)
        if len(nest) != 2 or not _touches(inner, c):
            return loop
        i, j = nest[0].loop_var, nest[1].loop_var
        e = tirx.Var("e", "int32")

        def on_store(store: Any) -> Any:
            if store.buffer.same_as(c):
                return tirx.BufferStore(reg, store.value, [e])
            return store

        def on_load(load: Any) -> Any:
            if isinstance(load.source, tirx.Buffer) and load.source.same_as(c):
                return tirx.BufferLoad(reg, [e])
            return load

        new = tvm_ffi.structural_map(inner, [(tirx.BufferStore, on_store), (TensorLoad, on_load)], order="post")
        origin = tirx.BufferLoad(reg, [tirx.const(0, "int32")])
        binds = [tirx.Bind(var, tirx.call_extern("int32", "tl_cute_acc_coord", origin, e, mode))
                 for var, mode in ((i, 0), (j, 1))]
        return tirx.For(e, 0, per_thread, tirx.ForKind(UNROLLED), tirx.SeqStmt([*binds, new]))

    return tvm_ffi.structural_map(body, (tirx.For, on_for), order="pre")


def _touches(node: Any, c: Any) -> bool:
    from tilelang.plugin import buffer_accesses

    return any(buffer.same_as(c) for buffer, _, _ in buffer_accesses(node))
